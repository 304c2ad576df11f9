"""Small SVG charts rendered on the server (no chart library in the browser). Pure.

The markup uses classes only (`chart-*`), styled by site.css, so it passes a strict CSP. Every
chart carries a <title> and <desc> for screen readers; callers also print the key figures as
text. Charts are drawn WIDTH units wide, about a phone's width, so that their 12-unit text stays at
least 12 px on a 390 px phone (site.css caps them a little wider on larger screens).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

WIDTH = 340
LEGEND_ROW = 16  # height of one legend line
CHAR_W = 7.5  # a generous width of one character of the charts' 12-unit text
LINE_H = 14  # a generous height of a line of it


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    # CSS modifier: the line is drawn with class "chart-line chart-line-<style>".
    style: str


def line_chart(
    series: Sequence[Series],
    y_max: float,
    title: str,
    description: str,
    y_ticks: Sequence[tuple[float, str]],
    x_label: str = "rounds played",
    width: int = WIDTH,
    height: int = 200,
) -> Markup:
    """Lines over the x positions 1..len(values), y from 0 to y_max; the legend sits above the
    plot (the chart grows by a row per series)."""
    legend = LEGEND_ROW * len(series)
    height += legend
    left, right, top, bottom = 44, 12, 12 + legend, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    longest = max((len(s.values) for s in series), default=0)

    def x(i: int) -> float:
        return left + (plot_w * i / (longest - 1) if longest > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h * (1 - min(max(v / y_max, 0), 1))

    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f"<desc>{escape(description)}</desc>"
    ]
    for value, label in y_ticks:
        parts.append(
            f'<line class="chart-grid" x1="{left}" x2="{width - right}" '
            f'y1="{y(value):.1f}" y2="{y(value):.1f}"/>'
            f'<text class="chart-tick" x="{left - 6}" y="{y(value) + 4:.1f}" '
            f'text-anchor="end">{escape(label)}</text>'
        )
    parts.append(
        f'<text class="chart-tick" x="{left + plot_w / 2:.1f}" y="{height - 6}" '
        f'text-anchor="middle">{escape(x_label)}</text>'
        f'<text class="chart-tick" x="{left}" y="{height - 20}" text-anchor="start">1</text>'
        f'<text class="chart-tick" x="{width - right}" y="{height - 20}" '
        f'text-anchor="end">{longest}</text>'
    )
    for s in series:
        points = [f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(s.values) if v is not None]
        if not points:
            continue
        parts.append(
            f'<polyline class="chart-line chart-line-{escape(s.style)}" '
            f'points="{" ".join(points)}"/>'
        )
    # The legend, one series a line above the plot, where no line can run through it.
    for index, s in enumerate(series):
        ly = LEGEND_ROW * (index + 1)
        parts.append(
            f'<line class="chart-line chart-line-{escape(s.style)}" x1="{left}" x2="{left + 18}" '
            f'y1="{ly - 4}" y2="{ly - 4}"/>'
            f'<text class="chart-legend" x="{left + 24}" y="{ly}">{escape(s.name)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def bar_chart(
    labels: Sequence[str],
    counts: Sequence[int],
    title: str,
    description: str,
    highlight: int | None = None,
    marked: int | None = None,
    width: int = WIDTH,
    height: int = 170,
) -> Markup:
    """Vertical bars with a label under each; bar `highlight` is drawn as the answer, bar
    `marked` carries a "you" marker."""
    left, right, top, bottom = 8, 8, 20, 42
    plot_w, plot_h = width - left - right, height - top - bottom
    most = max(counts, default=0) or 1
    slot = plot_w / max(len(counts), 1)
    # With many bars, label every fifth (and the marked one) so that labels stay readable.
    step = 1 if len(counts) <= 12 else 5
    parts = [
        f'<svg class="chart chart-bars" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f"<desc>{escape(description)}</desc>",
        f'<line class="chart-axis" x1="{left}" x2="{width - right}" y1="{top + plot_h}" '
        f'y2="{top + plot_h}"/>',
    ]

    def middle(index: int) -> float:
        return left + slot * index + slot / 2

    # Under the bars: the marked bar's label first, then the answer's, then every `step`-th,
    # each only where it clears the labels already placed; above them the counts, tallest first.
    placed_ticks = _Row()
    ticks = [i for i in (marked, highlight) if i is not None and 0 <= i < len(counts)]
    ticks += [i for i in range(0, len(counts), step) if i not in ticks]
    shown_ticks = {i for i in ticks if placed_ticks.take(middle(i), len(labels[i]))}
    placed_counts = _Row()
    by_height = sorted(range(len(counts)), key=lambda i: (-counts[i], i))
    shown_counts = {
        i
        for i in by_height
        if counts[i]
        and placed_counts.take(middle(i), len(str(counts[i])), plot_h * counts[i] / most)
    }
    for index, (label, count) in enumerate(zip(labels, counts, strict=True)):
        bar_h = plot_h * count / most
        bx = left + slot * index + slot * 0.15
        bw = slot * 0.7
        kind = "chart-bar-answer" if index == highlight else "chart-bar"
        parts.append(
            f'<rect class="{kind}" x="{bx:.1f}" y="{top + plot_h - bar_h:.1f}" '
            f'width="{bw:.1f}" height="{bar_h:.1f}"/>'
        )
        if index in shown_ticks:
            parts.append(
                f'<text class="chart-tick" x="{bx + bw / 2:.1f}" y="{top + plot_h + 15}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
        if index in shown_counts:
            parts.append(
                f'<text class="chart-count" x="{bx + bw / 2:.1f}" '
                f'y="{top + plot_h - bar_h - 4:.1f}" text-anchor="middle">{count}</text>'
            )
        if index == marked:
            # "▲ you" under the bar; near an edge it reads away from the edge, staying inside.
            cx = bx + bw / 2
            text, anchor, tx = "▲ you", "middle", cx
            if cx - 3 * CHAR_W < 0:
                anchor, tx = "start", cx - CHAR_W / 2
            elif cx + 3 * CHAR_W > width:
                text, anchor, tx = "you ▲", "end", cx + CHAR_W / 2
            parts.append(
                f'<text class="chart-you" x="{tx:.1f}" y="{top + plot_h + 33}" '
                f'text-anchor="{anchor}">{text}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


class _Row:
    """Labels of one kind on a chart: `take` places a centred label of `chars` characters with
    its baseline at (x, y) when its box clears those already placed (by half a character
    across, a line's height up and down), and says whether it did."""

    def __init__(self) -> None:
        self.boxes: list[tuple[float, float, float]] = []

    def take(self, x: float, chars: int, y: float = 0.0) -> bool:
        half = chars * CHAR_W / 2 + CHAR_W / 4
        for other_x, other_half, other_y in self.boxes:
            if abs(x - other_x) < half + other_half and abs(y - other_y) < LINE_H:
                return False
        self.boxes.append((x, half, y))
        return True

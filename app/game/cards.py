"""The share card image of a daily result (1200×630 PNG, for link previews). Pure, but Pillow.

Like the share text, it shows one square per text coloured by points and the total: nothing that
tells where any boundary was.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from datetime import date

from PIL import Image, ImageDraw, ImageFont

WIDTH, HEIGHT = 1200, 630
PAPER = "#fbfaf7"
INK = "#1d2230"
MUTED = "#5b6275"
ACCENT = "#2f5bd3"
# Points -> square colour, matching the share text's emoji (🟩 🟨 🟧 ⬛).
# A text that did not count is an empty square (⬜), and the total says the result was a replay.
COLOURS = {5: "#2e9e4f", 4: "#e8b923", 3: "#e8b923", 2: "#e8772e", 1: "#e8772e", 0: "#2b2b2b"}
EMPTY = "#c9ccd3"


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


@functools.lru_cache(maxsize=256)
def _render(day: date, points: tuple[int | None, ...]) -> bytes:
    image = Image.new("RGB", (WIDTH, HEIGHT), PAPER)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, WIDTH, 18), fill=ACCENT)
    draw.text((80, 70), "Real or Fake Text", font=_font(64), fill=INK)
    draw.text((80, 150), f"Daily challenge · {day.isoformat()}", font=_font(40), fill=MUTED)
    gap = 28
    side = min(130, (WIDTH - 160 - gap * (len(points) - 1)) // max(len(points), 1))
    x = 80
    for value in points:
        box = (x, 250, x + side, 250 + side)
        if value is None:
            draw.rounded_rectangle(box, radius=18, outline=EMPTY, width=8)
        else:
            draw.rounded_rectangle(box, radius=18, fill=COLOURS[value])
        x += side + gap
    total, best = sum(p for p in points if p is not None), 5 * len(points)
    draw.text((80, 430), f"{total} / {best} points", font=_font(72), fill=INK)
    if None in points:
        draw.text((700, 452), "(replay, not counted)", font=_font(40), fill=MUTED)
    draw.text((80, 530), "Can you tell where the machine takes over?", font=_font(36), fill=ACCENT)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def render_png(day: date, points: Sequence[int | None]) -> bytes:
    """The card of a result: `points` per text as `daily.set_points` gives them."""
    return _render(day, tuple(points))

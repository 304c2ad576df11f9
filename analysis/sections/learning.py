"""Section 4: learning over rounds, and within sessions where the data records sessions
(analysis.learning)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.ticker

from analysis import boundary, learning
from analysis.render import PLAYERS, RANDOM, fmt, fmt_pe, save
from analysis.sections import Context, Section
from analysis.sections.limits import MIN_ANNOTATORS_FOR_TEST, MIN_ANNOTATORS_PER_POINT


def drawn(table):
    """The points of a learning curve that rest on enough annotators to be drawn."""
    if table.empty or "annotators" not in table:
        return table
    return table[table["annotators"] >= MIN_ANNOTATORS_PER_POINT]


def figure(out: Path, order_t, session_t, trends: dict, chance: float) -> str:
    panels = [(order_t, "n", "long_term", "annotator's n-th round")]
    if trends.get("within_session") is not None:
        panels.append((session_t, "position", "within_session", "position in a study session"))
    fig, axes = plt.subplots(
        1, len(panels), figsize=(5.6 * len(panels), 4.0), sharey=True, squeeze=False
    )
    for ax, (table, column, key, label) in zip(axes[0], panels, strict=True):
        n = int(table["rows"].sum()) if len(table) else 0  # every annotation, drawn or not
        table = drawn(table)
        if not table.empty:
            ax.fill_between(
                table[column],
                table["ci_low"],
                table["ci_high"],
                color=PLAYERS,
                alpha=0.2,
                lw=0,
                label="95% CI (over annotators)",
            )
            ax.plot(
                table[column], table["mean_points"], marker=".", color=PLAYERS, label="mean points"
            )
        ax.axhline(chance, color=RANDOM, ls="--", lw=1.2, label=f"random guessing ({chance:.2f})")
        pooled = len(table) and key == "long_term" and table[column].max() >= 50
        ax.set_xlabel(
            label
            + (" (50 pools the later rounds)" if pooled else "")
            + f"\npoints with ≥ {MIN_ANNOTATORS_PER_POINT} annotators"
        )
        trend = trends.get(key)
        title = f"{label.capitalize()} (n = {n:,} annotations)"
        if trend is None:
            title += "\norder not established: no trend reported"
        elif trend.get("slope") is not None:
            title += (
                f"\nslope {trend['slope']:+.3f} [{trend['ci_low']:+.3f}, {trend['ci_high']:+.3f}]"
                f" per {'log round' if key == 'long_term' else 'position'}, "
                f"p {fmt_pe(trend['p_value'])}"
            )
        ax.set_title(title, fontsize=9.5)
        ax.set_ylim(0, 5)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes[0][0].set_ylabel("mean points (all texts)")
    axes[0][0].legend(frameon=False, loc="lower right")
    return save(fig, out / "learning.png")


def _slope(t) -> str:
    if not t or t.get("slope") is None:
        return "–"
    return (
        f"{fmt(t['slope'])} [{fmt(t['ci_low'])}, {fmt(t['ci_high'])}] ({t['slope_from']}); "
        f"{t['method']} p {fmt_pe(t['p_value'])}"
        + "".join(f" (⚠ mixed model: {w})" for w in t.get("mixed_warnings", []))
        + "".join(
            f" (⚠ clustered diagnostic: {w})"
            for w in (t.get("clustered") or {}).get("warnings", [])
        )
    )


def _wilcoxon(trend: dict) -> str:
    """The Wilcoxon test of the annotators' trends, or why there is none."""
    if trend["annotators"] < MIN_ANNOTATORS_FOR_TEST:
        return (
            f"{trend['annotators']} annotators are too few to test across annotators (at least "
            f"{MIN_ANNOTATORS_FOR_TEST} needed)"
        )
    return f"Wilcoxon p {fmt_pe(trend['wilcoxon_p_value'])}"


def run(ctx: Context) -> Section:
    s, filtered, boot, seed = ctx.settings, ctx.filtered, ctx.boot, ctx.seed
    order_t = learning.by_order(filtered, cap=50, n_boot=boot, seed=seed)
    session_t = learning.by_session_position(filtered, s.session_length, boot, seed)
    per_annotator = learning.annotator_trends(filtered, s.min_rounds)
    trend = learning.trend_summary(filtered, s.min_rounds)
    if trend["annotators"] < MIN_ANNOTATORS_FOR_TEST:  # withheld in summary.json too
        trend = {**trend, "wilcoxon_p_value": None, "wilcoxon_withheld": _wilcoxon(trend)}
    trends = learning.clustered_trends(filtered, s.session_length, seed)
    chance = boundary.random_baseline(filtered)["mean_points"]  # learning: all texts
    basis = trends["order"]
    lines = ["## 4. Learning over time", "", "![learning](learning.png)", ""]
    if trends["long_term"] is None:
        lines += [
            f"The order of the rounds is not established ({basis['note']}), so no learning over "
            "rounds is reported.",
            "",
        ]
    else:
        lines += [
            f"Round order: {basis['note']}. Points on log(round number): slope "
            f"{_slope(trends['long_term'])}.",
            "",
            f"Descriptive: of {trend['annotators']} annotators with at least "
            f"{trend['min_rounds']} rounds, the mean per-annotator Spearman rho (points vs order) "
            f"is {fmt(trend['mean_rho'])} (median {fmt(trend['median_rho'])}; {_wilcoxon(trend)}).",
            "",
        ]
    hidden = len(order_t) - len(drawn(order_t))
    if hidden:
        lines += [
            f"The figure draws a round only where at least {MIN_ANNOTATORS_PER_POINT} annotators "
            f"played it ({hidden} later round(s) rest on fewer; all are in "
            "`learning_by_order.csv`).",
            "",
        ]
    lines += [trends["sessions_note"]]
    if trends["within_session"] is not None:
        lines += [
            f" {trends['sessions']} session(s); points on the position within the session: "
            f"{_slope(trends['within_session'])}."
        ]
    lines += [""]
    return Section(
        markdown=lines,
        tables={
            "learning_by_order": order_t,
            "learning_by_session_position": session_t,
            "annotator_trends": per_annotator,
        },
        figures=[figure(ctx.out, order_t, session_t, trends, chance)],
        summary={"learning": {**trend, "clustered": trends}},
    )

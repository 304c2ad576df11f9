"""Section 10 (a study with a detector-hint condition): the hint's own accuracy beside the
workers' with and without it, on the same texts (analysis.hint)."""

from __future__ import annotations

import pandas as pd

from analysis import hint
from analysis.render import fmt, md_table
from analysis.sections import Context, Section


def _ci(row, measure: str, digits: int = 3) -> str:
    return (
        f"{fmt(row[measure], digits)} [{fmt(row[f'{measure}_low'], digits)}, "
        f"{fmt(row[f'{measure}_high'], digits)}]"
    )


def run(ctx: Context) -> Section:
    result = hint.compare(ctx.filtered, ctx.boot, ctx.seed)
    summary = result["summary"]
    if not summary["hint_conditions"]:
        return Section(summary={"detector_hint": None})
    lines = ["## 10. The detector hint beside the workers", ""]
    if result["table"].empty:
        lines += [f"Not compared: {summary['reason']}.", ""]
        return Section(markdown=lines, summary={"detector_hint": summary})
    table = pd.DataFrame(
        [
            {
                "texts": r["texts"],
                "who": r["who"],
                "texts (n)": r["n_texts"],
                "rounds": r["rounds"],
                "workers": r["workers"] or "–",
                "exact rate [95% CI]": _ci(r, "exact"),
                "mean points [95% CI]": _ci(r, "points", 2),
            }
            for r in result["table"].to_dict(orient="records")
        ]
    )
    differences = pd.DataFrame(
        [
            {
                "texts": r["texts"],
                "difference": r["difference"],
                "exact rate [95% CI]": _ci(r, "exact"),
                "mean points [95% CI]": _ci(r, "points", 2),
            }
            for r in result["differences"].to_dict(orient="records")
        ]
    )
    lines += [
        f"Hint condition(s): {', '.join(summary['hint_conditions'])}; the other conditions are "
        f"'without the hint'. On the {summary['texts']} texts that have hint levels and were "
        f"answered in both arms ({summary['workers_with']} workers with the hint, "
        f"{summary['workers_without']} without, {summary['rounds']} rounds). The detector alone "
        "answers from the levels the hint showed, with the hint's own rule: it flags the first "
        "sentence (from sentence 1) the hint calls high, else 'all human'; it is scored on the "
        "rounds both arms played (each round's text), so it answers the same texts as often as "
        "the workers did. 95% intervals resample workers and texts at once (a crossed "
        "bootstrap), unlike sections 2 to 4 (workers only) and 9 (texts only); the detector's "
        "answers depend on the text alone. On all-human texts only 'all human' is exact.",
        "",
        md_table(table),
        "Differences (the same bootstrap draws, so paired on texts):",
        "",
        md_table(differences),
    ]
    return Section(
        markdown=lines,
        tables={
            "detector_hint": result["table"],
            "detector_hint_differences": result["differences"],
        },
        summary={"detector_hint": summary},
    )

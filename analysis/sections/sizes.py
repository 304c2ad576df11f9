"""Section 1: sizes of the data before and after cleaning, every filter, and points that disagree
with the scoring rule (analysis.cleaning)."""

from __future__ import annotations

import pandas as pd

from analysis import cleaning
from analysis.render import md_table
from analysis.sections import Context, Section
from analysis.sections.limits import MIN_ANNOTATORS_FOR_INTERVALS


def headline(frame: pd.DataFrame) -> dict:
    """The summary.json numbers of one set of rows."""
    d = frame["guess"] - frame["boundary"]
    empty = frame.empty
    return {
        **cleaning.sizes(frame),
        "exact_rate": None if empty else float((d == 0).mean()),
        "mean_points": None if empty else float(frame["points"].mean()),
        "mean_signed_distance": None if empty else float(d.mean()),
        "points_mismatch_rows": cleaning.points_mismatch(frame),
        "duplicate_pairs": cleaning.duplicate_pairs(frame),
    }


def _few_annotators(annotators: int) -> list[str]:
    """The warning every interval over annotators needs when there are few of them."""
    if annotators >= MIN_ANNOTATORS_FOR_INTERVALS:
        return []
    return [
        f"> ⚠ {annotators} annotators after cleaning, fewer than {MIN_ANNOTATORS_FOR_INTERVALS} "
        "annotators: the 95% intervals that resample annotators (sections 2, 3, 4 and 7) are "
        "too narrow with so few, so read them as rough; the permutation tests over texts are "
        "not affected.",
        "",
    ]


def run(ctx: Context) -> Section:
    a, f = headline(ctx.frame), headline(ctx.filtered)
    mismatches = cleaning.mismatch_table(ctx.frame)
    impossible = cleaning.impossible_points(ctx.frame)
    causes = mismatches.set_index("cause")["rows"].to_dict() if len(mismatches) else {}
    lines = [
        "## 1. Sizes and cleaning",
        "",
        md_table(
            pd.DataFrame(
                [
                    {"set": "all rows", **{k: a[k] for k in a}},
                    {"set": "filtered", **{k: f[k] for k in f}},
                ]
            )
        ),
        "exact_rate, mean_points and mean_signed_distance here pool machine and all-human texts "
        "(on an all-human text the only right answer is the last sentence); section 2 gives them "
        "apart, with intervals and baselines.",
        "",
        *_few_annotators(f["n_annotators"]),
        "Filters, in order (each says what it removed and why, or that it does not apply):",
        "",
        md_table(
            ctx.steps[["step", "rule", "rows_removed", "annotators_removed", "rows_left", "why"]]
        ),
        "Points are recomputed from guess and boundary with the scoring rule; "
        f"{a['points_mismatch_rows']} row(s) had stored points that disagree (the recomputed "
        "value is used)" + (". By cause:" if causes else "."),
        "",
    ]
    if causes:
        lines += [md_table(mismatches)]
    left_out = ctx.left_out
    if len(left_out):
        lines += [
            "Crowd workers left out by the decisions step, and why (all in `left_out.csv`; "
            "`--all-workers` keeps everyone):",
            "",
            md_table(cleaning.left_out_summary(left_out)),
            md_table(left_out.head(50)),
        ]
    if len(impossible):
        lines += [
            f"Impossible stored values ({len(impossible)} row(s); all in `impossible_points.csv`):",
            "",
            md_table(impossible.head(20)),
        ]
    return Section(
        markdown=lines,
        tables={
            "filter_steps": ctx.steps,
            "points_mismatches": mismatches,
            "impossible_points": impossible,
            "left_out": left_out,
        },
        summary={
            "all": a,
            "filtered": f,
            "filters": ctx.steps.to_dict(orient="records"),
            "duplicates": ctx.duplicates,
            "points_mismatch_causes": causes,
            "impossible_points": len(impossible),
            "left_out": left_out.to_dict(orient="records"),
            "min_rounds": ctx.settings.min_rounds,
        },
    )

"""Section 8: the Human Evaluation Datasheet (analysis.heds)."""

from __future__ import annotations

from analysis import agreement as agreement_mod
from analysis import heds
from analysis.sections import Context, Section


def run(ctx: Context) -> Section:
    agree = ctx.shared.get("agreement") or agreement_mod.agreement(ctx.filtered)
    sheet = heds.datasheet(ctx.frame, ctx.filtered, ctx.steps, agree, ctx.info, ctx.provenance)
    heds.write(sheet, ctx.out)
    return Section(
        markdown=[
            "## 8. Human Evaluation Datasheet",
            "",
            "See `heds.md` and `heds.json`; fields the input cannot establish say "
            f"'{heds.UNKNOWN}' and are listed under `to_fill`.",
            "",
        ]
    )

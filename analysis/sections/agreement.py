"""Section 6: agreement between players on the same text (analysis.agreement)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis import agreement as agreement_mod
from analysis.render import HUMAN, PLAYERS, RANDOM, errorbars, fmt, md_table, save
from analysis.sections import Context, Section
from analysis.sections.limits import MIN_TEXTS_FOR_AGREEMENT


def figure(out: Path, curve: pd.DataFrame, alpha: dict) -> str:
    fig, ax = plt.subplots(figsize=(6.4, 3.9))
    if not curve.empty:
        x = curve["tolerance"].to_numpy()
        ax.bar(x, curve["rate"], width=0.5, color=PLAYERS, label="pairs of players (95% CI)")
        errorbars(ax, x, curve, "rate", "ci_low", "ci_high")
        ax.plot(x, curve["chance_uniform"], "o--", color=RANDOM, label="chance: uniform guesses")
        ax.plot(
            x, curve["chance_marginal"], "s:", color=HUMAN, label="chance: same guess distribution"
        )
        ax.set_xticks(x, ["exact", "± 1", "± 2"])
        ax.set_title(
            f"Agreement on the same text (n = {int(curve['pairs'].iloc[0]):,} pairs)\n"
            f"Krippendorff's α (interval) = {fmt(alpha.get('alpha'))} "
            f"[{fmt(alpha.get('ci_low'))}, {fmt(alpha.get('ci_high'))}]"
        )
    ax.set_xlabel("guesses at most this many sentences apart")
    ax.set_ylabel("share of annotation pairs")
    ax.set_ylim(0, 1)
    ax.legend(frameon=False, loc="upper left")
    return save(fig, out / "agreement.png")


def run(ctx: Context) -> Section:
    agree = agreement_mod.agreement(ctx.filtered)
    alpha, curve = agreement_mod.intervals(ctx.filtered, ctx.boot, ctx.seed)
    ctx.shared["agreement"] = agree
    shared = agree["examples_with_2plus"]
    if shared < MIN_TEXTS_FOR_AGREEMENT:
        withheld = (
            f"{shared} text(s) have two or more annotations: too few to measure agreement (at "
            f"least {MIN_TEXTS_FOR_AGREEMENT} needed); {agree['pairs']} annotation pairs. Players "
            "must read the same texts for agreement to be measured."
        )
        blank = {"krippendorff_alpha_interval": None, "krippendorff_alpha_nominal": None}
        # The datasheet states no score either, and says why.
        ctx.shared["agreement"] = {**agree, "krippendorff_alpha_interval": f"none: {withheld}"}
        return Section(
            markdown=["## 6. Agreement", "", withheld, ""],
            tables={"agreement_by_tolerance": curve},
            summary={
                "agreement": {
                    **agree,
                    **blank,
                    "alpha_interval_ci": None,
                    "withheld": withheld,
                    "by_tolerance": curve.to_dict("records"),
                }
            },
        )
    lines = [
        "## 6. Agreement",
        "",
        "![agreement](agreement.png)",
        "",
        f"Examples with at least two annotations: {agree['examples_with_2plus']}; annotation "
        f"pairs: {agree['pairs']}. Krippendorff's alpha (interval) {fmt(alpha.get('alpha'))} "
        f"[{fmt(alpha.get('ci_low'))}, {fmt(alpha.get('ci_high'))}] (bootstrap over texts); "
        f"nominal {fmt(agree['krippendorff_alpha_nominal'])}. Pair agreement by tolerance, with "
        "the chance levels (independent uniform guesses; independent guesses with the observed "
        "distribution):",
        "",
        md_table(curve),
    ]
    return Section(
        markdown=lines,
        tables={"agreement_by_tolerance": curve},
        figures=[figure(ctx.out, curve, alpha)],
        summary={
            "agreement": {
                **agree,
                "alpha_interval_ci": alpha,
                "by_tolerance": curve.to_dict("records"),
            }
        },
    )

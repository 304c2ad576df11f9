"""Section 5: the range of skill between annotators and an item-response model of skill and text
difficulty (analysis.learning, analysis.irt)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd

from analysis import boundary, irt, learning
from analysis.render import HUMAN, PLAYERS, RANDOM, fmt, save
from analysis.sections import Context, Section


def figure(out: Path, means, fit: irt.IrtFit | None, min_rounds: int, chance: float) -> str:
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.9))
    ax = axes[0]
    if len(means):
        ax.hist(means, bins=20, range=(0, 5), color=PLAYERS, label="annotators")
        ax.axvline(chance, color=RANDOM, ls="--", lw=1.4, label=f"random guessing ({chance:.2f})")
        ax.axvline(means.median(), color="black", lw=1, label=f"median ({means.median():.2f})")
        ax.legend(frameon=False, fontsize=8)
    else:
        ax.text(
            0.5, 0.5, f"no annotator has {min_rounds} rounds", ha="center", transform=ax.transAxes
        )
    ax.set_xlim(0, 5)
    ax.set_xlabel("mean points per annotator")
    ax.set_ylabel("annotators")
    ax.set_title(f"Mean points ({len(means):,} annotators with ≥ {min_rounds} rounds)")
    if fit is not None and len(fit.annotators):
        a, t = fit.annotators, fit.texts
        axes[1].hist(a["skill"], bins=30, color=PLAYERS)
        axes[1].axvline(0, color="black", lw=0.8)
        axes[1].set_xlabel("skill (logit; 0 = average annotator)")
        axes[1].set_ylabel("annotators")
        axes[1].set_title(f"Skill, Rasch model ({len(a):,} annotators)")
        bins = np.histogram_bin_edges(t["difficulty"], bins=30)
        for flag, color, label in ((False, PLAYERS, "machine part"), (True, HUMAN, "all human")):
            part = t.loc[t["all_human"] == flag, "difficulty"]
            if len(part):
                axes[2].hist(
                    part, bins=bins, alpha=0.7, color=color, label=f"{label} ({len(part):,})"
                )
        axes[2].axvline(0, color="black", lw=0.8)
        axes[2].set_xlabel("difficulty (logit; 0 = average text)")
        axes[2].set_ylabel("texts")
        axes[2].set_title(f"Text difficulty ({len(t):,} texts)")
        axes[2].legend(frameon=False)
    for ax in axes:
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    return save(fig, out / "skill_range.png")


def run(ctx: Context) -> Section:
    filtered, min_rounds = ctx.filtered, ctx.settings.min_rounds
    skill = learning.skill_range(filtered, min_rounds)
    means = learning.annotator_means(filtered, min_rounds)
    fit = irt.fit(filtered) if len(filtered) else None
    chance = boundary.random_baseline(filtered)["mean_points"]
    s = fit.summary() if fit else {}
    lines = [
        "## 5. Skill and difficulty",
        "",
        "![skill range](skill_range.png)",
        "",
        f"Of {skill['annotators']} annotators with at least {skill['min_rounds']} rounds, the top "
        f"{skill['k']} averaged {fmt(skill['top_mean'])} points and the bottom {skill['k']} "
        f"{fmt(skill['bottom_mean'])} (random guessing: {fmt(chance)}).",
        "",
        f"Item-response model ({s.get('model', '–')}): skill and text difficulty "
        f"estimated jointly for {s.get('annotators', 0)} annotators and "
        f"{s.get('texts', 0)} texts; skill SD {fmt(s.get('skill_sd'))}, "
        f"difficulty SD {fmt(s.get('difficulty_sd'))}; correlation of skill with raw "
        f"mean points {fmt(s.get('skill_vs_mean_points_correlation'))}. Tables: "
        "`annotator_skill.csv`, `text_difficulty.csv`.",
        "",
    ]
    return Section(
        markdown=lines,
        tables={
            "annotator_skill": fit.annotators if fit else pd.DataFrame(),
            "text_difficulty": fit.texts if fit else pd.DataFrame(),
        },
        figures=[figure(ctx.out, means, fit, min_rounds, chance)],
        summary={"skill_range": skill, "irt": fit.summary() if fit else None},
    )

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
from analysis.sections.limits import MIN_ANNOTATORS_FOR_RANGE, MIN_SHARE_OF_TEXTS_SEEN_TWICE


def figure(
    out: Path,
    means,
    fit: irt.IrtFit | None,
    min_rounds: int,
    chance: float,
    difficulty_note: str | None = None,
) -> str:
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
    ax.set_xlabel("mean points per annotator (all texts)")
    ax.set_ylabel("annotators")
    ax.set_title(f"Mean points ({len(means):,} annotators with ≥ {min_rounds} rounds)")
    if fit is not None and len(fit.annotators):
        a, t = fit.annotators, fit.texts
        axes[1].hist(a["skill"], bins=30, color=PLAYERS)
        axes[1].axvline(0, color="black", lw=0.8)
        axes[1].set_xlabel("skill (logit; 0 = average annotator)")
        axes[1].set_ylabel("annotators")
        axes[1].set_title(f"Skill, Rasch model ({len(a):,} annotators)")
    if fit is not None and len(fit.annotators) and difficulty_note:
        axes[2].text(
            0.5, 0.5, difficulty_note, ha="center", va="center", transform=axes[2].transAxes
        )
        axes[2].set_title("Text difficulty: not identified")
        axes[2].axis("off")
    elif fit is not None and len(fit.annotators):
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


def _range_line(skill: dict, chance: float) -> str:
    """The top and bottom 5% of annotators, or why they are withheld."""
    head = f"Of {skill['annotators']} annotators with at least {skill['min_rounds']} rounds"
    baseline = f"random guessing on the same texts, all texts pooled: {fmt(chance)}"
    if skill["annotators"] < MIN_ANNOTATORS_FOR_RANGE:
        return (
            f"{head}: too few to report the top and bottom 5% (at least "
            f"{MIN_ANNOTATORS_FOR_RANGE} needed); the histogram shows each of them ({baseline})."
        )
    return (
        f"{head}, the top {skill['k']} averaged {fmt(skill['top_mean'])} points and the bottom "
        f"{skill['k']} {fmt(skill['bottom_mean'])} ({baseline})."
    )


def _not_identified(seen_once: tuple[int, int]) -> str:
    once, texts = seen_once
    return (
        f"{once} of {texts} texts have a single annotator, so a text's difficulty cannot be told "
        "from its annotator's skill: text difficulty is not identified and not reported (it "
        f"needs at least {MIN_SHARE_OF_TEXTS_SEEN_TWICE:.0%} of texts with two or more "
        "annotators)"
    )


def _irt_line(s: dict, seen_once: tuple[int, int], difficulty_ok: bool) -> str:
    head = f"Item-response model ({s.get('model', '–')}) for {s.get('annotators', 0)} annotators"
    tail = (
        f"correlation of skill with raw mean points "
        f"{fmt(s.get('skill_vs_mean_points_correlation'))}."
    )
    if not difficulty_ok:
        return (
            f"{head}: skill SD {fmt(s.get('skill_sd'))}; {tail} {_not_identified(seen_once)}. "
            "Table: `annotator_skill.csv`."
        )
    return (
        f"{head} and {s.get('texts', 0)} texts, skill and text difficulty estimated jointly: "
        f"skill SD {fmt(s.get('skill_sd'))}, difficulty SD {fmt(s.get('difficulty_sd'))}; "
        f"{tail} Tables: `annotator_skill.csv`, `text_difficulty.csv`."
    )


def run(ctx: Context) -> Section:
    filtered, min_rounds = ctx.filtered, ctx.settings.min_rounds
    skill = learning.skill_range(filtered, min_rounds)
    means = learning.annotator_means(filtered, min_rounds)
    fit = irt.fit(filtered) if len(filtered) else None
    chance = boundary.random_baseline(filtered)["mean_points"]
    s = fit.summary() if fit else {}
    per_text = filtered.groupby("example")["annotator"].nunique()
    seen_once = (int((per_text < 2).sum()), len(per_text))
    difficulty_ok = len(per_text) > 0 and (per_text >= 2).mean() >= MIN_SHARE_OF_TEXTS_SEEN_TWICE
    if not difficulty_ok and s:  # withheld in summary.json too
        s = {**s, "difficulty_sd": None, "difficulty_withheld": _not_identified(seen_once)}
    range_line = _range_line(skill, chance)
    if skill["annotators"] < MIN_ANNOTATORS_FOR_RANGE:  # withheld in summary.json too
        skill = {**skill, "top_mean": None, "bottom_mean": None, "withheld": range_line}
    note = None
    if not difficulty_ok:
        note = (
            f"{seen_once[0]:,} of {seen_once[1]:,} texts have one annotator:\n"
            "a text's difficulty cannot be told\nfrom its annotator's skill"
        )
    lines = [
        "## 5. Skill and difficulty",
        "",
        "![skill range](skill_range.png)",
        "",
        range_line,
        "",
        _irt_line(s, seen_once, difficulty_ok),
        "",
    ]
    return Section(
        markdown=lines,
        tables={
            "annotator_skill": fit.annotators if fit else pd.DataFrame(),
            "text_difficulty": fit.texts if fit and difficulty_ok else pd.DataFrame(),
        },
        figures=[figure(ctx.out, means, fit, min_rounds, chance, note)],
        summary={"skill_range": skill, "irt": s or None},
    )

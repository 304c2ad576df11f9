"""Section 2: how far guesses land from the boundary, machine and all-human texts apart, beside
random guessing and always "all human" (analysis.boundary)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis import boundary
from analysis.render import PLAYERS, RANDOM, ci, fmt, md_table, save
from analysis.sections import Context, Section


def figure(out: Path, hist, human_guesses, n_machine: int, n_human: int) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.9), gridspec_kw={"width_ratios": [3, 2]})
    ax = axes[0]
    if not hist.empty:
        x = hist["distance"].to_numpy()
        ax.bar(x - 0.2, hist["observed_share"], width=0.4, label="players", color=PLAYERS)
        ax.bar(x + 0.2, hist["random_share"], width=0.4, label="random guessing", color=RANDOM)
        ax.set_xticks(x)
    ax.set_xlabel("guess − boundary (sentences; negative = too early)")
    ax.set_ylabel("share of annotations")
    ax.set_title(f"Texts with a machine part (n = {n_machine:,} annotations)")
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False)
    ax = axes[1]
    if not human_guesses.empty:
        x = human_guesses["guess"].to_numpy()
        ax.bar(x - 0.2, human_guesses["observed_share"], width=0.4, color=PLAYERS, label="players")
        ax.bar(x + 0.2, human_guesses["random_share"], width=0.4, color=RANDOM, label="random")
        labels = [str(v) for v in x]
        labels[-1] = f"{x[-1]}\nall human"
        ax.set_xticks(x, labels)
    ax.set_xlabel("sentence flagged (N = 'all human', the right answer)")
    ax.set_ylabel("share of annotations")
    ax.set_title(f"All-human texts (n = {n_human:,} annotations)")
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False)
    return save(fig, out / "distance_histogram.png")


def _stat_rows(stats: dict, baselines: dict) -> pd.DataFrame:
    rows = []
    for statistic in boundary.STATISTICS:
        rows.append(
            {
                "statistic": statistic,
                "machine texts [95% CI]": ci(stats["machine"].loc[statistic]),
                "random guessing": baselines["random_guessing"][statistic],
                "always 'all human'": baselines["always_all_human"][statistic],
                "all-human texts [95% CI]": ci(stats["human"].loc[statistic]),
            }
        )
    return pd.DataFrame(rows)


def run(ctx: Context) -> Section:
    boot, seed, filtered = ctx.boot, ctx.seed, ctx.filtered
    machine, human = boundary.split_human(filtered)
    hist = boundary.histogram(machine)
    human_guesses = boundary.human_text_guesses(human)
    stats = {
        "machine": boundary.statistics(machine, boot, seed),
        "human": boundary.statistics(human, boot, seed),
        "all": boundary.statistics(filtered, boot, seed),
    }
    baselines = {
        "random_guessing": boundary.random_baseline(machine),
        "always_all_human": boundary.always_human_baseline(machine),
        "random_guessing_human": boundary.random_baseline(human),
    }
    sm = stats["machine"]
    lines = [
        "## 2. Boundary distance",
        "",
        "![distance histogram](distance_histogram.png)",
        "",
        "Texts with a machine part and all-human texts are shown apart: on an all-human text "
        "the only right answer is 'all human', and its distances would pile up at −(N−1). "
        "Estimates with 95% bootstrap intervals over annotators; the baselines are what random "
        "guessing (uniform on 1..N) and always answering 'all human' would score on the same "
        "machine texts:",
        "",
        md_table(_stat_rows(stats, baselines)),
        f"Players found the exact boundary {ci(sm.loc['exact_rate'])} of the time on "
        f"{len(machine):,} annotations of machine texts, against "
        f"{fmt(baselines['random_guessing']['exact_rate'])} by random guessing; all-human texts: "
        f"{len(human):,} annotations.",
        "",
    ]
    return Section(
        markdown=lines,
        tables={
            "distance_histogram": hist,
            "human_text_guesses": human_guesses,
            **{
                f"statistics_{k}": v.rename_axis("statistic").reset_index()
                for k, v in stats.items()
            },
        },
        figures=[figure(ctx.out, hist, human_guesses, len(machine), len(human))],
        summary={
            "statistics_filtered": stats["all"].to_dict(orient="index"),
            "statistics_machine_texts": stats["machine"].to_dict(orient="index"),
            "statistics_all_human_texts": stats["human"].to_dict(orient="index"),
            "random_guessing": baselines["random_guessing"],
            "always_all_human": baselines["always_all_human"],
        },
    )

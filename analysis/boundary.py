"""Boundary distance: how far guesses land from the boundary, against random guessing.

Signed distance d = guess - boundary, in sentences (negative = too early). The random-guessing
baseline keeps every row's boundary and N and draws the guess uniformly from 1..N (the N choices a
player has: flag one of sentences 1..N-1, or say "all human"), so row i contributes 1/N to each
distance 1-b .. N-b. Confidence intervals are percentile bootstraps over annotators (rows of one
annotator are not independent), drawn with a fixed seed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.load import recompute_points

STATISTICS = ("exact_rate", "mean_points", "mean_signed_distance", "too_early", "too_late")


def distances(frame: pd.DataFrame) -> pd.Series:
    return (frame["guess"] - frame["boundary"]).astype("int64")


def histogram(frame: pd.DataFrame) -> pd.DataFrame:
    """Observed counts and the counts expected from random guessing, per signed distance."""
    if frame.empty:
        return pd.DataFrame(columns=["distance", "observed", "random", "observed_share"])
    n_max = int(frame["n_sentences"].max())
    index = np.arange(-(n_max - 1), n_max)
    observed = distances(frame).value_counts().reindex(index, fill_value=0)
    random = np.zeros(len(index))
    pairs = frame.groupby(["boundary", "n_sentences"]).size()
    for (b, n), count in pairs.items():
        lo, hi = 1 - b, n - b  # distances reachable by guesses 1..N
        random[lo - index[0] : hi - index[0] + 1] += count / n
    table = pd.DataFrame(
        {"distance": index, "observed": observed.to_numpy(), "random": random},
    )
    table["observed_share"] = table["observed"] / len(frame)
    table["random_share"] = table["random"] / len(frame)
    return table


def random_baseline(frame: pd.DataFrame) -> dict[str, float]:
    """Expected statistics if every guess were uniform on 1..N, given the same boundaries."""
    if frame.empty:
        return dict.fromkeys(STATISTICS, float("nan"))
    pairs = frame.groupby(["boundary", "n_sentences"]).size().reset_index(name="count")
    totals = dict.fromkeys(STATISTICS, 0.0)
    for b, n, count in pairs.itertuples(index=False):
        guesses = np.arange(1, n + 1)
        pts = recompute_points(guesses, np.full(n, b))
        d = guesses - b
        totals["exact_rate"] += count * np.mean(d == 0)
        totals["mean_points"] += count * pts.mean()
        totals["mean_signed_distance"] += count * d.mean()
        totals["too_early"] += count * np.mean(d < 0)
        totals["too_late"] += count * np.mean(d > 0)
    return {k: float(v / len(frame)) for k, v in totals.items()}


def _per_annotator_sums(frame: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    d = distances(frame)
    parts = pd.DataFrame(
        {
            "annotator": frame["annotator"].to_numpy(),
            "exact_rate": (d == 0).to_numpy(dtype=float),
            "mean_points": frame["points"].to_numpy(dtype=float),
            "mean_signed_distance": d.to_numpy(dtype=float),
            "too_early": (d < 0).to_numpy(dtype=float),
            "too_late": (d > 0).to_numpy(dtype=float),
        }
    )
    grouped = parts.groupby("annotator", sort=False)
    sums = grouped[list(STATISTICS)].sum()
    counts = grouped.size().to_numpy(dtype=float)
    return sums, counts


def statistics(
    frame: pd.DataFrame, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """Each statistic with a bootstrap CI over annotators; columns estimate, ci_low, ci_high."""
    if frame.empty:
        return pd.DataFrame(
            {"estimate": np.nan, "ci_low": np.nan, "ci_high": np.nan}, index=list(STATISTICS)
        )
    sums, counts = _per_annotator_sums(frame)
    totals = sums.to_numpy()
    estimate = totals.sum(axis=0) / counts.sum()
    n_annot = len(counts)
    low = high = estimate
    if n_boot > 0 and n_annot > 1:
        rng = np.random.default_rng(seed)
        lows, highs = [], []
        # Draw the multinomial weights in blocks so memory stays bounded for many annotators.
        block = max(1, min(n_boot, 20_000_000 // max(n_annot, 1)))
        draws = []
        remaining = n_boot
        while remaining > 0:
            size = min(block, remaining)
            weights = rng.multinomial(n_annot, np.full(n_annot, 1.0 / n_annot), size=size)
            draws.append((weights @ totals) / (weights @ counts)[:, None])
            remaining -= size
        boot = np.vstack(draws)
        alpha = (1 - level) / 2
        lows = np.quantile(boot, alpha, axis=0)
        highs = np.quantile(boot, 1 - alpha, axis=0)
        low, high = lows, highs
    return pd.DataFrame(
        {"estimate": estimate, "ci_low": low, "ci_high": high}, index=list(STATISTICS)
    )


def always_human_baseline(frame: pd.DataFrame) -> dict[str, float]:
    """Expected statistics if every answer were "all human" (guess = N), given the boundaries:
    the lazy strategy a leaderboard must not reward."""
    if frame.empty:
        return dict.fromkeys(STATISTICS, float("nan"))
    guess = frame["n_sentences"].to_numpy()
    b = frame["boundary"].to_numpy()
    d = guess - b
    return {
        "exact_rate": float(np.mean(d == 0)),
        "mean_points": float(recompute_points(guess, b).mean()),
        "mean_signed_distance": float(d.mean()),
        "too_early": 0.0,
        "too_late": float(np.mean(d > 0)),
    }


def split_human(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows on texts with a machine part, rows on all-human texts)."""
    human = frame["boundary"] == frame["n_sentences"]
    return frame[~human], frame[human]


def human_text_guesses(frame: pd.DataFrame) -> pd.DataFrame:
    """On all-human texts: the share of answers at each position (N = "all human", right)."""
    if frame.empty:
        return pd.DataFrame(columns=["guess", "observed", "observed_share", "random_share"])
    n_max = int(frame["n_sentences"].max())
    counts = frame["guess"].value_counts().reindex(range(1, n_max + 1), fill_value=0)
    return pd.DataFrame(
        {
            "guess": counts.index,
            "observed": counts.to_numpy(),
            "observed_share": counts.to_numpy() / len(frame),
            "random_share": 1 / n_max,
        }
    )

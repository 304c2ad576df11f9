"""Agreement between annotators who read the same text.

On examples with at least two annotations: every unordered pair of annotations of one example is
compared (exact same guess; guesses at most one sentence apart), and Krippendorff's alpha of the
example x guess-position count matrix comes from the `krippendorff` package (interval and nominal
levels); only its bootstrap is computed here (`alpha_from_counts`). Counting is done on grouped
counts, never on the pairs themselves: an example with c_g annotations at position g has
sum C(c_g, 2) exact pairs and sum c_g * c_(g+1) pairs one apart.
"""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd


def _pairs(n: pd.Series | np.ndarray) -> np.ndarray:
    n = np.asarray(n, dtype=np.int64)
    return n * (n - 1) // 2


def value_counts_matrix(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Counts per (example, guess) for examples with >= 2 annotations, and the guess values."""
    per_example = frame.groupby("example")["guess"].transform("size")
    multi = frame[per_example >= 2]
    if multi.empty:
        return np.zeros((0, 0)), np.zeros(0)
    counts = multi.groupby(["example", "guess"]).size().unstack(fill_value=0)
    return counts.to_numpy(dtype=float), counts.columns.to_numpy(dtype=float)


def alpha(frame: pd.DataFrame, level: str = "interval") -> float | None:
    """Krippendorff's alpha of guess positions (the `krippendorff` package); None when it is
    undefined (e.g. no variation)."""
    counts, values = value_counts_matrix(frame)
    if counts.size == 0 or counts.shape[1] < 2:
        return None
    value = krippendorff.alpha(value_counts=counts, value_domain=values, level_of_measurement=level)
    return float(value) if np.isfinite(value) else None


def agreement(frame: pd.DataFrame) -> dict:
    """Pairs, exact and within-one rates, and alpha (interval and nominal)."""
    per_example = frame.groupby("example").size()
    multi_examples = per_example[per_example >= 2]
    total_pairs = int(_pairs(multi_examples).sum())
    cell = frame.groupby(["example", "guess"]).size().rename("c").reset_index()
    exact_pairs = int(_pairs(cell["c"]).sum())
    shifted = cell.assign(guess=cell["guess"] + 1).rename(columns={"c": "c_next"})
    adjacent = cell.merge(shifted, on=["example", "guess"], how="inner")
    adjacent_pairs = int((adjacent["c"] * adjacent["c_next"]).sum())
    within1 = exact_pairs + adjacent_pairs
    return {
        "examples_with_2plus": len(multi_examples),
        "annotations_on_them": int(multi_examples.sum()),
        "pairs": total_pairs,
        "pair_exact_rate": exact_pairs / total_pairs if total_pairs else None,
        "pair_within1_rate": within1 / total_pairs if total_pairs else None,
        "krippendorff_alpha_interval": alpha(frame, "interval"),
        "krippendorff_alpha_nominal": alpha(frame, "nominal"),
    }


TOLERANCES = (0, 1, 2)


def text_weights(n_texts: int, n_boot: int, seed: int, block: int = 250):
    """Bootstrap weights over texts, in blocks of replicates: Poisson(1) counts per text (the
    Poisson bootstrap: as good as resampling with replacement for many texts, and fast)."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_boot, block):
        yield rng.poisson(1.0, size=(min(block, n_boot - start), n_texts)).astype(float)


def alpha_from_counts(counts: np.ndarray, values: np.ndarray, level: str, weights=None):
    """Krippendorff's alpha from a units x values count matrix, optionally with unit weights
    (rows: bootstrap replicates); the same value as the `krippendorff` package for weights of 1.
    Returns an array (one alpha per weight row) or a float.

    Kept beside the package: it takes no unit weights, and the bootstrap needs a thousand
    weighted alphas in one matrix product rather than a thousand calls."""
    n_u = counts.sum(axis=1)
    keep = n_u >= 2
    counts, n_u = counts[keep], n_u[keep]
    if level == "interval":
        delta = (values[:, None] - values[None, :]) ** 2
    else:
        delta = (values[:, None] != values[None, :]).astype(float)
    # Observed disagreement per unit: sum_c,k n_uc n_uk delta_ck / (n_u - 1).
    observed_unit = np.einsum("uc,ck,uk->u", counts, delta, counts) / (n_u - 1)
    single = weights is None
    w = np.ones((1, len(n_u))) if single else np.asarray(weights, dtype=float)[:, keep]
    total = w @ n_u
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (w @ observed_unit) / total
    n_c = w @ counts  # (B, values)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.einsum("bc,ck,bk->b", n_c, delta, n_c) / (total * (total - 1))
        result = 1 - observed / expected
    return float(result[0]) if single else result


def within_all(counts: np.ndarray, distance: np.ndarray) -> list[np.ndarray]:
    """Per text, the pairs of guesses at most k apart for each k in TOLERANCES:
    (c^T near c - sum c) / 2 (a guess is not its own pair)."""
    return [
        (np.einsum("uc,ck,uk->u", counts, (distance <= k).astype(float), counts) - counts.sum(1))
        / 2
        for k in TOLERANCES
    ]


CURVE_COLUMNS = [
    "tolerance",
    "pairs",
    "rate",
    "ci_low",
    "ci_high",
    "chance_uniform",
    "chance_marginal",
]


def intervals(frame: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> tuple[dict, pd.DataFrame]:
    """Krippendorff's alpha (interval) with a 95% bootstrap interval over texts, and the share of
    annotation pairs on the same text whose guesses are at most k apart (k in TOLERANCES) with
    its interval and two chance levels: independent uniform guesses on 1..N, and independent
    guesses with the observed distribution of guesses. One set of bootstrap draws serves both."""
    counts, values = value_counts_matrix(frame)
    if counts.size == 0 or counts.shape[1] < 2:
        empty = {"alpha": None, "ci_low": None, "ci_high": None, "level": "interval"}
        if counts.size == 0:
            return empty, pd.DataFrame(columns=CURVE_COLUMNS)
    pairs_t = (counts.sum(axis=1) * (counts.sum(axis=1) - 1)) / 2
    distance = np.abs(values[:, None] - values[None, :])
    within = within_all(counts, distance)
    per_text = np.column_stack([pairs_t, *within])
    estimate = alpha_from_counts(counts, values, "interval") if counts.shape[1] > 1 else np.nan
    alpha_boot, curve_boot = [], []
    if n_boot > 0 and len(counts) > 1:
        for w in text_weights(len(counts), n_boot, seed):
            curve_boot.append(w @ per_text)
            if counts.shape[1] > 1:
                alpha_boot.append(alpha_from_counts(counts, values, "interval", w))
    low = high = estimate
    if alpha_boot:
        low, high = np.nanquantile(np.concatenate(alpha_boot), [0.025, 0.975])
    alpha_result = {
        "alpha": float(estimate) if np.isfinite(estimate) else None,
        "ci_low": float(low) if np.isfinite(low) else None,
        "ci_high": float(high) if np.isfinite(high) else None,
        "level": "interval",
        "texts": len(counts),
    }
    sums = np.vstack(curve_boot) if curve_boot else None
    n = int(frame["n_sentences"].max())
    share = counts.sum(axis=0) / counts.sum()
    rows = []
    for k in TOLERANCES:
        near = (distance <= k).astype(float)
        rate = within[k].sum() / pairs_t.sum()
        low = high = rate
        if sums is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = sums[:, 1 + k] / sums[:, 0]
            low, high = np.nanquantile(boot, [0.025, 0.975])
        uniform = sum(1 for g in range(1, n + 1) for h in range(1, n + 1) if abs(g - h) <= k) / n**2
        rows.append(
            {
                "tolerance": k,
                "pairs": int(pairs_t.sum()),
                "rate": float(rate),
                "ci_low": float(low),
                "ci_high": float(high),
                "chance_uniform": uniform,
                "chance_marginal": float(share @ near @ share),
            }
        )
    return alpha_result, pd.DataFrame(rows, columns=CURVE_COLUMNS)


def tolerance_curve(frame: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The pair-agreement curve of `intervals`."""
    return intervals(frame, n_boot, seed)[1]


def alpha_interval(frame: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> dict:
    """Krippendorff's alpha (interval) with its bootstrap interval, from `intervals`."""
    return intervals(frame, n_boot, seed)[0]

"""Inference that respects who answered and what they read.

Rows of one annotator are correlated (skill), and so are rows on one text (difficulty); treating
rows as independent makes intervals too narrow. Two tools, both fast at 10^6 rows:

- `level_means`: the mean of a value per level of a factor with a 95% percentile bootstrap
  interval that resamples annotators (every estimate the report plots or tabulates).
- `clustered_ols`: least squares with two-way cluster-robust standard errors (Cameron, Gelbach and
  Miller): clustered by annotator and by text at once, V = V_annotator + V_text − V_both. It tests
  factor effects (a Wald test that every level equals the reference) and trends over time (the
  slope of points on log round number).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

LEVEL = 0.95
FEW_CLUSTERS = 20  # below this many annotators or texts, clustered errors are unreliable


_WEIGHTS: dict[tuple[int, int, int], list[np.ndarray]] = {}
CACHE_CELLS = 20_000_000  # keep one set of weights up to this size (annotators x replicates)


def annotator_weights(n_annotators: int, n_boot: int, seed: int, block_cells: int = 20_000_000):
    """Bootstrap weights (how often each annotator is drawn), in blocks of at most block_cells.
    The same draws serve every estimate of a report (kept in memory when they are small)."""
    key = (n_annotators, n_boot, seed)
    if key in _WEIGHTS:
        yield from _WEIGHTS[key]
        return
    blocks = list(_draw_weights(n_annotators, n_boot, seed, block_cells))
    if n_annotators * n_boot <= CACHE_CELLS:
        _WEIGHTS.clear()
        _WEIGHTS[key] = blocks
    yield from blocks


def _draw_weights(n_annotators: int, n_boot: int, seed: int, block_cells: int):
    rng = np.random.default_rng(seed)
    block = max(1, min(n_boot, block_cells // max(n_annotators, 1)))
    remaining = n_boot
    while remaining > 0:
        size = min(block, remaining)
        yield rng.multinomial(n_annotators, np.full(n_annotators, 1.0 / n_annotators), size=size)
        remaining -= size


def level_means(
    frame: pd.DataFrame,
    by: str,
    value: pd.Series | str = "points",
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per level of `by`: rows, annotators, mean and its annotator-bootstrap interval."""
    values = frame[value] if isinstance(value, str) else value
    table = many_level_means(frame, by, {"v": values}, n_boot, seed)
    return table.drop(columns=["value"])


def many_level_means(
    frame: pd.DataFrame, by: str, values: dict[str, pd.Series], n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """`level_means` for several values at once (the same bootstrap draws for all), long format:
    one row per level and value."""
    columns = [by, "value", "rows", "annotators", "mean", "ci_low", "ci_high"]
    keep = frame[by].notna().to_numpy()
    if not keep.any():
        return pd.DataFrame(columns=columns)
    a_codes = _codes(frame, "annotator")
    a_names = np.arange(int(a_codes.max()) + 1 if len(a_codes) else 0)
    a_codes = a_codes[keep]
    l_codes, levels = pd.factorize(frame[by].to_numpy()[keep], sort=True)
    shape = (len(a_names), len(levels))
    cell = a_codes * len(levels) + l_codes

    def per_cell(weights=None) -> np.ndarray:
        return np.bincount(cell, weights, shape[0] * shape[1]).reshape(shape).astype(float)

    counts = per_cell()
    sums = {
        name: per_cell(np.nan_to_num(series.to_numpy(dtype=float)[keep]))
        for name, series in values.items()
    }
    n_rows = counts.sum(axis=0)
    estimates = {name: total.sum(axis=0) / n_rows for name, total in sums.items()}
    bounds = {name: (est.copy(), est.copy()) for name, est in estimates.items()}
    if n_boot > 0 and len(a_names) > 1:
        boots: dict[str, list] = {name: [] for name in sums}
        for w in annotator_weights(len(a_names), n_boot, seed):
            denominator = w @ counts
            denominator[denominator == 0] = np.nan
            for name, total in sums.items():
                boots[name].append((w @ total) / denominator)
        alpha = (1 - LEVEL) / 2
        for name, parts in boots.items():
            boot = np.vstack(parts)
            with np.errstate(all="ignore"):
                bounds[name] = (
                    np.nanquantile(boot, alpha, axis=0),
                    np.nanquantile(boot, 1 - alpha, axis=0),
                )
    out = [
        pd.DataFrame(
            {
                by: levels,
                "value": name,
                "rows": n_rows.astype(int),
                "annotators": (counts > 0).sum(axis=0),
                "mean": estimates[name],
                "ci_low": bounds[name][0],
                "ci_high": bounds[name][1],
            }
        )
        for name in sums
    ]
    return pd.concat(out, ignore_index=True)[columns]


@dataclass
class ClusteredFit:
    names: list[str]
    coef: np.ndarray
    se: np.ndarray
    n: int
    clusters: dict[str, int]
    cov: np.ndarray  # the two-way clustered covariance (made positive semi-definite)

    def table(self) -> pd.DataFrame:
        z = stats.norm.ppf(0.5 + LEVEL / 2)
        with np.errstate(all="ignore"):
            p = 2 * stats.norm.sf(np.abs(self.coef / self.se))
        return pd.DataFrame(
            {
                "term": self.names,
                "estimate": self.coef,
                "se": self.se,
                "ci_low": self.coef - z * self.se,
                "ci_high": self.coef + z * self.se,
                "p_value": p,
            }
        )


CODE_COLUMNS = {"annotator": "_annotator_code", "example": "_example_code"}


def with_codes(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with integer codes of annotator and text, so that the many groupings of a
    report do not factorize a million strings each time."""
    return frame.assign(
        **{code: pd.factorize(frame[column])[0] for column, code in CODE_COLUMNS.items()}
    )


def _codes(frame: pd.DataFrame, column: str) -> np.ndarray:
    code = CODE_COLUMNS[column]
    if code in frame.columns:
        return frame[code].to_numpy()
    return pd.factorize(frame[column])[0]


def cluster_codes(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of annotator and text per row."""
    return _codes(frame, "annotator"), _codes(frame, "example")


def _meat(x_u: np.ndarray, codes: np.ndarray, n: int, k: int) -> tuple[np.ndarray, int]:
    codes = pd.factorize(codes)[0] if codes.dtype.kind not in "iu" else codes
    g = int(codes.max()) + 1 if len(codes) else 0
    sums = np.column_stack([np.bincount(codes, x_u[:, j], g) for j in range(x_u.shape[1])])
    correction = (g / max(g - 1, 1)) * ((n - 1) / max(n - k, 1))
    return correction * (sums.T @ sums), g


def clustered_ols(
    y: np.ndarray, x: np.ndarray, names: list[str], annotators, texts
) -> ClusteredFit | None:
    """OLS of y on x (with its own constant column) and two-way clustered standard errors."""
    y = np.asarray(y, dtype=float)
    x = np.asarray(x, dtype=float)
    n, k = x.shape
    if n <= k:
        return None
    xtx = x.T @ x
    try:
        bread = np.linalg.inv(xtx)
    except np.linalg.LinAlgError:
        return None
    coef = bread @ (x.T @ y)
    x_u = x * (y - x @ coef)[:, None]
    a = pd.factorize(np.asarray(annotators))[0]
    t = pd.factorize(np.asarray(texts))[0]
    both = pd.factorize(a.astype(np.int64) * (int(t.max()) + 1) + t)[0]
    meat_a, g_a = _meat(x_u, a, n, k)
    meat_t, g_t = _meat(x_u, t, n, k)
    meat_b, _ = _meat(x_u, both, n, k)
    cov = bread @ (meat_a + meat_t - meat_b) @ bread
    # The difference of positive semi-definite parts can lose that property: clip negative
    # eigenvalues to zero (Cameron, Gelbach and Miller's fix), and where a variance is still not
    # positive, use the larger one-way variance.
    values, vectors = np.linalg.eigh((cov + cov.T) / 2)
    cov = (vectors * np.clip(values, 0, None)) @ vectors.T
    variance = np.diag(cov)
    one_way = np.maximum(np.diag(bread @ meat_a @ bread), np.diag(bread @ meat_t @ bread))
    se = np.sqrt(np.where(variance > 0, variance, one_way))
    return ClusteredFit(names, coef, se, n, {"annotators": g_a, "texts": g_t}, cov)


def factor_test(frame: pd.DataFrame, column: str, value: str = "points") -> dict:
    """Do levels of `column` differ? Two-way clustered OLS of the value on level dummies; a Wald
    chi-square test that every level equals the first (the reference)."""
    data = frame.dropna(subset=[column])
    levels = sorted(data[column].astype(str).unique())
    if len(levels) < 2:
        return {"test": "none (one level)", "levels": len(levels), "p_value": None}
    codes = pd.Categorical(data[column].astype(str), categories=levels).codes
    x = np.column_stack([np.ones(len(data))] + [(codes == i) for i in range(1, len(levels))])
    fit = clustered_ols(
        data[value].to_numpy(),
        x,
        ["(reference) " + levels[0], *levels[1:]],
        *cluster_codes(data),
    )
    if fit is None:
        return {"test": "none (too few rows)", "levels": len(levels), "p_value": None}
    cov = fit.cov[1:, 1:]
    beta = fit.coef[1:]
    wald = float(beta @ np.linalg.pinv(cov) @ beta)
    return {
        "test": "Wald, OLS with two-way clustered SEs (annotator, text)",
        "levels": len(levels),
        "statistic": wald,
        "df": len(beta),
        "p_value": float(stats.chi2.sf(wald, len(beta))),
        "clusters": fit.clusters,
        "few": min(fit.clusters.values()) < FEW_CLUSTERS,
        "effects": fit.table().to_dict(orient="records"),
    }


def trend_test(frame: pd.DataFrame, x_column: str, value: str = "points", log: bool = True) -> dict:
    """Slope of the value on (log) x with two-way clustered standard errors."""
    data = frame.dropna(subset=[x_column])
    if len(data) < 3 or data[x_column].nunique() < 2:
        return {"slope": None, "p_value": None, "n": len(data)}
    xs = data[x_column].to_numpy(dtype=float)
    if log:
        xs = np.log(np.maximum(xs, 1.0))
    fit = clustered_ols(
        data[value].to_numpy(),
        np.column_stack([np.ones(len(data)), xs]),
        ["intercept", f"log({x_column})" if log else x_column],
        *cluster_codes(data),
    )
    if fit is None:
        return {"slope": None, "p_value": None, "n": len(data)}
    row = fit.table().iloc[1]
    return {
        "term": row["term"],
        "slope": float(row["estimate"]),
        "ci_low": float(row["ci_low"]),
        "ci_high": float(row["ci_high"]),
        "p_value": float(row["p_value"]),
        "n": fit.n,
        "clusters": fit.clusters,
        "method": "OLS with two-way clustered SEs (annotator, text)",
    }

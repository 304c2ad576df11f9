"""Inference that respects who answered and what they read.

Rows of one annotator are correlated (skill), and so are rows on one text (difficulty); treating
rows as independent makes intervals too narrow. Two tools, both fast at 10^6 rows:

- `level_means`: the mean of a value per level of a factor with a 95% percentile bootstrap
  interval that resamples annotators (every estimate the report plots or tabulates).
- `clustered_ols`: least squares with two-way cluster-robust standard errors (Cameron, Gelbach and
  Miller): clustered by annotator and by text at once, V = V_annotator + V_text − V_both. That
  difference need not be positive semi-definite; when it is not, clipping its negative eigenvalues
  can leave a direction with almost no variance, which then makes any contrast along it look
  certain. We never clip: a covariance that is not PSD is replaced by the conservative
  V_annotator + V_text (always PSD), and the fit says so. Tests use the t / F distribution with
  G − 1 degrees of freedom (G = the smaller number of clusters) and are flagged below 42 clusters;
  a Wald test of more contrasts than G − 1 is not identified and returns no p-value.
- the mixed models (crossed random effects for annotator and text, on every row) are in
  `analysis.mixed`.
- `permutation_test`: a text-level factor (system, category, p, boundary) tested by permuting its
  values across texts, on points centred by annotator. Valid at any size without a model.
- `holm`: Holm's step-down adjustment of several p-values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

LEVEL = 0.95
FEW_CLUSTERS = 42  # below this many annotators or texts, cluster-robust tests over-reject
FEW_CLUSTERS_REASON = (
    "fewer than 42 clusters in the smaller dimension: cluster-robust tests over-reject with few "
    "clusters, so treat this p-value as a rough guide (the mixed model and the permutation test "
    "are the ones to read)"
)
PERMUTATIONS = 2000


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
    cov: np.ndarray  # the two-way clustered covariance (PSD; see `covariance`)
    covariance: str = "two-way"  # or "conservative: V_annotator + V_text (two-way was not PSD)"
    warnings: list[str] = field(default_factory=list)

    @property
    def df(self) -> int:
        """Degrees of freedom of the t and F references: the smaller cluster count minus one."""
        return max(min(self.clusters.values()) - 1, 1)

    @property
    def few(self) -> bool:
        return min(self.clusters.values()) < FEW_CLUSTERS

    def table(self) -> pd.DataFrame:
        z = stats.t.ppf(0.5 + LEVEL / 2, self.df)
        with np.errstate(all="ignore"):
            p = 2 * stats.t.sf(np.abs(self.coef / self.se), self.df)
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
    if np.linalg.matrix_rank(xtx) < k:
        return None
    bread = np.linalg.inv(xtx)
    coef = bread @ (x.T @ y)
    x_u = x * (y - x @ coef)[:, None]
    a = pd.factorize(np.asarray(annotators))[0]
    t = pd.factorize(np.asarray(texts))[0]
    both = pd.factorize(a.astype(np.int64) * (int(t.max()) + 1) + t)[0]
    meat_a, g_a = _meat(x_u, a, n, k)
    meat_t, g_t = _meat(x_u, t, n, k)
    meat_b, _ = _meat(x_u, both, n, k)
    cov = bread @ (meat_a + meat_t - meat_b) @ bread
    cov = (cov + cov.T) / 2
    kind, notes = "two-way", []
    values = np.linalg.eigvalsh(cov)
    if values.min() < -1e-10 * max(abs(values).max(), 1e-300):
        # Not positive semi-definite. Clipping the negative eigenvalues would leave directions
        # with (almost) no variance, and a contrast along one of them would look certain. Use
        # the conservative sum of the one-way covariances instead, which is always PSD.
        cov = bread @ (meat_a + meat_t) @ bread
        cov = (cov + cov.T) / 2
        kind = "conservative: V_annotator + V_text (the two-way covariance was not PSD)"
        notes.append(
            "the two-way clustered covariance was not positive semi-definite; the conservative "
            "V_annotator + V_text was used instead"
        )
    fit = ClusteredFit(
        names,
        coef,
        np.sqrt(np.clip(np.diag(cov), 0, None)),
        n,
        {"annotators": g_a, "texts": g_t},
        cov,
        kind,
        notes,
    )
    if fit.few:
        fit.warnings.append(FEW_CLUSTERS_REASON)
    return fit


def wald(fit: ClusteredFit, terms: list[int]) -> dict:
    """Wald test that the coefficients `terms` are all zero, with an F(q, G − 1) reference.

    With G clusters the clustered covariance has rank at most G − 1: a test of more contrasts, or
    along a direction the covariance gives (almost) no variance, is not identified and gets no
    p-value."""
    beta = fit.coef[terms]
    cov = fit.cov[np.ix_(terms, terms)]
    q = len(terms)
    smallest = float(np.linalg.eigvalsh(cov).min()) if q else 0.0
    scale = max(float(np.abs(np.diag(cov)).max(initial=0)), 1e-300)
    if q == 0 or q > fit.df or smallest <= 1e-8 * scale:
        return {
            "statistic": None,
            "df": q,
            "df_denominator": fit.df,
            "p_value": None,
            "identified": False,
            "why": f"{q} contrast(s) but only {min(fit.clusters.values())} clusters in the smaller "
            "dimension (or a contrast with no clustered variance): not identified",
        }
    statistic = float(beta @ np.linalg.solve(cov, beta))
    return {
        "statistic": statistic,
        "df": q,
        "df_denominator": fit.df,
        "p_value": float(stats.f.sf(statistic / q, q, fit.df)),
        "identified": True,
    }


def dummies(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Level indicators of `values` (the first level in sorted order is the reference)."""
    levels = sorted(values.astype(str).unique())
    codes = pd.Categorical(values.astype(str), categories=levels).codes
    x = np.column_stack([np.ones(len(values))] + [(codes == i) for i in range(1, len(levels))])
    return x.astype(float), levels


def factor_test(frame: pd.DataFrame, column: str, value: str = "points") -> dict:
    """Do levels of `column` differ? Two-way clustered OLS of the value on level dummies; a Wald
    test (F reference with G − 1 denominator degrees of freedom) that every level equals the
    first (the reference)."""
    data = frame.dropna(subset=[column])
    levels = sorted(data[column].astype(str).unique())
    if len(levels) < 2:
        return {"test": "none (one level)", "levels": len(levels), "p_value": None}
    x, levels = dummies(data[column])
    fit = clustered_ols(
        data[value].to_numpy(), x, ["(reference) " + levels[0], *levels[1:]], *cluster_codes(data)
    )
    if fit is None:
        return {"test": "none (too few rows)", "levels": len(levels), "p_value": None}
    return {
        "test": "Wald, OLS with two-way clustered SEs (annotator, text)",
        "levels": len(levels),
        **wald(fit, list(range(1, len(levels)))),
        "covariance": fit.covariance,
        "clusters": fit.clusters,
        "few": fit.few,
        "warnings": fit.warnings,
        "effects": fit.table().to_dict(orient="records"),
    }


def trend_test(frame: pd.DataFrame, x_column: str, value: str = "points", log: bool = True) -> dict:
    """Slope of the value on (log) x with two-way clustered standard errors (t reference with
    G − 1 degrees of freedom; see `clustered_ols` for the PSD safeguard)."""
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
        "few": fit.few,
        "covariance": fit.covariance,
        "warnings": fit.warnings,
        "method": "OLS with two-way clustered SEs (annotator, text), t with G − 1 df",
    }


# -- a permutation test over texts ------------------------------------------------------------


def permutation_test(
    frame: pd.DataFrame,
    column: str,
    value: str = "points",
    numeric: bool = False,
    n_perm: int = PERMUTATIONS,
    seed: int = 0,
) -> dict:
    """Permute a text-level `column` across texts (each text keeps its annotations) and compare
    the observed statistic with its permutation distribution.

    The value is centred by annotator first (an annotator's skill is not a property of the text;
    centring uses no factor labels, so the test stays exact). Statistic: for a factor, the
    between-level sum of squares of the centred values; for a numeric column, the absolute
    covariance of the value with it. p = (1 + #{perm >= observed}) / (1 + n_perm)."""
    data = frame.dropna(subset=[column])
    texts = data.groupby("example", sort=False)
    labels = texts[column].first()
    if labels.nunique() < 2 or n_perm <= 0:
        return {"p_value": None, "texts": len(labels), "permutations": 0}
    centred = data[value] - data.groupby("annotator")[value].transform("mean")
    sums = centred.groupby(data["example"], sort=False).sum().reindex(labels.index).to_numpy()
    counts = texts.size().reindex(labels.index).to_numpy(dtype=float)
    total = counts.sum()
    rng = np.random.default_rng(seed)
    if numeric:
        xs = labels.to_numpy(dtype=float)

        def statistic(x: np.ndarray) -> np.ndarray:  # rows of x are label vectors
            mean_x = (x * counts).sum(axis=-1, keepdims=True) / total
            return np.abs(((x - mean_x) * sums).sum(axis=-1)) / total

        observed = float(statistic(xs[None, :])[0])
        draws = []
        for block in _blocks(n_perm, len(xs)):
            draws.append(statistic(rng.permuted(np.tile(xs, (block, 1)), axis=1)))
    else:
        codes, _ = pd.factorize(labels.astype(str))
        k = int(codes.max()) + 1

        def statistic(c: np.ndarray) -> np.ndarray:
            flat = (c + k * np.arange(len(c))[:, None]).ravel()
            s = np.bincount(flat, np.tile(sums, len(c)), k * len(c)).reshape(len(c), k)
            m = np.bincount(flat, np.tile(counts, len(c)), k * len(c)).reshape(len(c), k)
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.nansum(np.where(m > 0, s**2 / m, 0.0), axis=1)

        observed = float(statistic(codes[None, :])[0])
        draws = []
        for block in _blocks(n_perm, len(codes)):
            draws.append(statistic(rng.permuted(np.tile(codes, (block, 1)), axis=1)))
    null = np.concatenate(draws)
    exceed = int((null >= observed - 1e-12 * max(abs(observed), 1)).sum())
    return {
        "method": "permutation over texts (points centred by annotator)",
        "statistic": observed,
        "p_value": (1 + exceed) / (1 + len(null)),
        "permutations": len(null),
        "texts": len(labels),
    }


def _blocks(n_perm: int, width: int, cells: int = 5_000_000):
    size = max(1, cells // max(width, 1))
    done = 0
    while done < n_perm:
        block = min(size, n_perm - done)
        yield block
        done += block


def holm(p_values: dict[str, float | None]) -> dict[str, float | None]:
    """Holm's step-down adjusted p-values (None stays None and does not count)."""
    known = sorted((p, name) for name, p in p_values.items() if p is not None)
    m, running, out = len(known), 0.0, dict.fromkeys(p_values)
    for i, (p, name) in enumerate(known):
        running = max(running, min(1.0, (m - i) * p))
        out[name] = running
    return out


# -- factors that are one split of the data -----------------------------------------------------


def aliasing(texts: pd.DataFrame, columns: list[str]) -> dict[str, list[str]]:
    """Groups of text-level columns that split the texts the same way (each level of one is
    exactly one level of the other). Returns {first column: [it and every alias]} for groups of
    two or more; a factor in such a group cannot be told apart from its aliases."""
    codes = {c: pd.factorize(texts[c].astype(str))[0] for c in columns}
    groups: list[list[str]] = []
    for c in columns:
        for group in groups:
            if _same_split(codes[group[0]], codes[c]):
                group.append(c)
                break
        else:
            groups.append([c])
    return {g[0]: g for g in groups if len(g) > 1}


def _same_split(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = pd.DataFrame({"a": a, "b": b}).drop_duplicates()
    return bool(pairs["a"].is_unique and pairs["b"].is_unique)


def nested(texts: pd.DataFrame, inner: str, outer: str) -> bool:
    """Every level of `inner` lies within one level of `outer` (and `outer` has fewer levels):
    differences between levels of `outer` are also differences of `inner`."""
    pairs = texts[[inner, outer]].astype(str).drop_duplicates()
    return bool(pairs[inner].is_unique) and pairs[outer].nunique() < pairs[inner].nunique()

"""Reason shares corrected for the coder's measured errors, with an interval that includes them.

A coder (rules or a language model) gives each comment a main class; researchers label a random
sample of the same comments. From that sample, `confusion_rates` estimates M[t, c] = P(coder says
c | the truth is t). The coder's shares over all comments, q, relate to the true shares p by
q = Mᵀp, so `invert` solves for p (least squares, since the coder may abstain: it has one column
more than there are true classes; the generalisation of Rogan and Gladen's correction to several
classes), then clips it to [0, 1] and rescales it to sum to 1.

`corrected_shares` bootstraps both parts together, so that the interval holds the sampling error
of the coded comments and the error of the correction itself: each replicate resamples the
labelled sample (a new M) and the coded comments (a new q) and inverts again; the interval is the
2.5th to 97.5th percentile. The labelled sample must be a random sample of the coded comments,
or a stratified one with proportional allocation (as `app/research/validation.py` draws it):
a sample that over-draws some of the coder's classes would bias M.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

UNCORRECTED_NOTE = "uncorrected, coder not validated on this data"


def confusion_rates(
    truth: list[str], coded: list[str], classes: list[str], columns: list[str]
) -> np.ndarray:
    """M[t, c]: the share of comments whose truth is classes[t] that the coder put in columns[c]
    (a row of NaN for a class the sample does not hold)."""
    counts = np.zeros((len(classes), len(columns)))
    row = {name: i for i, name in enumerate(classes)}
    column = {name: i for i, name in enumerate(columns)}
    for t, c in zip(truth, coded, strict=True):
        counts[row[t], column[c]] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts / counts.sum(axis=1, keepdims=True)


def invert(rates: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """The true shares p with Mᵀp closest to the observed shares (least squares), clipped to
    [0, 1] and rescaled to sum to 1; classes with no row in M (NaN) get NaN."""
    known = ~np.isnan(rates).any(axis=1)
    out = np.full(rates.shape[0], np.nan)
    if not known.any():
        return out
    solution, *_ = np.linalg.lstsq(rates[known].T, observed, rcond=None)
    solution = np.clip(solution, 0.0, None)
    total = solution.sum()
    out[known] = solution / total if total > 0 else np.nan
    return out


def shares_of(coded: list[str], columns: list[str]) -> np.ndarray:
    counts = pd.Series(coded).value_counts()
    return np.array([counts.get(c, 0) for c in columns], dtype=float) / max(len(coded), 1)


def _rates_from_codes(t: np.ndarray, c: np.ndarray, k: int, m: int) -> np.ndarray:
    counts = np.bincount(t * m + c, minlength=k * m).reshape(k, m).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts / counts.sum(axis=1, keepdims=True)


def corrected_shares(
    truth: list[str],
    coded_sample: list[str],
    coded_all: list[str],
    classes: list[str],
    columns: list[str],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Per true class: the coder's raw share, the corrected share and its bootstrap interval
    (over the labelled sample and the coded comments together), and the labelled count."""
    rng = np.random.default_rng(seed)
    k, m = len(classes), len(columns)
    t = np.array([classes.index(x) for x in truth], dtype=int)
    c = np.array([columns.index(x) for x in coded_sample], dtype=int)
    everything = np.array([columns.index(x) for x in coded_all], dtype=int)
    raw = np.bincount(everything, minlength=m) / max(len(everything), 1)
    point = invert(_rates_from_codes(t, c, k, m), raw)
    draws = np.full((n_boot, k), np.nan)
    for b in range(n_boot):
        pick = rng.integers(0, len(t), len(t))
        again = everything[rng.integers(0, len(everything), len(everything))]
        draws[b] = invert(
            _rates_from_codes(t[pick], c[pick], k, m), np.bincount(again, minlength=m) / len(again)
        )
    alpha = (1 - level) / 2
    low = np.full(k, np.nan)
    high = np.full(k, np.nan)
    for i in range(k):
        column = draws[:, i][~np.isnan(draws[:, i])]
        if len(column):
            low[i], high[i] = np.quantile(column, [alpha, 1 - alpha])
    labelled = np.bincount(t, minlength=k)
    return pd.DataFrame(
        {
            "class": classes,
            "labelled": labelled.astype(int),
            "raw_share": [raw[columns.index(x)] if x in columns else np.nan for x in classes],
            "corrected_share": point,
            "ci_low": low,
            "ci_high": high,
        }
    )

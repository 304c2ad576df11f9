"""Learning over time and the range of skill between annotators.

- Mean points by the annotator's n-th round, long-term (capped) and within a session of
  `session_length` rounds (position ((order - 1) mod L) + 1), with 95% intervals from a bootstrap
  over annotators, and the trend tested with least squares on log(round) with two-way clustered
  standard errors (annotator and text; analysis.inference).
- Per-annotator Spearman rho of points against round order (annotators with at least
  `min_rounds` rounds), computed for all annotators at once from within-group ranks, and a
  Wilcoxon signed-rank test of the rhos against 0 (one value per annotator, so independent).
- Skill range: mean points of the top and bottom 5% of annotators with at least `min_rounds`
  rounds (at least one annotator each).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from analysis import inference


def _means(frame: pd.DataFrame, column: str, n_boot: int, seed: int) -> pd.DataFrame:
    table = inference.level_means(frame, column, "points", n_boot, seed)
    table = table.rename(columns={"mean": "mean_points"})
    return table.astype({column: "int64"}) if len(table) else table


def by_order(frame: pd.DataFrame, cap: int = 100, n_boot: int = 0, seed: int = 0) -> pd.DataFrame:
    """Mean points by the n-th round (rows beyond `cap` are pooled into `cap`), with intervals."""
    return _means(frame.assign(n=frame["order"].clip(upper=cap)), "n", n_boot, seed)


def by_session_position(
    frame: pd.DataFrame, session_length: int = 10, n_boot: int = 0, seed: int = 0
) -> pd.DataFrame:
    position = (frame["order"] - 1) % session_length + 1
    return _means(frame.assign(position=position), "position", n_boot, seed)


def clustered_trends(frame: pd.DataFrame, session_length: int = 10) -> dict:
    """Points on log(round number), and on the position within a session, with two-way
    clustered standard errors."""
    position = (frame["order"] - 1) % session_length + 1
    return {
        "long_term": inference.trend_test(frame, "order", log=True),
        "within_session": inference.trend_test(
            frame.assign(position=position), "position", log=False
        ),
    }


def annotator_trends(frame: pd.DataFrame, min_rounds: int = 10) -> pd.DataFrame:
    """Spearman rho of points vs order per annotator with >= min_rounds rounds (NaN if flat)."""
    data = frame.dropna(subset=["order"])
    counts = data.groupby("annotator")["points"].transform("size")
    data = data[counts >= min_rounds]
    if data.empty:
        return pd.DataFrame(columns=["annotator", "rounds", "rho"])
    grouped = data.groupby("annotator")
    rx = grouped["order"].rank(method="average")
    ry = grouped["points"].rank(method="average")
    work = pd.DataFrame({"annotator": data["annotator"], "x": rx, "y": ry})
    work["xy"], work["xx"], work["yy"] = work.x * work.y, work.x * work.x, work.y * work.y
    s = work.groupby("annotator").agg(
        n=("x", "size"),
        sx=("x", "sum"),
        sy=("y", "sum"),
        sxy=("xy", "sum"),
        sxx=("xx", "sum"),
        syy=("yy", "sum"),
    )
    cov = s.sxy - s.sx * s.sy / s.n
    vx = s.sxx - s.sx**2 / s.n
    vy = s.syy - s.sy**2 / s.n
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = cov / np.sqrt(vx * vy)
    rho = rho.where((vx > 1e-12) & (vy > 1e-12))
    return pd.DataFrame({"annotator": s.index, "rounds": s.n.to_numpy(), "rho": rho.to_numpy()})


def trend_summary(frame: pd.DataFrame, min_rounds: int = 10) -> dict:
    trends = annotator_trends(frame, min_rounds)
    rhos = trends["rho"].dropna().to_numpy()
    out: dict = {
        "min_rounds": min_rounds,
        "annotators": len(trends),
        "annotators_with_rho": len(rhos),
        "mean_rho": float(rhos.mean()) if len(rhos) else None,
        "median_rho": float(np.median(rhos)) if len(rhos) else None,
        "wilcoxon_p_value": None,
    }
    if len(rhos) >= 2 and np.any(rhos != 0):
        p = float(stats.wilcoxon(rhos).pvalue)
        out["wilcoxon_p_value"] = p if math.isfinite(p) else None
    return out


def skill_range(frame: pd.DataFrame, min_rounds: int = 10, share: float = 0.05) -> dict:
    """Mean points of the top and bottom `share` of annotators with >= min_rounds rounds."""
    per = frame.groupby("annotator")["points"].agg(["size", "mean"])
    per = per[per["size"] >= min_rounds].sort_values("mean")
    if per.empty:
        return {
            "min_rounds": min_rounds,
            "annotators": 0,
            "k": 0,
            "top_mean": None,
            "bottom_mean": None,
        }
    k = max(1, math.ceil(share * len(per)))
    return {
        "min_rounds": min_rounds,
        "annotators": len(per),
        "k": k,
        "top_mean": float(per["mean"].iloc[-k:].mean()),
        "bottom_mean": float(per["mean"].iloc[:k].mean()),
        "median": float(per["mean"].median()),
    }


def annotator_means(frame: pd.DataFrame, min_rounds: int = 10) -> pd.Series:
    per = frame.groupby("annotator")["points"].agg(["size", "mean"])
    return per.loc[per["size"] >= min_rounds, "mean"]

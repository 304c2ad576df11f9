"""Learning over time and the range of skill between annotators.

- Mean points by the annotator's n-th round (capped), with 95% intervals from a bootstrap over
  annotators. The order is the site's own round number in our exports; roft.csv has none, so it
  is the order of the annotator's dates, and `order_basis` says whether those dates establish it
  (ties within an annotator do not).
- Within a session, only where the data has sessions (`sessions`): a crowd study's rounds of one
  worker, in the study's order. roft.csv has no sessions, and our exports do not identify the
  site's sets of public players, so for those rows nothing is cut into invented sessions.
- The trend on log(round): a permutation test that shuffles each annotator's rounds (exact when
  there is no learning), and the slope with a 95% interval from a linear mixed model with crossed
  random intercepts (small data) or least squares with two-way clustered errors.
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

from analysis import inference, mixed


def _means(frame: pd.DataFrame, column: str, n_boot: int, seed: int) -> pd.DataFrame:
    table = inference.level_means(frame, column, "points", n_boot, seed)
    table = table.rename(columns={"mean": "mean_points"})
    return table.astype({column: "int64"}) if len(table) else table


def by_order(frame: pd.DataFrame, cap: int = 100, n_boot: int = 0, seed: int = 0) -> pd.DataFrame:
    """Mean points by the n-th round (rows beyond `cap` are pooled into `cap`), with intervals."""
    return _means(frame.assign(n=frame["order"].clip(upper=cap)), "n", n_boot, seed)


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A text column, or "" for every row when the frame has none."""
    if name not in frame.columns:
        return pd.Series("", index=frame.index)
    return frame[name].astype(str).where(frame[name].notna(), "")


def order_basis(frame: pd.DataFrame) -> dict:
    """Whether the data establishes the order of each annotator's rounds, and from what."""
    if frame.empty:
        return {"known": False, "source": None, "note": "no rows"}
    if (_column(frame, "source") != "roft-csv").all():
        return {"known": True, "source": "round number", "note": "the site's round number"}
    dates = frame["date"]
    if dates.isna().any():
        return {
            "known": False,
            "source": "dates",
            "note": "some rows have no date, so their order is unknown",
        }
    tied = frame.duplicated(["annotator", "date"], keep=False)
    share = float(tied.mean())
    if share > 0.05:
        return {
            "known": False,
            "source": "dates",
            "note": f"{share:.0%} of rows share their date with another row of the same "
            "annotator, so the order of those rounds is unknown",
        }
    return {
        "known": True,
        "source": "dates",
        "note": "roft.csv has no round number: the order of each annotator's dates",
    }


def sessions(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows that belong to a session the data records, with their `session` and `position`
    (1 = the session's first round): a crowd study's rounds of one worker. Empty when none."""
    rows = frame[(_column(frame, "study") != "") & frame["order"].notna()]
    if rows.empty:
        return rows.assign(session=pd.Series(dtype=str), position=pd.Series(dtype="int64"))
    session = rows["annotator"].astype(str) + " / " + _column(rows, "study")
    position = rows.groupby(session)["order"].rank(method="first").astype("int64")
    return rows.assign(session=session, position=position)


def sessions_note(frame: pd.DataFrame) -> str:
    """What the data says about sessions, in words the report prints."""
    if (_column(frame, "source") == "roft-csv").any():
        return (
            "This data has no sessions: roft.csv records neither sets nor study order, so no "
            "within-session learning is reported."
        )
    return (
        "Sessions are a crowd study's rounds of one worker; the export does not identify the "
        "site's sets of public players, so their rounds are in no session."
    )


def by_session_position(
    frame: pd.DataFrame, session_length: int = 10, n_boot: int = 0, seed: int = 0
) -> pd.DataFrame:
    """Mean points by position in a recorded session (positions beyond `session_length` pooled);
    empty when the data has no sessions."""
    rows = sessions(frame)
    if rows.empty:
        return pd.DataFrame(columns=["position", "rows", "annotators", "mean_points"])
    rows = rows.assign(position=rows["position"].clip(upper=session_length))
    return _means(rows, "position", n_boot, seed)


def _log_order_trend(frame: pd.DataFrame, column: str, seed: int, log: bool = True) -> dict:
    data = frame.dropna(subset=[column])
    if len(data) < 3 or data[column].nunique() < 2:
        return {"slope": None, "p_value": None, "n": len(data)}
    xs = data[column].to_numpy(dtype=float)
    xs = np.log(np.maximum(xs, 1.0)) if log else xs
    term = f"log({column})" if log else column
    clustered = inference.trend_test(data, column, log=log)
    model = mixed.fit(data, np.column_stack([np.ones(len(data)), xs]), ["intercept", term], [1])
    if model is not None:
        effect = model.effects[1]
        slope, low, high = effect["estimate"], effect["ci_low"], effect["ci_high"]
        source = f"{model.model}; {model.library}"
    else:
        slope, low, high = clustered["slope"], clustered["ci_low"], clustered["ci_high"]
        source = f"OLS, {clustered.get('covariance', 'two-way')} clustered covariance"
    permutation = within_annotator_permutation(data, xs, seed=seed)
    return {
        "term": term,
        "slope": slope,
        "ci_low": low,
        "ci_high": high,
        "slope_from": source,
        "p_value": permutation["p_value"],
        "method": permutation["method"],
        "permutations": permutation["permutations"],
        "mixed_p_value": model.p_value if model else None,
        "mixed_library": model.library if model else None,
        "mixed_warnings": model.warnings if model else [],
        "n": len(data),
        "clustered": clustered,
    }


def within_annotator_permutation(
    frame: pd.DataFrame, xs: np.ndarray, n_perm: int = 1000, seed: int = 0
) -> dict:
    """Shuffle x among each annotator's rows; the statistic is the absolute pooled
    within-annotator covariance of points with x. p = (1 + #{perm >= observed}) / (1 + n)."""
    codes = pd.factorize(frame["annotator"])[0]
    y = frame["points"].to_numpy(dtype=float)
    y = y - (np.bincount(codes, y) / np.bincount(codes))[codes]
    n_perm = int(min(n_perm, max(50, 20_000_000 // max(len(y), 1))))
    order = np.argsort(codes, kind="stable")
    codes, y, xs = codes[order], y[order], np.asarray(xs, dtype=float)[order]
    observed = abs(float(xs @ y))
    rng = np.random.default_rng(seed)
    exceed = 0
    for _ in range(n_perm):
        # codes + U[0, 1) keeps each annotator's block and shuffles within it (one float sort)
        shuffled = xs[np.argsort(codes + rng.random(len(xs)))]
        exceed += abs(float(shuffled @ y)) >= observed - 1e-12 * max(observed, 1)
    return {
        "method": "permutation of each annotator's rounds",
        "p_value": (1 + exceed) / (1 + n_perm),
        "permutations": n_perm,
    }


def clustered_trends(frame: pd.DataFrame, session_length: int = 10, seed: int = 0) -> dict:
    """Points on log(round number) (when the order is known) and on the position within a
    recorded session (when there are sessions); None where the data cannot support it."""
    basis = order_basis(frame)
    rows = sessions(frame)
    return {
        "order": basis,
        "long_term": _log_order_trend(frame, "order", seed) if basis["known"] else None,
        "sessions": int(rows["session"].nunique()) if len(rows) else 0,
        "sessions_note": sessions_note(frame),
        "within_session": _log_order_trend(
            rows.assign(position=rows["position"].clip(upper=session_length)),
            "position",
            seed,
            log=False,
        )
        if len(rows)
        else None,
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

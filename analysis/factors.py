"""Points by factor: system, category, decoding p (binned) and boundary position.

On texts with a machine part (all-human texts are reported apart, in the boundary section). For
each level: rows, annotators, texts, mean points and exact rate with 95% intervals from a
bootstrap over annotators, and what random guessing and always answering "all human" would score
on the same texts. Whether levels differ is tested with least squares and two-way clustered
standard errors (annotator and text; analysis.inference), not with tests that take rows as
independent: an annotator's rows share their skill and a text's rows share its difficulty.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from analysis import inference
from analysis.load import recompute_points

P_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
FACTORS = (("system", "system"), ("category", "category"), ("p", "p_bin"), ("boundary", "boundary"))


def p_bin(p: pd.Series) -> pd.Series:
    """Bins of width 0.2 ("[0.0, 0.2]" includes 0); "unknown" for a missing p."""
    labels = [f"{lo:.1f}-{hi:.1f}" for lo, hi in itertools.pairwise(P_BINS)]
    binned = pd.cut(p, bins=list(P_BINS), labels=labels, include_lowest=True)
    return binned.astype("str").where(p.notna(), "unknown")


def _baselines(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per level: mean points of random guessing (uniform on 1..N) and of always "all human"."""
    n = frame["n_sentences"].to_numpy()
    b = frame["boundary"].to_numpy()
    top = int(n.max()) + 1 if len(n) else 1
    table = np.zeros((top, top))  # [b, n] -> mean points of a uniform guess on 1..n
    for bb, nn in set(zip(b.tolist(), n.tolist(), strict=True)):
        table[bb, nn] = recompute_points(np.arange(1, nn + 1), np.full(nn, bb)).mean()
    expected = table[b, n]
    data = pd.DataFrame(
        {
            column: frame[column].to_numpy(),
            "random_points": expected,
            "always_human_points": recompute_points(n, b),
        }
    )
    return data.groupby(column, observed=True).mean().reset_index()


def table(frame: pd.DataFrame, column: str, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    exact = (frame["guess"] == frame["boundary"]).astype(float)
    long = inference.many_level_means(
        frame, column, {"points": frame["points"].astype(float), "exact": exact}, n_boot, seed
    )
    if long.empty:
        return pd.DataFrame(columns=[column, "rows", "annotators", "texts", "mean_points"])
    points = long[long["value"] == "points"].set_index(column)
    hits = long[long["value"] == "exact"].set_index(column)
    out = pd.DataFrame(
        {
            "rows": points["rows"],
            "annotators": points["annotators"],
            "texts": frame.drop_duplicates(["example"]).groupby(column, observed=True).size(),
            "mean_points": points["mean"],
            "points_ci_low": points["ci_low"],
            "points_ci_high": points["ci_high"],
            "exact_rate": hits["mean"],
            "exact_ci_low": hits["ci_low"],
            "exact_ci_high": hits["ci_high"],
        }
    )
    out = out.join(_baselines(frame, column).set_index(column))
    return out.rename_axis(column).reset_index()


def by_factor(frame: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> dict[str, dict]:
    """Tables and clustered tests for system, category, p bin and boundary (machine texts)."""
    machine = frame[frame["boundary"] < frame["n_sentences"]]
    machine = machine.assign(p_bin=p_bin(machine["p"]))
    out: dict[str, dict] = {}
    for name, column in FACTORS:
        out[name] = {
            "column": column,
            "table": table(machine, column, n_boot, seed),
            "test": inference.factor_test(machine.assign(**{column: machine[column]}), column),
        }
    known_p = machine.dropna(subset=["p"])
    out["p"]["trend"] = inference.trend_test(known_p, "p", log=False)
    out["boundary"]["trend"] = inference.trend_test(machine, "boundary", log=False)
    return out

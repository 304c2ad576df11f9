"""Points by factor: system, category, decoding p (binned) and boundary position.

On texts with a machine part (all-human texts are reported apart, in the boundary section). For
each level: rows, annotators, texts, mean points and exact rate with 95% intervals from a
bootstrap over annotators, and what random guessing and always answering "all human" would score
on the same texts.

Whether levels differ (analysis.inference), never with tests that take rows as independent (an
annotator's rows share their skill and a text's rows share its difficulty):

- the p-value is a permutation test over texts (every factor here is a property of the text), on
  points centred by annotator; Holm-adjusted over the factors tested;
- a linear mixed model with crossed random intercepts for annotator and text (analysis.mixed, on
  every row) gives a joint test beside it and the effect of each level against the reference with
  a 95% interval, naming the library that fitted it and every warning it raised;
- the two-way clustered Wald test is kept in summary.json as a diagnostic; its warnings are
  printed under the factor in report.md.

Factors that split the texts the same way (each system wrote only one category) are one contrast:
they are merged into one entry labelled "system & category (one split)" and the report warns that
their effects cannot be told apart.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from analysis import inference, mixed
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


def _levels_with_few_texts(frame: pd.DataFrame, column: str, least: int = 5) -> list[str]:
    texts = frame.drop_duplicates("example").groupby(column, observed=True).size()
    return [str(level) for level, count in texts.items() if count < least]


def factor_result(frame: pd.DataFrame, column: str, seed: int = 0) -> dict:
    """Permutation, mixed-model and clustered tests of one text-level factor, with effects."""
    data = frame.dropna(subset=[column])
    permutation = inference.permutation_test(data, column, seed=seed)
    clustered = inference.factor_test(data, column)
    model = None
    if data[column].nunique() >= 2:
        x, names = mixed.design(data, column)
        model = mixed.fit(data, x, names, list(range(1, len(names))), "points")
    few_texts = _levels_with_few_texts(data, column)
    notes = []
    if few_texts:
        notes.append(
            f"level(s) {', '.join(few_texts)} have fewer than 5 texts each: their effects are "
            "poorly determined"
        )
    if model is not None and model.is_mixed and model.converged:
        effects, source = _standardised(model), f"mixed model ({model.library})"
    else:
        effects = clustered.get("effects", [])
        source = f"OLS, {clustered.get('covariance', 'two-way')} clustered covariance"
    return {
        "p_value": permutation["p_value"],
        "method": permutation.get("method", "none (one level)"),
        "permutations": permutation["permutations"],
        "texts": permutation["texts"],
        "levels": int(data[column].nunique()),
        "mixed_p_value": model.p_value if model else None,
        "mixed": _summary(model),
        "effects": effects,
        "effects_from": source,
        "clustered": {k: v for k, v in clustered.items() if k != "effects"},
        "notes": notes,
    }


def trend_result(frame: pd.DataFrame, column: str, seed: int = 0) -> dict:
    """The slope of points on a numeric text-level column: a permutation p-value over texts, the
    mixed model's slope and interval (small data) or the clustered one."""
    data = frame.dropna(subset=[column])
    if len(data) < 3 or data[column].nunique() < 2:
        return {"slope": None, "p_value": None, "n": len(data)}
    permutation = inference.permutation_test(data, column, numeric=True, seed=seed)
    x, names = mixed.design(data, column, numeric=True)
    model = mixed.fit(data, x, names, [1], "points")
    clustered = inference.trend_test(data, column, log=False)
    if model is not None:
        effect = model.effects[1]
        source = f"{model.model}; {model.library}"
    else:
        effect = {k: clustered[k] for k in ("slope", "ci_low", "ci_high")}
        effect["estimate"] = effect.pop("slope")
        source = f"OLS, {clustered.get('covariance', 'two-way')} clustered covariance"
    return {
        "slope": effect["estimate"],
        "ci_low": effect["ci_low"],
        "ci_high": effect["ci_high"],
        "slope_from": source,
        "p_value": permutation["p_value"],
        "method": permutation["method"],
        "mixed_p_value": model.p_value if model else None,
        "mixed": _summary(model),
        "n": len(data),
        "clustered": clustered,
    }


def _standardised(model: mixed.MixedResult) -> list[dict]:
    """The model's effects with `d`: each estimate over the square root of the model's total
    variance (annotator + text + residual), so effects read on one scale across studies."""
    total = sum(model.variances.get(p, 0.0) for p in ("annotator", "text", "residual"))
    scale = float(np.sqrt(total)) if total > 0 else float("nan")
    return [{**e, "d": e["estimate"] / scale} for e in model.effects]


def baseline_gain(frame: pd.DataFrame, seed: int = 0) -> dict | None:
    """Boundary against the scoring ceiling: always answering "all human" earns more points the
    later the boundary (0 at boundary 1, up to 4 at boundary 9), so the raw effect of the boundary
    partly measures the scoring rule. The gain over that baseline (points − what always "all
    human" earns on the same text) by boundary, with the mixed model's effects of each boundary
    against the first and the permutation test over texts."""
    data = frame.dropna(subset=["boundary"])
    if data["boundary"].nunique() < 2:
        return None
    gain = data["points"] - recompute_points(data["n_sentences"], data["boundary"])
    data = data.assign(gain=gain.to_numpy(dtype=float))
    x, names = mixed.design(data, "boundary")
    model = mixed.fit(data, x, names, list(range(1, len(names))), "gain")
    permutation = inference.permutation_test(data, "boundary", value="gain", seed=seed)
    means = data.groupby("boundary")["gain"].agg(["size", "mean"]).reset_index()
    return {
        "table": means.rename(columns={"size": "rows", "mean": "mean_gain"}),
        "p_value": permutation["p_value"],
        "mixed_p_value": model.p_value if model else None,
        "mixed": _summary(model),
        "effects": _standardised(model) if model and model.is_mixed else [],
    }


def _summary(model: mixed.MixedResult | None) -> dict | None:
    """The model's summary for summary.json and the report (its effects are kept apart)."""
    if model is None:
        return None
    out = model.as_dict()
    out.pop("effects")
    return out


def by_factor(frame: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> dict[str, dict]:
    """Tables and tests for system, category, p bin and boundary (machine texts).

    Factors that split the texts the same way are merged: the entry of the first one is labelled
    "a & b (one split)", carries `aliases` and a warning, and the others point to it with
    `aliased_with` (their table is kept, their test is not repeated). P-values are
    Holm-adjusted over the factors actually tested."""
    machine = frame[frame["boundary"] < frame["n_sentences"]]
    machine = machine.assign(p_bin=p_bin(machine["p"]))
    columns = [column for _, column in FACTORS]
    texts = machine.drop_duplicates("example")
    groups = inference.aliasing(texts, columns) if len(texts) else {}
    alias_of = {c: g[0] for g in groups.values() for c in g[1:]}
    names = dict((column, name) for name, column in FACTORS)
    out: dict[str, dict] = {}
    for name, column in FACTORS:
        entry: dict = {"column": column, "table": table(machine, column, n_boot, seed)}
        if column in alias_of:
            entry["aliased_with"] = names[alias_of[column]]
            entry["test"] = {"p_value": None, "aliased_with": names[alias_of[column]]}
            out[name] = entry
            continue
        entry["test"] = factor_result(machine, column, seed)
        if column in groups:
            group = [names[c] for c in groups[column]]
            entry["aliases"] = group
            entry["label"] = " & ".join(group) + " (one split)"
            entry["test"]["notes"].insert(
                0,
                f"{' and '.join(group)} split the texts the same way (each level of one is exactly "
                "one level of the other): this is one contrast, and its effect cannot be "
                f"attributed to {' or '.join(group)}",
            )
        out[name] = entry
    tested = [n for n, e in out.items() if "aliased_with" not in e]
    for outer in tested:
        for inner in tested:
            column_in, column_out = out[inner]["column"], out[outer]["column"]
            if inner != outer and len(texts) and inference.nested(texts, column_in, column_out):
                out[outer]["test"]["notes"].append(
                    f"every {inner} lies within one {outer}: differences between {outer} levels "
                    f"are also differences between {inner} levels"
                )
    adjusted = inference.holm({n: out[n]["test"]["p_value"] for n in tested})
    for n in tested:
        out[n]["test"]["p_holm"] = adjusted[n]
    for name, column in (("p", "p"), ("boundary", "boundary")):
        if "aliased_with" not in out[name]:
            known = machine.dropna(subset=[column])
            out[name]["trend"] = trend_result(known, column, seed)
    if "aliased_with" not in out["boundary"]:
        out["boundary"]["gain"] = baseline_gain(machine, seed)
    return out

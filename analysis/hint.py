"""The detector hint beside the workers: in a study with a detector-hint condition, how well the
detector alone would have answered, against the workers who saw its hint and those who did not,
on the same texts.

The hint (app/crowd/hints.py, `flask study hints`) shows a level for each revealed sentence but
the first: low, unsure or high (the study's thirds of the detector's per-sentence scores). The
round stores the levels it showed in `detector_hints` (a JSON list, one per sentence; empty in a
condition without the hint). The detector alone answers from those levels with the rule the hint
suggests: it flags the first sentence from sentence 1 the hint calls "high", else "all human"
(analysis.detect.online_guess on the levels, with "high" as the threshold). A text's levels are
those its hint rounds stored (the most frequent list, should the study's cut points have changed).

Compared on the texts that have levels and were answered in both arms: the workers' exact-hit
rate and mean points in the hint condition(s), in the other conditions, and the detector's on
the very rounds the workers played (each round's text, so the texts weigh the same for all
three). Intervals and the differences' intervals come from one crossed (pigeonhole) bootstrap:
each draw gives every worker and every text a Poisson(1) weight and a round their product (Owen
2007), so they carry both sources of variation; the detector's values vary with the texts only.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from analysis.detect import online_guess
from analysis.load import recompute_points

RANK = {"low": 0.0, "unsure": 1.0, "high": 2.0}
DETECTOR = "detector alone (hint rule)"
WITH, WITHOUT = "workers with the hint", "workers without the hint"
WHO = (DETECTOR, WITH, WITHOUT)
DIFFERENCES = ((WITH, WITHOUT), (WITH, DETECTOR), (WITHOUT, DETECTOR))
ALL, MACHINE, ALL_HUMAN = "all texts", "machine texts", "all-human texts"
MEASURES = ("exact", "points")


def parse_levels(value: object) -> list[str] | None:
    """'["low","unsure","high"]' -> ['low', 'unsure', 'high']; None for no hint."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, list | tuple | np.ndarray):
        return [str(v) for v in value]
    text = str(value).strip()
    if not text:
        return None
    try:
        levels = json.loads(text)
    except ValueError:
        return None
    return [str(v) for v in levels] if isinstance(levels, list) and levels else None


def hint_guess(levels: list[str]) -> int:
    """The detector's answer from the hint's levels: the first sentence k >= 1 it calls "high",
    else N ("all human")."""
    return online_guess([RANK.get(level, RANK["unsure"]) for level in levels], RANK["high"])


def text_levels(frame: pd.DataFrame) -> pd.Series:
    """Each text's hint levels (a JSON string), from the rounds that showed a hint."""
    shown = frame.loc[frame["detector_hints"].astype(str).str.strip().ne(""), :]
    if shown.empty:
        return pd.Series(dtype="str")
    return shown.groupby("example")["detector_hints"].agg(lambda s: s.value_counts().index[0])


def hint_conditions(frame: pd.DataFrame) -> list[str]:
    """The conditions whose rounds showed a hint."""
    shown = frame["detector_hints"].astype(str).str.strip().ne("") & frame["condition"].ne("")
    return sorted(frame.loc[shown, "condition"].unique())


def rows_compared(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The rounds of the comparison, one column per value: `arm` (WITH or WITHOUT), `kind`,
    the workers' `exact` and `points`, the detector's `detector_exact` and `detector_points`.
    Returns (rows, facts) with rows empty when the study has no hint condition or no text
    answered in both arms."""
    conditions = hint_conditions(frame)
    facts = {"hint_conditions": conditions, "scorer_rule": "first 'high' from sentence 1"}
    if not conditions:
        return pd.DataFrame(), facts
    study = frame[frame["condition"].ne("")]
    levels = text_levels(study).map(parse_levels).dropna()
    arm = np.where(study["condition"].isin(conditions), WITH, WITHOUT)
    rows = study.assign(arm=arm)[study["example"].isin(levels.index)]
    both = rows.groupby("example")["arm"].nunique()
    rows = rows[rows["example"].isin(both.index[both == 2])].copy()
    facts["texts_with_levels"] = len(levels)
    if rows.empty:
        return rows, facts
    texts = rows.drop_duplicates("example").set_index("example")
    guess = {}
    for example, found in levels.items():
        if example not in texts.index:
            continue
        n = int(texts.at[example, "n_sentences"])
        # A text's levels cover its N sentences; a short list answers "all human" past its end.
        guess[example] = hint_guess(list(found[:n]) + ["unsure"] * max(0, n - len(found)))
    g = rows["example"].map(guess).to_numpy(dtype=int)
    b = rows["boundary"].to_numpy(dtype=int)
    rows["exact"] = (rows["guess"] == rows["boundary"]).astype(float)
    rows["points"] = rows["points"].astype(float)
    rows["detector_exact"] = (g == b).astype(float)
    rows["detector_points"] = recompute_points(g, b).astype(float)
    rows["kind"] = np.where(rows["boundary"] >= rows["n_sentences"], ALL_HUMAN, MACHINE)
    columns = ["annotator", "example", "arm", "kind", "exact", "points"]
    return rows[[*columns, "detector_exact", "detector_points"]].reset_index(drop=True), facts


def _crossed_weights(a: np.ndarray, t: np.ndarray, n_boot: int, seed: int, block: int = 64):
    """Blocks of round weights (draws × rounds): Poisson(1) per worker times per text."""
    rng = np.random.default_rng(seed)
    n_a, n_t = int(a.max()) + 1, int(t.max()) + 1
    done = 0
    while done < n_boot:
        size = min(block, n_boot - done)
        yield rng.poisson(1.0, (size, n_a))[:, a] * rng.poisson(1.0, (size, n_t))[:, t]
        done += size


def _estimates(rows: pd.DataFrame) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """{(who, measure): (values, mask)}: the rounds each estimate averages."""
    everyone = np.ones(len(rows), dtype=bool)
    out = {}
    for measure in MEASURES:
        out[(DETECTOR, measure)] = (rows[f"detector_{measure}"].to_numpy(float), everyone)
        for arm in (WITH, WITHOUT):
            out[(arm, measure)] = (rows[measure].to_numpy(float), rows["arm"].eq(arm).to_numpy())
    return out


def compare(frame: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> dict:
    """The three answerers' exact-hit rate and mean points (all texts, machine texts, all-human
    texts) and the differences between them, with 95% crossed-bootstrap intervals.

    Returns {"table", "differences", "summary"}; empty tables when there is nothing to compare
    (summary["reason"] says why)."""
    rows, facts = rows_compared(frame)
    summary = {**facts, "rounds": len(rows)}
    if rows.empty:
        summary["reason"] = (
            "no condition of this export showed the detector hint"
            if not facts["hint_conditions"]
            else "no text with hint levels was answered both with and without the hint"
        )
        return {"table": pd.DataFrame(), "differences": pd.DataFrame(), "summary": summary}
    table, differences = [], []
    for kind in (ALL, MACHINE, ALL_HUMAN):
        part = rows if kind == ALL else rows[rows["kind"] == kind]
        if part.empty:
            continue
        a = pd.factorize(part["annotator"])[0]
        t = pd.factorize(part["example"])[0]
        estimates = _estimates(part)
        point = {
            key: float(values[mask].mean()) if mask.any() else np.nan
            for key, (values, mask) in estimates.items()
        }
        draws: dict[tuple[str, str], list[np.ndarray]] = {key: [] for key in estimates}
        if n_boot > 0:
            for weights in _crossed_weights(a, t, n_boot, seed):
                for key, (values, mask) in estimates.items():
                    w = weights[:, mask]
                    total = w.sum(axis=1).astype(float)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        draws[key].append((w @ values[mask]) / total)
        boot = {k: np.concatenate(v) if v else np.array([]) for k, v in draws.items()}

        def interval(values: np.ndarray) -> tuple[float, float]:
            values = values[np.isfinite(values)]
            if len(values) < 2:
                return np.nan, np.nan
            low, high = np.quantile(values, [0.025, 0.975])
            return float(low), float(high)

        for who in WHO:
            mask = estimates[(who, "exact")][1]
            row = {
                "texts": kind,
                "who": who,
                "n_texts": int(part.loc[mask, "example"].nunique()),
                "rounds": int(mask.sum()),
                "workers": 0 if who == DETECTOR else int(part.loc[mask, "annotator"].nunique()),
            }
            for measure in MEASURES:
                row[measure] = point[(who, measure)]
                row[f"{measure}_low"], row[f"{measure}_high"] = interval(boot[(who, measure)])
            table.append(row)
        for first, second in DIFFERENCES:
            row = {"texts": kind, "difference": f"{first} − {second}"}
            for measure in MEASURES:
                row[measure] = point[(first, measure)] - point[(second, measure)]
                row[f"{measure}_low"], row[f"{measure}_high"] = interval(
                    boot[(first, measure)] - boot[(second, measure)]
                )
            differences.append(row)
    table, differences = pd.DataFrame(table), pd.DataFrame(differences)
    summary.update(
        texts=int(rows["example"].nunique()),
        workers_with=int(rows.loc[rows["arm"] == WITH, "annotator"].nunique()),
        workers_without=int(rows.loc[rows["arm"] == WITHOUT, "annotator"].nunique()),
        bootstrap=n_boot,
        table=table.to_dict(orient="records"),
        differences=differences.to_dict(orient="records"),
    )
    return {"table": table, "differences": differences, "summary": summary}

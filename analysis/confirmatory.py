"""The preregistered (confirmatory) analysis: exactly the frozen plan, then its deviations.

A plan (the export's preregistration.json, analysis.load.read_preregistration) names the outcome
(exact_hit, points or distance), the contrast (condition, condition:order, system, category or
boundary), the control condition, alpha, the exclusions (decisions, minimum rounds) and the
planned numbers of workers and texts. `analyse` applies the plan's exclusions (and only those)
to the rows, fits the planned model with analysis.mixed (crossed random intercepts for annotator
and text; for a condition contrast, a random slope of the condition by text when the data
support it) and tests the planned contrast. `deviations` lists every way the analysis could not
follow the plan. The power simulation (analysis.power) calls the same `fit_plan`, so the power it
predicts is that of this test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis import mixed
from analysis.load import canonical_decision, canonical_decisions

OUTCOMES = ("exact_hit", "points", "distance")
CONTRASTS = ("condition", "condition:order", "system", "category", "boundary")


class PlanError(ValueError):
    """The plan cannot be run on these rows; the message says why."""


@dataclass
class Confirmatory:
    plan: dict
    version: dict
    rows: int
    workers: int
    texts: int
    excluded: dict[str, int]
    result: mixed.MixedResult | None
    terms: list[str]
    p_value: float | None
    reject: bool | None
    effect_size: list[dict] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)


def apply_exclusions(frame: pd.DataFrame, plan: dict) -> tuple[pd.DataFrame, dict[str, int]]:
    """The rows the plan keeps: workers whose decision is not excluded, with at least
    `min_rounds` rounds. Returns the rows and how many rows each rule removed."""
    excluded: dict[str, int] = {}
    drop = {canonical_decision(d) for d in plan.get("exclude_decisions") or []}
    if drop:
        decisions = canonical_decisions(frame["decision"])
        out = frame[~decisions.isin(drop)]
        excluded["decisions " + ", ".join(sorted(drop))] = len(frame) - len(out)
        frame = out
    least = int(plan.get("min_rounds") or 0)
    if least > 0:
        counts = frame.groupby("annotator")["annotator"].transform("size")
        out = frame[counts >= least]
        excluded[f"fewer than {least} rounds"] = len(frame) - len(out)
        frame = out
    return frame, excluded


def fit_plan(frame: pd.DataFrame, plan: dict, engine: str = "auto"):
    """The planned model on the planned outcome and contrast. Returns (result, tested term
    names, p-value of the joint test of those terms)."""
    outcome, contrast = plan.get("outcome"), plan.get("contrast")
    if outcome not in OUTCOMES:
        raise PlanError(f"the plan's outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
    if contrast not in CONTRASTS:
        raise PlanError(f"the plan's contrast {contrast!r} is not one of {', '.join(CONTRASTS)}")
    column = "condition" if contrast.startswith("condition") else contrast
    data = frame
    if column in ("system", "boundary"):
        data = frame[frame["boundary"] < frame["n_sentences"]]  # texts with a machine part
    data = data[data[column].astype(str).ne("") & data[column].notna()]
    if data[column].nunique() < 2:
        found = sorted(data[column].astype(str).unique())
        raise PlanError(
            f"the plan's contrast is {contrast!r} but the data has "
            f"{len(found)} level(s) of {column} ({', '.join(found) or 'none'})"
        )
    control = plan.get("control") if column == "condition" else None
    if control is not None and control not in set(data[column].astype(str)):
        raise PlanError(
            f"the plan's control condition {control!r} is not in the data (conditions: "
            f"{', '.join(sorted(data[column].astype(str).unique()))})"
        )
    x, names = mixed.design(data, column, reference=control)
    levels = list(range(1, len(names)))
    slopes = levels if column == "condition" else None
    if contrast == "condition:order":
        order = data["order"].to_numpy(float)
        order = order - np.nanmean(order)
        interactions = x[:, levels] * order[:, None]
        x = np.column_stack([x, order, interactions])
        names = [*names, "order", *(f"{names[i]} × order" for i in levels)]
        test = list(range(len(levels) + 2, len(names)))
    else:
        test = levels
    result = mixed.fit(data, x, names, test, outcome, slopes=slopes, engine=engine)
    return result, [names[i] for i in test], (result.p_value if result else None)


def effect_sizes(result: mixed.MixedResult, terms: list[str]) -> list[dict]:
    """Odds ratios (exact hit) or standardised effects: the estimate over the square root of the
    total variance (annotator + text + residual; Westfall, Kenny and Judd's d for crossed
    designs), with the interval scaled the same way."""
    out = []
    for effect in result.effects:
        if effect["term"] not in terms:
            continue
        if result.family == "binomial":
            out.append(
                {
                    "term": effect["term"],
                    "kind": "odds ratio",
                    "value": effect["odds_ratio"],
                    "ci_low": effect["or_ci_low"],
                    "ci_high": effect["or_ci_high"],
                }
            )
            continue
        parts = ("annotator", "text", "residual")
        total = sum(result.variances.get(p, 0.0) for p in parts)
        if total <= 0:
            continue
        scale = float(np.sqrt(total))
        out.append(
            {
                "term": effect["term"],
                "kind": "standardised (d, total variance)",
                "value": effect["estimate"] / scale,
                "ci_low": effect["ci_low"] / scale,
                "ci_high": effect["ci_high"] / scale,
            }
        )
    return out


def analyse(frame: pd.DataFrame, prereg: dict) -> Confirmatory:
    """Run the latest version of the plan on the rows (before the report's own filters)."""
    versions = prereg["versions"]
    version = max(versions, key=lambda v: v.get("version", 0))
    plan = version["plan"]
    deviations: list[str] = []
    if not version.get("sha256_ok", True):
        deviations.append(
            f"the plan's SHA-256 ({str(version.get('sha256'))[:12]}…) is not that of its content: "
            "the plan in this export was changed after it was frozen"
        )
    for earlier in sorted(versions, key=lambda v: v.get("version", 0))[:-1]:
        deviations.append(
            f"plan version {earlier.get('version')} (frozen {earlier.get('frozen_at')}) was "
            f"replaced by a later version"
        )
    if len(versions) > 1:
        deviations.append(
            f"this analysis follows version {version.get('version')}, frozen "
            f"{version.get('frozen_at')}, because: {version.get('reason') or 'no reason given'}"
        )
    rows, excluded = apply_exclusions(frame, plan)
    workers, texts = rows["annotator"].nunique(), rows["example"].nunique()
    for key, planned, found in (
        ("planned_workers", plan.get("planned_workers"), workers),
        ("planned_texts", plan.get("planned_texts"), texts),
    ):
        if planned and found < planned:
            what = key.removeprefix("planned_")
            deviations.append(f"{found} {what} analysed, fewer than the {planned} planned")
    try:
        result, terms, p_value = fit_plan(rows, plan)
    except PlanError as error:
        deviations.append(f"the planned analysis could not run: {error}")
        return Confirmatory(
            plan,
            version,
            len(rows),
            workers,
            texts,
            excluded,
            None,
            [],
            None,
            None,
            [],
            deviations,
        )
    if result is None:
        deviations.append("too few rows to fit the planned model")
    else:
        if not result.library.startswith("R "):
            deviations.append(
                f"the planned mixed model was fitted by {result.library}, not lme4 (R is missing)"
            )
        if not result.converged:
            deviations.append(
                f"the planned model did not converge ({'; '.join(result.warnings)}); its "
                "estimates are reported but may be unreliable"
            )
        deviations += [f"model: {w}" for w in result.warnings if "converge" not in w.lower()]
    alpha = float(plan.get("alpha", 0.05))
    return Confirmatory(
        plan=plan,
        version=version,
        rows=len(rows),
        workers=workers,
        texts=texts,
        excluded=excluded,
        result=result,
        terms=terms,
        p_value=p_value,
        reject=None if p_value is None else bool(p_value < alpha),
        effect_size=effect_sizes(result, terms) if result else [],
        deviations=deviations,
    )

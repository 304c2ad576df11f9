"""Power by simulation for a crossed design (workers × texts), with the confirmatory model.

Following Kumle, Võ and Draschkow (2021): choose the parameters of a generating model (from a
pilot export's fitted mixed model, or stated), simulate many studies of each candidate size, run
on each exactly the analysis the plan will run (analysis.confirmatory.fit_plan, hence
analysis.mixed), and count how often it rejects at the plan's alpha. The power of a size is that
share; its Monte-Carlo standard error is sqrt(p(1 − p) / simulations).

The generating model: worker w in condition c (allocated in balanced alternation, the first
condition the control) reads `rounds` distinct texts drawn at random from `texts`; the linear
predictor is

    base + u_w + v_t + c · (effect + s_t)            (contrast "condition")
    base + u_w + v_t + c · effect · (order − mean)   (contrast "condition:order")

with u ~ N(0, sd_annotator²), v ~ N(0, sd_text²), s ~ N(0, sd_slope²). For the exact hit, base
is the control's hit rate on the logit scale and effect a log odds ratio; for points and
distance, the outcome is the predictor plus N(0, sd_residual²) noise.
"""

from __future__ import annotations

import json
import math
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context

import numpy as np
import pandas as pd

from analysis import confirmatory, mixed


@dataclass(frozen=True)
class Scenario:
    """The generating model of a simulated study (see the module docstring)."""

    outcome: str = "exact_hit"
    contrast: str = "condition"
    base: float = 0.3  # exact hit: the control's hit rate; else its mean outcome
    effect: float = 0.5  # exact hit: log odds ratio; else a difference in outcome units
    sd_annotator: float = 0.5
    sd_text: float = 0.5
    sd_slope: float = 0.0
    sd_residual: float = 1.5  # points and distance only
    rounds: int = 10  # texts per worker
    alpha: float = 0.05

    def plan(self) -> dict:
        """The plan the simulated studies are analysed with."""
        return {
            "outcome": self.outcome,
            "contrast": self.contrast,
            "control": "control",
            "alpha": self.alpha,
        }


def simulate(scenario: Scenario, workers: int, texts: int, seed: int) -> pd.DataFrame:
    """One simulated study's rows: annotator, example, condition, order and the outcome."""
    rng = np.random.default_rng(seed)
    rounds = min(scenario.rounds, texts)
    treated = np.arange(workers) % 2 == 1
    rng.shuffle(treated)
    annotator = np.repeat(np.arange(workers), rounds)
    example = np.concatenate([rng.choice(texts, rounds, replace=False) for _ in range(workers)])
    order = np.tile(np.arange(1, rounds + 1), workers).astype(float)
    c = treated[annotator].astype(float)
    u = rng.normal(0, scenario.sd_annotator, workers)[annotator]
    v = rng.normal(0, scenario.sd_text, texts)[example]
    s = rng.normal(0, scenario.sd_slope, texts)[example]
    if scenario.outcome == "exact_hit":
        base = math.log(scenario.base / (1 - scenario.base))
    else:
        base = scenario.base
    if scenario.contrast == "condition:order":
        eta = base + u + v + c * (scenario.effect * (order - order.mean()) + s)
    else:
        eta = base + u + v + c * (scenario.effect + s)
    if scenario.outcome == "exact_hit":
        y = (rng.random(len(eta)) < 1 / (1 + np.exp(-eta))).astype(float)
    else:
        y = eta + rng.normal(0, scenario.sd_residual, len(eta))
    return pd.DataFrame(
        {
            "annotator": annotator,
            "example": example,
            "condition": np.where(c == 1, "treatment", "control"),
            "order": order,
            scenario.outcome: y,
        }
    )


def rejects(scenario: Scenario, workers: int, texts: int, seed: int, engine: str = "auto"):
    """Whether the planned test rejects on one simulated study (None when it cannot be fitted),
    and whether the fit warned."""
    frame = simulate(scenario, workers, texts, seed)
    result, _, p = confirmatory.fit_plan(frame, scenario.plan(), engine=engine)
    warned = bool(result and (result.warnings or not result.converged))
    return (None if p is None else p < scenario.alpha), warned


def _chunk(args) -> tuple[int, int, int, int, str]:
    scenario, workers, texts, seeds, engine = args
    hits = fitted = warned = 0
    for seed in seeds:
        reject, warn = rejects(scenario, workers, texts, seed, engine)
        fitted += reject is not None
        hits += bool(reject)
        warned += warn
    library = mixed.r_available() or "statsmodels"
    return hits, fitted, warned, len(seeds), library


def grid(
    scenario: Scenario,
    workers: list[int],
    texts: list[int],
    simulations: int = 200,
    seed: int = 0,
    jobs: int | None = None,
    progress: bool = True,
    engine: str = "auto",
) -> pd.DataFrame:
    """Power of every workers × texts design: simulations per design, spread over `jobs`
    processes (default: every core). One row per design with power, its Monte-Carlo standard
    error, the studies fitted and those whose fit warned."""
    from tqdm import tqdm

    jobs = jobs or os.cpu_count() or 1
    cells = [(w, t) for w in workers for t in texts]
    # About four tasks per process, so the bar moves and the cores stay busy to the end.
    per = min(simulations, max(5, math.ceil(len(cells) * simulations / (4 * jobs))))
    tasks = []
    for i, (w, t) in enumerate(cells):
        seeds = [seed + 1_000_003 * i + k for k in range(simulations)]
        for start in range(0, simulations, per):
            tasks.append(((w, t), (scenario, w, t, seeds[start : start + per], engine)))
    totals = {cell: [0, 0, 0, 0] for cell in cells}
    library = ""
    bar = tqdm(total=len(cells) * simulations, disable=not progress, unit="study", desc="power")
    if jobs == 1:
        for cell, args in tasks:
            *counts, library = _chunk(args)
            totals[cell] = [a + b for a, b in zip(totals[cell], counts, strict=True)]
            bar.update(counts[3])
    else:
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(_chunk, args): cell for cell, args in tasks}
            for future in as_completed(futures):
                *counts, library = future.result()
                cell = futures[future]
                totals[cell] = [a + b for a, b in zip(totals[cell], counts, strict=True)]
                bar.update(counts[3])
    bar.close()
    rows = []
    for (w, t), (hits, fitted, warned, _) in totals.items():
        power = hits / fitted if fitted else float("nan")
        rows.append(
            {
                "workers": w,
                "texts": t,
                "rows": w * min(scenario.rounds, t),
                "power": power,
                "mc_se": math.sqrt(power * (1 - power) / fitted) if fitted else float("nan"),
                "simulations": fitted,
                "warned": warned,
                "library": library,
            }
        )
    return pd.DataFrame(rows)


def observed_power(
    scenario: Scenario, workers: int, texts: int, studies: int, seed: int
) -> tuple[float, int]:
    """The share of `studies` simulated studies in which the report's confirmatory analysis
    (analysis.confirmatory.analyse, on a preregistration of the scenario's plan) rejects, and
    how many could be analysed. Independent of `grid`'s path: the calibration test compares the
    two."""
    from analysis.load import plan_digest

    plan = scenario.plan()
    prereg = {"versions": [{"version": 1, "plan": plan, "sha256": plan_digest(plan)}]}
    rejected = analysed = 0
    for k in range(studies):
        frame = simulate(scenario, workers, texts, seed + k).assign(decision="")
        result = confirmatory.analyse(frame, prereg)
        if result.reject is not None:
            analysed += 1
            rejected += result.reject
    return (rejected / analysed if analysed else float("nan")), analysed


def smallest(table: pd.DataFrame, target: float) -> dict | None:
    """The design with the fewest workers (then texts) whose power reaches the target."""
    reached = table[table["power"] >= target].sort_values(["workers", "texts"])
    return None if reached.empty else reached.iloc[0].to_dict()


def write_result(
    path: str, scenario: Scenario, table: pd.DataFrame, target: float, best: dict | None
) -> None:
    """The power result as JSON, for `flask study check FILE --power JSON`: the scenario, the
    target, every design's power and the smallest design reaching the target (or null)."""
    doc = {
        "scenario": asdict(scenario),
        "target": target,
        "designs": [
            {k: row[k] for k in ("workers", "texts", "power", "mc_se", "simulations")}
            for row in json.loads(table.to_json(orient="records"))
        ],
        "smallest": (
            {"workers": int(best["workers"]), "texts": int(best["texts"]), "power": best["power"]}
            if best is not None
            else None
        ),
    }
    with open(path, "w", encoding="utf-8") as out:
        json.dump(doc, out, indent=2)


def from_pilot(frame: pd.DataFrame, plan: dict, effect: float | None) -> tuple[Scenario, list]:
    """A scenario from a pilot's rows: the plan's exclusions, then the planned model's variances,
    the control's level and the median rounds per worker. The effect is the stated one; without
    it the pilot's estimate (noisy: a note says so)."""
    if plan.get("contrast") not in ("condition", "condition:order"):
        raise confirmatory.PlanError(
            f"the plan's contrast is {plan.get('contrast')!r}: the power simulation randomises "
            "conditions, so it needs a contrast of condition or condition:order"
        )
    rows, _ = confirmatory.apply_exclusions(frame, plan)
    result, terms, _ = confirmatory.fit_plan(rows, plan)
    if result is None:
        raise confirmatory.PlanError("the pilot has too few rows to fit the planned model")
    notes = [f"pilot fitted by {result.library}", *result.warnings]
    estimates = {e["term"]: e["estimate"] for e in result.effects}
    intercept = result.effects[0]["estimate"]
    if effect is None:
        effect = estimates[terms[0]]
        notes.append(
            f"effect taken from the pilot's estimate ({effect:.3f}); a pilot's effect is noisy, "
            "state the smallest effect worth finding with --effect"
        )
    variances = result.variances
    slope = next((v for k, v in variances.items() if k.startswith("text slope")), 0.0)
    outcome = plan["outcome"]
    base = 1 / (1 + math.exp(-intercept)) if outcome == "exact_hit" else intercept
    scenario = Scenario(
        outcome=outcome,
        contrast=plan["contrast"],
        base=base,
        effect=float(effect),
        sd_annotator=math.sqrt(variances.get("annotator", 0.0)),
        sd_text=math.sqrt(variances.get("text", 0.0)),
        sd_slope=math.sqrt(slope),
        sd_residual=math.sqrt(variances.get("residual", 1.0)),
        rounds=int(rows.groupby("annotator").size().median()),
        alpha=float(plan.get("alpha", 0.05)),
    )
    return scenario, notes


__all__ = ["Scenario", "grid", "observed_power", "replace", "simulate", "smallest"]


def describe(scenario: Scenario) -> str:
    parts = ", ".join(f"{k}={v}" for k, v in asdict(scenario).items())
    return f"Scenario: {parts}"

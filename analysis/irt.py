"""Text difficulty and annotator skill, estimated together (an item-response model).

A Rasch (one-parameter logistic) model of finding the boundary exactly:

    P(guess == boundary) = sigmoid(mu + skill[annotator] - difficulty[text])

with normal priors (mean 0, standard deviation `prior_sd`) on skill and difficulty, fitted by
maximum a posteriori with alternating Newton steps (each step is a few bincounts over the rows, so
10^6 rows take about a second). Skills are comparable across annotators who read different texts,
which raw mean points are not: an annotator who drew hard texts is not penalised. Standard errors
come from the curvature of the log posterior (Laplace approximation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass
class IrtFit:
    annotators: pd.DataFrame  # annotator, rounds, exact_rate, mean_points, skill, skill_se
    texts: pd.DataFrame  # example, system, category, boundary, ..., difficulty, difficulty_se
    intercept: float
    iterations: int
    converged: bool

    def summary(self) -> dict:
        a, t = self.annotators, self.texts
        corr = a["skill"].corr(a["mean_points"]) if len(a) > 2 else None
        return {
            "model": "Rasch (1PL) on exact hits, normal priors, MAP",
            "annotators": len(a),
            "texts": len(t),
            "intercept": self.intercept,
            "skill_sd": float(a["skill"].std()) if len(a) > 1 else None,
            "difficulty_sd": float(t["difficulty"].std()) if len(t) > 1 else None,
            "skill_vs_mean_points_correlation": None if corr is None or np.isnan(corr) else corr,
            "iterations": self.iterations,
            "converged": self.converged,
        }


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def fit(
    frame: pd.DataFrame, prior_sd: float = 1.0, max_iter: int = 300, tol: float = 1e-3
) -> IrtFit:
    """Fit the model on the rows of `frame` (canonical columns)."""
    a_codes, a_names = pd.factorize(frame["annotator"])
    t_codes, t_names = pd.factorize(frame["example"])
    y = (frame["guess"] == frame["boundary"]).to_numpy(dtype=float)
    n_a, n_t = len(a_names), len(t_names)
    skill, difficulty = np.zeros(n_a), np.zeros(n_t)
    mean = y.mean() if len(y) else 0.5
    mu = float(np.log(max(mean, 1e-6) / max(1 - mean, 1e-6)))
    precision = 1.0 / prior_sd**2
    converged, done = False, 0
    hess_a = hess_t = np.ones(1)
    for done in range(1, max_iter + 1):  # noqa: B007 (the count is reported)
        p = _sigmoid(mu + skill[a_codes] - difficulty[t_codes])
        resid, w = y - p, p * (1 - p)
        grad_a = np.bincount(a_codes, resid, n_a) - precision * skill
        hess_a = np.bincount(a_codes, w, n_a) + precision
        step_a = grad_a / hess_a
        skill += step_a
        p = _sigmoid(mu + skill[a_codes] - difficulty[t_codes])
        resid, w = y - p, p * (1 - p)
        grad_t = -np.bincount(t_codes, resid, n_t) - precision * difficulty
        hess_t = np.bincount(t_codes, w, n_t) + precision
        step_t = grad_t / hess_t
        difficulty += step_t
        p = _sigmoid(mu + skill[a_codes] - difficulty[t_codes])
        step_mu = (y - p).sum() / max((p * (1 - p)).sum(), 1e-12)
        mu += step_mu
        if max(np.abs(step_a).max(initial=0), np.abs(step_t).max(initial=0), abs(step_mu)) < tol:
            converged = True
            break
    rows = frame.assign(_exact=y)
    per_a = rows.groupby(a_codes).agg(
        rounds=("points", "size"), exact_rate=("_exact", "mean"), mean_points=("points", "mean")
    )
    annotators = pd.DataFrame(
        {
            "annotator": a_names,
            "rounds": per_a["rounds"].to_numpy(),
            "exact_rate": per_a["exact_rate"].to_numpy(),
            "mean_points": per_a["mean_points"].to_numpy(),
            "skill": skill,
            "skill_se": 1 / np.sqrt(hess_a),
        }
    ).sort_values("skill", ascending=False, kind="stable")
    per_t = rows.groupby(t_codes).agg(
        system=("system", "first"),
        category=("category", "first"),
        boundary=("boundary", "first"),
        n_sentences=("n_sentences", "first"),
        annotations=("points", "size"),
        exact_rate=("_exact", "mean"),
        mean_points=("points", "mean"),
    )
    texts = pd.DataFrame({"example": t_names, **{c: per_t[c].to_numpy() for c in per_t.columns}})
    texts["all_human"] = texts["boundary"] == texts["n_sentences"]
    texts["difficulty"] = difficulty
    texts["difficulty_se"] = 1 / np.sqrt(hess_t)
    texts = texts.sort_values("difficulty", ascending=False, kind="stable")
    return IrtFit(
        annotators.reset_index(drop=True),
        texts.reset_index(drop=True),
        float(mu),
        done,
        converged,
    )

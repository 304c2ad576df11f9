"""Benchmark: the mixed models of analysis.mixed on synthetic crossed data.

    .venv/bin/python bench/mixed_models.py [--rows 100000 1000000] [--outcomes exact_hit points]
        [--rounds 20] [--per-text 200]

Each size has rows / rounds annotators (each reads `rounds` texts at random) and rows / per-text
texts, two conditions between annotators, random intercepts for annotator and text. Fitted: the
logistic model of the exact hit and the linear model of points, each with crossed random
intercepts (lme4 through rpy2 when R is installed; the library used is printed). Building the
data is not timed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import mixed


def synthetic(rows: int, rounds: int, per_text: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    workers, texts = max(rows // rounds, 2), max(rows // per_text, 2)
    annotator = np.repeat(np.arange(workers), rounds)[:rows]
    example = rng.integers(0, texts, len(annotator))
    condition = annotator % 2
    eta = (
        -1.2
        + 0.3 * condition
        + rng.normal(0, 0.6, workers)[annotator]
        + rng.normal(0, 0.6, texts)[example]
    )
    hit = rng.random(len(eta)) < 1 / (1 + np.exp(-eta))
    return pd.DataFrame(
        {
            "annotator": annotator,
            "example": example,
            "condition": np.where(condition == 1, "feedback", "none"),
            "exact_hit": hit.astype(float),
            "points": 2.0 + 0.3 * condition + 1.5 * (eta + 1.2) + rng.normal(0, 1.5, len(eta)),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=20, help="rounds per annotator")
    parser.add_argument("--per-text", type=int, default=200, help="rows per text")
    parser.add_argument(
        "--outcomes", nargs="+", default=["exact_hit", "points"], choices=["exact_hit", "points"]
    )
    args = parser.parse_args()
    for rows in args.rows:
        frame = synthetic(rows, args.rounds, args.per_text)
        x, names = mixed.design(frame, "condition", reference="none")
        for outcome in args.outcomes:
            start = time.perf_counter()
            result = mixed.fit(frame, x, names, [1], outcome)
            seconds = time.perf_counter() - start
            effect = result.effects[1]
            print(
                f"{rows:>9,} rows, {result.groups['annotators']:,} annotators, "
                f"{result.groups['texts']:,} texts, {outcome}: {seconds:.1f} s; "
                f"{result.library}; effect {effect['estimate']:.3f} "
                f"[{effect['ci_low']:.3f}, {effect['ci_high']:.3f}]; "
                f"warnings: {'; '.join(result.warnings) or 'none'}",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""Calibration of the confirmatory analysis, the long version of tests/analysis/test_calibration.py.

    .venv/bin/python bench/calibration.py [--outcome exact_hit] [--studies 1000] [--jobs N]

Simulates `--studies` studies under no effect and counts how often the planned test (the same
mixed model as the report's confirmatory analysis) rejects at alpha 0.05, with the interval 200
or more draws allow; then, under a set effect, compares the power `analysis power` predicts with
the share of other simulated studies the report's confirmatory analysis rejects.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import power


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outcome", default="exact_hit", choices=["exact_hit", "points"])
    parser.add_argument("--contrast", default="condition", choices=["condition", "condition:order"])
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=40)
    parser.add_argument("--texts", type=int, default=20)
    parser.add_argument("--effect", type=float, default=0.6)
    parser.add_argument("--jobs", type=int)
    args = parser.parse_args()
    base = 0.3 if args.outcome == "exact_hit" else 2.0
    scenario = power.Scenario(outcome=args.outcome, contrast=args.contrast, base=base)
    started = time.perf_counter()
    null = power.grid(
        power.replace(scenario, effect=0.0),
        [args.workers],
        [args.texts],
        args.studies,
        0,
        args.jobs,
    ).iloc[0]
    rejected = round(null["power"] * null["simulations"])
    low, high = stats.binomtest(rejected, int(null["simulations"]), 0.05).proportion_ci(0.95)
    print(
        f"no effect: {rejected} of {null['simulations']} studies rejected at alpha 0.05 "
        f"(rate {null['power']:.3f}, 95% CI [{low:.3f}, {high:.3f}]); {null['warned']} fits "
        f"warned; {null['library']}",
        flush=True,
    )
    effect = power.replace(scenario, effect=args.effect)
    half = max(args.studies // 2, 1)
    predicted = power.grid(effect, [args.workers], [args.texts], half, 1, args.jobs).iloc[0]
    observed, analysed = power.observed_power(effect, args.workers, args.texts, half, 10**7)
    print(
        f"effect {args.effect}: predicted power {predicted['power']:.3f} ± "
        f"{predicted['mc_se']:.3f}, observed {observed:.3f} over {analysed} studies "
        f"(difference {observed - predicted['power']:+.3f}); "
        f"{time.perf_counter() - started:.0f} s in all"
    )


if __name__ == "__main__":
    main()

"""Benchmark: the full analysis report on a synthetic dump of 10^6 rounds.

    .venv/bin/python bench/analysis.py [--rounds 1000000] [--format parquet|csv] [--keep DIR]

The dump has the columns of `flask export` (rounds.parquet by default) and realistic shapes taken
from RoFT's published figures: 20,000 texts of 10 sentences, boundary uniform over 1..10 (10 = all
human), guesses that are late more often than early (about 20% exact), ~9,000 annotators with a
heavy-tailed number of rounds, log-normal seconds per round, 1–2 reasons per round and free-text
explanations on a third of the rounds, many of them copy-pasted. Building the dump is not timed;
the report (load, filters, every analysis, figures, tables) is.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.load import ROFT_COLUMNS
from analysis.report import ReportSettings, build_report
from roftcore.reasons import REASONS

VOCABULARY = (
    "the sentence repeats itself topic changes suddenly grammar wrong name weird odd "
    "does not follow makes no sense generic vague date fact contradicts earlier character "
    "pronoun flow abrupt tone robotic list numbers quote quotes punctuation comma story recipe "
    "ingredient oven minutes news city mayor police said"
)
WORDS = VOCABULARY.split()


def synthetic_rounds(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n_examples = 20_000
    systems = np.array(["gpt2", "gpt2-xl", "grover_mega", "ctrl", "human"])
    categories = np.array(["news", "stories", "recipes", "speeches"])
    ex_boundary = rng.integers(1, 11, n_examples)
    ex_system = np.where(ex_boundary == 10, 4, rng.integers(0, 4, n_examples))
    ex_category = rng.integers(0, 4, n_examples)
    ex_p = np.where(ex_boundary == 10, np.nan, rng.integers(0, 11, n_examples) / 10)
    ex_p[rng.random(n_examples) < 0.05] = np.nan

    # Annotators: heavy-tailed round counts adding up to n.
    sizes = np.maximum(1, rng.pareto(1.2, 12_000) * 40).astype(int)
    sizes = sizes[np.cumsum(sizes) <= n]
    sizes = np.append(sizes, n - sizes.sum()) if sizes.sum() < n else sizes
    sizes = sizes[sizes > 0]
    annotator = np.repeat(np.arange(len(sizes)), sizes)
    order = np.concatenate([np.arange(1, s + 1) for s in sizes])
    example = rng.integers(0, n_examples, n)
    b = ex_boundary[example]
    # Guess: exact ~20%, late with a linear tail, early less often.
    offset = rng.choice(
        np.arange(-4, 10),
        size=n,
        p=np.array([1, 2, 4, 8, 20, 14, 12, 10, 8, 7, 6, 4, 2, 2]) / 100,
    )
    guess = np.clip(b + offset, 1, 10)
    reason_names = np.array(list(REASONS))
    r1 = reason_names[rng.integers(0, 8, n)]
    r2 = reason_names[rng.integers(0, 8, n)]
    reasons = np.where(
        guess == 10,
        "[]",
        np.where(rng.random(n) < 0.4, '["' + r1 + '", "' + r2 + '"]', '["' + r1 + '"]'),
    )
    pool = [
        " ".join(rng.choice(WORDS, size=rng.integers(3, 12))) + ("." if i % 3 else "!")
        for i in range(30_000)
    ]
    pool_arr = np.array(pool, dtype=object)
    explanation = np.where(
        rng.random(n) < 0.33, pool_arr[rng.zipf(1.3, n) % len(pool_arr)], ""
    ).astype(object)
    start = pd.Timestamp("2026-01-01", tz="UTC")
    seconds = np.round(rng.lognormal(3.0, 0.6, n), 3)
    points = np.where(guess < b, 0, np.maximum(5 - (guess - b), 0))
    frame = pd.DataFrame(
        {
            "date": start + pd.to_timedelta(np.arange(n) * 2.0, unit="s"),
            "model": systems[ex_system[example]],
            "dataset": categories[ex_category[example]],
            "annotator": pd.Series(annotator).map(lambda a: f"p_{a:020x}"),
            "group": "public",
            "dec_strat_value": ex_p[example],
            "predicted_boundary_index": guess - 1,
            "true_boundary_index": b - 1,
            "points": points,
            "reason": reasons,
            "prompt": "",
            "prompt_body": "",
            "generation": "",
            "gen_body": "",
            **{c: -1 for c in ROFT_COLUMNS[14:]},
            "explanation": explanation,
            "example_id": pd.Series(example).map(lambda e: f"ex-{e:06d}"),
            "category": categories[ex_category[example]],
            "system": systems[ex_system[example]],
            "n_sentences": 10,
            "boundary": b,
            "guess": guess,
            "decoding_p": ex_p[example],
            "order_index": order,
            "seconds": seconds,
            "attention_check": False,
            "participant_kind": "public",
            "study": "",
        }
    )
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1_000_000)
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    parser.add_argument("--keep", type=Path, help="keep the dump and report in this folder")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="roft-bench-"))
    dump = folder / "dump"
    dump.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rounds = synthetic_rounds(args.rounds)
    if args.format == "parquet":
        rounds.to_parquet(dump / "rounds.parquet", index=False)
    else:
        rounds.to_csv(dump / "rounds.csv", index=False)
    built = time.perf_counter() - started
    started = time.perf_counter()
    summary = build_report(dump, folder / "report", ReportSettings())
    elapsed = time.perf_counter() - started
    print(
        json.dumps(
            {
                "rounds": args.rounds,
                "format": args.format,
                "annotators": summary["all"]["n_annotators"],
                "dump_seconds": round(built, 1),
                "report_seconds": round(elapsed, 1),
                "steps_seconds": summary["timings_seconds"],
                "comments": summary["comments"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

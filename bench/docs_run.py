"""The example run shown in docs/analysis.md: simulated players on the shipped demo texts.

    .venv/bin/python bench/docs_run.py [--out DIR] [--figures docs/analysis-figures]

Builds an export-shaped folder (rounds.csv, examples.csv) in which 150 simulated players answer
the texts of data/demo/examples.jsonl (a skill per player and a difficulty per text; late
guesses more often than early ones; a few double submissions and replays; explanations taken
from the labelled development set of the comment taxonomy), then runs
`python -m analysis detect` with the shipped tiny GPT-2 and `python -m analysis report
--detections`, and copies the figures. The players are simulated, so the numbers illustrate the
report; they are not findings.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.load import ROFT_COLUMNS  # noqa: E402
from analysis.taxonomy import read_development_set  # noqa: E402
from roftcore.boundary import points  # noqa: E402
from roftcore.roft import SEP  # noqa: E402


def simulate(seed: int = 7, players: int = 150) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    lines = (ROOT / "data/demo/examples.jsonl").read_text(encoding="utf-8").splitlines()
    examples = pd.DataFrame([json.loads(line) for line in lines])
    n_texts = len(examples)
    difficulty = rng.normal(0, 0.8, n_texts)
    skill = rng.normal(0, 0.8, players)
    rounds_per = np.clip((rng.pareto(1.3, players) * 12 + 5).astype(int), 5, 80)
    notes = [r.text for r in read_development_set()]
    reasons = ["grammar", "repetition", "irrelevant", "contradicts_sentence", "common_sense"]
    rows = []
    start = pd.Timestamp("2026-10-01", tz="UTC")
    for a in range(players):
        when = start + pd.Timedelta(hours=float(rng.uniform(0, 24 * 40)))
        texts = rng.choice(n_texts, size=rounds_per[a], replace=False)
        for order, t in enumerate(texts, start=1):
            ex = examples.iloc[t]
            n, b = len(ex["sentences"]), int(ex["boundary"])
            logit = -0.6 + 0.01 * order + skill[a] - difficulty[t]
            if b == n:
                guess = n if rng.random() < 1 / (1 + np.exp(-logit + 0.4)) else rng.integers(2, n)
            elif rng.random() < 1 / (1 + np.exp(-logit)):
                guess = b
            elif rng.random() < 0.8:
                guess = min(b + 1 + rng.geometric(0.35) - 1, n)
            else:
                guess = max(1, b - rng.geometric(0.6))
            seconds = float(np.round(rng.lognormal(3.1, 0.5), 2))
            when += pd.Timedelta(seconds=seconds + rng.uniform(2, 15))
            row = {
                "annotator": f"p_{a:04d}",
                "example": int(t),
                "guess": int(guess),
                "date": when,
                "seconds": seconds,
                "order": order,
                "explanation": str(rng.choice(notes)) if rng.random() < 0.45 else "",
                "reasons": list(rng.choice(reasons, size=rng.integers(1, 3), replace=False))
                if guess < n
                else [],
            }
            rows.append(row)
            if rng.random() < 0.03:  # a double submission a second or two later
                rows.append({**row, "date": when + pd.Timedelta(seconds=1.5)})
    rounds = pd.DataFrame(rows)
    ex = examples.iloc[rounds["example"]].reset_index(drop=True)
    n = ex["sentences"].map(len)
    b = ex["boundary"].astype(int)
    p = ex["decoding"].map(lambda d: (d or {}).get("p"))
    out = pd.DataFrame(
        {
            "date": rounds["date"],
            "model": ex["system"],
            "dataset": ex["category"],
            "annotator": rounds["annotator"],
            "group": "public",
            "dec_strat_value": p,
            "predicted_boundary_index": rounds["guess"] - 1,
            "true_boundary_index": b - 1,
            "points": [points(g, bb) for g, bb in zip(rounds["guess"], b, strict=True)],
            "reason": rounds["reasons"].map(json.dumps),
            "prompt": ex["id"],
            "prompt_body": [SEP.join(s[:k]) for s, k in zip(ex["sentences"], b, strict=True)],
            "generation": ex["id"],
            "gen_body": [SEP.join(s[k:]) for s, k in zip(ex["sentences"], b, strict=True)],
            **{c: -1 for c in ROFT_COLUMNS[14:]},
            "explanation": rounds["explanation"],
            "example_id": ex["id"],
            "category": ex["category"],
            "system": ex["system"],
            "n_sentences": n,
            "boundary": b,
            "guess": rounds["guess"],
            "decoding_p": p,
            "order_index": rounds["order"],
            "seconds": rounds["seconds"],
            "attention_check": False,
            "participant_kind": "public",
            "study": "",
        }
    )
    table = pd.DataFrame(
        {
            "example_id": examples["id"],
            "category": examples["category"],
            "system": examples["system"],
            "n_sentences": examples["sentences"].map(len),
            "boundary": examples["boundary"],
            "sentences": examples["sentences"].map(json.dumps),
        }
    )
    return out, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the export and the report here")
    parser.add_argument("--figures", type=Path, help="copy the figures into this folder")
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="roft-docs-"))
    export = work / "export"
    export.mkdir(parents=True, exist_ok=True)
    rounds, examples = simulate()
    rounds.to_csv(export / "rounds.csv", index=False)
    examples.to_csv(export / "examples.csv", index=False)
    run = [sys.executable, "-m", "analysis"]
    subprocess.run(
        [
            *run,
            "detect",
            str(export),
            "--out",
            str(work / "detect"),
            "--model",
            str(ROOT / "data/demo/model"),
            "--no-progress",
        ],
        check=True,
        cwd=ROOT,
    )
    subprocess.run(
        [
            *run,
            "report",
            str(export),
            "--out",
            str(work / "report"),
            "--detections",
            str(work / "detect" / "detections.csv"),
        ],
        check=True,
        cwd=ROOT,
    )
    if args.figures:
        args.figures.mkdir(parents=True, exist_ok=True)
        for png in sorted((work / "report").glob("*.png")):
            shutil.copy(png, args.figures / png.name)
    print(f"export, detections and report in {work}")


if __name__ == "__main__":
    main()

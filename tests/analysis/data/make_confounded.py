"""Write roft_confounded.csv: a roft.csv-shaped set built like the data that broke the old tests.

25 players answer 4 to 10 of 48 texts each (about 170 annotations). Each system wrote only one
category (so "system" and "category" are the same split of the texts), decoding p varies within
a system, there is no session or round number (only dates), player skill and text difficulty
vary, and nothing but the scoring rule makes the boundary position matter. Deterministic:
`python tests/analysis/data/make_confounded.py` rewrites the same file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

SYSTEMS = {"gpt2": "news", "ctrl": "recipes", "gpt2-xl": "stories"}
REASONS = ["['irrelevant']", "['grammar']", "['repetition']", "['common_sense']", "['other']", "[]"]


def rows(seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    human_rng = np.random.default_rng(seed + 1000)
    texts = []
    for t in range(48):
        system = list(SYSTEMS)[t % 3]
        texts.append((f"t{t}", system, SYSTEMS[system], 1 + rng.integers(0, 10), rng.normal()))
    skill = rng.normal(0, 1.0, 25)
    out = []
    start = pd.Timestamp("2021-06-01 09:00:00")
    for a in range(25):
        n = rng.integers(4, 11)
        when = start + pd.Timedelta(hours=int(a) * 7)
        for t in rng.choice(48, n, replace=False):
            name, system, category, b, difficulty = texts[t]
            when += pd.Timedelta(seconds=int(40 + human_rng.integers(0, 80)))
            if b == 10:  # all human: the player may still flag a sentence
                g = 10 if human_rng.random() < 0.4 else int(human_rng.integers(1, 10))
            else:
                hit = rng.random() < 1 / (1 + np.exp(-(skill[a] - difficulty - 0.3)))
                if hit:
                    g = b
                elif rng.random() < 0.7:
                    g = int(np.clip(b + rng.integers(1, 4), 1, 10))
                else:
                    g = int(np.clip(rng.integers(1, b + 1), 1, 10))
            out.append((when, name, system, category, f"p{a:02d}", int(b), int(g)))
    return pd.DataFrame(out, columns=["date", "text", "model", "dataset", "annotator", "b", "g"])


def roft_csv(frame: pd.DataFrame) -> pd.DataFrame:
    from roftcore.boundary import points

    p_of = {f"t{t}": [0.0, 0.4, 0.9][(t // 3) % 3] for t in range(48)}
    human = frame["b"] == 10
    number = frame["text"].str[1:].astype(int)
    prompt = [
        "_SEP_".join(f"Human sentence {i} of text {t}." for i in range(1, max(b - 1, 1) + 1))
        for t, b in zip(number, frame["b"], strict=True)
    ]
    generation = [
        "" if b == 10 else "_SEP_".join(f"Machine sentence {i} of text {t}." for i in range(b, 11))
        for t, b in zip(number, frame["b"], strict=True)
    ]
    return pd.DataFrame(
        {
            "date": frame["date"].dt.strftime("%Y-%m-%d %H:%M:%S"),
            "model": frame["model"].where(~human, "human"),
            "dataset": frame["dataset"],
            "annotator": frame["annotator"],
            "group": "A",
            "dec_strat_value": [
                None if h else p_of[t] for t, h in zip(frame["text"], human, strict=True)
            ],
            "predicted_boundary_index": frame["g"] - 1,
            "true_boundary_index": frame["b"] - 1,
            "points": [points(g, b) for g, b in zip(frame["g"], frame["b"], strict=True)],
            "reason": [REASONS[i % len(REASONS)] for i in range(len(frame))],
            "prompt": 1000 + number,
            "prompt_body": prompt,
            "generation": 2000 + number,
            "gen_body": generation,
            "recipe_familiarity": 3,
            "news_familiarity": 4,
            "stories_familiarity": 2,
            "gen_familiarity": 2,
            "native_speaker": 1,
            "read_guide": 1,
        }
    )


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    roft_csv(rows()).to_csv(Path(__file__).with_name("roft_confounded.csv"), index=False)

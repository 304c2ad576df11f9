"""The detector hint beside the workers (analysis.hint, report section 10): a synthetic study
export with a hint condition, whose workers with the hint find the boundary more often, and a
detector whose levels are right on two texts of three."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import hint
from analysis.load import load
from analysis.report import ReportSettings, build_report

N = 10


def levels_for(boundary: int, right: bool) -> list[str]:
    """Levels whose first 'high' from sentence 1 is the boundary (right) or sentence 1 (wrong:
    every boundary here is 2 or later)."""
    if right:
        return ["unsure"] + ["low"] * (boundary - 1) + ["high"] * (N - boundary)
    return ["high", "high", "low"] + ["unsure"] * (N - 3)


def hint_export(folder: Path, workers: int = 60, texts: int = 30, seed: int = 0) -> dict:
    """rounds.csv of a two-condition study ("alone" and "hint"); returns the texts' truth."""
    rng = np.random.default_rng(seed)
    boundary = rng.integers(2, 10, texts)
    boundary[::5] = N  # every fifth text is all human
    right = np.arange(texts) % 3 != 0
    shown = {t: levels_for(int(boundary[t]), bool(right[t])) for t in range(texts)}
    rows = []
    for w in range(workers):
        condition = "hint" if w % 2 else "alone"
        skill = rng.normal(0, 0.3)
        # Text `texts` is read only without the hint (no levels), text `texts + 1` only with it.
        pool = [*range(texts), texts if condition == "alone" else texts + 1]
        for order, t in enumerate(rng.choice(pool, 10, replace=False), start=1):
            b = int(boundary[t]) if t < texts else 5
            p = 0.6 if condition == "hint" else 0.25
            hit = rng.random() < min(max(p + skill, 0.02), 0.98)
            guess = b if hit else int(rng.choice([g for g in range(1, N + 1) if g != b]))
            hints = ""
            if condition == "hint":
                hints = json.dumps(shown[t] if t < texts else ["low"] * N)
            rows.append(
                {
                    "example_id": f"ex{t}",
                    "annotator": f"w{w:03d}",
                    "date": f"2026-11-{1 + order:02d}T10:00:00Z",
                    "model": "gpt2",
                    "dataset": "news",
                    "group": "hint-study",
                    "dec_strat_value": 0.9,
                    "true_boundary_index": b - 1,
                    "predicted_boundary_index": guess - 1,
                    "points": 0,
                    "reason": "",
                    "n_sentences": N,
                    "order_index": order,
                    "seconds": 30.0,
                    "attention_check": False,
                    "participant_kind": "crowd",
                    "study": "hint-study",
                    "decision": "approve",
                    "condition": condition,
                    "detector_hints": hints,
                }
            )
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "rounds.csv", index=False)
    return {"boundary": boundary, "right": right}


def test_the_hint_rule_flags_the_first_high_sentence_after_the_first():
    assert hint.hint_guess(["unsure", "low", "high", "high"]) == 2
    assert hint.hint_guess(["high", "low", "low", "low"]) == 4  # sentence 0 shows no hint
    assert hint.hint_guess(["low"] * 5) == 5  # no "high": all human
    assert hint.parse_levels('["low", "high"]') == ["low", "high"]
    assert hint.parse_levels("") is None and hint.parse_levels(float("nan")) is None


def test_detector_and_workers_compared_on_the_same_texts(tmp_path):
    truth = hint_export(tmp_path / "dump")
    frame = load(tmp_path / "dump")
    assert set(frame["detector_hints"].ne("").groupby(frame["condition"]).all().items()) == {
        ("alone", False),
        ("hint", True),
    }
    result = hint.compare(frame, n_boot=300, seed=1)
    summary, table = result["summary"], result["table"].set_index(["texts", "who"])
    assert summary["hint_conditions"] == ["hint"]
    assert summary["texts"] == 30  # the text read in one arm only is left out, in both arms
    everything = table.loc["all texts"]
    assert set(everything.index) == set(hint.WHO)
    # The detector is scored on the rounds the workers played: its rate is that of the texts
    # it gets right, weighed by how often they were played.
    rows = frame[frame["example"].isin([f"ex{t}" for t in range(30)])]
    played = rows["example"].str.removeprefix("ex").astype(int).to_numpy()
    assert everything.loc[hint.DETECTOR, "exact"] == pytest.approx(truth["right"][played].mean())
    assert everything.loc[hint.DETECTOR, "rounds"] == len(rows)
    for who in hint.WHO:
        row = everything.loc[who]
        for measure in ("exact", "points"):
            assert row[f"{measure}_low"] < row[measure] < row[f"{measure}_high"]
    assert everything.loc[hint.WITH, "workers"] == everything.loc[hint.WITHOUT, "workers"] == 30
    # All-human texts: the detector's wrong levels flag sentence 1, its right ones say all human.
    assert {"machine texts", "all-human texts"} <= set(table.index.get_level_values(0))
    gain = result["differences"].set_index(["texts", "difference"])
    with_vs_without = gain.loc[("all texts", f"{hint.WITH} − {hint.WITHOUT}")]
    assert with_vs_without["exact_low"] > 0  # the hint helps, and the interval says so


def test_intervals_resample_workers_and_texts(tmp_path):
    """The workers' intervals are wider than a bootstrap over texts alone would give when
    workers differ a lot; the detector's vary with the texts only."""
    hint_export(tmp_path / "dump")
    rows, _ = hint.rows_compared(load(tmp_path / "dump"))
    a = pd.factorize(rows["annotator"])[0]
    t = pd.factorize(rows["example"])[0]
    weights = np.vstack(list(hint._crossed_weights(a, t, 200, 0)))
    assert weights.shape == (200, len(rows))
    # A round's weight is its worker's times its text's: for two workers who read the same two
    # texts, w(a1, t1) · w(a2, t2) = w(a1, t2) · w(a2, t1) in every draw, and both factors vary.
    cell = {(x, y): i for i, (x, y) in enumerate(zip(a, t, strict=True))}
    quad = next(
        (i, j, k, m)
        for (a1, t1), i in cell.items()
        for (a2, t2), m in cell.items()
        if a2 != a1 and t2 != t1
        and (j := cell.get((a1, t2))) is not None and (k := cell.get((a2, t1))) is not None
    )  # fmt: skip
    i, j, k, m = quad
    assert (weights[:, i] * weights[:, m] == weights[:, j] * weights[:, k]).all()
    assert weights[:, i].std() > 0 and (weights[:, i] != weights[:, j]).any()


def test_the_report_shows_the_hint_section_only_with_a_hint_condition(tmp_path):
    hint_export(tmp_path / "dump")
    summary = build_report(tmp_path / "dump", tmp_path / "out", ReportSettings(bootstrap=100))
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## 10. The detector hint beside the workers" in report
    assert "detector alone (hint rule)" in report and "resample workers and texts" in report
    assert (tmp_path / "out" / "detector_hint.csv").exists()
    assert summary["detector_hint"]["hint_conditions"] == ["hint"]

    plain = pd.read_csv(tmp_path / "dump" / "rounds.csv")
    plain["detector_hints"] = ""
    (tmp_path / "plain").mkdir()
    plain.to_csv(tmp_path / "plain" / "rounds.csv", index=False)
    summary = build_report(tmp_path / "plain", tmp_path / "out2", ReportSettings(bootstrap=50))
    assert summary["detector_hint"] is None
    assert "detector hint" not in (tmp_path / "out2" / "report.md").read_text()

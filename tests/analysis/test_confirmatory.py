"""The report reads the plan first: a study with two conditions (feedback vs none) whose
workers' exact hits rise across rounds only with feedback, exported with its frozen plan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import mixed
from analysis.load import load, plan_digest, read_preregistration
from analysis.report import ReportSettings, build_report

PLAN = {
    "hypotheses": ["With feedback, workers' exact hits rise across rounds; without, they do not."],
    "outcome": "exact_hit",
    "contrast": "condition:order",
    "control": "none",
    "model": "mixed",
    "alpha": 0.05,
    "exclude_decisions": ["rejected"],
    "min_rounds": 0,
    "planned_workers": 90,
    "planned_texts": 40,
    "stopping_rule": "stop at 90 approved workers",
}


def study_export(folder: Path, plan: dict | None = PLAN, workers: int = 80, seed: int = 0) -> Path:
    """An export folder of a crowd study with conditions: rounds.csv and preregistration.json."""
    rng = np.random.default_rng(seed)
    texts, rounds = 40, 10
    boundary = rng.integers(1, 10, texts)  # every text has a machine part
    rows = []
    for w in range(workers):
        condition = "feedback" if w % 2 else "none"
        skill = rng.normal(0, 0.4)
        for order, t in enumerate(rng.choice(texts, rounds, replace=False), start=1):
            eta = -1.0 + skill + (0.35 * (order - 5.5) if condition == "feedback" else 0.0)
            hit = rng.random() < 1 / (1 + np.exp(-eta))
            b = int(boundary[t])
            guess = b if hit else int(rng.choice([g for g in range(1, 11) if g != b]))
            rows.append(
                {
                    "example_id": f"ex{t}",
                    "annotator": f"w{w:03d}",
                    "date": f"2026-11-{1 + order:02d}T10:00:00Z",
                    "model": "gpt2",
                    "dataset": "news",
                    "group": "fb-study",
                    "dec_strat_value": 0.9,
                    "true_boundary_index": b - 1,
                    "predicted_boundary_index": guess - 1,
                    "points": 0,
                    "reason": "",
                    "n_sentences": 10,
                    "order_index": order,
                    "seconds": 30.0,
                    "attention_check": False,
                    "participant_kind": "crowd",
                    "study": "fb-study",
                    "decision": "reject" if w < 2 else "approve",
                    "condition": condition,
                }
            )
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "rounds.csv", index=False)
    if plan is not None:
        version = {
            "version": 1,
            "frozen_at": "2026-11-01T09:00:00+00:00",
            "sha256": plan_digest(plan),
            "reason": None,
            "plan": plan,
        }
        (folder / "preregistration.json").write_text(
            json.dumps({"study": "fb-study", "versions": [version]})
        )
    return folder


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("planned")
    export = study_export(out / "export")
    summary = build_report(export, out / "report", ReportSettings(bootstrap=50))
    return summary, (out / "report" / "report.md").read_text()


def test_the_export_carries_each_workers_condition(tmp_path):
    frame = load(study_export(tmp_path / "e"))
    assert set(frame["condition"]) == {"feedback", "none"}
    assert (frame.groupby("annotator")["condition"].nunique() == 1).all()
    prereg = read_preregistration(tmp_path / "e")
    assert prereg["versions"][0]["sha256_ok"]


@pytest.mark.skipif(mixed.r_available() is None, reason="R with lme4 is not installed")
def test_the_report_opens_with_the_planned_analysis(planned):
    summary, text = planned
    body = text.split("Positions:", 1)[1]
    first = body.index("## Confirmatory analysis (preregistered)")
    assert first < body.index("# Exploratory analysis") < body.index("## 1.")
    result = summary["confirmatory"]
    assert result["terms"] == ["feedback × order"]
    assert result["reject"] is True and result["p_value"] < 0.05
    assert result["rows"] == 780 and result["workers"] == 78  # two rejected workers left out
    assert result["excluded"] == {"decisions reject": 20}
    (size,) = result["effect_size"]
    assert size["kind"] == "odds ratio" and size["ci_low"] > 1  # per round, with feedback
    assert "glmer" in result["model"]["library"]
    assert "odds ratio" in text and "**rejects the null hypothesis**" in text
    assert "matches its content" in text
    assert "78 workers analysed, fewer than the 90 planned" in text
    assert "Hypothesis: With feedback" in text


def test_without_a_plan_the_report_says_so(tmp_path):
    export = study_export(tmp_path / "e", plan=None, workers=20)
    summary = build_report(export, tmp_path / "r", ReportSettings(bootstrap=0))
    text = (tmp_path / "r" / "report.md").read_text()
    assert summary["confirmatory"] is None
    assert "no preregistration" in text and "every result below is exploratory" in text


def test_a_changed_plan_and_a_new_version_are_deviations(tmp_path):
    export = study_export(tmp_path / "e", workers=30)
    data = json.loads((export / "preregistration.json").read_text())
    first = data["versions"][0]
    second = {
        **first,
        "version": 2,
        "frozen_at": "2026-11-02T09:00:00+00:00",
        "reason": "the outcome was named wrongly",
        "plan": {**PLAN, "contrast": "condition", "outcome": "points"},
    }
    second["sha256"] = plan_digest(second["plan"])
    second["plan"]["alpha"] = 0.1  # edited after freezing: the digest no longer matches
    data["versions"].append(second)
    (export / "preregistration.json").write_text(json.dumps(data))
    summary = build_report(export, tmp_path / "r", ReportSettings(bootstrap=0))
    deviations = summary["confirmatory"]["deviations"]
    assert summary["confirmatory"]["plan_version"] == 2
    assert any("plan version 1" in d and "replaced" in d for d in deviations)
    assert any("the outcome was named wrongly" in d for d in deviations)
    assert any("not that of its content" in d for d in deviations)
    text = (tmp_path / "r" / "report.md").read_text()
    assert "**does not match its content**" in text


def test_a_plan_the_data_cannot_answer_is_a_deviation_not_a_crash(tmp_path):
    export = study_export(tmp_path / "e", plan={**PLAN, "contrast": "category"}, workers=20)
    summary = build_report(export, tmp_path / "r", ReportSettings(bootstrap=0))
    (deviation,) = [d for d in summary["confirmatory"]["deviations"] if "could not run" in d]
    assert "1 level(s) of category (news)" in deviation


def test_a_malformed_preregistration_names_the_file(tmp_path):
    from analysis.load import LoadError

    export = study_export(tmp_path / "e", workers=4)
    (export / "preregistration.json").write_text('{"study": "x"}')
    with pytest.raises(LoadError, match=r"preregistration\.json: not a preregistration"):
        read_preregistration(export)


@pytest.mark.parametrize(("planned", "exported"), [("rejected", "reject"), ("reject", "Rejected")])
def test_a_plan_and_an_export_may_spell_a_decision_either_way(tmp_path, planned, exported):
    """The site's plan may say approved/rejected where its export says approve/reject (or the
    reverse): analysis.load.canonical_decision makes them one, for the plan and the rows."""
    from analysis.confirmatory import apply_exclusions
    from analysis.load import canonical_decision

    assert canonical_decision(" Approved") == "approve" and canonical_decision("review") == "review"
    study_export(tmp_path / "dump", plan=None, workers=6)
    rounds = pd.read_csv(tmp_path / "dump" / "rounds.csv")
    rounds["decision"] = rounds["decision"].replace({"reject": exported})
    rounds.to_csv(tmp_path / "dump" / "rounds.csv", index=False)
    frame = load(tmp_path / "dump")
    assert set(frame["decision"]) == {"approve", "reject"}
    kept, excluded = apply_exclusions(frame, {"exclude_decisions": [planned]})
    assert set(kept["annotator"]) == {"w002", "w003", "w004", "w005"}
    assert excluded == {"decisions reject": 20}

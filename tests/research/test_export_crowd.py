"""Exports of crowd-study rounds: attention checks, study, group, ratings; no platform ids."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import select

from analysis.load import load
from app.crowd import ratings
from app.extensions import db
from app.models import Example
from app.research import exports
from tests.crowd.helpers import join, make_pool, make_study, play_slot

LIKERT = {
    "name": "fluency",
    "question": "How fluent is the flagged sentence?",
    "labels": ["Unreadable", "Awkward", "Acceptable", "Good", "Perfect"],
}


def test_study_rounds_export_with_checks_ratings_and_pseudonyms(ctx, tmp_path):
    make_pool()

    first = select(Example.external_id).order_by(Example.id).limit(1)
    tutorial = list(db.session.scalars(first))
    study = make_study(likert=[LIKERT], rounds=5, attention_check_rate=0.4, tutorial=tutorial)
    passer = join(study, worker="PROLIFIC5f00aa11", session="sess-a")
    failer = join(study, worker="PROLIFIC5f00bb22", session="sess-b")
    play_slot(study, passer)  # the practice round: not an annotation, not exported
    play_slot(study, failer)
    for _ in range(5):
        done = play_slot(study, passer, pass_check=True, rating=None)
        ratings.save_ratings(passer, done, {"rating_fluency": "4"})
        done = play_slot(study, failer, pass_check=False, rating=None)
        ratings.save_ratings(failer, done, {"rating_fluency": "2"})

    result = exports.export(exports.ExportOptions(out=tmp_path / "dump", format="csv"))
    rounds = pd.read_csv(tmp_path / "dump" / "rounds.csv")
    assert len(rounds) == 10
    assert set(rounds["study"]) == {"pilot"}
    assert set(rounds["group"]) == {"crowd"} and set(rounds["participant_kind"]) == {"crowd"}
    checks = rounds[rounds["attention_check"]]
    assert len(checks) == 4
    by_annotator = checks.groupby("annotator")["attention_passed"].agg(lambda s: set(s))
    assert sorted(map(sorted, by_annotator)) == [[False], [True]]
    assert rounds["attention_passed"][~rounds["attention_check"]].isna().all()
    normal = rounds[~rounds["attention_check"]]
    rated = normal[normal["likert_fluency"] == 4]
    assert len(rated) == 3 and len(normal[normal["likert_fluency"] == 2]) == 3
    assert set(rated["ratings"]) == {'{"fluency": 4}'}
    # The site's outcome travels with every round: no platform id is needed to leave out a
    # worker who failed the checks.
    outcome = rounds.groupby("annotator")["participant_status"].agg(set)
    assert sorted(map(sorted, outcome)) == [["completed"], ["failed_checks"]]
    assert rounds["decision"].isna().all()  # nothing verified yet
    for name in result.files:
        text = (tmp_path / "dump" / name).read_text(encoding="utf-8", errors="ignore")
        assert "PROLIFIC5f00" not in text and "sess-a" not in text

    frame = load(tmp_path / "dump")
    assert len(frame) == 10
    filtered = exports.export(
        exports.ExportOptions(out=tmp_path / "only", format="csv", study="pilot")
    )
    assert filtered.counts["rounds"] == 10


def test_data_dictionary_doc_lists_every_exported_column():
    from app import PROJECT_ROOT

    doc = (PROJECT_ROOT / "docs" / "data-dictionary.md").read_text(encoding="utf-8")
    for table, columns in exports.schema()["tables"].items():
        for column in columns:
            name = column["name"] if isinstance(column, dict) else column
            assert f"`{name}`" in doc, f"{table}.{name} is missing from docs/data-dictionary.md"


def test_private_exports_carry_platform_ids_and_decisions_join_pseudonymous_ones(
    ctx, tmp_path, runner
):
    make_pool()
    study = make_study(rounds=4, attention_check_rate=0.5)
    good = join(study, worker="PROLIFIC5f00aa11", session="sess-a")
    lazy = join(study, worker="PROLIFIC5f00bb22", session="sess-b")
    for _ in range(4):
        play_slot(study, good, flag_at=None)
        play_slot(study, lazy, pass_check=False)
    export_csv = tmp_path / "prolific.csv"
    export_csv.write_text(
        "Submission id,Participant id,Status,Completion code\n"
        "s1,PROLIFIC5f00aa11,AWAITING REVIEW,C1DONE01\n"
        "s2,PROLIFIC5f00bb22,AWAITING REVIEW,C2FAIL02\n",
        encoding="utf-8",
    )
    out = tmp_path / "decisions"
    verified = runner.invoke(
        args=["study", "verify", "pilot", "--prolific-export", str(export_csv), "--out",
              str(out), "--apply"]
    )  # fmt: skip
    assert verified.exit_code == 0, verified.output

    exports.export(exports.ExportOptions(out=tmp_path / "plain", format="csv"))
    plain = pd.read_csv(tmp_path / "plain" / "rounds.csv")
    assert "worker_id" not in plain and "platform_status" not in plain
    decisions = pd.read_csv(out / "decisions.csv")
    kept = plain.merge(decisions[["annotator", "decision"]], on="annotator", suffixes=("", "_v"))
    assert (kept["decision"] == kept["decision_v"]).all()  # the same decision either way
    assert set(plain.loc[plain["decision"] == "reject", "participant_status"]) == {"failed_checks"}
    clean = plain[plain["decision"] != "reject"]
    assert clean["annotator"].nunique() == 1 and len(clean) == 4

    exports.export(exports.ExportOptions(out=tmp_path / "private", format="csv", private=True))
    private = pd.read_csv(tmp_path / "private" / "rounds.csv")
    ids = dict(zip(private["worker_id"], private["platform_status"], strict=False))
    assert ids == {"PROLIFIC5f00aa11": "AWAITING REVIEW", "PROLIFIC5f00bb22": "AWAITING REVIEW"}
    assert "worker ids" in (tmp_path / "private" / "README.md").read_text()
    # No CSV, private or not, starts with anything but its header.
    for folder in ("plain", "private"):
        for name in ("rounds.csv", "examples.csv", "players.csv"):
            first = (tmp_path / folder / name).read_text(encoding="utf-8").splitlines()[0]
            assert not first.startswith(("#", "PRIVATE", "WARNING")), (folder, name, first)
            assert first.split(",")[0] in ("date", "example_id", "annotator")

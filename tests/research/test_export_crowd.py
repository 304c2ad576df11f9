"""Exports of crowd-study rounds: attention checks, study, group, ratings; no platform ids."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
from sqlalchemy import select

from analysis.load import load
from app.crowd import admission, ratings
from app.extensions import db
from app.models import Example, ParticipantStatus, Player
from app.research import export_options, export_schema, exports, pseudonyms
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

    result = exports.export(export_options.ExportOptions(out=tmp_path / "dump", format="csv"))
    rounds = pd.read_csv(tmp_path / "dump" / "rounds.csv")
    assert len(rounds) == 10
    assert set(rounds["study"]) == {"pilot"}
    # One numbering: each worker's rounds are 1..5 in the study, practice apart (order_index,
    # the player's n-th round on the site, counts the practice round).
    by_worker = rounds.groupby("annotator")
    assert [sorted(s) for _a, s in by_worker["study_round"]] == [[1, 2, 3, 4, 5]] * 2
    assert [sorted(s) for _a, s in by_worker["order_index"]] == [[2, 3, 4, 5, 6]] * 2
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
        export_options.ExportOptions(out=tmp_path / "only", format="csv", study="pilot")
    )
    assert filtered.counts["rounds"] == 10


def test_data_dictionary_doc_lists_every_exported_column():
    from app import PROJECT_ROOT

    doc = (PROJECT_ROOT / "docs" / "data-dictionary.md").read_text(encoding="utf-8")
    for table, columns in export_schema.schema()["tables"].items():
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

    exports.export(export_options.ExportOptions(out=tmp_path / "plain", format="csv"))
    plain = pd.read_csv(tmp_path / "plain" / "rounds.csv")
    assert "worker_id" not in plain and "platform_status" not in plain
    decisions = pd.read_csv(out / "decisions.csv")
    kept = plain.merge(decisions[["annotator", "decision"]], on="annotator", suffixes=("", "_v"))
    assert (kept["decision"] == kept["decision_v"]).all()  # the same decision either way
    assert set(plain.loc[plain["decision"] == "reject", "participant_status"]) == {"failed_checks"}
    clean = plain[plain["decision"] != "reject"]
    assert clean["annotator"].nunique() == 1 and len(clean) == 4

    # The workers table carries the same current decision as the rounds (one source).
    workers = pd.read_csv(tmp_path / "plain" / "workers.csv", keep_default_na=False)
    per_round = plain.groupby("annotator")["decision"].agg(set)
    assert {a: {d} for a, d in zip(workers["annotator"], workers["decision"], strict=True)} == (
        per_round.to_dict()
    )

    exports.export(
        export_options.ExportOptions(out=tmp_path / "private", format="csv", private=True)
    )
    private = pd.read_csv(tmp_path / "private" / "rounds.csv")
    ids = dict(zip(private["worker_id"], private["platform_status"], strict=False))
    assert ids == {"PROLIFIC5f00aa11": "AWAITING REVIEW", "PROLIFIC5f00bb22": "AWAITING REVIEW"}
    assert "worker ids" in (tmp_path / "private" / "README.md").read_text()
    # No CSV, private or not, starts with anything but its header.
    for folder in ("plain", "private"):
        for name in ("rounds.csv", "examples.csv", "players.csv", "workers.csv"):
            first = (tmp_path / folder / name).read_text(encoding="utf-8").splitlines()[0]
            assert not first.startswith(("#", "PRIVATE", "WARNING")), (folder, name, first)
            assert first.split(",")[0] in ("date", "example_id", "annotator")
    private_workers = pd.read_csv(tmp_path / "private" / "workers.csv")
    assert set(private_workers["worker_id"]) == {"PROLIFIC5f00aa11", "PROLIFIC5f00bb22"}
    assert set(private_workers["platform_status"]) == {"AWAITING REVIEW"}


SCREENING = {
    "question": "Do you read English fluently?",
    "options": ["yes", "no"],
    "accept": ["yes"],
}


def test_workers_table_has_every_participant_with_status_even_without_rounds(ctx, tmp_path):
    make_pool()
    study = make_study(rounds=4, attention_check_rate=0.5, screening=SCREENING)
    screened = join(study, worker="PROLIFICscreen01", session="s-x", screening="no")
    gone = join(study, worker="PROLIFICgone0002", session="s-g", screening="yes")
    admission.mark_left(gone, ParticipantStatus.returned)
    db.session.commit()
    done = join(study, worker="PROLIFICdone0003", session="s-d", screening="yes")
    for _ in range(4):
        play_slot(study, done, flag_at=None)
    assert done.status == ParticipantStatus.completed
    key = pseudonyms.pseudonym_key()
    names = {pseudonyms.pseudonym(p.player_id, key): p.status.value for p in (screened, gone, done)}

    result = exports.export(export_options.ExportOptions(out=tmp_path / "dump", format="csv"))
    assert result.counts["workers"] == 3
    workers = pd.read_csv(tmp_path / "dump" / "workers.csv", keep_default_na=False)
    assert list(workers.columns) == list(export_schema.WORKER_COLUMNS)
    assert dict(zip(workers["annotator"], workers["participant_status"], strict=True)) == names
    by_status = workers.set_index("participant_status")
    assert by_status.loc["screened_out", "rounds_done"] == 0
    assert by_status.loc["returned", "rounds_done"] == 0
    assert by_status.loc["completed", "rounds_done"] == 4
    assert (
        by_status.loc["completed", "checks_passed"] + by_status.loc["completed", "checks_void"] == 2
    )
    assert by_status.loc["completed", "checks_failed"] == 0
    assert (
        by_status.loc["screened_out", "finished_at"] and by_status.loc["completed", "finished_at"]
    )
    assert by_status.loc["returned", "finished_at"] == "" and by_status.loc["returned", "left_at"]
    assert set(workers["decision"]) == {""}  # nobody decided yet
    # The completed worker's rounds join on the pseudonym; the others have none.
    rounds = pd.read_csv(tmp_path / "dump" / "rounds.csv")
    assert set(rounds["annotator"]) == {by_status.loc["completed", "annotator"]}
    assert len(rounds) == 4
    # No platform id anywhere without --private.
    for name in result.files:
        text = (tmp_path / "dump" / name).read_text(encoding="utf-8", errors="ignore")
        assert "PROLIFIC" not in text and "s-x" not in text

    exports.export(
        export_options.ExportOptions(out=tmp_path / "private", format="parquet", private=True)
    )
    private = pd.read_parquet(tmp_path / "private" / "workers.parquet")
    ids = dict(zip(private["worker_id"], private["participant_status"], strict=True))
    assert ids == {
        "PROLIFICscreen01": "screened_out",
        "PROLIFICgone0002": "returned",
        "PROLIFICdone0003": "completed",
    }
    assert str(private["started_at"].dtype).startswith("datetime64")
    assert private["left_at"].notna().sum() == 1

    # The rounds' consent rule: a player without research consent is left out unless asked.
    db.session.get(Player, gone.player_id).research_consent_at = None
    db.session.commit()
    kept = exports.export(export_options.ExportOptions(out=tmp_path / "consented", format="csv"))
    assert kept.counts["workers"] == 2
    every = exports.export(
        export_options.ExportOptions(out=tmp_path / "all", format="csv", include_unconsented=True)
    )
    assert every.counts["workers"] == 3


def test_a_study_without_workers_exports_an_empty_typed_workers_table(ctx, tmp_path):
    make_pool()
    busy = make_study(rounds=4, attention_check_rate=0.5)
    join(busy, worker="PROLIFICbusy0001", session="s-b")
    make_study(slug="quiet", rounds=4, attention_check_rate=0.5)
    columns = export_schema.schema()["tables"]["workers"]
    for fmt in ("parquet", "csv"):
        folder = tmp_path / fmt
        result = exports.export(export_options.ExportOptions(out=folder, format=fmt, study="quiet"))
        assert result.counts["workers"] == 0
    arrow = pq.read_schema(tmp_path / "parquet" / "workers.parquet")
    assert arrow.names == [c["name"] for c in columns]
    assert str(arrow.field("rounds_done").type) == "int64"
    assert str(arrow.field("started_at").type) == "timestamp[us, tz=UTC]"
    frame = pd.read_parquet(tmp_path / "parquet" / "workers.parquet")
    assert len(frame) == 0 and str(frame["checks_void"].dtype) == "int64"
    text = pd.read_csv(tmp_path / "csv" / "workers.csv")
    assert list(text.columns) == [c["name"] for c in columns] and len(text) == 0
    # The filter applies: the other study's worker is not in it, but is in an unfiltered export.
    assert exports.export(export_options.ExportOptions(out=tmp_path / "all")).counts["workers"] == 1

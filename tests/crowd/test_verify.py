"""`flask study verify` on a simulated study: a careful worker, a lazy "human" spammer, a worker
who flags the first sentence every time, one who returned, one who timed out, one who submitted
without a code. Decisions, files, --apply, a second run, undo-verify and the bonus ledger.

Prolific's submissions export is written with the columns its documentation lists: "Submission
id", "Participant id", "Status", "Completion code" (NOCODE when none was entered); MTurk's batch
file with "HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "Answer.completion_code".
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.crowd import admission, ledger, lookup, serving, verdicts, verify, verify_submissions
from app.errors import Conflict
from app.extensions import db
from app.models import ParticipantStatus, Round, StudyBonus, StudyDecision
from tests.crowd.helpers import answer, join, make_pool, play_lazy, play_slot, study_round
from tests.crowd.test_study_cli import STUDY_TOML, create

BONUS = STUDY_TOML + "\n[bonus]\nper_exact = 0.05\ncap = 0.40\n"
EXPORT_HEADER = "Submission id,Participant id,Status,Completion code\n"


def pace(participant, seconds: float) -> None:
    """Give the worker's rounds a realistic pace: `seconds` per round, one after another."""
    at = participant.started_at
    rows = db.session.scalars(
        select(Round).where(Round.participant_id == participant.id).order_by(Round.id)
    )
    for row in rows:
        row.started_at = at + timedelta(seconds=2)
        if row.answered_at is not None:
            row.answered_at = row.started_at + timedelta(seconds=seconds)
            at = row.answered_at
    db.session.commit()


@pytest.fixture
def study(runner, ctx, tmp_path):
    make_pool(normal=20, human=6)
    result = create(runner, tmp_path, BONUS.replace("rounds = 6", "rounds = 6\nplaces = 6"))
    assert result.exit_code == 0, result.output
    made = lookup.get_study("pilot")
    workers = {}
    careful = workers["w-careful"] = join(made, "w-careful", "s1")
    for _ in range(6):
        play_slot(made, careful, flag_at=None)  # right every time
    pace(careful, 24)
    for name, strategy in (("w-hspam", "human"), ("w-mfirst", "first")):
        lazy = workers[name] = join(made, name, name)
        play_lazy(made, lazy, strategy)
        pace(lazy, 3)
    nocode = workers["w-nocode"] = join(made, "w-nocode", "s4")
    for _ in range(6):
        play_slot(made, nocode, flag_at=4)
    pace(nocode, 18)
    returned = workers["w-returned"] = join(made, "w-returned", "s5")
    play_slot(made, returned)
    study_round(made, returned)  # the round they left open
    slow = workers["w-slow"] = join(made, "w-slow", "s6")
    play_slot(made, slow)
    for w in workers.values():
        db.session.refresh(w)
    return made, workers


def export_file(tmp_path, rows: list[str], name="prolific.csv"):
    path = tmp_path / name
    path.write_text(EXPORT_HEADER + "".join(f"{r}\n" for r in rows), encoding="utf-8")
    return path


PROLIFIC_ROWS = [
    "sub1,w-careful,AWAITING REVIEW,C1DONE01",
    "sub2,w-hspam,AWAITING REVIEW,C2FAIL02",
    "sub3,w-mfirst,AWAITING REVIEW,C1DONE01",  # the code of an outcome they did not get
    "sub4,w-nocode,AWAITING REVIEW,NOCODE",
    "sub5,w-returned,RETURNED,",
    "sub6,w-slow,TIMED-OUT,",
    "sub1,w-careful,AWAITING REVIEW,C1DONE01",  # the same row twice
    "sub7,w-stranger,AWAITING REVIEW,C1DONE01",
]


def run_verify(runner, path, out, *extra):
    result = runner.invoke(
        args=["study", "verify", "pilot", "--prolific-export", str(path), "--out", str(out), *extra]
    )
    assert result.exit_code == 0, result.output
    return result


def read_rows(path):
    return {r["worker_id"]: r for r in csv.DictReader(io.StringIO(path.read_text()))}


def test_the_lazy_strategies_fail_the_checks_and_the_careful_worker_passes(study):
    _study, w = study
    assert w["w-careful"].status == ParticipantStatus.completed
    assert w["w-careful"].checks_passed == 2 and w["w-careful"].checks_failed == 0
    for lazy in ("w-hspam", "w-mfirst"):
        assert w[lazy].status == ParticipantStatus.failed_checks
        assert w[lazy].checks_failed == 2 and w[lazy].checks_passed == 0


def test_verify_decides_safely_and_writes_the_platform_files(study, runner, tmp_path):
    path = export_file(tmp_path, PROLIFIC_ROWS)
    out = tmp_path / "decisions"
    result = run_verify(runner, path, out)
    assert "8 row(s), 7 worker(s) (1 duplicate row(s) counted once)" in result.output
    assert (
        "7 submission(s): 2 approve, 2 reject, 1 review, 2 returned or timed out" in result.output
    )
    rows = read_rows(out / "decisions.csv")
    assert list(rows) == [
        "w-careful", "w-hspam", "w-mfirst", "w-nocode", "w-returned", "w-slow", "w-stranger",
    ]  # fmt: skip
    assert rows["w-careful"]["decision"] == "approve"
    assert rows["w-careful"]["bonus"] == "0.20"  # 4 exact hits on scored texts x 0.05
    assert rows["w-nocode"]["decision"] == "approve"  # NOCODE alone never rejects
    assert "NOCODE" in rows["w-nocode"]["reasons"]
    for lazy in ("w-hspam", "w-mfirst"):
        assert rows[lazy]["decision"] == "reject"
        assert rows[lazy]["rejection_category"] == "FAILED_CHECK"
        assert "failed 2 of 2 checks" in rows[lazy]["reasons"]
        assert "too fast" not in rows[lazy]["reasons"]
    assert "code of another outcome (completed)" in rows["w-mfirst"]["reasons"]
    assert rows["w-returned"]["decision"] == rows["w-slow"]["decision"] == "returned"
    assert rows["w-stranger"]["decision"] == "review"
    assert rows["w-careful"]["annotator"].startswith("p_")  # joins research exports

    assert (out / "approve.txt").read_text() == "w-careful\nw-nocode\n"
    rejected = list(csv.DictReader(io.StringIO((out / "reject.csv").read_text())))
    assert [r["participant_id"] for r in rejected] == ["w-hspam", "w-mfirst"]
    for r in rejected:
        assert r["rejection_category"] == "FAILED_CHECK" and len(r["message"]) >= 100
        assert "2 of the 2 attention checks" in r["message"]
    review = list(csv.DictReader(io.StringIO((out / "review.csv").read_text())))
    assert [r["worker_id"] for r in review] == ["w-stranger"]
    assert (out / "bonus.csv").read_text() == f"w-careful,{rows['w-careful']['bonus']}\n"
    readme = (out / "README.md").read_text()
    assert "Not recorded" in readme and "do not share" in readme
    for name in ("decisions.csv", "reject.csv", "review.csv"):
        first = (out / name).read_text().splitlines()[0]
        assert first.split(",")[0] in ("worker_id", "participant_id")  # header, no banner


def test_apply_stores_decisions_apart_and_a_second_run_agrees(study, runner, tmp_path):
    made, w = study
    path = export_file(tmp_path, PROLIFIC_ROWS)
    first = run_verify(runner, path, tmp_path / "one", "--apply")
    assert "Recorded run 1: 6 decision(s) new or changed" in first.output
    assert "2 worker(s) marked returned or timed out" in first.output
    for name in ("w-returned", "w-slow", "w-hspam", "w-careful"):
        db.session.refresh(w[name])
    # The evidence is unchanged: the lazy workers still failed their checks.
    assert w["w-hspam"].status == ParticipantStatus.failed_checks
    assert w["w-careful"].status == ParticipantStatus.completed
    assert w["w-returned"].status == ParticipantStatus.returned
    assert w["w-slow"].status == ParticipantStatus.timed_out
    # Their places are free again.
    assert admission.places_taken(made) == 4
    second = run_verify(runner, path, tmp_path / "two", "--apply")
    assert "Nothing new to record: all 6 decision(s) are as recorded before" in second.output
    one = read_rows(tmp_path / "one" / "decisions.csv")
    two = read_rows(tmp_path / "two" / "decisions.csv")
    assert {k: v["decision"] for k, v in one.items()} == {k: v["decision"] for k, v in two.items()}
    assert "failed 2 of 2 checks" in two["w-hspam"]["reasons"]  # not lost on a second run
    # Paid once: the ledger holds the first run's bonus, the second bonus.csv is empty.
    assert (tmp_path / "two" / "bonus.csv").read_text() == ""
    assert db.session.scalar(select(func.count()).select_from(StudyBonus)) == 1


def ledger_total(participant) -> int:
    return ledger.given_bonuses(participant.study).get(participant.id, 0)


def test_undo_verify_reverts_the_latest_run_but_keeps_paid_bonuses(study, runner, tmp_path):
    """The issue's sequence: verify, undo, verify, undo --drop-bonuses, verify. The old code
    reused run 1, dropped the paid run-1 bonus and wrote it again: 2x paid against 1x owed."""
    _made, w = study
    path = export_file(tmp_path, PROLIFIC_ROWS)
    run_verify(runner, path, tmp_path / "one", "--apply")
    paid = (tmp_path / "one" / "bonus.csv").read_text()
    assert paid == "w-careful,0.20\n"  # uploaded by the researcher
    undone = runner.invoke(args=["study", "undo-verify", "pilot"])
    assert undone.exit_code == 0, undone.output
    assert "Reverted run 1: 6 decision(s) removed, 2 status(es) put back" in undone.output
    assert "Kept its 1 bonus(es) from bonus.csv in the ledger" in undone.output
    db.session.refresh(w["w-returned"])
    assert w["w-returned"].status == ParticipantStatus.started
    assert db.session.scalar(select(func.count()).select_from(StudyDecision)) == 0
    again = run_verify(runner, path, tmp_path / "again", "--apply")
    assert "Recorded run 2:" in again.output  # run numbers are never given twice
    assert (tmp_path / "again" / "bonus.csv").read_text() == ""  # still not paid twice
    dropped = runner.invoke(args=["study", "undo-verify", "pilot", "--drop-bonuses"])
    assert "Reverted run 2" in dropped.output and "Cancelled" not in dropped.output
    third = run_verify(runner, path, tmp_path / "three", "--apply")
    assert "Recorded run 3:" in third.output
    assert (tmp_path / "three" / "bonus.csv").read_text() == ""
    assert ledger_total(w["w-careful"]) == 20  # paid once: 0.20 owed, 0.20 given
    rows = db.session.scalars(select(StudyBonus)).all()
    assert [(r.run, r.amount_minor, r.state) for r in rows] == [(1, 20, "issued")]
    for _ in range(3):
        runner.invoke(args=["study", "undo-verify", "pilot"])
    nothing = runner.invoke(args=["study", "undo-verify", "pilot"])
    assert nothing.exit_code != 0 and "no recorded verify run" in nothing.output
    assert db.session.scalar(select(func.count()).select_from(StudyBonus)) == 1  # never deleted


def test_a_run_that_only_adds_bonus_is_undone_alone(study, runner, tmp_path):
    """After `study edit` raises the cap, verify records a run with only a top-up; undo reverts
    that run, not the earlier, paid one."""
    made, w = study
    path = export_file(tmp_path, PROLIFIC_ROWS)
    run_verify(runner, path, tmp_path / "one", "--apply")
    made.config = {**made.config, "bonus": {"per_point": 0.0, "per_exact": 0.10, "cap": 1.00}}
    db.session.commit()
    top = run_verify(runner, path, tmp_path / "two", "--apply")
    assert "Recorded run 2: 0 decision(s) new or changed" in top.output
    assert (tmp_path / "two" / "bonus.csv").read_text() == "w-careful,0.20\n"  # 0.40 - 0.20
    undone = runner.invoke(args=["study", "undo-verify", "pilot", "--drop-bonuses"])
    assert "Reverted run 2: 0 decision(s) removed" in undone.output
    assert "Cancelled 1 unpaid bonus(es)" in undone.output
    assert db.session.scalar(select(func.count()).select_from(StudyDecision)) == 6  # run 1's
    assert ledger_total(w["w-careful"]) == 20
    rows = db.session.scalars(select(StudyBonus).order_by(StudyBonus.id)).all()
    assert [(r.run, r.amount_minor, r.state, r.reason) for r in rows] == [
        (1, 20, "issued", "score to 0.20"),
        (2, 20, "reversed", "score to 0.40"),
        (2, -20, "reversal", "score to 0.40"),
    ]
    again = run_verify(runner, path, tmp_path / "three", "--apply")
    assert "Recorded run 3" in again.output
    assert (tmp_path / "three" / "bonus.csv").read_text() == "w-careful,0.20\n"
    assert ledger_total(w["w-careful"]) == 40


def test_extra_rounds_do_not_change_the_bonus_as_the_finish_page_says(runner, ctx, tmp_path):
    make_pool(normal=20, human=6)
    text = BONUS.replace("rounds = 6", "rounds = 6\nmax_rounds = 10")
    assert create(runner, tmp_path, text).exit_code == 0
    made = lookup.get_study("pilot")
    worker = join(made, "w-keen", "s1")
    for _ in range(6):
        play_slot(made, worker, flag_at=None)
    before = verify.decide(made, [verify_submissions.Submission("w-keen")])[0].bonus_minor
    assert before == 20
    page = serving.extra_rounds_left(made, worker)
    assert page == 4
    for _ in range(4):
        round_ = study_round(made, worker, extra=True)
        answer(round_, round_.example.boundary)  # right every time: would raise the bonus
    db.session.refresh(worker)
    assert worker.rounds_done == 10
    after = verify.decide(made, [verify_submissions.Submission("w-keen")])[0]
    assert after.bonus_minor == before  # "does not change your code or payment"


def test_a_worker_out_of_time_frees_the_place_without_a_verify(study):
    made, w = study
    assert lookup.config_of(made).places == 6
    assert admission.places_taken(made) == 6  # everyone who joined holds a place
    with pytest.raises(Conflict, match="full"):
        join(made, "w-late", "s7")
    made.config = {**made.config, "time_limit_minutes": 60}
    w["w-slow"].started_at -= timedelta(hours=2)
    db.session.commit()
    assert admission.places_taken(made) == 5  # the slow worker is out of time
    assert join(made, "w-late", "s7").status == ParticipantStatus.started
    db.session.refresh(w["w-slow"])
    assert w["w-slow"].status == ParticipantStatus.timed_out  # marked on the way in


def test_mturk_batch_gets_approve_and_reject_filled_in(runner, ctx, tmp_path):
    make_pool()
    create(runner, tmp_path, BONUS.replace('platform = "prolific"', 'platform = "mturk"'))
    made = lookup.get_study("pilot")
    good = join(made, "A-good", "AS1")
    for _ in range(6):
        play_slot(made, good, flag_at=None)  # right every time: a bonus
    bad = join(made, "A-bad", "AS2")
    play_lazy(made, bad, "human")
    code = verdicts.completion_code(good)
    batch = tmp_path / "batch.csv"
    batch.write_text(
        "HITId,AssignmentId,WorkerId,AssignmentStatus,Answer.completion_code\n"
        f"H1,AS1,A-good,Submitted,{code.lower()}\n"
        "H1,AS2,A-bad,Submitted,WRONGCODE1\n",
        encoding="utf-8",
    )
    out = tmp_path / "turk"
    result = runner.invoke(
        args=["study", "verify", "pilot", "--mturk-batch", str(batch), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO((out / "mturk-decisions.csv").read_text())))
    assert rows[0]["WorkerId"] == "A-good" and rows[0]["Approve"] == "x" and rows[0]["Reject"] == ""
    assert rows[1]["Approve"] == "" and "attention checks" in rows[1]["Reject"]
    assert rows[1]["AssignmentId"] == "AS2"
    # The bonus in the shape MTurk's SendBonus takes, with the assignment.
    bonus = list(csv.DictReader(io.StringIO((out / "mturk-bonus.csv").read_text())))
    assert [(b["WorkerId"], b["AssignmentId"]) for b in bonus] == [("A-good", "AS1")]
    assert bonus[0]["BonusAmount"] == "0.20" and "Spot the machine" in bonus[0]["Reason"]
    # The README says what to do with each of the two MTurk files.
    readme = (out / "README.md").read_text()
    assert "- mturk-bonus.csv:" in readme and "- mturk-decisions.csv:" in readme


def test_plain_id_lists_and_bad_input(runner, ctx, tmp_path):
    make_pool()
    create(runner, tmp_path)
    made = lookup.get_study("pilot")
    good = join(made, "w-good", "s1")
    for _ in range(6):
        play_slot(made, good)
    play_slot(made, join(made, "w-mid", "s2"))
    ids = tmp_path / "ids.txt"
    ids.write_text("# paid batch 1\nw-good\n\nw-mid\nw-good\n", encoding="utf-8")
    result = runner.invoke(
        args=["study", "verify", "pilot", "--ids", str(ids), "--out", str(tmp_path / "o")]
    )
    assert "2 submission(s): 1 approve, 0 reject, 1 review" in result.output
    assert "unfinished: 1 of 6 rounds" in result.output
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("name,score\nx,1\n", encoding="utf-8")
    bad = runner.invoke(args=["study", "verify", "pilot", "--prolific-export", str(wrong)])
    assert bad.exit_code != 0 and "no 'Participant id' column" in bad.output
    neither = runner.invoke(args=["study", "verify", "pilot"])
    assert neither.exit_code != 0 and "exactly one of" in neither.output
    missing = runner.invoke(args=["study", "report", "nope"])
    assert missing.exit_code != 0 and "no study called 'nope'" in missing.output


def test_statuses_are_read_in_any_spelling():
    assert verify_submissions.normal_status("Awaiting review") == "AWAITING REVIEW"
    assert (
        verify_submissions.normal_status("TIMED_OUT")
        == verify_submissions.normal_status("timed out")
        == "TIMED-OUT"
    )
    assert verify_submissions.normal_status(" ") is None
    kept, dropped = verify_submissions.one_per_worker(
        [
            verify_submissions.Submission("a", status="RETURNED"),
            verify_submissions.Submission("a", status="AWAITING REVIEW"),
            verify_submissions.Submission("b"),
        ]
    )
    assert dropped == 1 and [(s.worker_id, s.status) for s in kept] == [
        ("a", "AWAITING REVIEW"),
        ("b", None),
    ]


def test_speeders_are_flagged_against_the_study_not_a_fixed_minimum(runner, ctx, tmp_path):
    """An attentive worker at 7.7 s a round was flagged by the old fixed 8 s minimum."""
    from app.crowd import reports

    make_pool(normal=20, human=6)
    create(runner, tmp_path)
    made = lookup.get_study("pilot")
    for name, seconds in (("w-a", 9.0), ("w-b", 10.5), ("w-c", 7.7), ("w-d", 12.0), ("w-e", 2.0)):
        worker = join(made, name, name)
        for _ in range(6):
            play_slot(made, worker)
        pace(worker, seconds)
    flagged = {w.worker_id for w in reports.worker_stats(made) if w.too_fast}
    assert flagged == {"w-e"}  # under a third of the study's median (9.0 s)
    report = reports.study_report(made)
    assert report.speed_threshold_seconds == pytest.approx(3.0)

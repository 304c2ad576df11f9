"""Decisions a worker cannot dispute: an attention check counts only if its evidence was shown
before the worker answered; otherwise it is void, a spare check takes its place, a worker who
voids check after check goes to review, and a rejection carries the reason the worker was shown
and the rounds that earned it."""

from __future__ import annotations

import csv
import html
import io

import pytest
from sqlalchemy import select

from app.crowd import lookup, schedule, verdicts, verify, verify_submissions
from app.extensions import db
from app.models import Participant, ParticipantStatus, Round
from app.models.rounds import CHECK_ROUND
from tests.conftest import csrf_token
from tests.crowd.helpers import answer, join, make_pool, play_lazy, study_round
from tests.crowd.test_crowd_http import join_http, play_round_http
from tests.crowd.test_study_cli import STUDY_TOML, create


def test_check_verdicts():
    # An inside check whose sentence (index 4) was never shown: void, not failed.
    assert schedule.check_verdict("inside", 2, 4) == schedule.VOID
    assert schedule.check_verdict("inside", 4, 4) == schedule.PASS
    assert schedule.check_verdict("inside", 5, 4) == schedule.FAIL  # read past it
    assert schedule.check_verdict("inside", 9, 4) == schedule.FAIL  # "all human" at the end
    # An all-human check's instruction is its first sentence: always shown.
    assert schedule.check_verdict("all_human", 1, 9) == schedule.FAIL
    assert schedule.check_verdict("all_human", 9, 9) == schedule.PASS


def test_spare_slots_go_to_the_soonest_round():
    plan = ["normal", "inside_check", "normal", "normal", "inside_check", "normal", "normal"]
    # Void at slot 1 (done = 2): the next normal round, slot 2, becomes a spare.
    assert schedule.spare_slot(plan, 2, 6)[2] == schedule.SPARE
    # Void at the last required round: one round more, right away.
    last = schedule.spare_slot(plan, 6, 6)
    assert last[6] == schedule.SPARE_ADDED and len(last) == len(plan) + 1
    assert schedule.spare_slot(plan, 7, 6) is None  # an optional extra round: nothing
    assert schedule.checks_left(plan, 2, 6) == 1


def test_the_reason_names_the_rounds():
    found = schedule.check_rounds(
        [(None, 3, 3), ("inside", 1, 4), ("all_human", 2, 9), (None, 2, 3), ("inside", 9, 3)]
    )
    assert found == {"pass": [], "fail": [3, 5], "void": [2]}
    text = schedule.failed_checks_text(found["fail"], 2)
    assert "2 of the 2 attention checks" in text and "rounds 3 and 5" in text


def play(study, participant, early_on_checks: int = 0):
    """A careful worker who, on the first `early_on_checks` inside checks, honestly flags the
    sentence before the check's sentence (they thought the machine had taken over)."""
    early = early_on_checks
    while (round_ := study_round(study, participant)) is not None:
        example = round_.example
        check = (example.source or {}).get("check")
        if check == "inside" and early:
            early -= 1
            answer(round_, example.boundary - 1)
        else:
            answer(round_, example.boundary)
        db.session.refresh(participant)


@pytest.fixture
def study(runner, ctx, tmp_path):
    make_pool(normal=20, human=6)
    # A strict study: one failed check is enough to fail.
    strict = STUDY_TOML.replace("rounds = 6", "rounds = 6\nfail_after_checks = 1")
    assert create(runner, tmp_path, strict).exit_code == 0
    return lookup.get_study("pilot")


def test_an_honest_early_guess_voids_the_check_and_a_spare_takes_its_place(study, tmp_path):
    worker = join(study, "w-honest", "s1")
    play(study, worker, early_on_checks=1)
    assert worker.status == ParticipantStatus.completed  # the old code: failed one check
    assert (worker.checks_void, worker.checks_failed, worker.checks_passed) == (1, 0, 2)
    assert worker.schedule.count(schedule.SPARE) + worker.schedule.count(schedule.SPARE_ADDED) == 1
    played = db.session.scalars(select(Round).where(Round.participant_id == worker.id)).all()
    spare = [r for r in played if r.example_id in study.pool["spare_checks"]]
    assert len(spare) == 1 and spare[0].kind == CHECK_ROUND
    decision = verify.decide(study, [verify_submissions.Submission("w-honest")])[0]
    assert decision.decision == verify_submissions.APPROVE, decision.reasons


def test_voiding_check_after_check_goes_to_review_never_through(study):
    worker = join(study, "w-voids", "s1")
    play(study, worker, early_on_checks=2)
    assert worker.checks_void == 2 and worker.checks_failed == 0
    decision = verify.decide(study, [verify_submissions.Submission("w-voids")])[0]
    assert decision.decision == verify_submissions.REVIEW
    assert "answered 2 attention checks before their instruction was shown" in "; ".join(
        decision.reasons
    )


def test_flagging_at_the_first_chance_cannot_void_its_way_through(study):
    """Flagging the second sentence every time voids every inside check; the spares have their
    instruction first, so this lazy strategy still fails."""
    for n in range(4):
        worker = join(study, f"w-first{n}", f"s{n}")
        play_lazy(study, worker, "first")
        assert worker.status == ParticipantStatus.failed_checks
        assert worker.checks_failed == 2


def test_a_rejection_carries_the_reason_shown_and_the_rounds(study, app, runner, tmp_path):
    client = app.test_client()
    assert join_http(client).status_code == 302
    client.get("/study/pilot/continue")
    token = csrf_token(client)
    while play_round_http(client, token, careful=False) is not None:
        pass
    page = client.get("/study/pilot/done").get_data(as_text=True)
    worker = db.session.scalar(select(Participant).where(Participant.worker_id == "5f1a2b3c"))
    db.session.refresh(worker)
    assert worker.status == ParticipantStatus.failed_checks
    shown = verdicts.failed_checks_message(worker)
    failed = [i + 1 for i, kind in enumerate(worker.schedule[:6]) if kind in schedule.CHECK_KINDS]
    assert f"rounds {failed[0]} and {failed[1]}" in shown
    assert shown in html.unescape(page)  # the finish page shows these words
    export = tmp_path / "export.csv"
    export.write_text(
        "Submission id,Participant id,Status\nsub1,5f1a2b3c,AWAITING REVIEW\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    result = runner.invoke(
        args=["study", "verify", "pilot", "--prolific-export", str(export), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader(io.StringIO((out / "reject.csv").read_text())))
    assert shown in row["message"] and len(row["message"]) >= 100
    decided = next(csv.DictReader(io.StringIO((out / "decisions.csv").read_text())))
    assert f"(rounds {failed[0]}, {failed[1]})" in decided["reasons"]

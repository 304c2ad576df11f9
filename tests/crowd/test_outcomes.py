"""Every platform outcome is decided in the tool: returned without joining, screened out with
the study's screen-out payment, failed checks stopping the worker at once, and a missing code
named with its cause. The money side (paid once whatever the commands) is in
test_ledger_property.py."""

from __future__ import annotations

import pytest

from app.crowd import lookup, schedule, verdicts, verify, verify_runs, verify_submissions
from app.crowd.config import StudyConfigError
from app.crowd.study_file import parse_study
from app.models import ParticipantStatus
from tests.crowd.helpers import BASE, join, make_pool, make_study, play_slot, study_round


def test_a_returned_submission_of_a_worker_who_never_joined_is_returned(ctx):
    make_pool()
    study = make_study(rounds=6, attention_check_rate=0.34)
    decided = verify.decide(
        study,
        [
            verify_submissions.Submission("ghost-r", None, "RETURNED"),
            verify_submissions.Submission("ghost-t", None, "TIMED-OUT"),
            verify_submissions.Submission("ghost-a", "C1DONE01", "AWAITING REVIEW"),
        ],
    )
    assert [d.decision for d in decided] == [
        verify_submissions.RETURNED,
        verify_submissions.RETURNED,
        verify_submissions.REVIEW,
    ]
    assert "never joined on the site" in decided[0].reasons[0]


def test_a_worker_who_fails_the_required_checks_is_stopped_at_once(ctx):
    make_pool(normal=20, human=6)
    # Two checks, fail_after_checks 2, and the default stop (the other tests turn it off).
    study = make_study(rounds=8, attention_check_rate=0.25, stop_after_failed_checks=True)
    # A worker whose second check comes before their last round.
    name = next(
        f"w-fail-{n}"
        for n in range(100)
        if schedule.attention_schedule(8, 0.25, schedule.worker_seed("pilot", f"w-fail-{n}"))[-1]
        == schedule.NORMAL
    )
    worker = join(study, name, "s1")
    second_check = [i for i, k in enumerate(worker.schedule) if k != "normal"][1]
    for _ in range(second_check + 1):
        play_slot(study, worker, pass_check=False)
    assert worker.status == ParticipantStatus.failed_checks
    assert worker.rounds_done == second_check + 1 < 8
    assert study_round(study, worker) is None
    assert verdicts.completion_code(worker) == "C2FAIL02"
    assert "2 of the 2 attention checks" in verdicts.failed_checks_message(worker)

    patient = make_study(slug="patient", rounds=8, attention_check_rate=0.25)
    worker = join(patient, "w-fail", "s2")
    while study_round(patient, worker) is not None:
        play_slot(patient, worker, pass_check=False)
    assert worker.status == ParticipantStatus.failed_checks and worker.rounds_done == 8


def test_a_missing_code_is_named_with_its_cause(ctx):
    make_pool()
    study = make_study(rounds=6, attention_check_rate=0.34)
    worker = join(study, "w-mid", "s1")
    play_slot(study, worker)
    play_slot(study, worker)
    (decision,) = verify.decide(
        study, [verify_submissions.Submission("w-mid", "NOCODE", "AWAITING REVIEW")]
    )
    assert decision.decision == verify_submissions.REVIEW
    assert (
        "no code entered (NOCODE): the site gives none before the last round: they stopped "
        "after 2 of 6 rounds"
    ) in decision.reasons


def test_a_screened_out_worker_is_paid_the_screen_out_payment_once(ctx):
    make_pool()
    screening = {"question": "Do you read English daily?", "options": ["Yes", "No"]}
    study = make_study(
        rounds=6,
        attention_check_rate=0.34,
        screened_out_pay=0.3,
        screening={**screening, "accept": ["Yes"]},
        completion_codes={**BASE["completion_codes"], "screened_out": "C3OUT003"},
    )
    out = join(study, "w-out", "s1", screening="No")
    assert out.status == ParticipantStatus.screened_out
    assert verdicts.completion_code(out) == "C3OUT003"
    rows = [verify_submissions.Submission("w-out", "C3OUT003", "AWAITING REVIEW")]
    (first,) = verify.decide(study, rows)
    assert first.decision == verify_submissions.RETURNED and first.bonus_minor == 30
    assert "screened out by screening: ask them to return the submission" in first.reasons[0]
    verify_runs.apply_decisions(study, [first])
    (again,) = verify.decide(study, rows)
    assert again.decision == verify_submissions.RETURNED and again.bonus_minor == 0  # paid once
    # Prolific's own screen-out (paid by Prolific): nothing more from the ledger.
    other = join(study, "w-out2", "s2", screening="No")
    assert other.status == ParticipantStatus.screened_out
    (settled,) = verify.decide(
        study, [verify_submissions.Submission("w-out2", "C3OUT003", "SCREENED OUT")]
    )
    assert settled.bonus_minor == 0
    assert lookup.config_of(study).screened_out_pay == 0.3


def test_stopping_at_once_is_the_default():
    data = {k: v for k, v in BASE.items() if k != "stop_after_failed_checks"}
    assert parse_study(data, "study.toml").stop_after_failed_checks is True


def test_a_screen_out_payment_above_the_reward_is_refused():
    with pytest.raises(StudyConfigError, match="screened_out_pay: must be less than the reward"):
        parse_study({**BASE, "screened_out_pay": 2.5}, "study.toml")

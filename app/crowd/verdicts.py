"""Recording study answers: check verdicts, spare checks, outcomes and completion codes."""

from __future__ import annotations

import re
from urllib.parse import quote

from sqlalchemy import select, update

from app.crowd import schedule, slots
from app.crowd.admission import CAUSES, finish, out_of_time
from app.crowd.config import StudyConfig
from app.crowd.lookup import FINISHED, LEFT, config_of
from app.crowd.slots import required_rounds
from app.errors import Conflict
from app.extensions import db
from app.models import (
    Example,
    Participant,
    ParticipantStatus,
    Round,
)
from app.models.base import utcnow
from app.models.rounds import CHECK_ROUND, PRACTICE_ROUND


def record_answer(participant_id: int, kind: str, passed: bool) -> None:
    """Called by the game service inside the answer's transaction; `passed` says whether the
    guess is the text's boundary (the right answer of an attention check).

    Raises Conflict, which undoes the answer, when the worker is past the time limit or has
    left: their open round no longer counts and another worker may have its text.
    """
    participant = db.session.get(Participant, participant_id)
    now = utcnow()
    if participant.status in LEFT or out_of_time(participant, now):
        raise Conflict(
            "Your time for this study has run out, so this answer cannot be counted. "
            "Thank you for your work so far."
        )
    if kind == PRACTICE_ROUND:
        return
    values = {"rounds_done": Participant.rounds_done + 1}
    verdict = _check_verdict(participant_id, passed) if kind == CHECK_ROUND else None
    if verdict == schedule.PASS:
        values["checks_passed"] = Participant.checks_passed + 1
    elif verdict == schedule.FAIL:
        values["checks_failed"] = Participant.checks_failed + 1
    elif verdict == schedule.VOID:
        values["checks_void"] = Participant.checks_void + 1
    db.session.execute(update(Participant).where(Participant.id == participant_id).values(**values))
    db.session.refresh(participant)
    config = config_of(participant.study)
    if verdict == schedule.VOID:
        _schedule_spare(participant, config)
    required = required_rounds(config, participant)
    if (
        participant.status == ParticipantStatus.started
        and config.stop_after_failed_checks
        and participant.checks_failed >= config.fail_after_checks
    ):
        # Failed the checks the study requires: stopped at once, not after every round.
        finish(participant, config, ParticipantStatus.failed_checks)
    if participant.status == ParticipantStatus.started and participant.rounds_done >= required:
        outcome = (
            ParticipantStatus.failed_checks
            if participant.checks_failed >= config.fail_after_checks
            else ParticipantStatus.completed
        )
        finish(participant, config, outcome)


def _check_verdict(participant_id: int, passed: bool) -> str:
    """PASS / FAIL / VOID for the check this worker has just answered (its answer is stored in
    the same transaction): void when they answered before the check's evidence was shown."""
    row = db.session.execute(
        select(Round.guess, Example.boundary, Example.source)
        .join(Example, Example.id == Round.example_id)
        .where(
            Round.participant_id == participant_id,
            Round.kind == CHECK_ROUND,
            Round.guess.is_not(None),
        )
        .order_by(Round.answered_at.desc(), Round.id.desc())
        .limit(1)
    ).first()
    if row is None:
        return schedule.PASS if passed else schedule.FAIL
    check = (row.source or {}).get("check", "all_human")
    return schedule.check_verdict(check, row.guess, row.boundary)


def _schedule_spare(participant: Participant, config: StudyConfig) -> None:
    """After a void check: if the checks still to come cannot make up the study's number, put
    a spare check in the worker's stored schedule, at the soonest round (see slots.add_spare),
    when the study has a spare text on a passage their schedule does not hold. Otherwise
    nothing: verify sends a worker with void checks to review."""
    plan = participant.schedule
    required = required_rounds(config, participant)
    wanted = sum(config.checks)
    counted = participant.checks_passed + participant.checks_failed
    done = participant.rounds_done
    if counted + schedule.checks_left(plan, done, required) >= wanted:
        return
    slots.add_spare(participant.study, participant, config)


def failed_checks_message(participant: Participant) -> str | None:
    """The reason a worker who failed checks is shown on the finish page (None for others);
    verify's rejection message carries the same words (schedule.failed_checks_text)."""
    if participant.status != ParticipantStatus.failed_checks:
        return None
    answered = db.session.execute(
        select(Round.kind, Round.guess, Example.boundary, Example.source)
        .join(Example, Example.id == Round.example_id)
        .where(
            Round.participant_id == participant.id,
            Round.guess.is_not(None),
            Round.kind != PRACTICE_ROUND,
        )
        .order_by(Round.answered_at, Round.id)
    ).all()
    found = check_rounds(answered)
    counted = participant.checks_passed + participant.checks_failed
    return schedule.failed_checks_text(found[schedule.FAIL], counted)


def check_rounds(answered) -> dict[str, list[int]]:
    """`schedule.check_rounds` of answered rounds read with their kind, guess, boundary and
    example source (which says what kind of check a check round is)."""
    return schedule.check_rounds(
        [
            (
                (r.source or {}).get("check", "all_human") if r.kind == CHECK_ROUND else None,
                r.guess,
                r.boundary,
            )
            for r in answered
        ]
    )


def completion_code(participant: Participant) -> str | None:
    """The code to show: the study's code for this outcome if configured, else the worker's own."""
    if participant.status not in FINISHED:
        return None
    config = config_of(participant.study)
    return config.completion_codes.get(code_outcome(participant)) or participant.completion_code


def code_outcome(participant: Participant) -> str | None:
    """The outcome whose code this worker is given: the status's, for a cause the status alone
    does not tell (admission.NO_TEXTS gets the screened-out code, RAN_OUT the completed one)."""
    if participant.outcome in CAUSES:
        return CAUSES[participant.outcome]
    return participant.outcome


def completion_url(participant: Participant) -> str | None:
    config = config_of(participant.study)
    code = completion_code(participant)
    if code is None or not config.completion_url:
        return None
    values = {"code": code, "pid": participant.worker_id}
    return re.sub(
        r"\{(code|pid)\}", lambda m: quote(values[m.group(1)], safe=""), config.completion_url
    )

"""Admitting workers, places, time limits and returns, instructions and comprehension."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from app.crowd import codes, conditions, preregistration, schedule, slots
from app.crowd.config import StudyConfig
from app.crowd.lookup import config_of, find_participant, holding_place
from app.crowd.platforms import Entry
from app.errors import BadRequest, Conflict, Forbidden
from app.extensions import db
from app.models import (
    Participant,
    ParticipantStatus,
    Player,
    Study,
)
from app.models.base import utcnow


def _may_resume(participant: Participant, entry: Entry, bound_id: int | None) -> bool:
    """A returning worker resumes when this browser is bound to them, or when the platform's
    per-session id matches (Prolific's SESSION_ID, MTurk's assignmentId); ids alone never do."""
    if bound_id == participant.id:
        return True
    return bool(
        entry.session
        and participant.platform_session
        and codes.codes_match(entry.session, participant.platform_session)
    )


def places_taken(study: Study) -> int:
    config = config_of(study)
    return db.session.scalar(
        select(func.count(Participant.id)).where(
            Participant.study_id == study.id, holding_place(config, utcnow())
        )
    )


def enter(
    study: Study, entry: Entry, bound_id: int | None, consent: bool, screening: str | None
) -> Participant:
    """Admit a worker who gave consent, or resume them; never a second session for one worker."""
    config = config_of(study)
    existing = find_participant(study, entry.worker_id)
    if existing is not None:
        if not _may_resume(existing, entry, bound_id):
            raise Forbidden(
                "You have already started this study in another browser or session. Please "
                "continue there; if you cannot, contact the researcher through the platform."
            )
        return existing
    if not study.is_open:
        raise Conflict("This study is closed and takes no new participants. Thank you!")
    if not consent:
        raise BadRequest("Please tick the consent box to take part, or close this page.")
    if config.screening is not None and screening not in config.screening.options:
        raise BadRequest("Please answer the question above.")
    expire_overdue(study)
    if config.places is not None or config.conditions:
        # One admission at a time per study where the database can lock (PostgreSQL).
        db.session.execute(select(Study.id).where(Study.id == study.id).with_for_update())
    if config.places is not None and places_taken(study) >= config.places:
        db.session.rollback()
        raise Conflict(
            "This study is full at the moment. Places may free up when others return the "
            f"task, so you could try again later from {config.display_platform}."
        )
    # The plan is frozen before the first worker's data exists, if not published already.
    preregistration.freeze_on_entry(study, config)
    player = Player(is_guest=True, kind="crowd", research_consent_at=utcnow())
    db.session.add(player)
    db.session.flush()
    plan = schedule.attention_schedule(
        config.rounds,
        config.attention_check_rate,
        schedule.worker_seed(study.slug, entry.worker_id),
        all_human=config.all_human_checks,
        extra=config.total_rounds - config.rounds,
    )
    participant = Participant(
        study_id=study.id,
        player_id=player.id,
        worker_id=entry.worker_id,
        platform_session=entry.session,
        platform_study=entry.study,
        submit_to=entry.submit_to,
        schedule=plan,
        consent_at=utcnow(),
        started_at=utcnow(),
        status=ParticipantStatus.started,
    )
    db.session.add(participant)
    if config.screening is not None and screening not in config.screening.accept:
        finish(participant, config, ParticipantStatus.screened_out)
    try:
        if participant.status == ParticipantStatus.started:
            db.session.flush()
            # The condition first: the schedule is built from its pool and settings. A worker
            # the pool cannot serve is screened out, which frees their condition's place.
            if config.conditions:
                conditions.allocate(study, participant, config, utcnow())
            admit_with_schedule(study, participant, config)
        db.session.commit()
    except IntegrityError:
        # The same worker's other tab got in first: resume that participant instead.
        db.session.rollback()
        winner = find_participant(study, entry.worker_id)
        if winner is None or not _may_resume(winner, entry, bound_id):
            raise Forbidden("You have already started this study in another browser.") from None
        return winner
    return participant


# Outcome of a worker for whom the pool held no complete schedule: not admitted to the rounds,
# finished as screened out (the screened-out code and pay; the finish page says why).
NO_TEXTS = "no_texts"
# Outcome of a worker whose stored schedule (from before schedules were complete at entry) ran
# out mid-study: finished as completed, as the shortfall was the study's, not theirs.
RAN_OUT = "ran_out"
# The status whose completion code each cause is given.
CAUSES = {NO_TEXTS: "screened_out", RAN_OUT: "completed"}


def admit_with_schedule(study: Study, participant: Participant, config: StudyConfig) -> bool:
    """Store the worker's whole schedule, texts included, so a reload or a return serves the
    same; only when it is complete. Otherwise the worker is finished at once as screened out
    (outcome NO_TEXTS): never admitted to rounds the pool cannot fill. The caller commits."""
    filled = slots.plan_for(study, participant)
    if not filled.complete:
        finish(participant, config, ParticipantStatus.screened_out, NO_TEXTS)
        return False
    slots.store(participant, filled, slots.required_rounds(config, participant))
    return True


# -- time limits and returns ----------------------------------------------------------------


def deadline(participant: Participant) -> datetime | None:
    config = conditions.settings_for(config_of(participant.study), participant.condition)
    if config.time_limit_minutes is None:
        return None
    return participant.started_at + timedelta(minutes=config.time_limit_minutes)


def out_of_time(participant: Participant, now: datetime) -> bool:
    end = deadline(participant)
    return participant.status == ParticipantStatus.started and end is not None and now > end


def check_time(participant: Participant) -> None:
    """Mark this worker timed out once past the study's time limit (their place is freed)."""
    now = utcnow()
    if out_of_time(participant, now):
        mark_left(participant, ParticipantStatus.timed_out, now)
        db.session.commit()


def expire_overdue(study: Study) -> int:
    """Mark every started worker past the time limit as timed out; returns how many."""
    config = config_of(study)
    if not conditions.any_time_limit(config):
        return 0
    result = db.session.execute(
        update(Participant)
        .where(
            Participant.study_id == study.id,
            Participant.status == ParticipantStatus.started,
            ~conditions.within_time(config, utcnow()),
        )
        .values(status=ParticipantStatus.timed_out, left_at=utcnow())
    )
    db.session.commit()
    return result.rowcount


def mark_left(participant: Participant, status: ParticipantStatus, now: datetime | None = None):
    """A started worker returned the task or ran out of time (the caller commits)."""
    if participant.status == ParticipantStatus.started:
        participant.status = status
        participant.left_at = now or utcnow()


# -- instructions and comprehension ---------------------------------------------------------


def finish_instructions(participant: Participant) -> None:
    if participant.instructions_at is None:
        participant.instructions_at = utcnow()
        db.session.commit()


def comprehension_pending(study: Study, participant: Participant) -> bool:
    return bool(config_of(study).comprehension) and participant.instructions_at is None


COMPREHENSION_TRIES = 2


def answer_comprehension(
    study: Study, participant: Participant, values: Mapping, graded: bool = True
) -> str:
    """Check the answers to the questions after the instructions: "passed", "retry" (one more
    try), "screened_out" after the second wrong try (Prolific allows two), or "stale".

    The server counts the tries: every graded wrong answer counts, whatever the form says.
    `graded` is False for a form that is not the one shown last (the second send of a double
    click, or a replay): it is not graded at all, so it can neither pass nor spend a try, and
    the worker sees where they stand.
    """
    config = config_of(study)
    if participant.status == ParticipantStatus.screened_out:
        return "screened_out"
    if participant.status != ParticipantStatus.started:
        raise Conflict("These questions are already answered.")
    if not comprehension_pending(study, participant):
        return "passed"
    if not graded:
        return "stale"
    given = [values.get(f"comprehension_{i}") for i in range(len(config.comprehension))]
    if any(answer is None for answer in given):
        raise BadRequest("Please answer every question.")
    if all(a == q.answer for a, q in zip(given, config.comprehension, strict=True)):
        participant.instructions_at = utcnow()
        db.session.commit()
        return "passed"
    db.session.execute(
        update(Participant)
        .where(Participant.id == participant.id)
        .values(comprehension_failures=Participant.comprehension_failures + 1)
    )
    db.session.refresh(participant)
    if participant.comprehension_failures >= COMPREHENSION_TRIES:
        finish(participant, config, ParticipantStatus.screened_out)
    db.session.commit()
    return "screened_out" if participant.status == ParticipantStatus.screened_out else "retry"


def finish(
    participant: Participant,
    config: StudyConfig,
    outcome: ParticipantStatus,
    cause: str | None = None,
) -> None:
    """Set the outcome and its completion code once (the status guard makes it single-shot).
    `cause` names an outcome the status alone does not tell (NO_TEXTS, RAN_OUT); the worker is
    given the status's code."""
    shared = config.completion_codes.get(outcome.value)
    participant.status = outcome
    participant.outcome = cause or outcome.value
    participant.finished_at = utcnow()
    participant.completion_code = None if shared else codes.new_code()

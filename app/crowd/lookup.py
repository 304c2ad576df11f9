"""Looking up studies and their workers, and the statuses that say where a worker stands."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, func, or_, select

from app.crowd.conditions import any_time_limit, within_time
from app.crowd.config import SLUG_RE, StudyConfig
from app.errors import NotFound
from app.extensions import db
from app.models import (
    Participant,
    ParticipantStatus,
    Round,
    Study,
)
from app.models.rounds import PRACTICE_ROUND

FINISHED = {
    ParticipantStatus.completed,
    ParticipantStatus.failed_checks,
    ParticipantStatus.screened_out,
    ParticipantStatus.approved,
    ParticipantStatus.rejected,
}
# Workers who returned the task or ran out of time: their place is free again.
LEFT = {ParticipantStatus.returned, ParticipantStatus.timed_out}


def config_of(study: Study) -> StudyConfig:
    return StudyConfig.from_json(study.config)


def get_study(slug: str) -> Study:
    # A slug no study can have (a NUL byte, 100k characters) is not looked up.
    study = (
        db.session.scalar(select(Study).where(Study.slug == slug))
        if SLUG_RE.fullmatch(slug)
        else None
    )
    if study is None:
        raise NotFound("There is no study at this address. Please check the link.")
    return study


def find_participant(study: Study, worker_id: str) -> Participant | None:
    return db.session.scalar(
        select(Participant).where(
            Participant.study_id == study.id, Participant.worker_id == worker_id
        )
    )


def participant_count(study: Study) -> int:
    return db.session.scalar(
        select(func.count(Participant.id)).where(Participant.study_id == study.id)
    )


def holding_place(config: StudyConfig, now: datetime):
    """Participants who hold a place: anyone finished, or started and still within the time."""
    return or_(Participant.status.not_in(LEFT | {ParticipantStatus.started}), in_time(config, now))


def in_time(config: StudyConfig, now: datetime):
    """Participants still playing: started, and within the time limit (their condition's)."""
    started = Participant.status == ParticipantStatus.started
    return and_(started, within_time(config, now)) if any_time_limit(config) else started


def round_numbers(participant_ids=None):
    """A subquery (columns id, number) giving each answered study round its study round
    number: 1, 2, … in the worker's play order (answered time, then id), practice apart. The one
    numbering of rounds that workers and researchers read (check verdicts, flags, review,
    verify, exports); `participant_ids` (a select or a list) limits it to those workers."""
    query = select(
        Round.id.label("id"),
        func.row_number()
        .over(partition_by=Round.participant_id, order_by=(Round.answered_at, Round.id))
        .label("number"),
    ).where(
        Round.participant_id.is_not(None),
        Round.guess.is_not(None),
        Round.kind != PRACTICE_ROUND,
    )
    if participant_ids is not None:
        query = query.where(Round.participant_id.in_(participant_ids))
    return query.subquery("round_numbers")

"""Looking up studies and their workers, and the statuses that say where a worker stands."""

from __future__ import annotations

from sqlalchemy import func, select

from app.crowd.config import SLUG_RE, StudyConfig
from app.errors import Conflict, NotFound
from app.extensions import db
from app.models import (
    Participant,
    ParticipantStatus,
    Round,
    Study,
)

FINISHED = {
    ParticipantStatus.completed,
    ParticipantStatus.failed_checks,
    ParticipantStatus.screened_out,
    ParticipantStatus.approved,
    ParticipantStatus.rejected,
}
# Workers who returned the task or ran out of time: their place is free again.
LEFT = {ParticipantStatus.returned, ParticipantStatus.timed_out}


class RatingsPending(Conflict):
    """The worker's last round still needs its ratings before anything else."""

    def __init__(self, round_: Round):
        super().__init__("Please give your ratings for this text before you go on.")
        self.round = round_


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


# Settings that decide what each worker plays and how they are judged: fixed once anyone joined.

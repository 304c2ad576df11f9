"""Crowd studies: a study configuration and the platform workers who take part."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import JSON, Enum, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import db
from app.models.base import UTCDateTime, utcnow
from app.models.players import Player


class Platform(enum.StrEnum):
    prolific = "prolific"
    mturk = "mturk"
    generic = "generic"


class ParticipantStatus(enum.StrEnum):
    """What the site saw (psiTurk's lifecycle, named): started -> an outcome, or left.

    `returned` and `timed_out` free the worker's place. The researcher's approve / reject
    decisions are kept apart, in study_decisions, so that the evidence never changes under them;
    `approved` and `rejected` are only read from data made before that split (migration 0007).
    """

    started = "started"
    completed = "completed"
    failed_checks = "failed_checks"
    screened_out = "screened_out"
    returned = "returned"
    timed_out = "timed_out"
    approved = "approved"
    rejected = "rejected"


class Study(db.Model):
    __tablename__ = "studies"

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    platform: Mapped[Platform] = mapped_column(
        Enum(Platform, native_enum=False, length=16, validate_strings=True)
    )
    # The validated study file, as loaded (see app/crowd/config.py for its fields).
    config: Mapped[dict] = mapped_column(JSON)
    # Example ids fixed when the study is created:
    # {"normal": [...], "checks": [...], "tutorial": [...]}.
    pool: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    is_open: Mapped[bool] = mapped_column(default=True)


class Participant(db.Model):
    __tablename__ = "participants"
    __table_args__ = (
        UniqueConstraint("study_id", "worker_id"),
        UniqueConstraint("completion_code"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    player_id: Mapped[int] = mapped_column(ForeignKey("players.id"), unique=True)
    # The platform's ids: PROLIFIC_PID / workerId / pid; SESSION_ID / assignmentId;
    # STUDY_ID / hitId.
    worker_id: Mapped[str] = mapped_column(String(128))
    platform_session: Mapped[str | None] = mapped_column(String(128), nullable=True)
    platform_study: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # MTurk's return address (validated against MTurk's hosts).
    submit_to: Mapped[str | None] = mapped_column(String(255), nullable=True)
    status: Mapped[ParticipantStatus] = mapped_column(
        Enum(ParticipantStatus, native_enum=False, length=16, validate_strings=True),
        default=ParticipantStatus.started,
    )
    # Slot kinds in play order, e.g. ["normal", "check", ...]; fixed at entry.
    schedule: Mapped[list] = mapped_column(JSON)
    consent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    instructions_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    practice_done_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    rounds_done: Mapped[int] = mapped_column(Integer, default=0)
    checks_passed: Mapped[int] = mapped_column(Integer, default=0)
    checks_failed: Mapped[int] = mapped_column(Integer, default=0)
    # completed / failed_checks / screened_out once finished.
    outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    completion_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Wrong tries at the comprehension questions (two are allowed).
    comprehension_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # When the worker returned the task or ran out of time (status returned / timed_out).
    left_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    study: Mapped[Study] = relationship()
    player: Mapped[Player] = relationship()


class StudyDecision(db.Model):
    """One `flask study verify --apply` decision about one participant.

    Decisions are stored apart from the evidence (the participant row): each run adds a row only
    for participants whose decision changed, the latest row is the current decision, and
    `flask study undo-verify` deletes the latest run's rows (and puts back the statuses that run
    changed, kept in `previous_status`).
    """

    __tablename__ = "study_decisions"
    __table_args__ = (Index("ix_study_decisions_study_run", "study_id", "run"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"))
    participant_id: Mapped[int] = mapped_column(
        ForeignKey("participants.id", ondelete="CASCADE"), index=True
    )
    run: Mapped[int] = mapped_column(Integer)
    # approve / reject / review / returned / pending
    decision: Mapped[str] = mapped_column(String(16))
    reasons: Mapped[list] = mapped_column(JSON, default=list)
    # Prolific's rejection category and the message sent with a rejection.
    rejection_category: Mapped[str | None] = mapped_column(String(32), nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")
    # The platform's status for the submission in the file this run read (e.g. AWAITING REVIEW).
    platform_status: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # The participant's status before this run marked them returned / timed_out (for undo).
    previous_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class StudyBonus(db.Model):
    """The bonus ledger: what was issued to whom, so that no one is paid twice.

    `flask study verify --apply` adds one row per bonus it writes to bonus.csv; the next run
    pays only what the study's rule owes beyond the sum of a participant's rows.
    """

    __tablename__ = "study_bonuses"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    participant_id: Mapped[int] = mapped_column(
        ForeignKey("participants.id", ondelete="CASCADE"), index=True
    )
    run: Mapped[int] = mapped_column(Integer)
    # In the study currency's minor unit (pence, cents), to keep sums exact.
    amount_minor: Mapped[int] = mapped_column(Integer)
    issued_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

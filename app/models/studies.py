"""Crowd studies: a study configuration and the platform workers who take part."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import (
    JSON,
    Enum,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
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
    # {"normal": [...], "checks": [...], "tutorial": [...]}; a study with conditions adds
    # "conditions" ({name: {"normal": [...], "tutorial": [...]}}) and "allocation_seed".
    pool: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    is_open: Mapped[bool] = mapped_column(default=True)
    # The study's id on Prolific, once `flask study prolific create` made its draft there.
    prolific_study_id: Mapped[str | None] = mapped_column(String(64), nullable=True)


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
    # Checks answered before their evidence was shown: neither passed nor failed.
    checks_void: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # completed / failed_checks / screened_out once finished.
    outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    completion_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Wrong tries at the comprehension questions (two are allowed).
    comprehension_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # When the worker returned the task or ran out of time (status returned / timed_out).
    left_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # The study condition the worker was allocated at entry (app/crowd/conditions.py); None in
    # a study without conditions. Never changes.
    condition: Mapped[str | None] = mapped_column(String(32), nullable=True)

    study: Mapped[Study] = relationship()
    player: Mapped[Player] = relationship()


class StudySlot(db.Model):
    """One round of a worker's schedule, fixed when they enter the study: the text they read
    in it (app/crowd/slots.py). A reload or a return serves the same text; no source passage
    appears twice among one worker's slots, attention checks included."""

    __tablename__ = "study_slots"
    __table_args__ = (UniqueConstraint("participant_id", "position"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participants.id", ondelete="CASCADE"))
    # 0-based, in play order (practice rounds come before and are not slots).
    position: Mapped[int] = mapped_column(Integer)
    # The slot's kind, as in Participant.schedule ("normal", "check", "inside_check", ...).
    kind: Mapped[str] = mapped_column(String(24))
    # None when no text was left for the slot (it is then picked when the worker reaches it).
    example_id: Mapped[int | None] = mapped_column(
        ForeignKey("examples.id", ondelete="SET NULL"), nullable=True
    )
    # One of the optional rounds after the required ones (up to max_rounds).
    optional: Mapped[bool] = mapped_column(default=False)


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
    # Who decided: "verify" (the rules) or "review" (a person, with `flask study review`). A
    # person's decision stands until a person changes it.
    source: Mapped[str] = mapped_column(String(16), default="verify", server_default="verify")


# Bonus ledger states. A row is `issued` when written to a bonus.csv for the researcher to upload
# (platform_ref's "file_run" names the run whose bonus.csv holds it, when that is not its own run),
# `requested` when owed and not yet handed out: a bonus given in review, or one to be paid through
# the platform's API; the next bonus.csv or API payment takes it, whichever comes first (a row
# with a Prolific set-up stays with the API). `sent` once the pay call went out
# (paid or not, it is never sent again), `paid` when the platform confirmed it, `failed` when the
# platform refused before paying. `reversed` rows were cancelled by a `reversal` row (a negative
# amount that names them); a paid or sent row is never reversed and no row is ever deleted.
BONUS_LIVE = ("issued", "requested", "sent", "paid")


class StudyBonus(db.Model):
    """The bonus ledger: what is owed or paid to whom and why, so that no one is paid twice.

    Each row is keyed by (study, participant, reason); at most one live row (see BONUS_LIVE) per
    key, which the database enforces. The reason of the study's score bonus names the total it
    brings the worker to, so a top-up after `flask study edit` raised the cap is a new key. A
    worker's bonus already given is the sum of amount_minor over their rows that are not failed
    (a reversal cancels the row it names).
    """

    __tablename__ = "study_bonuses"
    __table_args__ = (
        Index(
            "uq_study_bonuses_live_key",
            "study_id",
            "participant_id",
            "reason",
            unique=True,
            sqlite_where=text("state IN ('issued', 'requested', 'sent', 'paid')"),
            postgresql_where=text("state IN ('issued', 'requested', 'sent', 'paid')"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    participant_id: Mapped[int] = mapped_column(
        ForeignKey("participants.id", ondelete="CASCADE"), index=True
    )
    run: Mapped[int] = mapped_column(Integer)
    # In the study currency's minor unit (pence, cents), to keep sums exact; negative for a
    # reversal.
    amount_minor: Mapped[int] = mapped_column(Integer)
    issued_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    reason: Mapped[str] = mapped_column(String(120), default="score", server_default="score")
    state: Mapped[str] = mapped_column(String(16), default="issued", server_default="issued")
    # The row a reversal cancels.
    reverses_id: Mapped[int | None] = mapped_column(
        ForeignKey("study_bonuses.id", ondelete="SET NULL"), nullable=True
    )
    # What the platform answered (its payment id, or its refusal).
    platform_ref: Mapped[str | None] = mapped_column(Text, nullable=True)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class StudyRun(db.Model):
    """One recorded `flask study verify --apply` (or review) run of a study. Never deleted, so a
    run number is never given twice; `undone_at` is set by `flask study undo-verify`."""

    __tablename__ = "study_runs"
    __table_args__ = (UniqueConstraint("study_id", "run"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"))
    run: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    undone_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class StudyMessage(db.Model):
    """A message sent to a worker through the platform's API, recorded before it is sent so that
    the same message (study, worker, text) goes out once, however often the command is run.

    `sending` is committed before the call and never sent again (the call may have gone
    through); `sent` once the platform said so; `failed` when it refused (the next run tries
    again).
    """

    __tablename__ = "study_messages"
    __table_args__ = (UniqueConstraint("study_id", "worker_id", "body_hash"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"))
    worker_id: Mapped[str] = mapped_column(String(128))
    body_hash: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="sending")
    platform_ref: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

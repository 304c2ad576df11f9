"""Randomised conditions and frozen analysis plans of crowd studies (app/crowd/conditions.py,
app/crowd/preregistration.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db
from app.models.base import UTCDateTime, utcnow


class ConditionSlot(db.Model):
    """One place in a study's allocation sequence: blocks of one place per condition, each
    block in a seeded random order, appended as workers arrive. A place is taken by the
    participant who entered into it; when that worker returns, runs out of time or is screened
    out, the next worker to enter takes the place, and so its condition."""

    __tablename__ = "condition_slots"
    __table_args__ = (UniqueConstraint("study_id", "seq"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    # 0-based place in the sequence; block = seq // number of conditions.
    seq: Mapped[int] = mapped_column(Integer)
    condition: Mapped[str] = mapped_column(String(32))
    participant_id: Mapped[int | None] = mapped_column(
        ForeignKey("participants.id", ondelete="SET NULL"), nullable=True, index=True
    )


class StudyPlan(db.Model):
    """One frozen version of a study's analysis plan ([preregistration]). Never updated or
    deleted while the study exists: a changed plan is a new version, with its reason."""

    __tablename__ = "study_plans"
    __table_args__ = (UniqueConstraint("study_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    plan: Mapped[dict] = mapped_column(JSON)
    # SHA-256 of the plan's canonical JSON (sorted keys, no spaces), hex.
    sha256: Mapped[str] = mapped_column(String(64))
    frozen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Why this version replaced the one before; None for the first.
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Workers who had entered the study when this version was frozen (0: before any data).
    participants_then: Mapped[int] = mapped_column(Integer, default=0)

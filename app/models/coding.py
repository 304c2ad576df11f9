"""Researchers' labels of players' comments, to check the comment coder on a study's own data.

A `CodingSample` item is one unique comment drawn for labelling (stratified by the text's
category); a `CodingLabel` is one researcher's main class for it. The coder's own label is never
stored here: researchers label blind, and the report codes the comments when it runs.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import db
from app.models.base import UTCDateTime, utcnow


class CodingSample(db.Model):
    __tablename__ = "coding_samples"
    __table_args__ = (
        UniqueConstraint("scope", "text"),
        UniqueConstraint("scope", "position"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # A study's slug, or "site" for every player's explanations.
    scope: Mapped[str] = mapped_column(String(64), index=True)
    text: Mapped[str] = mapped_column(Text)
    stratum: Mapped[str] = mapped_column(String(64))  # the text's category slug
    position: Mapped[int] = mapped_column(Integer)  # the order it is served in, from 1
    seed: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    labels: Mapped[list[CodingLabel]] = relationship(
        back_populates="item", cascade="all, delete-orphan"
    )


class CodingLabel(db.Model):
    __tablename__ = "coding_labels"
    __table_args__ = (UniqueConstraint("sample_id", "researcher_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sample_id: Mapped[int] = mapped_column(
        ForeignKey("coding_samples.id", ondelete="CASCADE"), index=True
    )
    researcher_id: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    label: Mapped[str] = mapped_column(String(32))
    labelled_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    item: Mapped[CodingSample] = relationship(back_populates="labels")

"""What players read: categories, generating systems and boundary examples."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, CheckConstraint, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import db
from app.models.base import UTCDateTime, utcnow


class Category(db.Model):
    __tablename__ = "categories"

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(128))
    description: Mapped[str] = mapped_column(Text, default="")


class System(db.Model):
    """What wrote the continuation: a model, a baseline, or `human` for all-human texts."""

    __tablename__ = "systems"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)


class Example(db.Model):
    """N sentences with a known boundary (index of the first machine sentence; N = all human)."""

    __tablename__ = "examples"
    __table_args__ = (
        CheckConstraint("boundary >= 1 AND boundary <= n_sentences", name="boundary_range"),
        CheckConstraint("n_sentences >= 2", name="min_sentences"),
        # Picking a text for a player (app/game/rounds.py) walks these in order.
        Index("ix_examples_pick", "kind", "annotation_count", "id"),
        Index("ix_examples_pick_category", "category_id", "kind", "annotation_count", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    external_id: Mapped[str] = mapped_column(String(255), unique=True)
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id"))
    system_id: Mapped[int] = mapped_column(ForeignKey("systems.id"))
    sentences: Mapped[list] = mapped_column(JSON)
    n_sentences: Mapped[int] = mapped_column(Integer)
    boundary: Mapped[int] = mapped_column(Integer)
    decoding: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    decoding_p: Mapped[float | None] = mapped_column(Float, nullable=True)
    seed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    source: Mapped[dict] = mapped_column(JSON, default=dict)
    meta: Mapped[dict] = mapped_column(JSON, default=dict)
    # Shown to players instead of a generic description when the operator sets it.
    system_label: Mapped[str | None] = mapped_column(String(100), nullable=True)
    # How the text was made (roftcore.records.PROVENANCE_FIELDS): model, weights_sha256,
    # hub_commit, code_version, generation settings; kept verbatim as the record carried it.
    provenance: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # "normal"; "daily" (held back for the daily challenge, never served in normal play); or
    # "attention_check" (all human, first sentence tells workers what to answer).
    kind: Mapped[str] = mapped_column(String(16), default="normal", server_default="normal")
    # Answered rounds, kept in the same transaction as each answer; selection prefers low counts.
    annotation_count: Mapped[int] = mapped_column(Integer, default=0)
    # Estimated difficulty (logits; higher is harder) and its level ("easy", "medium", "hard"),
    # set by `flask difficulty refresh` once enough players answered (app/game/levels.py); null
    # for a text not rated yet.
    difficulty: Mapped[float | None] = mapped_column(Float, nullable=True)
    level: Mapped[str | None] = mapped_column(String(8), nullable=True)
    imported_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    category: Mapped[Category] = relationship()
    system: Mapped[System] = relationship()

    @property
    def all_human(self) -> bool:
        return self.boundary == self.n_sentences


class Passage(db.Model):
    """A human-written source text (`dataset/doc_id`); every variant built from it shares it."""

    __tablename__ = "passages"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(400), unique=True)


class ExamplePassage(db.Model):
    """The passages an example shows: its own, and a spliced baseline's second one."""

    __tablename__ = "example_passages"

    example_id: Mapped[int] = mapped_column(
        ForeignKey("examples.id", ondelete="CASCADE"), primary_key=True
    )
    passage_id: Mapped[int] = mapped_column(ForeignKey("passages.id"), primary_key=True, index=True)


class PassageRead(db.Model):
    """A passage a player has read (in any variant), so that no other variant is served to them."""

    __tablename__ = "passage_reads"

    player_id: Mapped[int] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    passage_id: Mapped[int] = mapped_column(ForeignKey("passages.id"), primary_key=True)
    read_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

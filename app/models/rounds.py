"""Rounds: one player reading one example, with every reveal timestamped by the server."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    select,
    text,
)
from sqlalchemy.orm import Mapped, aliased, column_property, mapped_column, relationship

from app.extensions import db
from app.models.base import UTCDateTime, utcnow
from app.models.content import Example
from app.models.players import Player
from app.models.sets import GameSet
from app.models.studies import Participant

# The kinds of round (`Round.kind`; a text's `Example.kind` uses the same names): a round of play,
# a crowd study's attention check, a practice round. Here, so that any package can name them
# without importing the game's services.
NORMAL_ROUND = "normal"
CHECK_ROUND = "attention_check"
PRACTICE_ROUND = "practice"


class Round(db.Model):
    __tablename__ = "rounds"
    __table_args__ = (
        UniqueConstraint("player_id", "example_id"),
        UniqueConstraint("player_id", "order_index"),
        Index("ix_rounds_player_answered", "player_id", "answered_at"),
        # At most one unanswered round per player: concurrent "start" requests cannot make two.
        Index(
            "uq_rounds_one_open_per_player",
            "player_id",
            unique=True,
            sqlite_where=text("guess IS NULL"),
            postgresql_where=text("guess IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    player_id: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    example_id: Mapped[int] = mapped_column(ForeignKey("examples.id"), index=True)
    # The player's n-th round, from 1.
    order_index: Mapped[int] = mapped_column(Integer)
    # "normal"; "attention_check" and "practice" rounds earn no points and stay off leaderboards.
    kind: Mapped[str] = mapped_column(String(16), default="normal", server_default="normal")
    participant_id: Mapped[int | None] = mapped_column(
        ForeignKey("participants.id"), nullable=True, index=True
    )
    # The set of texts (a normal set or a day's challenge) the round belongs to; None for study
    # rounds and rounds played before sets existed.
    set_id: Mapped[int | None] = mapped_column(
        ForeignKey("game_sets.id", ondelete="SET NULL"), nullable=True, index=True
    )
    # Likert ratings given in a study, e.g. {"fluency": 4, "commonsense": 2}.
    ratings: Mapped[dict | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    # What the player asked for: a category slug, or "random".
    chosen_category: Mapped[str] = mapped_column(String(64))
    # How many sentences have been revealed (s[0] .. s[revealed-1]); at least 1.
    revealed: Mapped[int] = mapped_column(Integer, default=1)
    guess: Mapped[int | None] = mapped_column(Integer, nullable=True)
    points: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # How sure the player said they were of the guess, in percent (50, 70 or 90); None: not said.
    confidence: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reasons: Mapped[list] = mapped_column(JSON, default=list)
    explanation: Mapped[str] = mapped_column(Text, default="")
    # Up-votes other players gave the explanation (kept with every vote in its transaction).
    upvotes: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Set when a researcher hides the explanation: never shown to players again, marked in exports.
    explanation_hidden_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # How the explanation was entered, as the page's script reported it (app/game/typing.py): only
    # signals for a person to look into, clamped on arrival; None where not reported (no script,
    # or no explanation). Pasted: text was pasted or dropped into the box. Typing: milliseconds
    # from the first keystroke in the box to the answer, and the characters typed in that time.
    explanation_pasted: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    typing_ms: Mapped[int | None] = mapped_column(Integer, nullable=True)
    typed_chars: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Why an answered round earns nothing on the totals and boards (None: it counts), e.g.
    # "truth_seen_device": its text's truth was shown to another identity in the same browser.
    uncounted: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # The worker's study condition when the round was made (app/models/experiments.py); None
    # outside studies with conditions.
    condition: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # The detector hint's level (low / unsure / high) for each sentence of the text, when the
    # worker's condition shows one (app/crowd/hints.py); None otherwise.
    detector_hints: Mapped[list | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    player: Mapped[Player] = relationship()
    example: Mapped[Example] = relationship()
    participant: Mapped[Participant | None] = relationship()
    game_set: Mapped[GameSet | None] = relationship()
    reveals: Mapped[list[Reveal]] = relationship(
        order_by="Reveal.sentence_index", cascade="all, delete-orphan"
    )

    @property
    def answered(self) -> bool:
        return self.guess is not None


class ExplanationVote(db.Model):
    """One player's up-vote for the explanation another player gave in a round."""

    __tablename__ = "explanation_votes"

    round_id: Mapped[int] = mapped_column(
        ForeignKey("rounds.id", ondelete="CASCADE"), primary_key=True
    )
    voter_id: Mapped[int] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    voted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class TruthView(db.Model):
    """The truth of a text was shown: to which player, in which browser, from which address.

    `device` and `address` are keyed hashes (app/leaderboard/integrity.py), never the cookie or
    the address itself. A deleted player's views stay, without the player, so that deleting an
    account does not clear the way for another one.
    """

    __tablename__ = "truth_views"

    id: Mapped[int] = mapped_column(primary_key=True)
    example_id: Mapped[int] = mapped_column(
        ForeignKey("examples.id", ondelete="CASCADE"), index=True
    )
    player_id: Mapped[int | None] = mapped_column(
        ForeignKey("players.id", ondelete="SET NULL"), nullable=True, index=True
    )
    device: Mapped[str | None] = mapped_column(String(32), nullable=True)
    address: Mapped[str | None] = mapped_column(String(32), nullable=True)
    shown_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Reveal(db.Model):
    """The server's time when sentence `sentence_index` was shown in a round."""

    __tablename__ = "reveals"

    round_id: Mapped[int] = mapped_column(
        ForeignKey("rounds.id", ondelete="CASCADE"), primary_key=True
    )
    sentence_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    revealed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


_earlier = aliased(Round)
# The round's place in its set (text 3 of 5), loaded only where asked for (`undefer`), so that
# the query that loads a round for its page brings it along.
Round.set_number = column_property(
    select(func.count(_earlier.id))
    .where(_earlier.set_id == Round.set_id, _earlier.id <= Round.id)
    .correlate_except(_earlier)
    .scalar_subquery(),
    deferred=True,
)

"""Sets of texts: a player's normal sets of five, and the daily challenge everyone shares."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import JSON, Date, ForeignKey, Index, Integer, String, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db
from app.models.base import UTCDateTime, utcnow

NORMAL_SET = "normal"
DAILY_SET = "daily"
# A past day's challenge played again for practice (`day` is the challenge's day): never counted.
PRACTICE_SET = "practice"
# A friend's run of the same texts as a finished normal set (app/game/challenge.py).
CHALLENGE_SET = "challenge"


class GameSet(db.Model):
    """A run of `size` texts with a running score; "daily" sets are one per player per UTC day."""

    __tablename__ = "game_sets"
    __table_args__ = (
        UniqueConstraint("player_id", "day"),
        # At most one unfinished normal set per player: it resumes instead of a second one.
        Index(
            "uq_game_sets_one_open_per_player",
            "player_id",
            unique=True,
            sqlite_where=text("finished_at IS NULL AND kind = 'normal'"),
            postgresql_where=text("finished_at IS NULL AND kind = 'normal'"),
        ),
        Index("ix_game_sets_day_finished", "day", "finished_at"),
        # One run of a challenge per friend.
        UniqueConstraint("player_id", "challenge_of_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    player_id: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"), index=True)
    # "normal", "daily", "practice" or "challenge".
    kind: Mapped[str] = mapped_column(String(16), default="normal")
    size: Mapped[int] = mapped_column(Integer)
    # The challenge's UTC day, for daily and practice sets only.
    day: Mapped[date | None] = mapped_column(Date, nullable=True)
    # Running figures, kept in the transaction of each answer.
    answered: Mapped[int] = mapped_column(Integer, default=0)
    points: Mapped[int] = mapped_column(Integer, default=0)
    exact: Mapped[int] = mapped_column(Integer, default=0)
    # An unguessable id for the public share card of a finished daily set.
    share_token: Mapped[str | None] = mapped_column(String(32), nullable=True, unique=True)
    # An unguessable id for the "challenge a friend" link of a finished normal set.
    challenge_token: Mapped[str | None] = mapped_column(String(32), nullable=True, unique=True)
    # For a friend's challenge set: the finished set whose texts it plays.
    challenge_of_id: Mapped[int | None] = mapped_column(
        ForeignKey("game_sets.id", ondelete="CASCADE"), nullable=True, index=True
    )
    # For a normal set: the difficulty level its next texts are drawn from ("easy", "medium",
    # "hard"; null for any), as the player last chose (app/game/levels.py).
    level: Mapped[str | None] = mapped_column(String(8), nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


class DailyChallenge(db.Model):
    """The texts of one UTC day's challenge, drawn from the held-back pool when first asked for."""

    __tablename__ = "daily_challenges"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    # Example ids in play order.
    example_ids: Mapped[list] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

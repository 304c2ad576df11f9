"""Totals per player, overall and per category, maintained with every answered round.

Leaderboards read these rows instead of summing all rounds. A totals row is `listed` when its
player has a username (guests are ranked against the board but not on it), and `points_counts`
holds how many listed rows have each number of points on each board, so that a rank is a sum over
the distinct point values above the player's rather than a count of every player above.
`standings.record_answer` keeps both in step with each answer, and the events at the end of this
module when a guest signs up or a player is deleted through the ORM.
"""

from __future__ import annotations

import functools
from collections import Counter

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    bindparam,
    delete,
    event,
    false,
    inspect,
    literal,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Mapped, Mapper, mapped_column
from sqlalchemy.sql.dml import Delete, Insert

from app.extensions import db
from app.models.players import Player

# The board of all categories in `points_counts`; a category's board is its id.
OVERALL_BOARD = 0


class TotalsColumns:
    points: Mapped[int] = mapped_column(Integer, default=0)
    rounds: Mapped[int] = mapped_column(Integer, default=0)
    exact: Mapped[int] = mapped_column(Integer, default=0)
    too_early: Mapped[int] = mapped_column(Integer, default=0)
    # Sum of (guess - boundary) over the rounds; divided by `rounds` it is the mean signed distance.
    distance_sum: Mapped[int] = mapped_column(Integer, default=0)
    abs_distance_sum: Mapped[int] = mapped_column(Integer, default=0)
    # The player has a username: the row is on the leaderboard and counted in `points_counts`.
    listed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class PlayerTotal(TotalsColumns, db.Model):
    __tablename__ = "player_totals"
    # A top list walks it backwards from (listed, highest points).
    __table_args__ = (Index("ix_player_totals_board", "listed", "points", "rounds"),)

    player_id: Mapped[int] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )


class CategoryTotal(TotalsColumns, db.Model):
    __tablename__ = "category_totals"
    __table_args__ = (
        Index("ix_category_totals_board", "category_id", "listed", "points", "rounds"),
    )

    player_id: Mapped[int] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id"), primary_key=True)


class PointsCount(db.Model):
    """How many listed totals rows have exactly `points` on a board; no row when none has."""

    __tablename__ = "points_counts"

    # OVERALL_BOARD (player_totals) or a category id (category_totals).
    board: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    points: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    players: Mapped[int] = mapped_column(Integer)


@functools.cache
def _count_statements(dialect: str) -> tuple[Insert, Delete]:
    """Add to one count (creating it), and drop one count if it is 0; built once per dialect."""
    table = PointsCount.__table__
    module = postgresql if dialect == "postgresql" else sqlite
    upsert = module.insert(table)
    upsert = upsert.on_conflict_do_update(
        index_elements=["board", "points"],
        set_={"players": table.c.players + upsert.excluded.players},
    )
    drop = delete(table).where(
        table.c.board == bindparam("board"),
        table.c.points == bindparam("points"),
        table.c.players == 0,
    )
    return upsert, drop


def move_counts(connection: Connection, moves: Counter[tuple[int, int]]) -> None:
    """Add each delta to the count at its (board, points) and drop the counts that reach 0.

    Always in (board, points) order, so concurrent answers lock counts in one order and cannot
    deadlock on them.
    """
    keys = sorted(key for key, delta in moves.items() if delta)
    if not keys:
        return
    upsert, drop = _count_statements(connection.dialect.name)
    connection.execute(
        upsert,
        [
            {"board": board, "points": points, "players": moves[board, points]}
            for board, points in keys
        ],
    )
    emptied = [
        {"board": board, "points": points} for board, points in keys if moves[board, points] < 0
    ]
    if emptied:
        connection.execute(drop, emptied)


def _relist(connection: Connection, player_id: int, listed: bool) -> None:
    """Set `listed` on the player's totals rows and add them to (or take them off) the counts."""
    moves: Counter[tuple[int, int]] = Counter()
    for table, board in (
        (PlayerTotal.__table__, literal(OVERALL_BOARD, Integer)),
        (CategoryTotal.__table__, CategoryTotal.__table__.c.category_id),
    ):
        changed = connection.execute(
            update(table)
            .where(table.c.player_id == player_id, table.c.listed == (not listed))
            .values(listed=listed)
            .returning(board, table.c.points)
        )
        for on_board, points in changed:
            moves[on_board, points] += 1 if listed else -1
    move_counts(connection, moves)


@event.listens_for(Player, "after_update")
def _relist_on_rename(mapper: Mapper, connection: Connection, player: Player) -> None:
    """A guest who signs up joins the boards of their totals in the same flush (and back)."""
    if inspect(player).attrs.username.history.has_changes():
        _relist(connection, player.id, player.username is not None)


@event.listens_for(Player, "before_delete")
def _unlist_before_delete(mapper: Mapper, connection: Connection, player: Player) -> None:
    """The database deletes a deleted player's totals (ON DELETE CASCADE); the counts follow."""
    _relist(connection, player.id, False)

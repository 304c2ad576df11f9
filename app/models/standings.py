"""Totals per player, maintained with every counted round: statistics and leaderboards.

- `PlayerTotal` and `CategoryTotal` are a player's all-time statistics (the profile's figures).
- `BoardTotal` is a player's row on one leaderboard: a period ("all", this week "w2026-11-16", this
  month "m2026-11") and a scope (OVERALL_SCOPE or a category id). It holds the points (the "most
  played" board) and the skill (detection: hit rate on machine texts plus the rate of rightly
  calling human texts human, minus 1, shrunk; see app/leaderboard/skill.py). A row is `listed`
  when its player is on the boards (a username and not unlisted for an implausible record), and
  `ranked` when it is listed and has enough rounds
  for the skill board.
- `BoardCount` holds, per board and measure, how many rows have each value, so that a rank is a
  sum over the distinct values above the player's rather than a count of every player above.

`standings.record_answer` keeps all of them in step with each answer, and the events at the end
of this module when a player joins or leaves the boards (sign-up, unlisting, restoring, deletion).
"""

from __future__ import annotations

import functools
from collections import Counter

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    bindparam,
    delete,
    event,
    false,
    inspect,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Mapped, Mapper, mapped_column
from sqlalchemy.sql.dml import Delete, Insert

from app.extensions import db
from app.leaderboard.skill import MIN_ROUNDS
from app.models.players import Player

# The scope of the boards of all categories; a category's boards have its id as scope.
OVERALL_SCOPE = 0
POINTS = "points"
SKILL = "skill"


class TotalsColumns:
    points: Mapped[int] = mapped_column(Integer, default=0)
    rounds: Mapped[int] = mapped_column(Integer, default=0)
    exact: Mapped[int] = mapped_column(Integer, default=0)
    too_early: Mapped[int] = mapped_column(Integer, default=0)
    # Sum of (guess - boundary) over the rounds; divided by `rounds` it is the mean signed distance.
    distance_sum: Mapped[int] = mapped_column(Integer, default=0)
    abs_distance_sum: Mapped[int] = mapped_column(Integer, default=0)


class PlayerTotal(TotalsColumns, db.Model):
    __tablename__ = "player_totals"

    player_id: Mapped[int] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    # Rounds answered faster than anyone reads (app/leaderboard/fairness.py); more than half of
    # the rounds means the median is too.
    fast_rounds: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class CategoryTotal(TotalsColumns, db.Model):
    __tablename__ = "category_totals"

    player_id: Mapped[int] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id"), primary_key=True)


class BoardTotal(db.Model):
    __tablename__ = "board_totals"
    __table_args__ = (
        # A top list walks these backwards from the highest value of its board.
        Index("ix_board_totals_points", "period", "scope", "listed", "points", "rounds"),
        Index("ix_board_totals_skill", "period", "scope", "ranked", "skill", "rounds"),
        Index("ix_board_totals_player", "player_id"),
    )

    period: Mapped[str] = mapped_column(String(12), primary_key=True)
    scope: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    player_id: Mapped[int] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    points: Mapped[int] = mapped_column(Integer, default=0)
    rounds: Mapped[int] = mapped_column(Integer, default=0)
    exact: Mapped[int] = mapped_column(Integer, default=0)
    # Sum over the rounds of points minus the points "all human" would have scored.
    excess: Mapped[int] = mapped_column(Integer, default=0)
    # Detection counts (app/leaderboard/skill.py): machine texts, their credit in points (0-5
    # each), human texts, and human texts rightly answered "all human".
    machine_rounds: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    machine_credit: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    human_rounds: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    human_right: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The shrunk detection skill in hundredths (app/leaderboard/skill.py).
    skill: Mapped[int] = mapped_column(Integer, default=0)
    listed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    ranked: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class BoardCount(db.Model):
    """How many rows of a board have exactly `value` of a measure; no row when none has.

    Measure "points" counts listed rows by points, measure "skill" ranked rows by skill.
    """

    __tablename__ = "board_counts"

    period: Mapped[str] = mapped_column(String(12), primary_key=True)
    scope: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    measure: Mapped[str] = mapped_column(String(8), primary_key=True)
    value: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    players: Mapped[int] = mapped_column(Integer)


# (period, scope, measure, value) -> change in the number of rows there.
Moves = Counter[tuple[str, int, str, int]]


@functools.cache
def _count_statements(dialect: str) -> tuple[Insert, Delete]:
    """Add to one count (creating it), and drop one count if it is 0; built once per dialect."""
    table = BoardCount.__table__
    module = postgresql if dialect == "postgresql" else sqlite
    upsert = module.insert(table)
    upsert = upsert.on_conflict_do_update(
        index_elements=["period", "scope", "measure", "value"],
        set_={"players": table.c.players + upsert.excluded.players},
    )
    drop = delete(table).where(
        table.c.period == bindparam("period"),
        table.c.scope == bindparam("scope"),
        table.c.measure == bindparam("measure"),
        table.c.value == bindparam("value"),
        table.c.players == 0,
    )
    return upsert, drop


def move_counts(connection: Connection, moves: Moves) -> None:
    """Add each delta to its count and drop the counts that reach 0.

    Always in key order, so concurrent transactions lock counts in one order and cannot deadlock,
    provided each calls this once: a second call would take its own keys in order again, after
    holding the first call's, and a lower key taken late can wait on a transaction that waits on
    this one. A transaction with several kinds of moves (an answer that also unlists its player)
    adds them up in one `Moves` first (`relist_moves`) and calls this once.
    """
    keys = sorted(key for key, delta in moves.items() if delta)
    if not keys:
        return
    upsert, drop = _count_statements(connection.dialect.name)
    names = ("period", "scope", "measure", "value")
    connection.execute(
        upsert, [{**dict(zip(names, key, strict=True)), "players": moves[key]} for key in keys]
    )
    emptied = [dict(zip(names, key, strict=True)) for key in keys if moves[key] < 0]
    if emptied:
        connection.execute(drop, emptied)


def count_row(moves: Moves, row, listed: bool, ranked: bool, sign: int) -> None:
    """Add (sign=1) or take away (sign=-1) one board row from the counts it belongs in."""
    if listed:
        moves[row.period, row.scope, POINTS, row.points] += sign
    if ranked:
        moves[row.period, row.scope, SKILL, row.skill] += sign


def relist(connection: Connection, player_id: int, listed: bool) -> None:
    """Set `listed` (and `ranked`) on the player's board rows and move the counts with them."""
    move_counts(connection, relist_moves(connection, player_id, listed))


def relist_moves(connection: Connection, player_id: int, listed: bool) -> Moves:
    """Set `listed` (and `ranked`) on the player's board rows; return the counts' moves (for the
    caller to make, in its one `move_counts` of the transaction)."""
    table = BoardTotal.__table__
    changed = connection.execute(
        update(table)
        .where(table.c.player_id == player_id, table.c.listed == (not listed))
        .values(listed=listed, ranked=(table.c.rounds >= MIN_ROUNDS) if listed else false())
        .returning(table.c.period, table.c.scope, table.c.points, table.c.skill, table.c.rounds)
    ).all()
    moves: Moves = Counter()
    for row in changed:
        count_row(moves, row, True, row.rounds >= MIN_ROUNDS, 1 if listed else -1)
    return moves


@event.listens_for(Player, "after_update")
def _relist_on_change(mapper: Mapper, connection: Connection, player: Player) -> None:
    """A guest who signs up, or a player unlisted or restored, moves on the boards in the same
    flush."""
    state = inspect(player).attrs
    if state.username.history.has_changes() or state.unlisted_at.history.has_changes():
        relist(connection, player.id, player.on_boards)


@event.listens_for(Player, "before_delete")
def _unlist_before_delete(mapper: Mapper, connection: Connection, player: Player) -> None:
    """The database deletes a deleted player's rows (ON DELETE CASCADE); the counts follow."""
    relist(connection, player.id, False)

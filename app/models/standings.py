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
- `BoardCountDelta` holds the changes to those counts not folded into them yet: every writer
  appends its changes there (`move_counts`), and `fold_counts` adds them into `BoardCount` from
  time to time. A count is always `BoardCount.players` plus the deltas of its key.

Why two tables: rows at popular values (this week's low scores) are shared by many players, and
an answer that updated them in place held their row locks until its commit, so concurrent
answers queued on each other (and two writers taking shared counts in different orders could
deadlock). An insert into an append-only table takes no lock another writer waits on. The fold is
the only writer of `BoardCount`, one at a time.

`recording.record_answer` keeps all of them in step with each answer, and the events at the end
of this module when a player joins or leaves the boards (sign-up, unlisting, restoring, deletion).
"""

from __future__ import annotations

import functools
from collections import Counter

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    bindparam,
    delete,
    event,
    false,
    func,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Mapped, Mapper, mapped_column
from sqlalchemy.sql.dml import Delete, Insert

from app.extensions import db
from app.models.players import Player

# A player is ranked on a skill board from this many rounds on it (app/leaderboard/skill.py).
MIN_ROUNDS = 10

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


class BoardCountDelta(db.Model):
    """A change to one count of `BoardCount` (`players` rows more, or fewer when negative) that
    `fold_counts` has not added into it yet. Rows are only ever inserted, and deleted by the fold.
    """

    __tablename__ = "board_count_deltas"
    __table_args__ = (
        # A rank reads the deltas of one board above a value, as it reads the counts.
        Index("ix_board_count_deltas_key", "period", "scope", "measure", "value"),
    )

    # 64 bits on PostgreSQL (an answer appends up to 24 rows); SQLite's INTEGER is 64 bits.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True
    )
    period: Mapped[str] = mapped_column(String(12))
    scope: Mapped[int] = mapped_column(Integer)
    measure: Mapped[str] = mapped_column(String(8))
    value: Mapped[int] = mapped_column(Integer)
    players: Mapped[int] = mapped_column(Integer)


# (period, scope, measure, value) -> change in the number of rows there.
Moves = Counter[tuple[str, int, str, int]]

_KEY = ("period", "scope", "measure", "value")
# PostgreSQL: the array parameter of each column of the deltas (`_delta_insert`).
_ARRAYS = {
    "period": "periods",
    "scope": "scopes",
    "measure": "measures",
    "value": "values",
    "players": "changes",
}

# A write folds the deltas after its commit when one of the ids its deltas took is a multiple of
# this (`fold_due`): about every 50th answer (an answer appends 12 to 24 deltas). The app reads
# BOARD_FOLD_EVERY; this is its default.
FOLD_EVERY = 1024

# The key of the PostgreSQL advisory lock a fold holds until its commit ("roftfold" in ASCII).
FOLD_LOCK = 0x726F6674666F6C64


@functools.cache
def _delta_insert(dialect: str) -> Insert:
    """Append deltas, returning their ids; built once per dialect.

    On PostgreSQL one statement takes all the deltas of a transaction as five arrays (`unnest`
    pairs them up), so it is the same short statement whatever their number, parsed once per
    process; SQLAlchemy sends SQLite's rows as one multi-row INSERT.
    """
    table = BoardCountDelta.__table__
    names = (*_KEY, "players")
    if dialect == "postgresql":
        moves = (
            func.unnest(
                *(
                    bindparam(_ARRAYS[name], type_=postgresql.ARRAY(table.c[name].type))
                    for name in names
                )
            )
            .table_valued(*names)
            .render_derived(name="moves")
        )
        stmt = postgresql.insert(table).from_select(
            list(names), select(*(moves.c[name] for name in names))
        )
    else:
        stmt = sqlite.insert(table)
    return stmt.returning(table.c.id)


def move_counts(connection: Connection, moves: Moves, fold_every: int = FOLD_EVERY) -> bool:
    """Append each nonzero change of a count to `board_count_deltas`, in one statement, in the
    caller's transaction; return whether a fold is due after its commit (`fold_due`).

    An insert locks no row that another writer waits for (each new row is its own), so
    concurrent answers, sign-ups and deletions no longer queue on the counts they share, and
    cannot deadlock there whatever order they move them in. A transaction that moves counts for
    several reasons adds them up in one `Moves` first where it can (`relist_moves`): one
    statement, and changes that cancel out are never written. (On PostgreSQL an answer appends
    its own in its one statement, app/leaderboard/standings.py `_answer_statement`.)
    """
    keys = sorted(key for key, delta in moves.items() if delta)
    if not keys:
        return False
    dialect = connection.dialect.name
    if dialect == "postgresql":
        columns = [*zip(*keys, strict=True), [moves[key] for key in keys]]
        parameters: dict | list[dict] = {
            _ARRAYS[name]: list(column) for name, column in zip(_ARRAYS, columns, strict=True)
        }
    else:
        parameters = [{**dict(zip(_KEY, key, strict=True)), "players": moves[key]} for key in keys]
    ids = connection.execute(_delta_insert(dialect), parameters).scalars().all()
    return fold_due(ids, fold_every)


def fold_due(ids: list[int], fold_every: int) -> bool:
    """Whether the write that took these delta ids should fold after its commit: one of them is
    a multiple of `fold_every`. Every id goes to one transaction, so concurrent writers do not
    fold at once for the same multiple; one rolled back (its ids are lost) leaves the next fold
    to the next multiple."""
    return any(delta_id % fold_every == 0 for delta_id in ids)


@functools.cache
def _fold_statements(dialect: str) -> tuple[Delete, Insert, Delete]:
    """Take the deltas, add to the counts (creating them), drop counts at 0; built once per
    dialect. PostgreSQL takes and adds in `_FOLD` instead of the first two."""
    deltas, counts = BoardCountDelta.__table__, BoardCount.__table__
    take = delete(deltas).returning(*(deltas.c[name] for name in (*_KEY, "players")))
    module = postgresql if dialect == "postgresql" else sqlite
    upsert = module.insert(counts)
    upsert = upsert.on_conflict_do_update(
        index_elements=list(_KEY),
        set_={"players": counts.c.players + upsert.excluded.players},
    )
    drop = delete(counts).where(
        *(counts.c[name] == bindparam(name) for name in _KEY), counts.c.players == 0
    )
    return take, upsert, drop


# PostgreSQL: take the deltas, add their sums per count into `board_counts` and return how many
# were taken and the counts that reached 0, in one statement (a fold of some 1,000 deltas cost
# 28 ms as a DELETE and one upsert per count, in one round trip each). Folds take turns: the
# advisory lock is tried once, before the first row (an InitPlan), and held until the fold's
# commit; a second fold meanwhile takes nothing. The sums are added in key order.
_FOLD = text(
    "WITH taken AS ("
    " DELETE FROM board_count_deltas WHERE (SELECT pg_try_advisory_xact_lock(:lock))"
    " RETURNING period, scope, measure, value, players),"
    " sums AS ("
    " SELECT period, scope, measure, value, sum(players) AS players FROM taken"
    " GROUP BY period, scope, measure, value HAVING sum(players) <> 0"
    " ORDER BY period, scope, measure, value),"
    " added AS ("
    " INSERT INTO board_counts (period, scope, measure, value, players)"
    " SELECT period, scope, measure, value, players FROM sums"
    " ON CONFLICT (period, scope, measure, value)"
    " DO UPDATE SET players = board_counts.players + excluded.players"
    " RETURNING period, scope, measure, value, players)"
    " SELECT (SELECT count(*) FROM taken) AS taken,"
    " added.period, added.scope, added.measure, added.value"
    " FROM (SELECT 1) AS one LEFT JOIN added ON added.players = 0"
).bindparams(bindparam("lock", FOLD_LOCK, type_=BigInteger()))


def fold_counts(connection: Connection) -> int:
    """Add the committed deltas into `board_counts` and delete them, dropping the counts that
    reach 0; return how many deltas were folded (0 also when another fold is running). The
    caller commits, at once: the counts' rows stay locked until then.

    Exact at every moment: the deltas taken and the counts they change commit together, so a
    reader (one statement, one snapshot) sees each change either as a delta or inside its count,
    never both or neither.

    Under READ COMMITTED the DELETE sees the deltas committed when it started. Those of writers
    still open are not seen: they stay, and a later fold takes them; until then a reader does not
    see them either, nor the board rows written with them in the same transaction. A delta
    deleted by another fold after this one's snapshot was taken is skipped (PostgreSQL finds it
    gone and does not return it), so none is added twice. On PostgreSQL folds also take turns
    (an advisory lock; a second fold takes nothing and leaves the deltas to the next), so two
    never wait on each other's count rows. SQLite has one writer at a time anyway.
    """
    take, upsert, drop = _fold_statements(connection.dialect.name)
    if connection.dialect.name == "postgresql":
        rows = connection.execute(_FOLD).all()
        emptied = [dict(zip(_KEY, row[1:], strict=True)) for row in rows if row.period]
        if emptied:
            connection.execute(drop, emptied)
        return rows[0].taken
    moves: Moves = Counter()
    taken = connection.execute(take).all()
    for row in taken:
        moves[row.period, row.scope, row.measure, row.value] += row.players
    keys = sorted(key for key, delta in moves.items() if delta)
    if keys:
        connection.execute(
            upsert,
            [{**dict(zip(_KEY, key, strict=True)), "players": moves[key]} for key in keys],
        )
        emptied = [dict(zip(_KEY, key, strict=True)) for key in keys if moves[key] < 0]
        if emptied:
            connection.execute(drop, emptied)
    return len(taken)


def count_row(moves: Moves, row, listed: bool, ranked: bool, sign: int) -> None:
    """Add (sign=1) or take away (sign=-1) one board row from the counts it belongs in."""
    if listed:
        moves[row.period, row.scope, POINTS, row.points] += sign
    if ranked:
        moves[row.period, row.scope, SKILL, row.skill] += sign


def relist(connection: Connection, player_id: int, listed: bool) -> None:
    """Set `listed` (and `ranked`) on the player's board rows and move the counts with them.

    The deltas wait for the next fold an answer (or `flask boards fold`) starts."""
    move_counts(connection, relist_moves(connection, player_id, listed))


def relist_moves(connection: Connection, player_id: int, listed: bool) -> Moves:
    """Set `listed` (and `ranked`) on the player's board rows; return the counts' moves (for the
    caller to add to its own and make in one `move_counts`)."""
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

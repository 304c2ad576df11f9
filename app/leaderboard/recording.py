"""Recording answers in the leaderboards' maintained totals, and folding the boards' counts.

`record_answer` adds each counted answer to the player's statistics and board rows, and appends
the changes of the boards' counts to their deltas (app/models/standings.py); `fold_if_due`, after
the answer's commit, folds the deltas into the counts when the answer made it due, and `fold`
does it at once (`flask boards fold`). Reading the boards is app.leaderboard.standings.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from flask import current_app
from sqlalchemy import (
    BigInteger,
    Select,
    TextClause,
    bindparam,
    case,
    cast,
    event,
    select,
    text,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert

from app.extensions import db
from app.leaderboard import skill as skill_rule
from app.models import BoardTotal, Player, PlayerTotal
from app.models.base import utcnow
from app.models.standings import (
    FOLD_EVERY,
    OVERALL_SCOPE,
    POINTS,
    SKILL,
    CategoryTotal,
    Moves,
    count_row,
    fold_counts,
    move_counts,
    relist_moves,
)
from roftcore.boundary import Verdict

STAT_INCREMENTS = ("points", "rounds", "exact", "too_early", "distance_sum", "abs_distance_sum")
PLAYER_INCREMENTS = (*STAT_INCREMENTS, "fast_rounds")
DETECTION = ("machine_rounds", "machine_credit", "human_rounds", "human_right")
BOARD_INCREMENTS = ("points", "rounds", "exact", "excess", *DETECTION)


def _skill_sql(machine, credit, human, right):
    """`skill.detection_skill` in SQL, in 64-bit integers (the products pass 2**31)."""
    numerator, denominator = skill_rule.fraction(
        cast(machine, BigInteger),
        cast(credit, BigInteger),
        cast(human, BigInteger),
        right,
        lambda count: case((count == 0, 1), else_=0),
    )
    # `//` is SQL integer division, which truncates toward zero on both databases.
    return numerator // denominator


@functools.cache
def _stats_upsert(model: type[PlayerTotal | CategoryTotal]) -> Insert:
    """SQLite: add one round to a statistics row (creating it); built once per table."""
    table = model.__table__
    stmt = sqlite.insert(table)
    increments = PLAYER_INCREMENTS if model is PlayerTotal else STAT_INCREMENTS
    stmt = stmt.on_conflict_do_update(
        index_elements=[column.name for column in table.primary_key],
        set_={name: table.c[name] + stmt.excluded[name] for name in increments},
    )
    if model is PlayerTotal:
        stmt = stmt.returning(table.c.rounds, table.c.exact, table.c.fast_rounds)
    return stmt


@functools.cache
def _board_upsert() -> Insert:
    """SQLite: add one round to a board row, creating it listed as given; the row's new values
    come back. The rows of an answer go one by one (executemany); PostgreSQL takes them in
    `_answer_statement`. Built once."""
    table = BoardTotal.__table__
    stmt = sqlite.insert(table)
    rounds = table.c.rounds + stmt.excluded.rounds
    set_ = {name: table.c[name] + stmt.excluded[name] for name in BOARD_INCREMENTS}
    set_["skill"] = _skill_sql(*(set_[name] for name in DETECTION))
    set_["ranked"] = table.c.listed & (rounds >= skill_rule.MIN_ROUNDS)
    return stmt.on_conflict_do_update(
        index_elements=["period", "scope", "player_id"], set_=set_
    ).returning(
        table.c.period,
        table.c.scope,
        table.c.points,
        table.c.rounds,
        table.c.excess,
        *(table.c[name] for name in DETECTION),
        table.c.skill,
        table.c.listed,
        table.c.ranked,
    )


class _SqlTerm:
    """An SQL expression as text, for `skill.fraction` to build the skill formula from short
    names (`_answer_statement`): the same formula as `_skill_sql`, a fraction of the length."""

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def _join(self, operator: str, other: object, reverse: bool = False) -> _SqlTerm:
        right = other.sql if isinstance(other, _SqlTerm) else str(other)
        left, right = (right, self.sql) if reverse else (self.sql, right)
        return _SqlTerm(f"({left}{operator}{right})")

    def __add__(self, other: object) -> _SqlTerm:
        return self._join("+", other)

    def __radd__(self, other: object) -> _SqlTerm:
        return self._join("+", other, reverse=True)

    def __sub__(self, other: object) -> _SqlTerm:
        return self._join("-", other)

    def __rsub__(self, other: object) -> _SqlTerm:
        return self._join("-", other, reverse=True)

    def __mul__(self, other: object) -> _SqlTerm:
        return self._join("*", other)

    def __rmul__(self, other: object) -> _SqlTerm:
        return self._join("*", other, reverse=True)


def _skill_of(machine: str, credit: str, human: str, right: str) -> str:
    """`skill.detection_skill` of four SQL expressions, in 64-bit integers: a scalar subquery
    that names them once (`/` truncates toward zero, as `detection_skill` does)."""
    numerator, denominator = skill_rule.fraction(
        *(_SqlTerm(name) for name in "mchr"),
        lambda count: _SqlTerm(f"({count.sql}=0)::int"),
    )
    return (
        f"(SELECT {numerator.sql}/{denominator.sql} FROM (SELECT ({machine})::int8 AS m,"
        f" ({credit})::int8 AS c, ({human})::int8 AS h, ({right})::int8 AS r) AS v)"
    )


def _stats_upsert_sql(table: str, keys: tuple[str, ...], increments: tuple[str, ...]) -> str:
    names = (*keys, *increments)
    return (
        f"INSERT INTO {table} AS t ({', '.join(names)})"
        f" VALUES ({', '.join(f':{name}' for name in names)})"
        f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
        + ", ".join(f"{name}=t.{name}+excluded.{name}" for name in increments)
    )


@functools.cache
def _answer_statement() -> TextClause:
    """On PostgreSQL, everything `record_answer` writes, in one statement (one round trip
    instead of three): both statistics upserts, the six board rows (their periods and scopes as
    two arrays that `unnest` pairs), and the counts' deltas the rows' moves make, appended in key
    order with the changes that cancel out left out, as `move_counts` does. Returns the player's
    all-time counts, whether they are on the boards, whether a board row's `listed` disagrees
    with that (`misfiled`), and whether a delta took an id that makes a fold due.

    The deltas come from the rows the upsert returns: a row's values before this answer are its
    values now less what the answer added, so they are exact whatever a concurrent writer did
    before (the upsert reads the row's latest version, locked). The data-modifying WITHs all run,
    read or not, from one snapshot. Built once; short enough (under 4,096 characters and 50
    parameters) for psycopg to keep it parsed."""
    listed = "(SELECT on_boards FROM listing)"
    detection_set = ", ".join(f"{name}=b.{name}+excluded.{name}" for name in DETECTION)
    after = _skill_of(*(f"b.{name}+excluded.{name}" for name in DETECTION))
    before = _skill_of(*(f"{name}-:{name}" for name in DETECTION))
    moves = " UNION ALL ".join(
        (
            f"SELECT period, scope, '{POINTS}' AS measure, points AS value, 1 AS players"
            " FROM boards WHERE listed",
            f"SELECT period, scope, '{SKILL}', skill, 1 FROM boards WHERE ranked",
            f"SELECT period, scope, '{POINTS}', points-:points, -1 FROM boards"
            " WHERE listed AND rounds>1",
            f"SELECT period, scope, '{SKILL}', {before}, -1 FROM boards"
            f" WHERE listed AND rounds>{skill_rule.MIN_ROUNDS}",
        )
    )
    key = "period, scope, measure, value"
    sql = (
        f"WITH mine AS ({_stats_upsert_sql('player_totals', ('player_id',), PLAYER_INCREMENTS)}"
        " RETURNING rounds, exact, fast_rounds),"
        " in_category AS ("
        f"{_stats_upsert_sql('category_totals', ('player_id', 'category_id'), STAT_INCREMENTS)}),"
        " listing AS (SELECT coalesce((SELECT username IS NOT NULL AND unlisted_at IS NULL"
        " FROM players WHERE id=:player_id), false) AS on_boards),"
        " boards AS (INSERT INTO board_totals AS b (period, scope, player_id, points, rounds,"
        f" exact, excess, {', '.join(DETECTION)}, skill, listed, ranked)"
        " SELECT k.period, k.scope, :player_id, :points, 1, :exact, :excess,"
        f" {', '.join(f':{name}' for name in DETECTION)}, :skill, {listed}, false"
        " FROM unnest(CAST(:periods AS text[]), CAST(:scopes AS int[])) AS k(period, scope)"
        " ON CONFLICT (period, scope, player_id) DO UPDATE SET points=b.points+excluded.points,"
        " rounds=b.rounds+excluded.rounds, exact=b.exact+excluded.exact,"
        f" excess=b.excess+excluded.excess, {detection_set}, skill={after},"
        f" ranked=b.listed AND b.rounds+excluded.rounds>={skill_rule.MIN_ROUNDS}"
        " RETURNING period, scope, points, rounds, skill, listed, ranked,"
        f" {', '.join(DETECTION)}),"
        f" moves AS ({moves}),"
        f" deltas AS (INSERT INTO board_count_deltas ({key}, players)"
        f" SELECT {key}, sum(players) FROM moves GROUP BY {key} HAVING sum(players)<>0"
        f" ORDER BY {key} RETURNING id)"
        " SELECT mine.rounds, mine.exact, mine.fast_rounds, listing.on_boards,"
        " coalesce((SELECT bool_or(b.listed<>l.on_boards) FROM boards b, listing l), false)"
        " AS misfiled,"
        " coalesce((SELECT bool_or(mod(id, :fold_every)=0) FROM deltas), false) AS fold_due"
        " FROM mine, listing"
    )
    return text(sql)


@functools.cache
def _on_boards_query() -> Select:
    return select(Player.username.is_not(None) & Player.unlisted_at.is_(None)).where(
        Player.id == bindparam("player_id")
    )


@dataclass(frozen=True)
class PlayerStats:
    """The player's all-time counts after an answer, for the integrity review."""

    rounds: int
    exact: int
    fast_rounds: int


def _round_stats(verdict: Verdict) -> dict[str, int]:
    """What one round adds to each of STAT_INCREMENTS."""
    return {
        "points": verdict.points,
        "rounds": 1,
        "exact": int(verdict.exact),
        "too_early": int(verdict.too_early),
        "distance_sum": verdict.distance,
        "abs_distance_sum": abs(verdict.distance),
    }


def record_answer(
    player_id: int,
    category_id: int,
    verdict: Verdict,
    excess: int = 0,
    fast: bool = False,
    when: datetime | None = None,
    detection: skill_rule.Detection = skill_rule.NO_DETECTION,
    review: Callable[[PlayerStats], bool] | None = None,
) -> PlayerStats:
    """Add one counted round to the player's statistics and to their six boards (no commit).

    `excess` is the round's points minus what "all human" would have scored, `fast` whether it
    was answered faster than reading speed, `when` the answer's time (it picks the week and month),
    `detection` what the round adds to the detection counts (`skill.detection`), `review`
    whether the player's record, with this round, takes them off the boards (the caller then
    records why; the rows and counts are moved here).

    The counts' changes are appended to the deltas, locking no shared row: on PostgreSQL by the
    answer's one statement (`_answer_statement`), on SQLite in one `move_counts`; those of taking
    the player off the boards (or putting misfiled rows right), rare, in one more `move_counts`
    on PostgreSQL, with the answer's on SQLite. When that makes a fold due, the caller runs
    `fold_if_due` after its commit.
    """
    when = when or utcnow()
    stats = _round_stats(verdict)
    periods = skill_rule.period_keys(when)
    fold_every = current_app.config.get("BOARD_FOLD_EVERY", FOLD_EVERY)
    # The statements below go to the connection: pending ORM changes first, as autoflush would.
    db.session.flush()
    connection = db.session.connection()
    if connection.dialect.name == "postgresql":
        mine = connection.execute(
            _answer_statement(),
            {
                "player_id": player_id,
                "category_id": category_id,
                **stats,
                "fast_rounds": int(fast),
                "excess": excess,
                **dict(zip(DETECTION, detection, strict=True)),
                "skill": skill_rule.detection_skill(*detection),
                "periods": [period for period in periods for _ in range(2)],
                "scopes": [OVERALL_SCOPE, category_id] * len(periods),
                "fold_every": fold_every,
            },
        ).one()
        on_boards, misfiled, fold_due = mine.on_boards, mine.misfiled, mine.fold_due
        moves: Moves = Counter()
    else:
        mine = connection.execute(
            _stats_upsert(PlayerTotal), {"player_id": player_id, **stats, "fast_rounds": int(fast)}
        ).one()
        connection.execute(
            _stats_upsert(CategoryTotal),
            {"player_id": player_id, "category_id": category_id, **stats},
        )
        on_boards = bool(connection.scalar(_on_boards_query(), {"player_id": player_id}))
        moves, misfiled = _board_moves(
            connection, player_id, category_id, verdict, excess, detection, periods, on_boards
        )
        fold_due = False
    result = PlayerStats(mine.rounds, mine.exact, mine.fast_rounds)
    off = review is not None and review(result)
    if misfiled or (off and on_boards):
        # Off the boards with this answer, or the player joined or left them without the ORM
        # event (a bulk UPDATE, or a sign-up racing this answer): put the rows right now.
        moves.update(relist_moves(connection, player_id, on_boards and not off))
    if move_counts(connection, moves, fold_every) or fold_due:
        db.session.info[_FOLD_DUE] = True
    # No row of this answer was on a board, before or after: no top list changed.
    info = db.session.info
    info[BOARDS_MOVED] = bool(info.get(BOARDS_MOVED) or on_boards or misfiled)
    return result


def _board_moves(
    connection: Connection,
    player_id: int,
    category_id: int,
    verdict: Verdict,
    excess: int,
    detection: skill_rule.Detection,
    periods: tuple[str, ...],
    on_boards: bool,
) -> tuple[Moves, bool]:
    """SQLite: add the round to the player's six board rows; return the counts' moves and
    whether a row's `listed` disagrees with `on_boards`."""
    added = dict(zip(DETECTION, detection, strict=True))
    values = {
        "player_id": player_id,
        "points": verdict.points,
        "rounds": 1,
        "exact": int(verdict.exact),
        "excess": excess,
        **added,
        "skill": skill_rule.detection_skill(*detection),
        # A new row has one round, fewer than MIN_ROUNDS: not ranked yet.
        "listed": on_boards,
        "ranked": False,
    }
    rows = connection.execute(
        _board_upsert(),
        [
            values | {"period": period, "scope": scope}
            for period in periods
            for scope in (OVERALL_SCOPE, category_id)
        ],
    ).all()
    moves: Moves = Counter()
    misfiled = False
    for row in rows:
        before_rounds = row.rounds - 1
        if before_rounds:
            before = _Before(
                row.period,
                row.scope,
                row.points - verdict.points,
                skill_rule.detection_skill(
                    *(getattr(row, name) - added[name] for name in DETECTION)
                ),
            )
            count_row(
                moves, before, row.listed, row.listed and before_rounds >= skill_rule.MIN_ROUNDS, -1
            )
        count_row(moves, row, row.listed, row.ranked, 1)
        misfiled |= row.listed != on_boards
    return moves, misfiled


# The session's flag that its transaction made a fold of the counts due (`fold_if_due`).
_FOLD_DUE = "roft_fold_due"
# The session's note of whether its answers moved a row that is (or was) on a board: False
# when every row they changed was off the boards, so that no top list changed (`invalidate`).
# It speaks of the transaction just committed only: the next one, or a rollback, drops it.
BOARDS_MOVED = "roft_boards_moved"


@event.listens_for(Session, "after_begin")
@event.listens_for(Session, "after_rollback")
def _forget_boards_moved(session: Session, *args: object) -> None:
    session.info.pop(BOARDS_MOVED, None)


def fold_if_due() -> None:
    """After the commit of an answer: fold the counts' deltas if the answer made it due.

    Never raises: the answer is stored already, and a fold that failed leaves the deltas for
    the next one (the ranks stay exact either way); the error is logged.
    """
    if db.session.info.pop(_FOLD_DUE, False):
        fold()


def fold() -> int | None:
    """Add the deltas of the boards' counts into the counts, in a transaction of its own on a
    connection of its own (the request's session and what it has loaded are left alone); return
    how many were folded, or None when the fold failed (logged, not raised)."""
    try:
        with db.engine.begin() as connection:
            return fold_counts(connection)
    except Exception:
        current_app.logger.exception("folding the leaderboard counts failed; the next fold retries")
        return None


@dataclass(frozen=True)
class _Before:
    """A board row as it was before this answer: the counts it leaves."""

    period: str
    scope: int
    points: int
    skill: int

"""Leaderboards from maintained totals: by skill and by points ("most played"), for this week,
this month and all time, overall and per category.

`record_answer` adds each counted answer to the totals: the game service calls it (through
app/leaderboard/integrity.py) inside the transaction that stores a counted answer. `invalidate`
is the only cache invalidation point, called by that service after commit, followed by
`fold_if_due`.

Only listed rows are on a points board and only ranked rows (listed, with enough rounds) on a
skill board: a top list is a short walk down a board index, joining `players` for the 50 names
only. A rank adds up the players at values above the player's: `board_counts` (one row per
distinct value) plus `board_count_deltas`, the changes answers and sign-ups appended since the
last fold (app/models/standings.py); the gap to the next player is the smallest value above
whose players, counts and deltas together, are more than 0. Both are read in one statement, so
from one snapshot, and are exact whether or not a fold has run: a fold moves deltas into the
counts in one transaction. An answer folds after its commit when its deltas took an id that is
a multiple of `BOARD_FOLD_EVERY` (`fold_if_due`), so that the deltas a rank reads stay few;
`flask boards fold` does the same by hand.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time

from flask import current_app
from sqlalchemy import (
    BigInteger,
    Select,
    TextClause,
    bindparam,
    case,
    cast,
    event,
    func,
    select,
    text,
    true,
    union_all,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert

from app.extensions import cache, db
from app.leaderboard import skill as skill_rule
from app.models import BoardTotal, Category, Player, PlayerTotal
from app.models.base import utcnow
from app.models.standings import (
    FOLD_EVERY,
    OVERALL_SCOPE,
    POINTS,
    SKILL,
    BoardCount,
    BoardCountDelta,
    CategoryTotal,
    Moves,
    count_row,
    fold_counts,
    move_counts,
    relist_moves,
)
from roftcore.boundary import Verdict

TOP_N = 50
OVERALL = "all"
MEASURES = (SKILL, POINTS)


@dataclass(frozen=True)
class Board:
    """One leaderboard: a measure ("skill" or "points"), a period and a scope."""

    measure: str = SKILL
    period: str = "all"  # "week", "month" or "all"
    category: Category | None = None

    def key(self, when: datetime | None = None) -> str:
        return skill_rule.period_key(self.period, when or utcnow())

    @property
    def scope(self) -> int:
        return self.category.id if self.category else OVERALL_SCOPE

    @property
    def slug(self) -> str:
        return self.category.slug if self.category else OVERALL


@dataclass(frozen=True)
class Standing:
    rank: int
    player_id: int
    name: str
    points: int
    rounds: int
    exact: int
    skill: int = 0  # detection skill in hundredths, shrunk (app/leaderboard/skill.py)
    # On the board (skill boards: listed with enough rounds; points boards: listed).
    on_board: bool = True
    # How much more of the measure would pass the next player above; None at the top.
    gap: int | None = None
    # Whether the player's profile is public (the board links only those).
    public: bool = False

    @property
    def mean_points(self) -> float:
        return self.points / self.rounds if self.rounds else 0.0

    @property
    def skill_points(self) -> float:
        return self.skill / skill_rule.SCALE

    @property
    def rounds_to_rank(self) -> int:
        return max(skill_rule.MIN_ROUNDS - self.rounds, 0)


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


# The columns of a board row an answer inserts, in order, after its period and scope.
_BOARD_VALUES = ("player_id", *BOARD_INCREMENTS, "skill", "listed", "ranked")


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
    stats = {
        "points": verdict.points,
        "rounds": 1,
        "exact": int(verdict.exact),
        "too_early": int(verdict.too_early),
        "distance_sum": verdict.distance,
        "abs_distance_sum": abs(verdict.distance),
    }
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
    info[_BOARDS_MOVED] = bool(info.get(_BOARDS_MOVED) or on_boards or misfiled)
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
_BOARDS_MOVED = "roft_boards_moved"


@event.listens_for(Session, "after_begin")
@event.listens_for(Session, "after_rollback")
def _forget_boards_moved(session: Session, *args: object) -> None:
    session.info.pop(_BOARDS_MOVED, None)


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


# -- cache -------------------------------------------------------------------------------------


def _cache_key(board: Board, period_key: str) -> str:
    return f"standings:{board.measure}:{period_key}:{board.slug}"


def _keys_of(slugs: list[str], when: datetime) -> list[str]:
    return [
        f"standings:{measure}:{skill_rule.period_key(period, when)}:{slug}"
        for measure in MEASURES
        for period in skill_rule.PERIODS
        for slug in slugs
    ]


@functools.lru_cache(maxsize=64)
def _answer_keys(category_slug: str, day: date) -> tuple[str, ...]:
    """`_keys_of` the overall boards and a category's on a day (the periods' keys depend on the
    day only); kept for the days and categories answers come in."""
    return tuple(_keys_of([OVERALL, category_slug], datetime.combine(day, time())))


def invalidate(category_slug: str, when: datetime | None = None) -> None:
    """Forget the cached top lists a new answer in this category can change.

    After answers that only moved rows off every board (a guest's, an unlisted player's:
    `record_answer` notes it in the session) no top list can have changed, and none is
    forgotten; any other call forgets them."""
    if db.session.info.pop(_BOARDS_MOVED, True):
        cache.delete_many(*_answer_keys(category_slug, (when or utcnow()).date()))


def forget_boards_of(player_id: int) -> None:
    """Forget the cached top lists the player is on (sign-up, unlisting, restoring, deletion)."""
    slugs = list(
        db.session.scalars(
            select(Category.slug)
            .join(BoardTotal, BoardTotal.scope == Category.id)
            .where(BoardTotal.player_id == player_id, BoardTotal.period == skill_rule.ALL_TIME)
        )
    )
    cache.delete_many(*_keys_of([OVERALL, *slugs], utcnow()))


# -- reads -------------------------------------------------------------------------------------
# The read queries are built once per measure (Core, bound parameters): building and ORM-compiling
# them on every call cost more than running them.

_ON_BOARD = {POINTS: "listed", SKILL: "ranked"}


@functools.cache
def _top_query(measure: str) -> Select:
    totals, players = BoardTotal.__table__, Player.__table__
    if measure == POINTS:
        order = (totals.c.points.desc(), totals.c.rounds.asc(), totals.c.player_id.asc())
    else:
        order = (totals.c.skill.desc(), totals.c.rounds.desc(), totals.c.player_id.asc())
    return (
        select(
            players.c.id,
            players.c.username,
            players.c.profile_public,
            totals.c.points,
            totals.c.rounds,
            totals.c.exact,
            totals.c.skill,
        )
        .join_from(totals, players, players.c.id == totals.c.player_id)
        .where(
            totals.c.period == bindparam("period"),
            totals.c.scope == bindparam("scope"),
            totals.c[_ON_BOARD[measure]] == true(),
        )
        .order_by(*order)
        .limit(bindparam("limit"))
    )


@functools.cache
def _standing_query(measure: str) -> Select:
    """The player's row, how many players are above it and the smallest value above it that
    someone has, from the counts plus the deltas not folded into them yet (one statement, so one
    snapshot: a fold commits its counts and deletes its deltas together, and is seen whole or not
    at all)."""
    totals = BoardTotal.__table__
    value = totals.c[measure]

    def above_mine(table):
        return (
            table.c.period == totals.c.period,
            table.c.scope == totals.c.scope,
            table.c.measure == measure,
            table.c.value > value,
        )

    def players_above(table):
        return (
            select(func.coalesce(func.sum(table.c.players), 0))
            .where(*above_mine(table))
            .scalar_subquery()
        )

    counts, deltas = BoardCount.__table__, BoardCountDelta.__table__
    better = players_above(counts) + players_above(deltas)

    # The next value above: the smallest one whose players, count and deltas together, are more
    # than 0. A count (never 0 or less once folded) may have lost its players in deltas not
    # folded yet, and deltas may bring players to a value without a count. So: the first count
    # above whose deltas do not take it to 0, and the first value above whose deltas add players
    # (then more than 0 with any count there); the smaller of the two. Each is a walk up an index
    # from the player's value that stops at its first match, usually the first row.
    at_value = deltas.alias("at_value")

    def deltas_at(table):
        return (
            select(func.coalesce(func.sum(at_value.c.players), 0))
            .where(
                at_value.c.period == table.c.period,
                at_value.c.scope == table.c.scope,
                at_value.c.measure == measure,
                at_value.c.value == table.c.value,
            )
            .correlate(table)
            .scalar_subquery()
        )

    first_count = (
        select(func.min(counts.c.value))
        .where(*above_mine(counts), counts.c.players + deltas_at(counts) > 0)
        .correlate(totals)
        .scalar_subquery()
    )
    first_added = (
        select(func.min(deltas.c.value))
        .where(*above_mine(deltas), deltas.c.players > 0, deltas_at(deltas) > 0)
        .correlate(totals)
        .scalar_subquery()
    )
    candidates = union_all(
        select(first_count.label("value")), select(first_added.label("value"))
    ).subquery("candidates")
    above = select(func.min(candidates.c.value)).correlate(totals).scalar_subquery()
    return select(
        totals.c.points,
        totals.c.rounds,
        totals.c.exact,
        totals.c.skill,
        totals.c[_ON_BOARD[measure]].label("on_board"),
        better.label("better"),
        above.label("above"),
    ).where(
        totals.c.period == bindparam("period"),
        totals.c.scope == bindparam("scope"),
        totals.c.player_id == bindparam("player_id"),
    )


def _value(row, measure: str) -> int:
    return row.skill if measure == SKILL else row.points


def top(
    category: Category | None = None,
    limit: int = TOP_N,
    measure: str = SKILL,
    period: str = "all",
) -> list[Standing]:
    """The top players of a board (ties share a rank), memoised.

    Skill boards: highest skill first, then more rounds. Points boards: most points first, then
    fewer rounds.
    """
    board = Board(measure, period, category)
    period_key = board.key()
    key = _cache_key(board, period_key)
    cached = cache.get(key) if limit <= TOP_N else None
    if cached is not None:
        return cached[:limit]
    rows = db.session.execute(
        _top_query(measure),
        {"period": period_key, "scope": board.scope, "limit": max(limit, TOP_N)},
    ).all()
    standings: list[Standing] = []
    for position, row in enumerate(rows):
        value = _value(row, measure)
        if standings and _value(standings[-1], measure) == value:
            rank = standings[-1].rank
        else:
            rank = position + 1
        standings.append(
            Standing(
                rank,
                row.id,
                row.username,
                row.points,
                row.rounds,
                row.exact,
                row.skill,
                public=bool(row.profile_public),
            )
        )
    if limit <= TOP_N:
        cache.set(key, standings)
    return standings[:limit]


def standing_of(
    player: Player,
    category: Category | None = None,
    measure: str = SKILL,
    period: str = "all",
) -> Standing | None:
    """The player's own row on a board: rank (where they stand among the players on it, or would
    if they are not on it yet), the gap to the next player above; None without a counted round
    there."""
    board = Board(measure, period, category)
    mine = db.session.execute(
        _standing_query(measure),
        {"period": board.key(), "scope": board.scope, "player_id": player.id},
    ).first()
    if mine is None:
        return None
    return Standing(
        mine.better + 1,
        player.id,
        player.display_name,
        mine.points,
        mine.rounds,
        mine.exact,
        mine.skill,
        on_board=bool(mine.on_board),
        gap=None if mine.above is None else mine.above - _value(mine, measure),
    )


def rank_of(player: Player, measure: str = SKILL, period: str = "all") -> Standing | None:
    """The player's standing on an overall board (for a home page: rank, gap, points)."""
    return standing_of(player, None, measure, period)

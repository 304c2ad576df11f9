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
from datetime import datetime

from flask import current_app
from sqlalchemy import BigInteger, Select, bindparam, case, cast, func, select, true, union_all
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from app.extensions import cache, db
from app.game.scoring import Verdict
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
def _stats_upsert(dialect: str, model: type[PlayerTotal | CategoryTotal]) -> Insert:
    """Add one round to a statistics row (creating it); built once per dialect and table."""
    table = model.__table__
    module = postgresql if dialect == "postgresql" else sqlite
    stmt = module.insert(table)
    increments = STAT_INCREMENTS + (("fast_rounds",) if model is PlayerTotal else ())
    stmt = stmt.on_conflict_do_update(
        index_elements=[column.name for column in table.primary_key],
        set_={name: table.c[name] + stmt.excluded[name] for name in increments},
    )
    if model is PlayerTotal:
        stmt = stmt.returning(table.c.rounds, table.c.exact, table.c.fast_rounds)
    return stmt


@functools.cache
def _stats_and_listing() -> Select:
    """On PostgreSQL, both statistics upserts and whether the player is on the boards in one
    statement (one round trip instead of three): the category's row is a data-modifying WITH,
    which PostgreSQL runs whether or not the query reads it. Built once."""

    def upsert(model: type[PlayerTotal | CategoryTotal], keys: tuple[str, ...]) -> Insert:
        table = model.__table__
        increments = STAT_INCREMENTS + (("fast_rounds",) if model is PlayerTotal else ())
        stmt = postgresql.insert(table).values(
            {name: bindparam(name, type_=table.c[name].type) for name in keys + increments}
        )
        return stmt.on_conflict_do_update(
            index_elements=[column.name for column in table.primary_key],
            set_={name: table.c[name] + stmt.excluded[name] for name in increments},
        )

    player_totals = PlayerTotal.__table__
    mine = (
        upsert(PlayerTotal, ("player_id",))
        .returning(player_totals.c.rounds, player_totals.c.exact, player_totals.c.fast_rounds)
        .cte("mine")
    )
    in_category = upsert(CategoryTotal, ("player_id", "category_id")).cte("in_category")
    return select(
        mine.c.rounds,
        mine.c.exact,
        mine.c.fast_rounds,
        _on_boards_query().scalar_subquery().label("on_boards"),
    ).add_cte(in_category)


# The columns of a board row an answer inserts, in order, after its period and scope.
_BOARD_VALUES = ("player_id", *BOARD_INCREMENTS, "skill", "listed", "ranked")


@functools.cache
def _board_upsert(dialect: str) -> Insert:
    """Add one round to a board row, creating it listed as given; the row's new values come
    back. Built once per dialect.

    On PostgreSQL one statement takes all the boards of an answer: the periods and scopes as two
    arrays (`unnest` pairs them), every other value once. Sent as rows of VALUES, six rows made a
    statement of some 5,000 characters and 96 parameters, which psycopg parses again on every
    answer (it keeps the parsed form of statements up to 4,096 characters and 50 parameters);
    this one is parsed once per process. SQLite takes the rows one by one (executemany).
    """
    table = BoardTotal.__table__
    if dialect == "postgresql":
        keys = (
            func.unnest(
                bindparam("periods", type_=postgresql.ARRAY(table.c.period.type)),
                bindparam("scopes", type_=postgresql.ARRAY(table.c.scope.type)),
            )
            .table_valued("period", "scope")
            .render_derived(name="keys")
        )
        rows = select(
            keys.c.period,
            keys.c.scope,
            *(bindparam(name, type_=table.c[name].type) for name in _BOARD_VALUES),
        )
        stmt = postgresql.insert(table).from_select(["period", "scope", *_BOARD_VALUES], rows)
    else:
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

    The counts' changes, the answer's and those of taking the player off the boards, are
    appended in one `move_counts` (one statement, locking no shared row). When that makes a fold
    due, the caller runs `fold_if_due` after its commit.
    """
    when = when or utcnow()
    dialect = db.session.get_bind().dialect.name
    stats = {
        "points": verdict.points,
        "rounds": 1,
        "exact": int(verdict.exact),
        "too_early": int(verdict.too_early),
        "distance_sum": verdict.distance,
        "abs_distance_sum": abs(verdict.distance),
    }
    if dialect == "postgresql":
        mine = db.session.execute(
            _stats_and_listing(),
            {"player_id": player_id, "category_id": category_id, **stats, "fast_rounds": int(fast)},
        ).one()
        on_boards = bool(mine.on_boards)
    else:
        mine = db.session.execute(
            _stats_upsert(dialect, PlayerTotal),
            {"player_id": player_id, **stats, "fast_rounds": int(fast)},
        ).one()
        db.session.execute(
            _stats_upsert(dialect, CategoryTotal),
            {"player_id": player_id, "category_id": category_id, **stats},
        )
        on_boards = bool(db.session.scalar(_on_boards_query(), {"player_id": player_id}))
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
    boards = [
        (period, scope)
        for period in skill_rule.period_keys(when)
        for scope in (OVERALL_SCOPE, category_id)
    ]
    if dialect == "postgresql":
        periods, scopes = (list(column) for column in zip(*boards, strict=True))
        parameters: dict | list[dict] = values | {"periods": periods, "scopes": scopes}
    else:
        parameters = [values | {"period": period, "scope": scope} for period, scope in boards]
    rows = db.session.execute(_board_upsert(dialect), parameters).all()
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
    stats = PlayerStats(mine.rounds, mine.exact, mine.fast_rounds)
    connection = db.session.connection()
    off = review is not None and review(stats)
    if misfiled or (off and on_boards):
        # Off the boards with this answer, or the player joined or left them without the ORM
        # event (a bulk UPDATE, or a sign-up racing this answer): put the rows right now.
        moves.update(relist_moves(connection, player_id, on_boards and not off))
    fold_every = current_app.config.get("BOARD_FOLD_EVERY", FOLD_EVERY)
    if move_counts(connection, moves, fold_every):
        db.session.info[_FOLD_DUE] = True
    return stats


# The session's flag that its transaction made a fold of the counts due (`fold_if_due`).
_FOLD_DUE = "roft_fold_due"


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


def invalidate(category_slug: str, when: datetime | None = None) -> None:
    """Forget the cached top lists a new answer in this category can change."""
    cache.delete_many(*_keys_of([OVERALL, category_slug], when or utcnow()))


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

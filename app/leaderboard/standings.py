"""Leaderboards from maintained totals: by skill and by points ("most played"), for this week,
this month and all time, overall and per category.

`record_answer` (app/leaderboard/recording.py) adds each counted answer to the totals: the game
service calls it (through app/leaderboard/integrity.py) inside the transaction that stores a
counted answer. `invalidate` is the only cache invalidation point, called by that service after
commit, followed by `fold_if_due`.

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
from dataclasses import dataclass
from datetime import date, datetime, time

from sqlalchemy import (
    Select,
    bindparam,
    func,
    select,
    true,
    union_all,
)

from app.extensions import cache, db
from app.leaderboard import skill as skill_rule
from app.leaderboard.recording import BOARDS_MOVED
from app.models import BoardTotal, Category, Player
from app.models.base import utcnow
from app.models.standings import (
    OVERALL_SCOPE,
    POINTS,
    SKILL,
    BoardCount,
    BoardCountDelta,
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
    def rounds_to_rank(self) -> int:
        return max(skill_rule.MIN_ROUNDS - self.rounds, 0)


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
    if db.session.info.pop(BOARDS_MOVED, True):
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

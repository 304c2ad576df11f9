"""Leaderboards from maintained totals.

`record_answer` is the only writer: the rounds service calls it inside the transaction that stores
an answer. `invalidate` is the only cache invalidation point, called by that service after commit.

Only `listed` rows (players with a username) are on a board: a top list is a short walk down the
board index, joining `players` for the 50 names only, and a rank adds up `points_counts` above the
player's points (one row per distinct number of points), not every player above.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Select, Table, bindparam, func, select, true, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from app.extensions import cache, db
from app.game.scoring import Verdict
from app.models import Category, CategoryTotal, Player, PlayerTotal
from app.models.standings import OVERALL_BOARD, PointsCount, move_counts

TOP_N = 50
OVERALL = "all"


@dataclass(frozen=True)
class Standing:
    rank: int
    player_id: int
    name: str
    points: int
    rounds: int
    exact: int

    @property
    def mean_points(self) -> float:
        return self.points / self.rounds if self.rounds else 0.0


INCREMENTS = ("points", "rounds", "exact", "too_early", "distance_sum", "abs_distance_sum")


@functools.cache
def _totals_upsert(dialect: str, model: type[PlayerTotal | CategoryTotal]) -> Insert:
    """Add one round to a totals row, creating it listed if the player has a username; return the
    row's new points, rounds and listed, and whether the player has a username now. Built once
    per dialect and table."""
    table = model.__table__
    module = postgresql if dialect == "postgresql" else sqlite
    named = (
        select(Player.username.is_not(None))
        .where(Player.id == bindparam("listed_id"))
        .scalar_subquery()
    )
    stmt = module.insert(table).values(listed=named)
    return stmt.on_conflict_do_update(
        index_elements=[column.name for column in table.primary_key],
        set_={name: table.c[name] + stmt.excluded[name] for name in INCREMENTS},
    ).returning(table.c.points, table.c.rounds, table.c.listed, named.label("named"))


def record_answer(player_id: int, category_id: int, verdict: Verdict) -> None:
    """Add one answered round to the player's totals and move them on both boards (no commit)."""
    increments = {
        "points": verdict.points,
        "rounds": 1,
        "exact": int(verdict.exact),
        "too_early": int(verdict.too_early),
        "distance_sum": verdict.distance,
        "abs_distance_sum": abs(verdict.distance),
    }
    dialect = db.session.get_bind().dialect.name
    moves: Counter[tuple[int, int]] = Counter()
    for board, model, keys in (
        (OVERALL_BOARD, PlayerTotal, {"player_id": player_id}),
        (category_id, CategoryTotal, {"player_id": player_id, "category_id": category_id}),
    ):
        params = {**keys, **increments, "listed_id": player_id}
        total = db.session.execute(_totals_upsert(dialect, model), params).one()
        # The row leaves the count it was in (if any) and joins the one it now belongs to.
        if total.listed and total.rounds > 1:
            moves[board, total.points - verdict.points] -= 1
        if total.named:
            moves[board, total.points] += 1
        if total.listed != total.named:
            # The username changed without the ORM event (a bulk UPDATE, or a sign-up racing
            # this answer): put the flag right now.
            db.session.execute(update(model).filter_by(**keys).values(listed=total.named))
    move_counts(db.session.connection(), moves)


def _cache_key(scope: str) -> str:
    return f"standings:{scope}"


def invalidate(category_slug: str) -> None:
    """Forget the cached top lists a new answer in this category can change."""
    cache.delete_many(_cache_key(OVERALL), _cache_key(category_slug))


def forget_boards_of(player_id: int) -> None:
    """Forget the cached top lists the player is on (when a guest with points signs up)."""
    slugs = db.session.scalars(
        select(Category.slug)
        .join(CategoryTotal, CategoryTotal.category_id == Category.id)
        .where(CategoryTotal.player_id == player_id)
    )
    cache.delete_many(_cache_key(OVERALL), *(_cache_key(slug) for slug in slugs))


def _board(category: Category | None) -> tuple[Table, dict[str, int]]:
    """The totals table of one leaderboard and the parameter that picks the board in it."""
    if category is None:
        return PlayerTotal.__table__, {}
    return CategoryTotal.__table__, {"category_id": category.id}


def _on_board(totals: Table) -> list[ColumnElement[bool]]:
    if "category_id" in totals.c:
        return [totals.c.category_id == bindparam("category_id")]
    return []


# The read queries are built once per totals table (Core, bound parameters): building and
# ORM-compiling them on every call cost more than running them.


@functools.cache
def _top_query(totals: Table) -> Select:
    players = Player.__table__
    return (
        select(players.c.id, players.c.username, totals.c.points, totals.c.rounds, totals.c.exact)
        .join_from(totals, players, players.c.id == totals.c.player_id)
        .where(totals.c.listed == true(), totals.c.rounds > 0, *_on_board(totals))
        .order_by(totals.c.points.desc(), totals.c.rounds.asc(), totals.c.player_id.asc())
        .limit(bindparam("limit"))
    )


@functools.cache
def _standing_query(totals: Table) -> Select:
    counts = PointsCount.__table__
    better = (
        select(func.coalesce(func.sum(counts.c.players), 0))
        .where(counts.c.board == bindparam("board"), counts.c.points > totals.c.points)
        .scalar_subquery()
    )
    return select(totals.c.points, totals.c.rounds, totals.c.exact, better.label("better")).where(
        totals.c.player_id == bindparam("player_id"), totals.c.rounds > 0, *_on_board(totals)
    )


def top(category: Category | None = None, limit: int = TOP_N) -> list[Standing]:
    """The top players by points (ties share a rank; fewer rounds first), memoised."""
    key = _cache_key(category.slug if category else OVERALL)
    cached = cache.get(key) if limit <= TOP_N else None
    if cached is not None:
        return cached[:limit]
    totals, params = _board(category)
    rows = db.session.execute(_top_query(totals), {**params, "limit": max(limit, TOP_N)}).all()
    standings: list[Standing] = []
    for position, row in enumerate(rows):
        if standings and standings[-1].points == row.points:
            rank = standings[-1].rank
        else:
            rank = position + 1
        standings.append(Standing(rank, row.id, row.username, row.points, row.rounds, row.exact))
    if limit <= TOP_N:
        cache.set(key, standings)
    return standings[:limit]


def standing_of(player: Player, category: Category | None = None) -> Standing | None:
    """The player's own row and rank, or None when they have no answered round here."""
    totals, params = _board(category)
    params |= {"board": category.id if category else OVERALL_BOARD, "player_id": player.id}
    mine = db.session.execute(_standing_query(totals), params).first()
    if mine is None:
        return None
    return Standing(
        mine.better + 1, player.id, player.display_name, mine.points, mine.rounds, mine.exact
    )

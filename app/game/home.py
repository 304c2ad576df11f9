"""What the home page shows of a signed-in player's own state, read in one statement.

The page shows today's daily set, the open normal set, whether a text is open, the category the
player last chose and their totals. Read one by one (`daily.own_set`, `sets.open_normal_set`,
`reveals.open_round`, `sets.last_choice`, `profiles.overall`) that was five statements, each
costing about a millisecond of CPU on the ORM's side (bench/round_cpu.py --sets); here it
is one: the player's row outer-joined to the two sets and their totals, with the open round's
id and the last choice as scalar subqueries. The totals row stays in the session's identity map,
where `profiles.overall` then finds it without a query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from sqlalchemy import and_, bindparam, select
from sqlalchemy.orm import aliased

from app.extensions import db
from app.game import starts
from app.game.sets import OPEN_ROUND_ID
from app.models import GameSet, Player, PlayerTotal, Round
from app.models.sets import DAILY_SET, NORMAL_SET


@dataclass(frozen=True)
class OpenRound:
    """The player's unanswered round, as far as the home page needs it (its link)."""

    id: int


@dataclass(frozen=True)
class HomeState:
    today_set: GameSet | None  # today's daily set (`daily.own_set`)
    open_set: GameSet | None  # the unfinished normal set (`sets.open_normal_set`)
    open_round: OpenRound | None  # the unanswered round (`reveals.open_round`)
    choice: str  # the last chosen category of normal play (`sets.last_choice`)
    totals: PlayerTotal | None  # kept referenced: the identity map holds it weakly


_today = aliased(GameSet, name="today_set")
_open = aliased(GameSet, name="open_set")
_LAST_CHOICE = (
    select(Round.chosen_category)
    .join(GameSet, GameSet.id == Round.set_id)
    .where(Round.player_id == bindparam("player_id"), GameSet.kind == NORMAL_SET)
    .order_by(Round.id.desc())
    .limit(1)
    .scalar_subquery()
)
# Built once: building a statement and its cache key costs about as much as running it.
_HOME_STATE = (
    select(
        _today,
        _open,
        PlayerTotal,
        OPEN_ROUND_ID.label("open_round_id"),
        _LAST_CHOICE.label("last_choice"),
    )
    .select_from(Player)
    .outerjoin(
        _today,
        and_(
            _today.player_id == Player.id,
            _today.kind == DAILY_SET,
            _today.day == bindparam("day"),
        ),
    )
    .outerjoin(
        _open,
        and_(_open.player_id == Player.id, _open.kind == NORMAL_SET, _open.finished_at.is_(None)),
    )
    .outerjoin(PlayerTotal, PlayerTotal.player_id == Player.id)
    .where(Player.id == bindparam("player_id"))
    .limit(1)
)


def home_state(player: Player, day: date) -> HomeState:
    """The signed-in player's sets, open round, last choice and totals, in one statement."""
    row = db.session.execute(_HOME_STATE, {"player_id": player.id, "day": day}).first()
    if row is None:  # the player's row is gone (deleted meanwhile): nothing of theirs
        return HomeState(None, None, None, starts.RANDOM, None)
    today_set, open_set, totals, open_round_id, choice = row
    return HomeState(
        today_set,
        open_set,
        OpenRound(open_round_id) if open_round_id is not None else None,
        choice or starts.RANDOM,
        totals,
    )

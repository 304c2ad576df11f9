"""What a round and a set earn: the one definition every page that shows points reads.

A round earns its points only when it counts: a normal round (not a study's attention check or
practice) whose truth no other identity of the same browser or address saw first
(`Round.uncounted`, app/leaderboard/integrity.py). Its stored `points` stay what the guess scored,
for research, but a round that does not count earns 0 on every page: results, share text and card,
profile, history, badges, set summaries and boards.

A set counts (for the daily distribution, streaks and the "Set complete" badge) when it is
finished and every one of its texts counted: a practice set (a past daily played again,
app/game/practice.py) never does, as its rounds are "practice" rounds.
"""

from __future__ import annotations

from sqlalchemy import and_, case, exists

from app.models import GameSet, Round
from app.models.rounds import NORMAL_ROUND

# SQL: the round counts / what it earns.
COUNTED = and_(Round.kind == NORMAL_ROUND, Round.uncounted.is_(None))
EARNED = case((COUNTED, Round.points), else_=0)
# SQL: a finished set all of whose texts counted.
SET_COUNTED = and_(
    GameSet.finished_at.is_not(None),
    ~exists().where(Round.set_id == GameSet.id, ~COUNTED),
)


def counts(round_: Round) -> bool:
    """Whether an answered round earns its points anywhere."""
    return round_.kind == NORMAL_ROUND and round_.uncounted is None


def earned(round_: Round) -> int:
    """The points an answered round earned (0 when it does not count)."""
    return (round_.points or 0) if counts(round_) else 0

"""Past daily challenges, played again for practice.

Every day before today that had a challenge is in the archive. A player who did not play a day
can read its texts as practice: the rounds are "practice" rounds (app/game/tally.py), so they earn
nothing anywhere (no points, no boards, no streak, no badge, no share card, no skill) and are
marked as practice wherever they are listed. Today's challenge is never in the archive, so
nobody learns today's answers through practice. A day is practised once: the texts' truths are
shown at the end of each round, so a second go would be a replay; asking again shows the first
go's results.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from sqlalchemy import func, select

from app.errors import Conflict, NotFound
from app.extensions import db
from app.game import daily, reveals
from app.game.scoring import verdict
from app.models import DailyChallenge, Example, GameSet, Player, Round
from app.models.rounds import PRACTICE_ROUND
from app.models.sets import DAILY_SET, PRACTICE_SET

PER_PAGE = 30
# A day's status for one player in the archive.
PLAYED = "played"  # finished on its day: the player's own (counted) results
STARTED = "started"  # started on its day, not finished
PRACTISED = "practised"
PRACTISING = "practising"
OPEN = "open"


class NotInArchive(NotFound):
    """No challenge that day, or the day is today or later."""


class IsToday(Conflict):
    """Today's challenge is played on the daily page, never as practice."""


class PlayedOnTheDay(Conflict):
    """The player has their own challenge of that day: it is not practised again."""

    def __init__(self, day: date):
        super().__init__("You played this challenge on its day: here are your results.")
        self.day = day


@dataclass(frozen=True)
class ArchiveDay:
    day: date
    texts: int
    status: str


def check_day(day: date) -> DailyChallenge:
    """The past day's challenge; IsToday for today, NotInArchive for a day without one."""
    if day == daily.today():
        raise IsToday("Today's challenge is played on the daily page, and counts.")
    found = db.session.get(DailyChallenge, day) if day < daily.today() else None
    if found is None:
        raise NotInArchive("There is no past challenge on that day.")
    return found


def past_days() -> int:
    return (
        db.session.scalar(
            select(func.count())
            .select_from(DailyChallenge)
            .where(DailyChallenge.day < daily.today())
        )
        or 0
    )


def archive(player: Player | None, page: int = 1) -> list[ArchiveDay]:
    """Past challenges, newest first, with where the player stands on each."""
    rows = db.session.execute(
        select(DailyChallenge.day, DailyChallenge.example_ids)
        .where(DailyChallenge.day < daily.today())
        .order_by(DailyChallenge.day.desc())
        .offset((page - 1) * PER_PAGE)
        .limit(PER_PAGE)
    ).all()
    mine: dict[date, str] = {}
    if player is not None and rows:
        sets = db.session.execute(
            select(GameSet.day, GameSet.kind, GameSet.finished_at).where(
                GameSet.player_id == player.id,
                GameSet.day.in_([day for day, _ in rows]),
                GameSet.kind.in_((DAILY_SET, PRACTICE_SET)),
            )
        )
        for day, kind, finished_at in sets:
            if kind == DAILY_SET:
                mine[day] = PLAYED if finished_at is not None else STARTED
            else:
                mine[day] = PRACTISED if finished_at is not None else PRACTISING
    return [ArchiveDay(day, len(ids), mine.get(day, OPEN)) for day, ids in rows]


def start(player: Player, day: date) -> GameSet:
    """The player's practice set of a past day (a new one if none): the caller shows its next
    text, or its results once finished.

    Raises IsToday, NotInArchive, PlayedOnTheDay (the player has their own challenge of that
    day, finished or not) or sets.FinishCurrentFirst (a text of other play is open).
    """
    found = check_day(day)
    if daily.own_set(player, day) is not None:
        raise PlayedOnTheDay(day)
    game_set = daily.set_of_day(player, day, PRACTICE_SET, len(found.example_ids))
    if game_set is None:
        raise PlayedOnTheDay(day)
    return game_set


def next_round(player: Player, game_set: GameSet) -> reveals.RevealView:
    """The practice set's next text for this player (or their open round), as a practice round."""
    return daily.next_of_day(
        player,
        game_set,
        PRACTICE_ROUND,
        "practice",
        NotInArchive("This practice has no more texts."),
    )


@dataclass(frozen=True)
class PracticeResult:
    day: date
    # What each answered text's call would have earned had it counted, in play order.
    would_have: list[int]
    size: int
    finished: bool

    @property
    def total(self) -> int:
        return sum(self.would_have)

    @property
    def max_points(self) -> int:
        return 5 * self.size

    @property
    def squares(self) -> str:
        return daily.squares(self.would_have)


def result(player: Player, day: date) -> PracticeResult:
    """How the player's practice of `day` went (what the calls would have earned; nothing was
    counted). Raises NotInArchive when they have not practised that day."""
    found = check_day(day)
    game_set = daily.own_set(player, day, PRACTICE_SET)
    if game_set is None:
        raise NotInArchive("You have not practised that day's challenge.")
    rows = db.session.execute(
        select(Round.guess, Example.boundary, Example.n_sentences)
        .join(Example, Example.id == Round.example_id)
        .where(Round.set_id == game_set.id, Round.guess.is_not(None))
        .order_by(Round.id)
    ).all()
    return PracticeResult(
        day,
        [verdict(guess, boundary, n).points for guess, boundary, n in rows],
        len(found.example_ids),
        game_set.finished,
    )

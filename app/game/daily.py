"""The daily challenge: the same few texts for everyone each UTC day, one attempt per player.

A day's texts are drawn from the held-back pool (examples of kind "daily", see
app/catalog/pools.py) the first time anyone asks for that day, and stored. Once a passage has
appeared in a challenge, none of its variants is drawn again, so nobody meets a passage twice.
How a day's texts are chosen (its composition rules) is app/game/daily_texts.py.
Streaks count consecutive UTC days with a finished challenge.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from flask import current_app
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.catalog.pools import DAILY
from app.errors import Conflict, NotFound
from app.extensions import db
from app.game import daily_texts, reveals, sets, starts, tally
from app.game.rounds import RevealView
from app.models import DailyChallenge, Example, ExamplePassage, GameSet, Player, Round, System
from app.models.rounds import NORMAL_ROUND
from app.models.sets import DAILY_SET

MAX_STREAK_LOOKBACK = 400
# Points of one text -> its square on the share card (no square tells where a boundary was);
# None: the text did not count (its truth was seen by another identity of the same browser).
SQUARES = {5: "🟩", 4: "🟨", 3: "🟨", 2: "🟧", 1: "🟧", 0: "⬛", None: "⬜"}
NOT_COUNTED = "replay, not counted"


class NoChallenge(NotFound):
    """There is no challenge for that day (none held back, or not today)."""


class AlreadyPlayed(Conflict):
    def __init__(self, game_set: GameSet):
        super().__init__("You have already played today's challenge: come back tomorrow!")
        self.game_set = game_set


def today() -> date:
    """The current UTC day (tests may set TODAY_OVERRIDE to move the site's clock by days)."""
    override = current_app.config.get("TODAY_OVERRIDE") if current_app.testing else None
    return override or datetime.now(UTC).date()


def size() -> int:
    return current_app.config["DAILY_SIZE"]


# --- The pool in the database ----------------------------------------------------------------


def _used_passages() -> set[int]:
    example_ids = [i for ids in db.session.scalars(select(DailyChallenge.example_ids)) for i in ids]
    if not example_ids:
        return set()
    return set(
        db.session.scalars(
            select(ExamplePassage.passage_id).where(ExamplePassage.example_id.in_(example_ids))
        )
    )


def _candidates() -> list[daily_texts.Candidate]:
    passages: dict[int, list[int]] = {}
    links = db.session.execute(
        select(ExamplePassage.example_id, ExamplePassage.passage_id)
        .join(Example, Example.id == ExamplePassage.example_id)
        .where(Example.kind == DAILY)
        .order_by(ExamplePassage.example_id, ExamplePassage.passage_id)
    )
    for example_id, passage_id in links:
        passages.setdefault(example_id, []).append(passage_id)
    rows = db.session.execute(
        select(
            Example.id,
            Example.category_id,
            Example.boundary,
            Example.n_sentences,
            Example.decoding,
            Example.source,
            System.name,
        )
        .join(System, System.id == Example.system_id)
        .where(Example.kind == DAILY)
        .order_by(Example.id)
    )
    return [
        daily_texts.Candidate(
            example_id=example_id,
            category_id=category_id,
            kind=daily_texts.text_kind(boundary, n_sentences, system, decoding, source),
            boundary=boundary,
            n_sentences=n_sentences,
            passages=tuple(passages.get(example_id, ())),
        )
        for example_id, category_id, boundary, n_sentences, decoding, source, system in rows
    ]


def challenge(day: date) -> DailyChallenge | None:
    """The challenge of `day`; today's is drawn on first request. None if there is none."""
    found = db.session.get(DailyChallenge, day)
    if found is not None or day != today():
        return found
    picked = daily_texts.pick_texts(_candidates(), _used_passages(), size(), random.SystemRandom())
    if picked is None:
        return None
    db.session.add(DailyChallenge(day=day, example_ids=[c.example_id for c in picked.texts]))
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()  # drawn at the same moment by another request: theirs stands
    else:
        if not picked.complete:
            # A thin day beats no day; the operator hears of it here and in `flask daily status`.
            current_app.logger.warning(
                "daily challenge %s drawn without: %s", day.isoformat(), picked.shortfall()
            )
    return db.session.get(DailyChallenge, day)


@dataclass(frozen=True)
class PoolStatus:
    held_back: int
    fresh_examples: int
    # Days the unused texts fill keeping every composition rule, then days that miss one.
    days_left: int
    thin_days: int
    days_played: int
    today_drawn: bool
    warn_days: int
    # What the first day that misses a rule would lack, in words ("" when no day does).
    shortfall: str = ""

    @property
    def warning(self) -> bool:
        return self.days_left < self.warn_days


def pool_status() -> PoolStatus:
    candidates = _candidates()
    used = _used_passages()
    fresh = [c for c in candidates if not used.intersection(c.passages)]
    days = daily_texts.plan_days(candidates, used, size())
    full = daily_texts.full_days(days)
    return PoolStatus(
        held_back=len(candidates),
        fresh_examples=len(fresh),
        days_left=full,
        thin_days=len(days) - full,
        days_played=db.session.scalar(select(func.count()).select_from(DailyChallenge)) or 0,
        today_drawn=db.session.get(DailyChallenge, today()) is not None,
        warn_days=current_app.config["DAILY_WARN_DAYS"],
        shortfall=days[full].shortfall() if full < len(days) else "",
    )


# --- Playing ---------------------------------------------------------------------------------


def own_set(player: Player, day: date, kind: str = DAILY_SET) -> GameSet | None:
    """The player's set of `kind` for `day`: the challenge itself, or its practice."""
    return db.session.scalars(
        select(GameSet).where(
            GameSet.player_id == player.id, GameSet.kind == kind, GameSet.day == day
        )
    ).first()


def set_of_day(player: Player, day: date, kind: str, size: int) -> GameSet | None:
    """The player's set of `kind` for `day`, started now if they have none (None: one of theirs
    made at the same moment clashed). Raises sets.FinishCurrentFirst when a text of other play
    is open."""
    game_set = own_set(player, day, kind)
    if game_set is None:
        current = reveals.open_round(player)
        if current is not None:
            raise sets.FinishCurrentFirst(current)
        game_set = sets.start_set(player, kind, size, lambda: own_set(player, day, kind), day=day)
    return game_set


def start(player: Player) -> RevealView:
    """Start (or resume) today's challenge for the player; returns the round to show.

    Raises NoChallenge, AlreadyPlayed (finished today) or FinishCurrentFirst (a text of normal
    play is open).
    """
    day = today()
    found = challenge(day)
    if found is None:
        raise NoChallenge("There is no daily challenge today. Please come back tomorrow.")
    game_set = set_of_day(player, day, DAILY_SET, len(found.example_ids))
    if game_set.finished:
        raise AlreadyPlayed(game_set)
    return next_round(player, game_set)


def next_round(player: Player, game_set: GameSet) -> RevealView:
    """The challenge's next text for this player (or their open round)."""
    return next_of_day(
        player, game_set, NORMAL_ROUND, "daily", NoChallenge("This challenge has no more texts.")
    )


def next_of_day(
    player: Player, game_set: GameSet, kind: str, label: str, none_left: Exception
) -> RevealView:
    """The next text of a set that plays a day's challenge in order (the daily itself, or a past
    day practised): the player's open round of the set, or a new round of `kind` for the day's
    next text. Raises FinishCurrentFirst when a text of another set is open, `none_left` when
    the day has no more texts."""
    current = reveals.open_round(player)
    if current is not None:
        if current.set_id != game_set.id:
            raise sets.FinishCurrentFirst(current)
        return current
    found = db.session.get(DailyChallenge, game_set.day)
    played = db.session.scalar(select(func.count(Round.id)).where(Round.set_id == game_set.id))
    if found is None or played >= len(found.example_ids):
        raise none_left
    example = db.session.get(Example, found.example_ids[played])
    chosen = f"{label}-{game_set.day.isoformat()}"
    for _ in range(3):
        new = starts.new_round(player, chosen, example=example, game_set=game_set, kind=kind)
        if new is not None:
            return new
        current = reveals.open_round(player)
        if current is not None and current.set_id == game_set.id:
            return current
    raise Conflict("Could not start the next text right now; please try again.")


def set_points(game_set: GameSet) -> list[int | None]:
    """What each answered text of the set earned, in play order; None for a text that did not
    count. Every page of a daily result (results, share text, card page, PNG) reads this."""
    rows = db.session.execute(
        select(tally.EARNED, tally.COUNTED)
        .where(Round.set_id == game_set.id, Round.guess.is_not(None))
        .order_by(Round.id)
    )
    return [int(earned) if counted else None for earned, counted in rows]


def total(points: Sequence[int | None]) -> int:
    """The points a result earned: texts that did not count add nothing."""
    return sum(p for p in points if p is not None)


def counted(points: Sequence[int | None]) -> bool:
    """Whether every text of a result counted (else it is a replay shown as such)."""
    return None not in points


def squares(points: Sequence[int | None]) -> str:
    return "".join(SQUARES[p] for p in points)


def share_text(day: date, points: Sequence[int | None], url: str) -> str:
    """The spoiler-free share card text: the day, one square per text, the total, a link; a
    result that did not count says so."""
    note = "" if counted(points) else f" ({NOT_COUNTED})"
    return (
        f"Real or Fake Text · daily challenge {day.isoformat()}\n"
        f"{squares(points)} {total(points)}/{5 * len(points)}{note}\n{url}"
    )


def ensure_share_token(game_set: GameSet) -> str:
    if game_set.share_token is None:
        game_set.share_token = secrets.token_urlsafe(12)
        db.session.commit()
    return game_set.share_token


def by_share_token(day: date, token: str) -> GameSet:
    found = (
        db.session.scalars(
            select(GameSet).where(GameSet.share_token == token, GameSet.day == day)
        ).first()
        if 8 <= len(token) <= 32
        else None
    )
    if found is None or not found.finished:
        raise NotFound("There is no such result card.")
    return found


# --- Results and streaks ---------------------------------------------------------------------


@dataclass(frozen=True)
class DayResults:
    day: date
    max_points: int
    # counts[p]: finished challenges of the day that scored p points.
    counts: list[int]

    @property
    def players(self) -> int:
        return sum(self.counts)

    def share_below(self, points: int) -> float | None:
        """Share of the other players who scored fewer points (None with no one else)."""
        others = self.players - 1
        if others <= 0:
            return None
        return sum(self.counts[:points]) / others

    @property
    def mean(self) -> float | None:
        if not self.players:
            return None
        return sum(p * c for p, c in enumerate(self.counts)) / self.players


def results(day: date) -> DayResults:
    found = db.session.get(DailyChallenge, day)
    if found is None:
        raise NoChallenge("There was no daily challenge that day.")
    max_points = 5 * len(found.example_ids)
    counts = [0] * (max_points + 1)
    # A set with a round that does not count (its truth was seen by another identity of the
    # same browser or address) is left out: it would show a score nobody earned.
    rows = db.session.execute(
        select(GameSet.points, func.count(GameSet.id))
        .where(GameSet.kind == DAILY_SET, GameSet.day == day, tally.SET_COUNTED)
        .group_by(GameSet.points)
    )
    for points, count in rows:
        counts[min(points, max_points)] += count
    return DayResults(day, max_points, counts)


def _finished_days(player: Player, limit: int | None = MAX_STREAK_LOOKBACK) -> list[date]:
    query = (
        select(GameSet.day)
        .where(
            GameSet.player_id == player.id,
            GameSet.kind == DAILY_SET,
            # A replayed challenge (a text that did not count) keeps no streak going.
            tally.SET_COUNTED,
        )
        .order_by(GameSet.day.desc())
    )
    if limit is not None:
        query = query.limit(limit)
    return list(db.session.scalars(query))


def current_streak(days_desc: Sequence[date], day: date) -> int:
    """Consecutive days up to `day` (or up to yesterday, while today is still open)."""
    played = set(days_desc)
    start = day if day in played else day - timedelta(days=1)
    streak = 0
    while start - timedelta(days=streak) in played:
        streak += 1
    return streak


def longest_streak(days: Sequence[date]) -> int:
    ordered = sorted(set(days))
    best = run = 0
    previous = None
    for day in ordered:
        run = run + 1 if previous is not None and day - previous == timedelta(days=1) else 1
        best = max(best, run)
        previous = day
    return best


def streak(player: Player) -> int:
    return current_streak(_finished_days(player), today())


def best_streak(player: Player) -> int:
    return longest_streak(_finished_days(player, limit=None))

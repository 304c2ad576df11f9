"""The skill measure of the leaderboards, and their periods. Pure: no Flask, no database.

A round's *excess* is its points minus the points "all human" would have scored on the same text
(RoFT's rule gives "all human" 5 on an all-human text, 5 - (N - boundary) when the machine starts
within the last five sentences, else 0). Always answering "all human" therefore has an excess of
exactly 0 on any set of texts, whatever its share of all-human texts, and flagging the same
sentence every time falls below it on the demo set (tests/test_fair_boards.py). Only reading
beats it.

A player's *skill* is the sum of excesses divided by (rounds + PRIOR_ROUNDS): the mean excess
shrunk toward 0, as if every player had also played PRIOR_ROUNDS rounds exactly as well as "all
human". A lucky 3 rounds cannot top 100 careful ones, and the shrinkage fades as rounds add up.
A player is ranked on a skill board from MIN_ROUNDS rounds on that board. Skills are kept in
hundredths of a point, truncated toward zero as SQL integer division does on both databases.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from app.game.scoring import points

MIN_ROUNDS = 10
PRIOR_ROUNDS = 10
SCALE = 100
ALL_TIME = "all"
PERIODS = ("week", "month", "all")


def excess(guess: int, boundary: int, n_sentences: int) -> int:
    """Points of the guess minus the points of "all human" on the same text (-5 to 5)."""
    return points(guess, boundary) - points(n_sentences, boundary)


def shrunk(excess_sum: int, rounds: int) -> int:
    """The skill in hundredths of a point per round: SCALE * excess / (rounds + PRIOR_ROUNDS),
    truncated toward zero (what `(100 * excess) / (rounds + 10)` gives in SQL)."""
    numerator = SCALE * excess_sum
    quotient = abs(numerator) // (rounds + PRIOR_ROUNDS)
    return quotient if numerator >= 0 else -quotient


def week_start(day: date) -> date:
    """The Monday of the week of `day` (weeks run Monday to Sunday, UTC)."""
    return day - timedelta(days=day.weekday())


def period_key(period: str, when: datetime) -> str:
    """The key of the board of `period` ("week", "month" or "all") that contains `when` (UTC)."""
    if period == "week":
        return f"w{week_start(when.date()).isoformat()}"
    if period == "month":
        return f"m{when:%Y-%m}"
    if period == "all":
        return ALL_TIME
    raise ValueError(f"unknown period {period!r}")


def period_keys(when: datetime) -> tuple[str, ...]:
    """The keys of every board an answer given at `when` counts on."""
    return tuple(period_key(period, when) for period in PERIODS)


def period_start(key: str) -> date | None:
    """The first day of a week or month board; None for all time."""
    if key.startswith("w"):
        return date.fromisoformat(key[1:])
    if key.startswith("m"):
        return date.fromisoformat(key[1:] + "-01")
    return None

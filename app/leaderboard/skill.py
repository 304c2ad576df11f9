"""The skill measure of the leaderboards, and their periods. Pure: no Flask, no database.

Skill is detection, measured so that no lazy strategy scores above 0 (Youden's J, with partial
credit for late calls):

    skill = hit rate on machine texts + rate of rightly calling human texts human - 1

A machine text's credit is the round's points / 5 when the player called "machine" at or after
the boundary (1 for the exact sentence, 0.2 less for each sentence late), else 0; a human text
counts as right when the player answered "all human". Always answering "all human" scores
exactly 0 (hit rate 0, human texts all right) whatever the texts; always flagging the first
sentence scores -1 or near it; guessing at random scores about 4/N - 1 (below 0). So a player
who never calls "machine" is never above one who calls it and finds boundaries better than
chance. Few rounds are shrunk toward 0, keeping the sign: J * n / (n + PRIOR_ROUNDS) for n
rounds. Skills are kept in hundredths, truncated toward zero as SQL integer division does on both
databases (`fraction` builds the same formula for Python and for standings' SQL).

A round's *excess* (kept on the boards, no longer ranked by) is its points minus the points "all
human" would have scored on the same text (RoFT's rule gives "all human" 5 on an all-human text,
5 - (N - boundary) when the machine starts within the last five sentences, else 0). Only reading
beats it in points; `shrunk` is the mean excess shrunk toward 0 as the boards ranked before.
A player is ranked on a skill board from MIN_ROUNDS rounds on that board.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

# The threshold lives with the ranked column it sets (app/models/standings.py); the rule names it.
from app.models.standings import MIN_ROUNDS as MIN_ROUNDS
from roftcore.boundary import points

PRIOR_ROUNDS = 10
SCALE = 100
# What one answered round adds to a player's detection counts.
Detection = tuple[int, int, int, int]  # (machine texts, credit in points, human texts, right)
NO_DETECTION: Detection = (0, 0, 0, 0)
ALL_TIME = "all"
PERIODS = ("week", "month", "all")


def excess(guess: int, boundary: int, n_sentences: int) -> int:
    """Points of the guess minus the points of "all human" on the same text (-5 to 5)."""
    return points(guess, boundary) - points(n_sentences, boundary)


def detection(guess: int, boundary: int, n_sentences: int) -> Detection:
    """One round's addition to (machine texts, credit in points 0-5, human texts, right)."""
    if boundary >= n_sentences:
        return (0, 0, 1, int(guess >= n_sentences))
    called = guess < n_sentences
    return (1, points(guess, boundary) if called else 0, 0, 0)


def detection_skill(machine: int, credit: int, human: int, right: int) -> int:
    """The shrunk skill in hundredths: SCALE * J * n / (n + PRIOR_ROUNDS), n = machine + human,
    J = credit / (5 machine) + right / human - 1 (a rate with no texts behind it counts as a
    never-caller's: hit rate 0, human texts all right), truncated toward zero; one fraction,
    exactly the SQL in standings."""
    numerator, denominator = fraction(machine, credit, human, right, lambda c: int(c == 0))
    quotient = abs(numerator) // denominator
    return quotient if numerator >= 0 else -quotient


def fraction(machine, credit, human, right, missing):
    """Numerator and (positive) denominator of the skill in hundredths, on ints or SQL
    expressions alike; `missing(count)` is 1 where a count is 0, else 0."""
    no_machine, no_human = missing(machine), missing(human)
    m = machine + no_machine
    h = human + no_human
    r = right + no_human
    n = machine + human
    numerator = SCALE * (credit * h + 5 * r * m - 5 * m * h) * n
    return numerator, 5 * m * h * (n + PRIOR_ROUNDS)


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

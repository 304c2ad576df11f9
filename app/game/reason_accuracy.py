"""How often a player is right when they give each reason: the one source the profile and the
data download read.

A reason is given with a "machine" call (the flagged sentence is `guess`, counted from 0). The
call is **right** when the flagged sentence came at or after the point where the text changed
(`boundary <= guess < n_sentences`): where a machine took over or, in a splice, where a different
human-written text begins; an all-human text never changes, so every call on it is wrong.
That is a looser test than points: a call three sentences late is right here and earns 2 points.
Only rounds that count (`tally.COUNTED`) are tallied, so a replay or an uncounted round changes
nothing; a round with several reasons counts once under each of them.

A share is given only from `MIN_FOR_SHARE` calls on; below that the page shows the count
("3 of 4"), never a percentage.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select

from app.extensions import db
from app.game import tally
from app.game.reasons import REASONS
from app.models import Example, Round

MIN_FOR_SHARE = 5
RIGHT_MEANS = (
    "Right means the flagged sentence came at or after the point where the text changed: where "
    "a machine took over, or where a different human-written text was spliced in."
)


@dataclass(frozen=True)
class ReasonAccuracy:
    """A player's counted machine calls that gave one reason, and how many of them were right."""

    reason: str
    label: str
    calls: int
    right: int

    @property
    def share(self) -> float | None:
        """The share that was right; None under `MIN_FOR_SHARE` calls (too few to say)."""
        return self.right / self.calls if self.calls >= MIN_FOR_SHARE else None

    @property
    def percent(self) -> int | None:
        return None if self.share is None else round(100 * self.share)

    def as_dict(self) -> dict:
        return {
            "reason": self.reason,
            "label": self.label,
            "calls": self.calls,
            "right": self.right,
            "right_percent": self.percent,
        }


def flag_right(guess: int, boundary: int, n_sentences: int) -> bool:
    """Whether a "machine" call on sentence `guess` (from 0) flagged a machine-written one."""
    return boundary <= guess < n_sentences


def tally_reasons(calls: Iterable[tuple[list[str], int, int, int]]) -> list[ReasonAccuracy]:
    """Per reason, from (reasons, guess, boundary, n_sentences) of counted rounds (pure).

    "All human" answers (guess == n_sentences) and unknown reason keys are left out; the result
    is in the game's order of reasons, reasons never given omitted."""
    calls_by: dict[str, int] = {}
    right_by: dict[str, int] = {}
    for reasons, guess, boundary, n in calls:
        if guess >= n:
            continue
        hit = flag_right(guess, boundary, n)
        for reason in set(reasons or ()):
            if reason in REASONS:
                calls_by[reason] = calls_by.get(reason, 0) + 1
                right_by[reason] = right_by.get(reason, 0) + int(hit)
    return [
        ReasonAccuracy(key, REASONS[key][0], calls_by[key], right_by[key])
        for key in REASONS
        if key in calls_by
    ]


def for_player(player_id: int, with_study_rounds: bool = True) -> list[ReasonAccuracy]:
    """The player's accuracy per reason over their counted rounds.

    `with_study_rounds=False` leaves out crowd-study rounds (a study that hides the truth must
    not let a worker read it back from this)."""
    query = (
        select(Round.reasons, Round.guess, Example.boundary, Example.n_sentences)
        .join(Example, Example.id == Round.example_id)
        .where(
            Round.player_id == player_id,
            Round.guess.is_not(None),
            Round.guess < Example.n_sentences,
            tally.COUNTED,
        )
    )
    if not with_study_rounds:
        query = query.where(Round.participant_id.is_(None))
    return tally_reasons(db.session.execute(query).all())

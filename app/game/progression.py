"""Progression on the profile: skill over time, mastery levels and badges. Pure.

Every figure compares the player with the always-human baseline: the points the answer "the whole
text is human" would have earned on the same texts (RoFT's rule gives it 5 on all-human texts and
up to 5 on late boundaries, about 2 points a round on a realistic mix), so playing without reading
never looks like progress.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WINDOW = 10
MASTERY_WINDOW = 25


@dataclass(frozen=True)
class Played:
    """One answered, scored round, in play order."""

    points: int
    exact: bool
    # Points "all human" would have scored on the same text.
    baseline: int
    category: str


def rolling_mean(values: Sequence[float], window: int = WINDOW) -> list[float]:
    """Mean of the last `window` values at each position (fewer at the start)."""
    out: list[float] = []
    total = 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        out.append(total / min(index + 1, window))
    return out


@dataclass(frozen=True)
class Level:
    name: str
    rounds: int
    # Mean points above the always-human baseline over the last MASTERY_WINDOW rounds.
    edge: float | None


LEVELS: tuple[Level, ...] = (
    Level("Newcomer", 0, None),
    Level("Reader", 5, None),
    Level("Spotter", 10, 0.0),
    Level("Sleuth", 25, 0.5),
    Level("Expert", 50, 1.0),
)


def level_rule(level: Level) -> str:
    if level.edge is None:
        return f"{level.rounds} rounds" if level.rounds else "your first rounds"
    return (
        f"{level.rounds} rounds, and over your last {MASTERY_WINDOW} more than "
        f"{level.edge:g} points a round above “all human” on the same texts"
        if level.edge
        else f"{level.rounds} rounds, and more points than “all human” over your last "
        f"{MASTERY_WINDOW}"
    )


@dataclass(frozen=True)
class Mastery:
    category: str
    rounds: int
    edge: float | None
    level: Level
    next_level: Level | None

    @property
    def rank(self) -> int:
        return LEVELS.index(self.level) + 1


def edge(played: Sequence[Played], window: int = MASTERY_WINDOW) -> float | None:
    recent = played[-window:]
    if not recent:
        return None
    return sum(p.points - p.baseline for p in recent) / len(recent)


def mastery(category: str, played: Sequence[Played]) -> Mastery:
    """The highest level whose rule the player's rounds in this category meet."""
    current_edge = edge(played)
    reached = LEVELS[0]
    for level in LEVELS:
        if len(played) < level.rounds:
            break
        if level.edge is not None and (current_edge is None or current_edge <= level.edge):
            break
        reached = level
    position = LEVELS.index(reached)
    upcoming = LEVELS[position + 1] if position + 1 < len(LEVELS) else None
    return Mastery(category, len(played), current_edge, reached, upcoming)


def masteries(played: Sequence[Played]) -> list[Mastery]:
    by_category: dict[str, list[Played]] = {}
    for p in played:
        by_category.setdefault(p.category, []).append(p)
    return [mastery(name, rows) for name, rows in sorted(by_category.items())]


@dataclass(frozen=True)
class Badge:
    key: str
    name: str
    rule: str
    earned: bool


def longest_exact_run(played: Sequence[Played]) -> int:
    best = run = 0
    for p in played:
        run = run + 1 if p.exact else 0
        best = max(best, run)
    return best


def badges(
    played: Sequence[Played], best_streak: int, upvotes: int, sets_finished: int
) -> list[Badge]:
    """Every badge with whether it is earned; the rules are the badges' own text."""
    rounds = len(played)
    beats = len(played) >= 20 and edge(played) > 0
    return [
        Badge("first-exact", "Bullseye", "Flag the exact sentence where the machine took over.",
              any(p.exact for p in played)),
        Badge("first-set", "Set complete", "Finish a set of texts.", sets_finished > 0),
        Badge("exact-5-row", "On a roll", "Five exact hits in a row.",
              longest_exact_run(played) >= 5),
        Badge("beat-baseline", "Sharper than a shrug",
              f"After 20 rounds, score more over your last {MASTERY_WINDOW} than answering "
              "“all human” every time would have.", beats),
        Badge("streak-7", "Week streak", "Play the daily challenge seven days in a row.",
              best_streak >= 7),
        Badge("rounds-100", "Century", "Answer 100 texts.", rounds >= 100),
        Badge("upvoted", "Helpful", "Another player up-votes one of your explanations.",
              upvotes > 0),
    ]  # fmt: skip

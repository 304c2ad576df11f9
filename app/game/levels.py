"""Difficulty levels: easy, medium and hard sets, from how players did on each text.

`refresh()` (the `flask difficulty refresh` command, app/game/cli.py) fits the item-response
model of roftcore/difficulty.py on every counted answer (a replay or an uncounted round says
nothing about a text) and stores each text's estimated difficulty; the texts of normal play with
at least LEVEL_MIN_ANSWERS answers get a level, the thirds of them by difficulty. Pages only read
the stored levels.

A player chooses a level like a category: the next texts of their set come from that level (and
the chosen category) among the texts they may still read, with the passage rules of normal play.
The level sticks to the set until they choose another one or "any level".
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app
from sqlalchemy import bindparam, func, select, update

from app.errors import BadRequest
from app.extensions import cache, db
from app.game import rounds, starts, tally
from app.models import Category, Example, Player, Round
from app.models.rounds import NORMAL_ROUND
from roftcore import difficulty

LEVELS = difficulty.LEVELS
ANY = "any"
LABELS = {difficulty.EASY: "Easy", difficulty.MEDIUM: "Medium", difficulty.HARD: "Hard"}
RATED_CACHE_KEY = "levels:rated"
RATED_SECONDS = 600


def parse(value: str | None) -> str | None:
    """A level from a form: None when not given, ANY to clear it; BadRequest otherwise."""
    if value is None or value == "":
        return None
    if value == ANY or value in LEVELS:
        return value
    raise BadRequest("Choose the level as easy, medium or hard (or any level).")


# --- Estimating and storing difficulty -------------------------------------------------------


@dataclass(frozen=True)
class Refreshed:
    answers: int
    texts: int
    # Texts per level.
    levels: dict[str, int]
    min_answers: int
    converged: bool


def counted_answers() -> list[tuple[int, int, bool]]:
    """(player, text, exact hit) for every counted answer."""
    rows = db.session.execute(
        select(Round.player_id, Round.example_id, Round.guess == Example.boundary)
        .join(Example, Example.id == Round.example_id)
        .where(Round.guess.is_not(None), tally.COUNTED)
    )
    return [(player, example, bool(hit)) for player, example, hit in rows]


def refresh(min_answers: int | None = None) -> Refreshed:
    """Estimate every answered text's difficulty and store it with the texts' levels."""
    needed = current_app.config["LEVEL_MIN_ANSWERS"] if min_answers is None else min_answers
    answers = counted_answers()
    fitted = difficulty.fit(answers)
    # Levels are for normal play (daily and check texts are fitted, for the players' skills).
    normal = set(db.session.scalars(select(Example.id).where(Example.kind == NORMAL_ROUND)))
    levels = difficulty.levels(
        {t: d for t, d in fitted.difficulty.items() if t in normal}, fitted.answers, needed
    )
    db.session.execute(update(Example).values(difficulty=None, level=None))
    if fitted.difficulty:
        db.session.execute(
            update(Example.__table__)
            .where(Example.__table__.c.id == bindparam("example_id"))
            .values(difficulty=bindparam("new_difficulty"), level=bindparam("new_level")),
            [
                {"example_id": t, "new_difficulty": d, "new_level": levels.get(t)}
                for t, d in fitted.difficulty.items()
            ],
        )
    db.session.commit()
    cache.delete(RATED_CACHE_KEY)
    per_level = {level: 0 for level in LEVELS}
    for level in levels.values():
        per_level[level] += 1
    return Refreshed(len(answers), len(fitted.difficulty), per_level, needed, fitted.converged)


# --- What the home page offers ---------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    level: str
    label: str
    # Rated texts of this level in the category, and how many of them the player may still read.
    rated: int
    left: int

    @property
    def offered(self) -> bool:
        return self.left > 0


@dataclass(frozen=True)
class Offer:
    choices: list[Choice]
    set_size: int
    min_answers: int

    @property
    def open(self) -> bool:
        """Whether levels are offered at all: a set's worth of rated texts of every level."""
        return all(choice.rated >= self.set_size for choice in self.choices)


def rated_counts() -> dict[str, int]:
    """Rated texts of normal play per "category slug:level" and per "random:level"; cached (the
    home page reads it) until the next refresh, or RATED_SECONDS at most."""
    found = cache.get(RATED_CACHE_KEY)
    if found is None:
        found = {}
        rows = db.session.execute(
            select(Category.slug, Example.level, func.count(Example.id))
            .join(Category, Category.id == Example.category_id)
            .where(Example.kind == NORMAL_ROUND, Example.level.is_not(None))
            .group_by(Category.slug, Example.level)
        )
        for slug, level, count in rows:
            found[f"{slug}:{level}"] = count
            found[f"{starts.RANDOM}:{level}"] = found.get(f"{starts.RANDOM}:{level}", 0) + count
        cache.set(RATED_CACHE_KEY, found, timeout=RATED_SECONDS)
    return found


def offer(player: Player | None, category_slug: str) -> Offer:
    """The levels the home page offers for the chosen category ("random": all of them).

    Reads no table while the rated counts are cached and levels are not open; the player's
    unread texts per level are counted only when they are.
    """
    counts = rated_counts()
    rated = {level: counts.get(f"{category_slug}:{level}", 0) for level in LEVELS}
    size = current_app.config["SET_SIZE"]
    left = rated
    if player is not None and all(n >= size for n in rated.values()):
        unplayed = rounds.unplayed(player, None).where(Example.level.is_not(None))
        if category_slug != starts.RANDOM:
            unplayed = unplayed.join(Category, Category.id == Example.category_id).where(
                Category.slug == category_slug
            )
        unplayed = unplayed.subquery()
        left = dict(
            db.session.execute(
                select(unplayed.c.level, func.count()).group_by(unplayed.c.level)
            ).all()
        )
    return Offer(
        [Choice(lv, LABELS[lv], rated.get(lv, 0), left.get(lv, 0)) for lv in LEVELS],
        size,
        current_app.config["LEVEL_MIN_ANSWERS"],
    )

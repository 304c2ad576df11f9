"""Each worker's texts balanced by design: across the pool's systems (or its categories, when it
has one system) and across boundary positions (early, middle, late, none: all human).

Each worker first gets their counts of each kind and each position: the pool's shares of their
rounds, rounded up or down at random (seeded per worker) so that on average every kind is read
exactly in proportion to the pool. Their rounds are then filled one at a time: each pick takes,
among the texts the worker may read, the one whose kind and position are furthest behind the
worker's counts so far; among those, a text still under its annotation target, then the least
read, then a tie broken by the worker's seed. So every worker reads the pool's mix (each count
within one of its share where the pool allows), the order of the kinds differs from worker to
worker as in a Latin square, and within each kind texts fill up to their target evenly.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy import select

from app.extensions import db
from app.models import Category, Example, System

ALL_HUMAN = "all human"


def position(boundary: int, n: int) -> str:
    """Where the machine takes over: early, middle or late third, or none (all human)."""
    if boundary >= n:
        return ALL_HUMAN
    return ("early", "middle", "late")[min(boundary * 3 // max(n, 1), 2)]


@dataclass(frozen=True)
class Text:
    id: int
    kind: str  # its system (or category); ALL_HUMAN for an all-human text
    position: str


def texts(ids: Iterable[int]) -> dict[int, Text]:
    """The pool's texts with what a worker's mix is balanced on."""
    rows = db.session.execute(
        select(Example.id, System.name, Category.slug, Example.boundary, Example.n_sentences)
        .join(System, System.id == Example.system_id)
        .join(Category, Category.id == Example.category_id)
        .where(Example.id.in_(list(ids)))
    ).all()
    machine = [r for r in rows if r.boundary < r.n_sentences]
    by_system = len({r.name for r in machine}) > 1
    return {
        r.id: Text(
            r.id,
            ALL_HUMAN if r.boundary >= r.n_sentences else (r.name if by_system else r.slug),
            position(r.boundary, r.n_sentences),
        )
        for r in rows
    }


def quotas(shares: dict[str, float], picks: int, rng: random.Random) -> dict[str, int]:
    """How many of `picks` each kind gets: share × picks rounded up or down at random so that
    the counts add up to `picks`, each is within one of its share, and on average each is
    exactly its share (systematic sampling: points u, u+1, … over the kinds laid end to end, in
    a random order)."""
    order = sorted(shares)
    rng.shuffle(order)
    u = rng.random()
    counts, start = {}, 0.0
    for kind in order:
        end = start + shares[kind] * picks
        counts[kind] = math.ceil(end - u - 1e-12) - math.ceil(start - u - 1e-12)
        start = end
    return counts


class Picker:
    """Picks one worker's texts, one round at a time (see the module's docstring)."""

    def __init__(
        self,
        pool: dict[int, Text],
        loads: Counter,
        target: int,
        ties: dict[int, float],
        picks: int,
        rng: random.Random,
    ) -> None:
        self.pool = dict(pool)
        self.loads = loads
        self.target = target
        self.ties = ties
        self.picks = max(picks, 1)
        total = max(len(pool), 1)
        kinds = Counter(t.kind for t in pool.values())
        positions = Counter(t.position for t in pool.values())
        # This worker's counts of each kind and position (the pool's shares, rounded at random).
        self.kind_quota = quotas({k: n / total for k, n in kinds.items()}, self.picks, rng)
        self.position_quota = quotas({k: n / total for k, n in positions.items()}, self.picks, rng)
        self.kinds: Counter = Counter()
        self.positions: Counter = Counter()
        self.picked = 0

    def _key(self, text: Text) -> tuple:
        ahead = self.picked + 1
        kind_behind = self.kind_quota[text.kind] * ahead / self.picks - self.kinds[text.kind]
        position_behind = (
            self.position_quota[text.position] * ahead / self.picks - self.positions[text.position]
        )
        load = self.loads[text.id]
        return (
            -round(kind_behind, 9),
            -round(position_behind, 9),
            load >= self.target,
            load,
            self.ties[text.id],
        )

    def pick(self, allowed: Callable[[int], bool]) -> int | None:
        """The next text for this worker among those `allowed`; None when none is."""
        for text in sorted(self.pool.values(), key=self._key):
            if allowed(text.id):
                del self.pool[text.id]
                self.kinds[text.kind] += 1
                self.positions[text.position] += 1
                self.picked += 1
                return text.id
        return None

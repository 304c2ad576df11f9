"""Choosing the texts of a daily challenge's day (app/game/daily.py), from candidates: pure
functions, no database.

A day holds `count` texts of pairwise distinct passages that no earlier day used. Its
composition follows `rules_for`: mostly texts a language model continued, at least one all-human
text, at most one spliced baseline, spread over categories and boundary positions; a pool that
cannot keep every rule still gives the best day it can (`pick_texts`), and says what it lacks.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

HUMAN = "human"  # every sentence written by a person
MACHINE = "machine"  # a language model continued the text
SPLICE = "splice"  # the spliced baseline: the rest comes from another human-written text
SPLICE_SYSTEMS = frozenset({"splice-baseline"})
POSITION_BINS = ("early", "middle", "late")
# Rules in the order they matter: when a pool cannot meet them all, a day keeps the first ones
# it can (a site never goes without a daily) and the ones it breaks are reported.
RULE_ORDER = ("machine", "splice", "human", "few_human", "category", "position")
SEARCH_STEPS = 200_000


def text_kind(
    boundary: int,
    n_sentences: int,
    system: str,
    decoding: dict | None,
    source: dict | None = None,
) -> str:
    """HUMAN, MACHINE or SPLICE. A text that turns is a splice when its system is the splice
    baseline, its source names a second passage, or nothing was decoded (the reveal then tells the
    player the rest came from another human-written text, app/game/insights.py)."""
    if boundary >= n_sentences:
        return HUMAN
    if system in SPLICE_SYSTEMS or (source or {}).get("splice_doc_id") not in (None, ""):
        return SPLICE
    return MACHINE if decoding else SPLICE


def position_bin(boundary: int, n_sentences: int) -> int | None:
    """Where the text turns: 0 early, 1 middle, 2 late (thirds of the positions 1..N-1); None for
    an all-human text. The daily's measure of difficulty: after an early boundary a reader sees
    many machine sentences to judge, after a late one only a few."""
    if boundary >= n_sentences:
        return None
    spread = len(POSITION_BINS)
    return min(spread - 1, spread * (boundary - 1) // max(1, n_sentences - 1))


@dataclass(frozen=True)
class Candidate:
    example_id: int
    category_id: int
    kind: str
    boundary: int
    n_sentences: int
    passages: tuple[int, ...]

    @property
    def all_human(self) -> bool:
        return self.kind == HUMAN

    @property
    def position(self) -> int | None:
        return position_bin(self.boundary, self.n_sentences)


@dataclass(frozen=True)
class Rules:
    """What a day of `count` texts should hold (see `rules_for`)."""

    count: int
    min_machine: int
    max_splice: int
    min_human: int
    max_human: int
    max_per_category: int
    max_per_position: int

    def describe(self, name: str) -> str:
        return {
            "machine": f"at least {self.min_machine} texts a language model continued",
            "splice": f"at most {self.max_splice} spliced baseline",
            "human": f"at least {self.min_human} all-human text",
            "few_human": f"at most {self.max_human} all-human texts",
            "category": f"at most {self.max_per_category} texts of one category",
            "position": f"at most {self.max_per_position} texts turning in the same third",
        }[name]


def rules_for(count: int, categories: int, positions: int) -> Rules:
    """The rules for a day of `count` texts drawn from a pool whose unused texts span
    `categories` categories and `positions` position bins (early/middle/late boundaries).

    At least three texts (fewer on a small day) a language model continued, at least one all-human
    text (from two texts up) and at most a third all-human (rounded up), at most one splice; no
    category gives more than its even share (rounded up) and, among the texts that turn, no third
    of the text holds more than half of them (rounded up). Category and position spread follow what
    the pool still has, so a pool of one category is not refused for lack of others.
    """
    min_human = 1 if count >= 2 else 0
    turning = count - min_human
    spread = max(1, min(categories, count))
    return Rules(
        count=count,
        min_machine=min(3, turning),
        max_splice=1,
        min_human=min_human,
        max_human=max(min_human, -(-count // 3)),
        max_per_category=-(-count // spread),
        max_per_position=-(-turning // 2) if positions >= 2 and turning >= 2 else count,
    )


def pool_rules(fresh: Sequence[Candidate], count: int) -> Rules:
    """`rules_for` the unused candidates of a pool."""
    categories = {c.category_id for c in fresh}
    positions = {c.position for c in fresh if c.position is not None}
    return rules_for(count, len(categories), len(positions))


def broken_rules(rules: Rules, texts: Sequence[Candidate]) -> list[str]:
    """The rules (RULE_ORDER names) a day of these texts breaks."""
    kinds = Counter(c.kind for c in texts)
    categories = Counter(c.category_id for c in texts)
    positions = Counter(c.position for c in texts if c.position is not None)
    checks = {
        "machine": kinds[MACHINE] >= rules.min_machine,
        "splice": kinds[SPLICE] <= rules.max_splice,
        "human": kinds[HUMAN] >= rules.min_human,
        "few_human": kinds[HUMAN] <= rules.max_human,
        "category": max(categories.values(), default=0) <= rules.max_per_category,
        "position": max(positions.values(), default=0) <= rules.max_per_position,
    }
    return [name for name in RULE_ORDER if not checks[name]]


class _OutOfSteps(Exception):
    pass


def _search(
    fresh: Sequence[Candidate], rules: Rules, active: frozenset[str]
) -> list[Candidate] | None:
    """`rules.count` texts with pairwise distinct passages meeting the `active` rules, trying
    `fresh` in its order (depth first, so it finds a day whenever one exists, within
    SEARCH_STEPS); None when there is none (or the steps ran out)."""
    count = rules.count
    caps = {
        SPLICE: rules.max_splice if "splice" in active else count,
        HUMAN: rules.max_human if "few_human" in active else count,
    }
    need_machine = rules.min_machine if "machine" in active else 0
    need_human = rules.min_human if "human" in active else 0
    max_category = rules.max_per_category if "category" in active else count
    max_position = rules.max_per_position if "position" in active else count
    taken: list[Candidate] = []
    seen: set[int] = set()
    kinds: Counter[str] = Counter()
    categories: Counter[int] = Counter()
    positions: Counter[int | None] = Counter()
    steps = 0

    def fits(c: Candidate) -> bool:
        if kinds[c.kind] >= caps.get(c.kind, count) or categories[c.category_id] >= max_category:
            return False
        if c.position is not None and positions[c.position] >= max_position:
            return False
        left = count - len(taken) - 1
        machines = kinds[MACHINE] + (c.kind == MACHINE)
        humans = kinds[HUMAN] + (c.kind == HUMAN)
        return max(0, need_machine - machines) + max(0, need_human - humans) <= left

    def extend(start: int) -> bool:
        nonlocal steps
        if len(taken) == count:
            return True
        for i in range(start, len(fresh)):
            if len(fresh) - i < count - len(taken):
                return False
            steps += 1
            if steps > SEARCH_STEPS:
                raise _OutOfSteps
            c = fresh[i]
            if seen.intersection(c.passages) or not fits(c):
                continue
            taken.append(c)
            seen.update(c.passages)
            kinds[c.kind] += 1
            categories[c.category_id] += 1
            positions[c.position] += 1
            if extend(i + 1):
                return True
            taken.pop()
            seen.difference_update(c.passages)
            kinds[c.kind] -= 1
            categories[c.category_id] -= 1
            positions[c.position] -= 1
        return False

    try:
        return list(taken) if extend(0) else None
    except _OutOfSteps:
        return None


@dataclass(frozen=True)
class Pick:
    """A day's texts in play order, the rules they were drawn under, and the rules the pool could
    not meet (empty for a day that keeps them all)."""

    texts: list[Candidate]
    rules: Rules
    missed: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.missed

    def shortfall(self) -> str:
        """The missed rules in words ("" when none)."""
        return "; ".join(self.rules.describe(name) for name in self.missed)


def pick_texts(
    candidates: Sequence[Candidate], used: set[int], count: int, rng: random.Random
) -> Pick | None:
    """A day of `count` candidates whose passages are unused and pairwise distinct, meeting the
    composition rules (`rules_for`) whenever the unused pool allows. When it cannot, the best
    day it can: the rules are kept in RULE_ORDER as far as the pool allows, and the ones missed
    are named in the result. None only when there are not `count` texts of distinct unused
    passages at all."""
    fresh = [c for c in candidates if not used.intersection(c.passages)]
    # A random order where a text that shows two passages (a splice) comes up a quarter as
    # eagerly: it spends two of the pool's passages, and a pool lasts longer on texts that spend
    # one; splices still appear, on about a third of the days.
    keys = {c.example_id: rng.random() * max(1, len(c.passages)) ** 2 for c in fresh}
    fresh.sort(key=lambda c: keys[c.example_id])
    rules = pool_rules(fresh, count)
    texts = _search(fresh, rules, frozenset(RULE_ORDER))
    if texts is None:
        kept: frozenset[str] = frozenset()
        for name in RULE_ORDER:
            if _search(fresh, rules, kept | {name}) is not None:
                kept |= {name}
        texts = _search(fresh, rules, kept)
        if texts is None:
            return None
    rng.shuffle(texts)
    return Pick(texts, rules, tuple(broken_rules(rules, texts)))


def plan_days(candidates: Sequence[Candidate], used: set[int], count: int) -> list[Pick]:
    """Every day `pick_texts` can still draw, in order (one simulated draw, seeded)."""
    rng = random.Random(0)
    spent = set(used)
    days: list[Pick] = []
    while (picked := pick_texts(candidates, spent, count, rng)) is not None:
        days.append(picked)
        for candidate in picked.texts:
            spent.update(candidate.passages)
    return days


def full_days(days: Sequence[Pick]) -> int:
    """How many of these days, from the first, keep every rule."""
    full = 0
    for day in days:
        if not day.complete:
            break
        full += 1
    return full

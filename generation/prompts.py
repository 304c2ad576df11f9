"""Prompt sampling (pure): which documents, how many human sentences, which p, which seed.

Boundary positions are stratified: within each category the run's examples get h values whose
counts match the requested distribution (uniform on 1..N, or an all-human share and uniform on
1..N-1) as closely as whole numbers allow, in a shuffled order seeded by the run seed. Every other
draw for an example (its p and seed) comes from a random generator seeded by (run seed, category,
document, repeat). The plan depends only on the corpus and the settings, so a resumed run, a shard
of a run and the whole run agree example by example.

An example the quality or content filter rejects is replaced (`replacement`): same category, same
h, same decoding settings, another document drawn from the plan's, a new seed. So rejections do not
skew the kept set's boundary (or p) distribution away from the requested one.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from generation.corpus import Document
from generation.decoding import P_DECIMALS, PDistribution  # noqa: F401 (moved; re-exported)
from generation.errors import PlanError

if TYPE_CHECKING:
    from generation.decoding import Decoding, DecodingPlan

SEED_RANGE = 2**31
HUMAN_SLUG = "human"  # ids of all-human examples name them so, whichever run made them
GROVER_FIELDS = ("domain", "date", "authors", "title")
PROMPT_FORMATS = ("plain", "grover")
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


@dataclass(frozen=True)
class Task:
    """One planned example: the first `h` sentences of `doc` are the prompt."""

    index: int
    id: str
    category: str
    doc: Document
    repeat: int
    h: int
    n: int
    decoding: Decoding | None
    seed: int
    replaces: str | None = None  # the id of the rejected example this one replaces

    @property
    def p(self) -> float | None:
        return None if self.decoding is None else self.decoding.p

    @property
    def all_human(self) -> bool:
        return self.h == self.n

    @property
    def prompt(self) -> list[str]:
        return list(self.doc.sentences[: self.h])


@dataclass
class Plan:
    tasks: list[Task]
    skipped_documents: list[str]  # ids of documents too short for N sentences
    category: str = ""  # the run's category (documents without their own)
    documents: list[Document] = field(default_factory=list)  # long enough: replacements' pool
    size: int = 0  # tasks in the whole plan (before a shard keeps its own)
    system_slug: str = ""  # the run's system, as its ids name it


def slug(text: str) -> str:
    """A lowercase id fragment: letters, digits, dots and dashes."""
    out = re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")
    return out or "model"


def check_settings(n: int, per_doc: int, human_share: float | None) -> None:
    if n < 2:
        raise PlanError(f"N (sentences per example) must be at least 2, got {n}")
    if per_doc < 1:
        raise PlanError(f"examples per document must be at least 1, got {per_doc}")
    if human_share is not None and not 0.0 <= human_share <= 1.0:
        raise PlanError(f"the all-human share must be in [0, 1], got {human_share}")


def draw_boundary(rng: random.Random, n: int, human_share: float | None) -> int:
    """h, the number of human sentences: uniform on 1..N, or all-human (N) with a fixed share
    and otherwise uniform on 1..N-1."""
    if human_share is None:
        return rng.randint(1, n)
    if rng.random() < human_share:
        return n
    return rng.randint(1, n - 1)


def boundary_distribution(n: int, human_share: float | None) -> dict[int, float]:
    """The requested P(h) for h = 1..N: uniform, or `human_share` at N and the rest uniform on
    1..N-1 (the same law `draw_boundary` samples)."""
    if human_share is None:
        return {h: 1 / n for h in range(1, n + 1)}
    rest = (1 - human_share) / (n - 1)
    return {**{h: rest for h in range(1, n)}, n: human_share}


def stratified_counts(
    count: int, distribution: dict[int, float], rng: random.Random
) -> dict[int, int]:
    """How many of `count` examples get each h: the floor of count × P(h), and the units left over
    to the largest remainders (ties in a random order), so every count is within 1 of its
    expectation and they sum to `count`."""
    weights = {h: Fraction(prob) for h, prob in distribution.items()}  # exact arithmetic
    total = sum(weights.values())
    exact = {h: count * weight / total for h, weight in weights.items()}
    counts = {h: math.floor(value) for h, value in exact.items()}
    order = list(distribution)
    rng.shuffle(order)
    order.sort(key=lambda h: exact[h] - counts[h], reverse=True)
    for h in order[: count - sum(counts.values())]:
        counts[h] += 1
    return counts


def stratified_boundaries(
    count: int, n: int, human_share: float | None, rng: random.Random
) -> list[int]:
    """`count` boundary positions with stratified counts (see `stratified_counts`), shuffled."""
    counts = stratified_counts(count, boundary_distribution(n, human_share), rng)
    values = [h for h in sorted(counts) for _ in range(counts[h])]
    rng.shuffle(values)
    return values


def make_plan(
    docs: list[Document],
    *,
    category: str,
    system_slug: str,
    n: int = 10,
    per_doc: int = 1,
    seed: int = 0,
    human_share: float | None = None,
    decoding: DecodingPlan | None = None,
) -> Plan:
    """The examples of a run, in a fixed order (document order, then repeat).

    A document's own `category` field, when it has one, is its examples' category; `category`
    applies to the others.
    """
    check_settings(n, per_doc, human_share)
    tasks: list[Task] = []
    skipped: list[str] = [d.id for d in docs if len(d.sentences) < n]
    usable = [d for d in docs if len(d.sentences) >= n]
    slots: dict[str, int] = {}
    for doc in usable:
        key = doc.category or category
        slots[key] = slots.get(key, 0) + per_doc
    boundaries = {
        key: iter(stratified_boundaries(size, n, human_share, random.Random(f"{seed}/{key}/h")))
        for key, size in slots.items()
    }
    for doc in usable:
        doc_category = doc.category or category
        for repeat in range(per_doc):
            rng = random.Random(f"{seed}/{doc_category}/{doc.id}/{repeat}")
            h = next(boundaries[doc_category])
            first = decoding.draw_p(rng) if decoding is not None and h < n else None
            task_seed = rng.randrange(SEED_RANGE)
            tasks.append(
                Task(
                    index=len(tasks),
                    # An all-human example is named as human, whichever system's run made it.
                    id=f"{doc.id}-{HUMAN_SLUG if h == n else system_slug}-{repeat}",
                    category=doc_category,
                    doc=doc,
                    repeat=repeat,
                    h=h,
                    n=n,
                    decoding=None if first is None else decoding.draw(first, rng),
                    seed=task_seed,
                )
            )
    return Plan(
        tasks=tasks,
        skipped_documents=skipped,
        category=category,
        documents=usable,
        size=len(tasks),
        system_slug=system_slug,
    )


def replacement(task: Task, plan: Plan, round_: int) -> Task | None:
    """The example that stands in for `task` (rejected) in replacement round `round_` (1, 2, …):
    the same category, h, N and decoding settings, a document of that category drawn from the
    plan's (another one when there is one), and a new seed. Its id names the document it is built
    from, the system, the round and the original's place in the plan
    (`<doc>-<system>-r<round>-<task>`), so a resumed run and every shard make the same
    replacements, and per-passage counts stay right; `replaces` names the original. The draw follows
    the rejected example's seed, not its id (which names the system): two systems run on one plan
    get the same replacements, and stay paired. None when no document of the category is long
    enough."""
    original = task.replaces or task.id
    pool = [d for d in plan.documents if (d.category or plan.category) == task.category]
    others = [d for d in pool if d.id != task.doc.id] or pool
    if not others:
        return None
    rng = random.Random(f"{task.seed}/replace/{round_}")
    place = task.index % max(plan.size, 1)
    doc = rng.choice(others)
    return Task(
        index=plan.size * round_ + place,
        id=f"{doc.id}-{plan.system_slug or 'model'}-r{round_}-{place}",
        category=task.category,
        doc=doc,
        repeat=task.repeat,
        h=task.h,
        n=task.n,
        decoding=task.decoding,
        seed=rng.randrange(SEED_RANGE),
        replaces=original,
    )


def retry_seed(seed: int, attempt: int) -> int:
    """The seed of attempt `attempt` (0 is the example's own seed)."""
    if attempt == 0:
        return seed
    return random.Random(f"{seed}/retry/{attempt}").randrange(SEED_RANGE)


def grover_date(value: str) -> str:
    """Grover wrote dates as "March 14, 2025"; ISO dates (YYYY-MM-DD) are converted."""
    found = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", value.strip())
    if not found:
        return value.strip()
    year, month, day = (int(x) for x in found.groups())
    if not 1 <= month <= 12:
        return value.strip()
    return f"{MONTHS[month - 1]} {day:02d}, {year}"


def grover_header(doc: Document) -> tuple[str, list[str]]:
    """The metadata Grover was conditioned on, before the body: domain, date, authors, title,
    each wrapped in `<|beginX|>…<|endX|>`, then `<|beginarticle|>`. Returns (text, fields used)."""
    values = {
        "domain": doc.domain,
        "date": grover_date(doc.date) if doc.date else None,
        "authors": ", ".join(doc.authors) if doc.authors else None,
        "title": doc.title,
    }
    parts, used = [], []
    for key in GROVER_FIELDS:
        if values[key]:
            parts.append(f"<|begin{key}|>{values[key]}<|end{key}|>")
            used.append(key)
    parts.append("<|beginarticle|>")
    return "".join(parts), used


GROVER_END = "<|endofarticle|>"


def grover_tags() -> list[str]:
    """Every marker the Grover format writes, and the end-of-article token."""
    tags = [f"<|{edge}{key}|>" for key in GROVER_FIELDS for edge in ("begin", "end")]
    return [*tags, "<|beginarticle|>", GROVER_END]


def prompt_text(doc: Document, h: int, prompt_format: str) -> tuple[str, dict]:
    """The text the model is conditioned on, and what to record about its format in `meta`."""
    body = " ".join(doc.sentences[:h])
    if prompt_format == "plain":
        return body, {"prompt_format": "plain"}
    if prompt_format == "grover":
        header, used = grover_header(doc)
        return header + body, {"prompt_format": "grover", "grover_fields": used}
    raise PlanError(f"unknown prompt format {prompt_format!r}; choose from {PROMPT_FORMATS}")

"""Passages behind the examples, and which pool serves each example.

Every example is linked to the human-written passages it shows (`app/catalog/passages.py`). A
passage belongs to one pool: normal play, or the daily challenge. An example is served from the
pool of its passages: "normal", or "daily" (held back for the challenge, so nobody meets its
passage in normal play). A spliced baseline whose two passages sit in different pools is "spare":
served nowhere, since either pool would show a passage of the other.

The operator holds texts back with `flask import FILE --reserve-daily SHARE` (a share of the new
passages of each category) or later with `flask daily reserve SHARE` (a share of the passages no
one has read yet).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sqlalchemy import insert, select, update

from app.catalog.passages import passage_keys
from app.extensions import db
from app.models import Example, ExamplePassage, Passage, Round, Study

NORMAL = "normal"
DAILY = "daily"
SPARE = "spare"
CHUNK = 500


def _chunks(values: list, size: int = CHUNK) -> Iterable[list]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _passage_ids(keys: Iterable[str]) -> dict[str, int]:
    """Ids of these passage keys, creating the missing passages (no commit)."""
    wanted = sorted(set(keys))
    ids: dict[str, int] = {}

    def lookup(chunk: list[str]) -> None:
        query = select(Passage.key, Passage.id).where(Passage.key.in_(chunk))
        ids.update(db.session.execute(query).all())

    for chunk in _chunks(wanted):
        lookup(chunk)
    missing = [key for key in wanted if key not in ids]
    for chunk in _chunks(missing):
        db.session.execute(insert(Passage), [{"key": key} for key in chunk])
        lookup(chunk)
    return ids


def link_passages(examples: list[Example]) -> dict[int, list[int]]:
    """Link flushed examples to their passages; returns passage ids by example id (no commit)."""
    keys = {ex.id: passage_keys(ex.source, ex.external_id) for ex in examples}
    ids = _passage_ids(key for ks in keys.values() for key in ks)
    links = {ex_id: [ids[key] for key in ks] for ex_id, ks in keys.items()}
    rows = [{"example_id": e, "passage_id": p} for e, ps in links.items() for p in ps]
    for chunk in _chunks(rows):
        db.session.execute(insert(ExamplePassage), chunk)
    return links


def _pools_of(passage_ids: list[int], excluding: set[int]) -> dict[int, str]:
    """The pool of passages that other examples already use ("normal" wins when mixed)."""
    pools: dict[int, str] = {}
    for chunk in _chunks(passage_ids):
        rows = db.session.execute(
            select(ExamplePassage.passage_id, Example.id, Example.kind)
            .join(Example, Example.id == ExamplePassage.example_id)
            .where(ExamplePassage.passage_id.in_(chunk))
        )
        for passage_id, example_id, kind in rows:
            if example_id in excluding or kind == SPARE:
                continue
            pool = DAILY if kind == DAILY else NORMAL
            if pools.get(passage_id) != NORMAL:
                pools[passage_id] = pool
    return pools


def _choose(
    candidates: dict[int, int],
    share: float,
    rng: random.Random | None = None,
    neighbours: dict[int, set[int]] | None = None,
) -> set[int]:
    """A share of candidate passages, drawn within each category: {passage: category}.

    `neighbours` links passages that a spliced baseline shows together. The draw grows along
    those links (a neighbour of a passage already drawn comes first, the one with most such
    links), so that few splices end up with one passage in each pool, where neither pool may
    serve them.
    """
    neighbours = neighbours or {}
    by_category: dict[int, list[int]] = defaultdict(list)
    for passage, category in sorted(candidates.items()):
        by_category[category].append(passage)
    rng = rng or random.Random()
    chosen: set[int] = set()
    for passages in by_category.values():
        count = math.floor(share * len(passages) + 0.5)
        left = set(passages)
        frontier: dict[int, int] = {}  # passage -> links into the chosen set
        for _ in range(count):
            if frontier:
                most = max(frontier.values())
                pick = rng.choice(sorted(p for p, n in frontier.items() if n == most))
            else:
                pick = rng.choice(sorted(left))
            chosen.add(pick)
            left.discard(pick)
            frontier.pop(pick, None)
            for other in neighbours.get(pick, ()):
                if other in left:
                    frontier[other] = frontier.get(other, 0) + 1
    return chosen


def _splice_links(passage_lists) -> dict[int, set[int]]:
    """Which passages are shown together by one example (a splice's two passages)."""
    neighbours: dict[int, set[int]] = defaultdict(set)
    for passages in passage_lists:
        for a in passages:
            neighbours[a].update(b for b in passages if b != a)
    return neighbours


def _kind_for(pools: list[str]) -> str:
    if all(pool == DAILY for pool in pools):
        return DAILY
    if all(pool == NORMAL for pool in pools):
        return NORMAL
    return SPARE


def _set_kinds(kinds: dict[int, str]) -> None:
    by_kind: dict[str, list[int]] = defaultdict(list)
    for example_id, kind in kinds.items():
        by_kind[kind].append(example_id)
    for kind, ids in by_kind.items():
        for chunk in _chunks(ids):
            db.session.execute(update(Example).where(Example.id.in_(chunk)).values(kind=kind))


def place_new_examples(examples: list[Example], daily_share: float = 0.0) -> dict[str, int]:
    """Link new (flushed) examples to their passages and put each in its pool (no commit).

    A passage other examples already use keeps its pool; a share `daily_share` of the new
    passages of each category goes to the daily challenge. Returns how many examples went to
    each pool.
    """
    links = link_passages(examples)
    own = {ex.id for ex in examples}
    passages = sorted({p for ps in links.values() for p in ps})
    pools = _pools_of(passages, own)
    if daily_share > 0:
        first_category = {}
        for ex in examples:
            first_category.setdefault(links[ex.id][0], ex.category_id)
        candidates = {p: c for p, c in first_category.items() if p not in pools}
        drawn = _choose(candidates, daily_share, None, _splice_links(links.values()))
        pools.update(dict.fromkeys(drawn, DAILY))
    kinds = {ex_id: _kind_for([pools.get(p, NORMAL) for p in ps]) for ex_id, ps in links.items()}
    _set_kinds({ex_id: kind for ex_id, kind in kinds.items() if kind != NORMAL})
    counts = dict.fromkeys((NORMAL, DAILY, SPARE), 0)
    for kind in kinds.values():
        counts[kind] += 1
    return counts


def _in_study_pools() -> set[int]:
    """Example ids fixed in some crowd study's pool (they stay where the study expects them)."""
    ids: set[int] = set()
    for pool in db.session.scalars(select(Study.pool)):
        ids.update(_ids_in(pool or {}))
    return ids


def _ids_in(pool: dict) -> Iterator[int]:
    """The example ids of a study's pool: its lists of ids, and those of its conditions' own
    pools (`pool["conditions"]`, a pool per condition); other values (the allocation seed)
    hold none."""
    for value in pool.values():
        if isinstance(value, list):
            yield from (int(v) for v in value)
        elif isinstance(value, dict):
            yield from _ids_in(value)


@dataclass(frozen=True)
class Reserved:
    passages: int
    daily: int
    spare: int


def reserve_unread(share: float, rng: random.Random | None = None) -> Reserved:
    """Move a share of the passages nobody has read (per category) to the daily challenge.

    Only passages whose every example is in normal play, never played (in any round) and in no
    study's pool are candidates. Commits.
    """
    if not 0 < share <= 1:
        raise ValueError("the share must be more than 0 and at most 1")
    links: dict[int, list[tuple[int, str, int]]] = defaultdict(list)
    rows = db.session.execute(
        select(ExamplePassage.passage_id, Example.id, Example.kind, Example.category_id).join(
            Example, Example.id == ExamplePassage.example_id
        )
    )
    for passage_id, example_id, kind, category_id in rows:
        links[passage_id].append((example_id, kind, category_id))
    played = set(db.session.scalars(select(Round.example_id).distinct()))
    in_studies = _in_study_pools()
    candidates = {
        passage: uses[0][2]
        for passage, uses in links.items()
        if all(kind == NORMAL and ex not in played and ex not in in_studies for ex, kind, _ in uses)
    }
    passages_of: dict[int, list[int]] = defaultdict(list)
    for passage, uses in links.items():
        for ex, _kind, _category in uses:
            passages_of[ex].append(passage)
    chosen = _choose(candidates, share, rng, _splice_links(passages_of.values()))
    touched = {ex for passage in chosen for ex, _, _ in links[passage]}
    current = {ex: kind for uses in links.values() for ex, kind, _ in uses}

    def pool(passage: int) -> str:
        if passage in chosen:
            return DAILY
        kinds = {current[ex] for ex, _, _ in links[passage]} - {SPARE}
        return DAILY if kinds == {DAILY} else NORMAL

    kinds = {ex: _kind_for([pool(p) for p in passages_of[ex]]) for ex in touched}
    _set_kinds(kinds)
    db.session.commit()
    values = list(kinds.values())
    return Reserved(len(chosen), values.count(DAILY), values.count(SPARE))

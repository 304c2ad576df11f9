"""Which text goes in each round of one worker's schedule. Pure: no Flask, no database.

A text shows one source passage, two (a spliced baseline: its own and the donor's), or none
known (then it stands for itself). No worker is shown a passage twice, checks included (a check
shows the passage it was built from), nor a passage they read before (practice included).

`fill` first places the texts the way the study prefers them: checks first (their texts are
few), then the normal rounds, each taken by the caller's `pick` (slots passes balance.Picker's,
which keeps the pool's mix of systems and boundary positions) or else least-read first. Where
that leaves a required round empty (a splice took two passages another round needed, say), it
solves the rounds left as a maximum bipartite matching of rounds to passages over the
one-passage texts (networkx's Hopcroft-Karp): if any schedule of one-passage texts is complete,
that one is found. Only then is a round reported missing, and the worker is not admitted (see
admission.admit_with_schedule).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import networkx as nx
from networkx.algorithms import bipartite

Token = tuple[str, int]  # ("passage", id) or ("example", id)
# Picks the next normal text among those a predicate allows (None when none is).
Pick = Callable[[Callable[[int], bool]], int | None]


@dataclass(frozen=True)
class Filled:
    """A schedule's texts: position -> example id (None where nothing was left), and the
    required positions left empty."""

    texts: dict[int, int | None]
    missing: tuple[int, ...]

    @property
    def complete(self) -> bool:
        return not self.missing


def first_free(candidates: Iterable[int], tokens: Mapping[int, frozenset], used: set) -> int | None:
    return next((i for i in candidates if not tokens[i] & used), None)


def _unit(example: int, tokens: Mapping[int, frozenset]) -> Token | None:
    """What a one-passage text uses up: its passage (or itself, when it has none); None for a
    text of two passages, which the matching leaves out."""
    passages = [t for t in tokens[example] if t[0] == "passage"]
    if len(passages) > 1:
        return None
    return passages[0] if passages else ("example", example)


def _greedy(
    plan: list[str],
    fixed: Mapping[int, int | None],
    candidates: Mapping[str, list[int]],
    tokens: Mapping[int, frozenset],
    used: set[Token],
    rng: random.Random,
    pick: Pick | None = None,
) -> dict[int, int | None]:
    chosen: dict[int, int | None] = dict(fixed)
    used = set(used)
    normal = [i for i in candidates.get("normal", [])]
    taken: set[int] = {e for e in fixed.values() if e is not None}
    for position, kind in enumerate(plan):
        if position in chosen or kind == "normal":
            continue
        pool = sorted(candidates.get(kind, []))
        rng.shuffle(pool)
        found = first_free((c for c in pool if c not in taken), tokens, used)
        chosen[position] = found
        if found is not None:
            used |= tokens[found]
            taken.add(found)
    for position in range(len(plan)):
        if position in chosen:
            continue
        if pick is not None:
            found = pick(lambda c, seen=used: c not in taken and not tokens[c] & seen)
        else:
            found = first_free((c for c in normal if c not in taken), tokens, used)
        chosen[position] = found
        if found is not None:
            used |= tokens[found]
            taken.add(found)
    return chosen


def _matched(
    plan: list[str],
    positions: list[int],
    candidates: Mapping[str, list[int]],
    tokens: Mapping[int, frozenset],
    used: set[Token],
) -> dict[int, int]:
    """The most of `positions` that one-passage texts on distinct passages can fill."""
    graph_edges = []
    best: dict[tuple[int, Token], int] = {}
    for position in positions:
        for example in candidates.get(plan[position], []):
            unit = _unit(example, tokens)
            if unit is None or tokens[example] & used:
                continue
            key = (position, unit)
            if key not in best:  # candidates come in order of preference
                best[key] = example
                graph_edges.append((("slot", position), ("unit", unit)))
    if not graph_edges:
        return {}
    graph = nx.Graph(graph_edges)
    top = {node for node in graph if node[0] == "slot"}
    matching = bipartite.hopcroft_karp_matching(graph, top_nodes=top)
    return {node[1]: best[(node[1], matching[node][1])] for node in top if node in matching}


def fill(
    plan: list[str],
    required: int,
    candidates: Mapping[str, list[int]],
    tokens: Mapping[int, frozenset],
    used: set[Token],
    rng: random.Random,
    fixed: Mapping[int, int | None] | None = None,
    pick: Pick | None = None,
) -> Filled:
    """The texts of a schedule of slot kinds `plan`, the first `required` of them required.

    `candidates` gives, per slot kind, the example ids it may take, normal texts in order of
    preference (least read first); `tokens` what each example shows; `used` what the worker
    has been shown already; `fixed` the positions already played, kept as they are; `pick`,
    when given, takes the normal rounds' texts in its own order first (the matching, if needed,
    then takes `candidates`' order).
    """
    fixed = dict(fixed or {})
    chosen = _greedy(plan, fixed, candidates, tokens, used, rng, pick)
    empty = [p for p in range(required) if chosen[p] is None]
    if empty:
        free = [p for p in range(required) if p not in fixed]
        shown = set(used).union(*(tokens[e] for e in fixed.values() if e is not None))
        matched = _matched(plan, free, candidates, tokens, shown)
        if len(matched) > len(free) - len(empty):
            chosen = {**fixed, **{p: matched.get(p) for p in free}}
            # The optional rounds after, from what is left.
            for position in range(required, len(plan)):
                chosen.pop(position, None)
            shown |= set().union(*(tokens[e] for e in matched.values()))
            rest = _greedy(
                plan[required:],
                {},
                {k: [c for c in v if c not in matched.values()] for k, v in candidates.items()},
                tokens,
                shown,
                rng,
            )
            chosen.update({required + p: e for p, e in rest.items()})
    missing = tuple(p for p in range(required) if chosen.get(p) is None)
    return Filled({p: chosen.get(p) for p in range(len(plan))}, missing)

"""Agreement between workers who answered the same text, as a study runs. Pure: no Flask, no
database.

Pairwise rates compare every unordered pair of answers to one text (the same sentence; at most
one sentence apart). Krippendorff's alpha is computed from the coincidence matrix of the values
(Krippendorff, Content Analysis, ch. 12): alpha = 1 - D_o / D_e, with the interval distance
(a - b)^2 or the nominal one (a != b). Only texts with two or more answers count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Agreement:
    texts: int  # texts with two or more answers
    answers: int  # answers on those texts
    pairs: int
    exact_rate: float | None
    within_one_rate: float | None
    alpha_interval: float | None
    alpha_nominal: float | None


def _multi(units: Iterable[Sequence[float]]) -> list[Sequence[float]]:
    return [u for u in units if len(u) >= 2]


def krippendorff_alpha(units: Iterable[Sequence[float]], level: str = "interval") -> float | None:
    """Alpha over units (the values given for one item); None when undefined (no variation or
    fewer than two pairable values)."""
    if level not in ("interval", "nominal"):
        raise ValueError("level must be interval or nominal")

    def delta(a: float, b: float) -> float:
        return (a - b) ** 2 if level == "interval" else float(a != b)

    coincidences: Counter = Counter()
    for unit in _multi(units):
        counts = Counter(unit)
        m = len(unit)
        for c, n_c in counts.items():
            for k, n_k in counts.items():
                pairs = n_c * (n_k - 1) if c == k else n_c * n_k
                if pairs:
                    coincidences[c, k] += pairs / (m - 1)
    totals: Counter = Counter()
    for (c, _k), o in coincidences.items():
        totals[c] += o
    n = sum(totals.values())
    if n < 2:
        return None
    observed = sum(o * delta(c, k) for (c, k), o in coincidences.items()) / n
    expected = sum(totals[c] * totals[k] * delta(c, k) for c in totals for k in totals) / (
        n * (n - 1)
    )
    if expected == 0:
        return None
    return 1 - observed / expected


def agreement(units: Iterable[Sequence[int]]) -> Agreement:
    """Pairwise exact and within-one rates and alpha, over texts with two or more answers."""
    multi = _multi(list(units))
    pairs = exact = within = 0
    for unit in multi:
        for i, a in enumerate(unit):
            for b in unit[i + 1 :]:
                pairs += 1
                exact += a == b
                within += abs(a - b) <= 1
    return Agreement(
        texts=len(multi),
        answers=sum(len(u) for u in multi),
        pairs=pairs,
        exact_rate=exact / pairs if pairs else None,
        within_one_rate=within / pairs if pairs else None,
        alpha_interval=krippendorff_alpha(multi, "interval"),
        alpha_nominal=krippendorff_alpha(multi, "nominal"),
    )

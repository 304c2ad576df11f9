"""Agreement between workers who answered the same text, as a study runs. Pure: no Flask, no
database.

Pairwise rates compare every unordered pair of answers to one text (the same sentence; at most
one sentence apart). Krippendorff's alpha (interval and nominal) comes from the `krippendorff`
package. Only texts with two or more answers count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np


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
    multi = _multi(units)
    domain = sorted({value for unit in multi for value in unit})
    if len(domain) < 2:
        return None
    column = {value: j for j, value in enumerate(domain)}
    counts = np.zeros((len(multi), len(domain)))
    for i, unit in enumerate(multi):
        for value in unit:
            counts[i, column[value]] += 1
    # The field's implementation (pinned in requirements.txt) rather than our own coincidences.
    value = krippendorff.alpha(value_counts=counts, value_domain=domain, level_of_measurement=level)
    return float(value) if np.isfinite(value) else None


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

"""How hard each text is, from players' answers: a small item-response model in plain Python.

The model (Rasch, one-parameter logistic) is the one `analysis/irt.py` fits for research, on the
same outcome, finding the boundary exactly:

    P(hit) = sigmoid(intercept + skill[player] - difficulty[text])

Skill and difficulty have normal priors (mean 0, standard deviation `prior_sd`), so a text with
few answers is shrunk toward the average text, and a text answered by strong players is not
mistaken for an easy one. It is fitted by maximum a posteriori with alternating Newton steps.
The game (app/game/levels.py) sorts the texts with at least `min_answers` answers into three
equal levels by estimated difficulty (`levels`).

No numpy and no pandas: the site imports this module. A fit over 10^5 answers takes about 15
seconds; it runs in an operator's command, never on a page.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

EASY, MEDIUM, HARD = "easy", "medium", "hard"
LEVELS = (EASY, MEDIUM, HARD)


@dataclass(frozen=True)
class Fit:
    # Difficulty per text in logits (higher is harder; 0 is the average text).
    difficulty: dict[Hashable, float]
    skill: dict[Hashable, float]
    # Answers per text.
    answers: dict[Hashable, int]
    intercept: float
    iterations: int
    converged: bool


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def fit(
    answers: Iterable[tuple[Hashable, Hashable, bool]],
    prior_sd: float = 1.0,
    max_iter: int = 300,
    tol: float = 1e-4,
) -> Fit:
    """Fit the model on (player, text, hit) answers."""
    players: dict[Hashable, int] = {}
    texts: dict[Hashable, int] = {}
    rows: list[tuple[int, int, float]] = []
    for player, text, hit in answers:
        a = players.setdefault(player, len(players))
        t = texts.setdefault(text, len(texts))
        rows.append((a, t, 1.0 if hit else 0.0))
    skill = [0.0] * len(players)
    difficulty = [0.0] * len(texts)
    counts = [0] * len(texts)
    for _, t, _ in rows:
        counts[t] += 1
    rate = sum(y for _, _, y in rows) / len(rows) if rows else 0.5
    rate = min(max(rate, 1e-6), 1 - 1e-6)
    mu = math.log(rate / (1 - rate))
    precision = 1.0 / prior_sd**2
    converged, done = False, 0
    for done in range(1, max_iter + 1):  # noqa: B007 (the count is reported)
        # Players' skills, texts held.
        grad = [-precision * s for s in skill]
        hess = [precision] * len(skill)
        for a, t, y in rows:
            p = _sigmoid(mu + skill[a] - difficulty[t])
            grad[a] += y - p
            hess[a] += p * (1 - p)
        biggest = 0.0
        for a, (g, h) in enumerate(zip(grad, hess, strict=True)):
            skill[a] += g / h
            biggest = max(biggest, abs(g / h))
        # Texts' difficulties, skills held.
        grad = [-precision * d for d in difficulty]
        hess = [precision] * len(difficulty)
        for a, t, y in rows:
            p = _sigmoid(mu + skill[a] - difficulty[t])
            grad[t] -= y - p
            hess[t] += p * (1 - p)
        for t, (g, h) in enumerate(zip(grad, hess, strict=True)):
            difficulty[t] += g / h
            biggest = max(biggest, abs(g / h))
        # The intercept (no prior).
        residual = weight = 0.0
        for a, t, y in rows:
            p = _sigmoid(mu + skill[a] - difficulty[t])
            residual += y - p
            weight += p * (1 - p)
        step = residual / max(weight, 1e-12)
        mu += step
        if max(biggest, abs(step)) < tol:
            converged = True
            break
    return Fit(
        difficulty={text: difficulty[t] for text, t in texts.items()},
        skill={player: skill[a] for player, a in players.items()},
        answers={text: counts[t] for text, t in texts.items()},
        intercept=mu,
        iterations=done,
        converged=converged,
    )


def levels(
    difficulty: Mapping[Hashable, float], answers: Mapping[Hashable, int], min_answers: int
) -> dict[Hashable, str]:
    """Easy, medium or hard for each text with at least `min_answers` answers: the thirds of
    those texts by estimated difficulty (ties by key). None is rated until three texts are."""
    rated = sorted(
        (text for text in difficulty if answers.get(text, 0) >= min_answers),
        key=lambda text: (difficulty[text], text),
    )
    if len(rated) < len(LEVELS):
        return {}
    return {text: LEVELS[3 * i // len(rated)] for i, text in enumerate(rated)}

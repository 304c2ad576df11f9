"""The difficulty estimator (roftcore/difficulty.py), alone: it recovers a known ordering of
texts from simulated answers, agrees with the research model (analysis/irt.py), shrinks texts
with few answers and does not mistake strong readers for an easy text; levels are thirds of the
rated texts."""

from __future__ import annotations

import math
import random

import pytest

from roftcore import difficulty


def simulate(seed: int = 7, players: int = 120, texts: int = 30, per_player: int = 15):
    """Answers of players of known skill on texts of known difficulty (the model's own law)."""
    rng = random.Random(seed)
    skill = {f"p{i}": rng.gauss(0, 1) for i in range(players)}
    hardness = {f"t{j:02d}": -2 + 4 * j / (texts - 1) for j in range(texts)}
    answers = []
    for player, s in skill.items():
        for text in rng.sample(sorted(hardness), per_player):
            chance = 1 / (1 + math.exp(-(-0.5 + s - hardness[text])))
            answers.append((player, text, rng.random() < chance))
    return answers, skill, hardness


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(values):
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        for rank, index in enumerate(order):
            out[index] = float(rank)
        return out

    ra, rb = ranks(a), ranks(b)
    mean = (len(a) - 1) / 2
    num = sum((x - mean) * (y - mean) for x, y in zip(ra, rb, strict=True))
    den = sum((x - mean) ** 2 for x in ra)
    return num / den


def test_recovers_a_known_ordering_of_texts():
    answers, _, hardness = simulate()
    fit = difficulty.fit(answers)
    assert fit.converged
    texts = sorted(hardness)
    assert spearman([fit.difficulty[t] for t in texts], [hardness[t] for t in texts]) > 0.9
    # The easiest and the hardest third are told apart.
    levels = difficulty.levels(fit.difficulty, fit.answers, min_answers=10)
    easiest, hardest = texts[:5], texts[-5:]
    assert all(levels[t] == "easy" for t in easiest)
    assert all(levels[t] == "hard" for t in hardest)


def test_agrees_with_the_research_model():
    pd = pytest.importorskip("pandas")
    from analysis import irt

    answers, _, _ = simulate(seed=11, players=60, texts=20, per_player=10)
    frame = pd.DataFrame(
        {
            "annotator": [a for a, _, _ in answers],
            "example": [t for _, t, _ in answers],
            "boundary": [3] * len(answers),
            "guess": [3 if hit else 5 for _, _, hit in answers],
            "points": [5 if hit else 3 for _, _, hit in answers],
            "system": "gpt2",
            "category": "news",
            "n_sentences": 10,
        }
    )
    research = irt.fit(frame, tol=1e-6).texts.set_index("example")["difficulty"]
    ours = difficulty.fit(answers, tol=1e-6).difficulty
    for text, value in ours.items():
        assert value == pytest.approx(research[text], abs=1e-3)


def test_few_answers_are_shrunk_toward_the_average():
    answers, _, _ = simulate(seed=3)
    # Two new texts, missed by everyone who read them: one by a single player, one by twenty.
    players = sorted({p for p, _, _ in answers})
    answers.append((players[0], "new-1", False))
    answers += [(p, "new-20", False) for p in players[:20]]
    fit = difficulty.fit(answers)
    assert 0 < fit.difficulty["new-1"] < fit.difficulty["new-20"]
    assert fit.answers["new-1"] == 1 and fit.answers["new-20"] == 20


def test_strong_readers_do_not_make_a_text_look_easy():
    rng = random.Random(5)
    answers = []
    # Strong readers hit most of twenty shared texts, weak ones few.
    strong = [f"s{i}" for i in range(15)]
    weak = [f"w{i}" for i in range(15)]
    for text in range(20):
        for player in strong:
            answers.append((player, f"common-{text}", rng.random() < 0.8))
        for player in weak:
            answers.append((player, f"common-{text}", rng.random() < 0.2))
    # Two texts with the same raw hit rate (half): one read by the strong, one by the weak.
    answers += [(p, "read-by-strong", i % 2 == 0) for i, p in enumerate(strong)]
    answers += [(p, "read-by-weak", i % 2 == 0) for i, p in enumerate(weak)]
    fit = difficulty.fit(answers)
    assert fit.difficulty["read-by-strong"] > fit.difficulty["read-by-weak"] + 0.5


def test_levels_are_thirds_of_the_rated_texts():
    values = {f"t{i}": float(i) for i in range(9)}
    answers = {t: 10 for t in values} | {"t4": 9}
    levels = difficulty.levels(values, answers, min_answers=10)
    assert "t4" not in levels  # too few answers: no level
    assert [levels[f"t{i}"] for i in (0, 1, 2, 3, 5, 6, 7, 8)] == [
        "easy", "easy", "easy", "medium", "medium", "medium", "hard", "hard"
    ]  # fmt: skip
    counts = {level: list(levels.values()).count(level) for level in difficulty.LEVELS}
    assert max(counts.values()) - min(counts.values()) <= 1
    assert difficulty.levels({"a": 0.0, "b": 1.0}, {"a": 50, "b": 50}, 10) == {}
    assert difficulty.fit([]).difficulty == {}

"""Skill that means detection: no lazy strategy scores above 0, and a player who never calls
"machine" is never ranked above one who calls it and finds boundaries better than chance."""

from __future__ import annotations

import json
import random

from hypothesis import given
from hypothesis import strategies as st

from app import PROJECT_ROOT
from app.leaderboard import skill, standings
from tests import factories
from tests.game_helpers import answer

DEMO = PROJECT_ROOT / "data" / "demo" / "examples.jsonl"
N = 10


def skill_of(texts: list[int], guesses: list[int]) -> int:
    """The shrunk detection skill of these guesses (N = all human) on texts of these boundaries."""
    totals = [0, 0, 0, 0]
    for boundary, guess in zip(texts, guesses, strict=True):
        for i, value in enumerate(skill.detection(guess, boundary, N)):
            totals[i] += value
    return skill.detection_skill(*totals)


def expected_random_skill(texts: list[int]) -> float:
    """Skill of guessing uniformly among sentences 2 to N and "all human", in expectation of the
    rates (unshrunk)."""
    machine = [b for b in texts if b < N]
    human = [b for b in texts if b >= N]
    choices = range(1, N + 1)
    hit = sum(skill.detection(g, b, N)[1] for b in machine for g in choices) / (5 * len(choices))
    right = sum(skill.detection(g, b, N)[3] for b in human for g in choices) / len(choices)
    return hit / max(len(machine), 1) + right / max(len(human), 1) - 1


texts = st.lists(st.integers(min_value=1, max_value=N), min_size=1, max_size=60)


@given(texts)
def test_never_calling_machine_scores_exactly_zero_on_any_texts(boundaries):
    assert skill_of(boundaries, [N] * len(boundaries)) == 0


@given(texts, st.randoms(use_true_random=False))
def test_a_player_who_beats_chance_ranks_above_one_who_never_calls_machine(boundaries, rng):
    """Any player with more credit on machine texts than false alarms on human texts (better
    than chance) has a skill above 0, the never-caller's."""
    guesses = [rng.randint(1, N) for _ in boundaries]
    machine = [(b, g) for b, g in zip(boundaries, guesses, strict=True) if b < N]
    human = [(b, g) for b, g in zip(boundaries, guesses, strict=True) if b >= N]
    hit_rate = sum(skill.detection(g, b, N)[1] for b, g in machine) / (5 * max(len(machine), 1))
    false_alarms = sum(g < N for _, g in human) / max(len(human), 1)
    mine = skill_of(boundaries, guesses)
    if hit_rate > false_alarms:
        # Shrinkage keeps the sign; truncation to hundredths may round a tiny edge to 0.
        assert mine >= 0
    if hit_rate < false_alarms:
        assert mine <= 0


def test_lazy_strategies_score_no_skill_on_the_demo_set():
    records = [json.loads(line) for line in DEMO.read_text().splitlines()]
    boundaries = [min(r["boundary"], N) for r in records]
    assert all(len(r["sentences"]) == N for r in records)
    assert skill_of(boundaries, [N] * len(boundaries)) == 0  # always "all human"
    assert skill_of(boundaries, [1] * len(boundaries)) < 0  # always the first sentence it can
    for k in range(1, N):  # the same sentence every time
        assert skill_of(boundaries, [k] * len(boundaries)) < 0, k
    assert expected_random_skill(boundaries) < 0  # guessing at random
    rng = random.Random(5)
    careful = [
        b if rng.random() < 0.6 else min(b + 1, N) if rng.random() < 0.7 else max(b - 1, 1)
        for b in boundaries
    ]
    assert skill_of(boundaries, careful) > 0


def test_a_learner_below_all_human_in_points_ranks_above_a_never_caller(ctx):
    """On texts where "all human" earns much (late boundaries), a learner who catches half the
    machine texts exactly and false-alarms one human text in four has fewer points than a player
    who never calls "machine", and ranks above them."""
    human = [factories.example(boundary=N) for _ in range(4)]
    machine = [factories.example(boundary=8) for _ in range(8)]
    learner, lazy = factories.player("lea"), factories.player("lazy")
    for i, example in enumerate(human):
        answer(learner, example, None if i < 3 else 5)
        answer(lazy, example, None)
    for i, example in enumerate(machine):
        answer(learner, example, 8 if i < 4 else 6)
        answer(lazy, example, None)
    board = {s.name: s for s in standings.top()}
    assert board["lea"].points == 35 < board["lazy"].points == 44
    assert board["lazy"].skill == 0
    assert board["lea"].skill == skill.detection_skill(8, 20, 4, 3) > 0
    assert board["lea"].rank < board["lazy"].rank


def test_the_board_explains_the_score_in_one_sentence(client):
    page = client.get("/leaderboard").get_data(as_text=True)
    assert "Skill = how often you find where the machine took over" in " ".join(page.split())
    assert "always the first sentence" in page and "at random" in page

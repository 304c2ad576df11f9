"""Each worker's texts follow the pool's mix of systems and boundary positions (balance.py)."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.crowd import balance
from app.crowd.slots import stored
from app.extensions import db
from app.models import Example
from tests import factories
from tests.crowd.helpers import join, make_study


def test_positions_are_thirds_of_the_text():
    assert [balance.position(b, 10) for b in (1, 3, 4, 6, 7, 9, 10)] == [
        "early", "early", "middle", "middle", "late", "late", balance.ALL_HUMAN,
    ]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 8), min_size=1, max_size=4),
    picks=st.integers(1, 30),
    seed=st.integers(0, 1000),
)
def test_every_kind_stays_within_one_of_its_share(sizes, picks, seed):
    pool = {}
    for k, size in enumerate(sizes):
        for j in range(size):
            i = len(pool)
            pool[i] = balance.Text(i, f"system-{k}", ("early", "late")[(j + seed) % 2])
    picks = min(picks, len(pool))
    ties = {i: ((i * 7919 + seed) % 1009) / 1009 for i in pool}
    picker = balance.Picker(pool, Counter(), 3, ties, picks, random.Random(seed))
    got = Counter()
    for t in range(1, picks + 1):
        chosen = picker.pick(lambda _i: True)
        got[pool[chosen].kind] += 1
        for k, size in enumerate(sizes):
            # Along the way within two of the pool's share; at the end within one.
            slack = 1 if t == picks else 2
            assert abs(got[f"system-{k}"] - size / len(pool) * t) < slack + 1e-9


def test_the_rounding_is_fair_on_average():
    shares = {"a": 4 / 6, "b": 2 / 6}
    rng = random.Random(7)
    draws = [balance.quotas(shares, 2, rng) for _ in range(3000)]
    assert all(sum(d.values()) == 2 and set(d.values()) <= {0, 1, 2} for d in draws)
    mean_b = sum(d["b"] for d in draws) / len(draws)
    assert abs(mean_b - 2 * 2 / 6) < 0.03  # not always 1, as plain rounding would give


def test_the_least_read_text_of_a_kind_comes_first():
    pool = {i: balance.Text(i, "a", "early") for i in range(4)}
    loads = Counter({0: 3, 1: 1, 2: 0, 3: 2})
    picker = balance.Picker(pool, loads, 3, {i: 0.0 for i in pool}, 4, random.Random(1))
    assert [picker.pick(lambda _i: True) for _ in range(4)] == [2, 1, 3, 0]


def test_a_worker_reads_the_pools_mix(ctx):
    for system in ("gpt2", "grover"):
        for boundary in (2, 8):
            for _ in range(4):
                factories.example(boundary=boundary, system_name=system, category_slug="news")
    for _ in range(4):
        factories.example(boundary=10, category_slug="news")
    study = make_study(rounds=10, attention_check_rate=0, target_per_example=1)
    for worker in ("w1", "w2"):
        participant = join(study, worker, f"s-{worker}")
        ids = [slot.example_id for slot in stored(participant)]
        texts = db.session.scalars(select(Example).where(Example.id.in_(ids))).all()
        machine = [t for t in texts if t.boundary < t.n_sentences]
        systems = Counter(t.system.name for t in machine)
        positions = Counter(balance.position(t.boundary, t.n_sentences) for t in texts)
        assert systems == {"gpt2": 4, "grover": 4}
        assert positions == {"early": 4, "late": 4, balance.ALL_HUMAN: 2}

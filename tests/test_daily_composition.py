"""What a daily challenge holds: the composition rules (pure), checked against every possible day
of small random pools, and the pool in the database that `flask daily status` reports on."""

from __future__ import annotations

import itertools
import random
from datetime import date

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.game import daily, daily_texts
from app.game.daily_texts import HUMAN, MACHINE, SPLICE, Candidate
from tests import factories

N = 10
DAY = date(2026, 11, 20)


def text(example_id, kind=MACHINE, category=1, boundary=5, passages=None):
    boundary = N if kind == HUMAN else boundary
    return Candidate(example_id, category, kind, boundary, N, tuple(passages or (example_id,)))


def disjoint(texts) -> bool:
    passages = [p for c in texts for p in c.passages]
    return len(passages) == len(set(passages))


# -- the pieces ---------------------------------------------------------------------------------


def test_a_text_is_human_machine_or_splice():
    assert daily_texts.text_kind(10, 10, "human", None) == HUMAN
    assert daily_texts.text_kind(4, 10, "gpt2-xl", {"strategy": "nucleus", "p": 0.9}) == MACHINE
    assert daily_texts.text_kind(4, 10, "splice-baseline", None) == SPLICE
    # Another passage named as its source, or nothing decoded: the reveal calls it a splice too.
    assert daily_texts.text_kind(4, 10, "other", {"p": 1}, {"splice_doc_id": "d2"}) == SPLICE
    assert daily_texts.text_kind(4, 10, "gpt2-xl", None) == SPLICE


def test_positions_fall_in_thirds():
    bins = [daily_texts.position_bin(b, 10) for b in range(1, 11)]
    assert bins == [0, 0, 0, 1, 1, 1, 2, 2, 2, None]
    assert daily_texts.position_bin(1, 2) == 0 and daily_texts.position_bin(2, 2) is None


def test_rules_for_five_texts_and_how_they_shrink():
    five = daily_texts.rules_for(5, categories=3, positions=3)
    assert (five.min_machine, five.max_splice, five.min_human, five.max_human) == (3, 1, 1, 2)
    assert (five.max_per_category, five.max_per_position) == (2, 2)
    assert daily_texts.rules_for(5, categories=2, positions=3).max_per_category == 3
    assert daily_texts.rules_for(5, categories=1, positions=1).max_per_category == 5
    assert daily_texts.rules_for(5, categories=3, positions=1).max_per_position == 5
    three = daily_texts.rules_for(3, categories=3, positions=3)
    assert (three.min_machine, three.min_human, three.max_human) == (2, 1, 1)
    assert (three.max_per_category, three.max_per_position) == (1, 1)
    one = daily_texts.rules_for(1, categories=3, positions=3)
    assert (one.min_machine, one.min_human, one.max_per_category) == (1, 0, 1)


def test_broken_rules_names_each_rule_a_day_breaks():
    rules = daily_texts.rules_for(5, categories=3, positions=3)
    good = [
        text(1, MACHINE, 1, 2),
        text(2, MACHINE, 2, 5),
        text(3, MACHINE, 3, 8),
        text(4, HUMAN, 1),
        text(5, SPLICE, 2, 2, (5, 6)),
    ]
    assert daily_texts.broken_rules(rules, good) == []
    thin = [text(i, SPLICE if i < 2 else HUMAN, 1, 2) for i in range(5)]
    assert daily_texts.broken_rules(rules, thin) == ["machine", "splice", "few_human", "category"]
    early = [text(i, MACHINE, i % 3, 1) for i in range(4)] + [text(9, HUMAN, 2)]
    assert daily_texts.broken_rules(rules, early) == ["position"]


# -- drawing --------------------------------------------------------------------------------------


def test_a_thin_pool_still_gives_the_best_day_and_says_what_it_lacks():
    # Only all-human texts and splices are left: the day is drawn, and it says what it lacks.
    pool = [text(i, HUMAN, i % 3) for i in range(6)]
    pool += [text(10 + i, SPLICE, i % 3, 3 + i, (10 + i, 20 + i)) for i in range(3)]
    picked = daily_texts.pick_texts(pool, set(), 5, random.Random(1))
    assert picked is not None and len(picked.texts) == 5 and disjoint(picked.texts)
    assert picked.missed == ("machine", "few_human")
    assert sum(c.kind == SPLICE for c in picked.texts) == 1  # the splice rule still holds
    assert "at least 3 texts a language model continued" in picked.shortfall()
    assert daily_texts.full_days(daily_texts.plan_days(pool, set(), 5)) == 0


def test_no_day_without_enough_distinct_passages():
    pool = [text(i, MACHINE, passages=(i % 4,)) for i in range(12)]
    assert daily_texts.pick_texts(pool, set(), 5, random.Random(0)) is None
    assert daily_texts.plan_days(pool, set(), 5) == []


def test_full_days_counts_days_that_keep_every_rule():
    # Four texts a day must be three machine texts and one all-human: six days' worth, no more.
    pool = []
    for day in range(6):
        pool += [text(10 * day + i, MACHINE) for i in range(3)] + [text(10 * day + 3, HUMAN)]
    pool.append(text(99, HUMAN))
    days = daily_texts.plan_days(pool, set(), 4)
    assert daily_texts.full_days(days) == 6
    assert [d.complete for d in days] == [True] * 6
    for day in days:
        assert sorted(c.kind for c in day.texts) == [HUMAN, MACHINE, MACHINE, MACHINE]
    # Three machine passages already shown: a day fewer.
    assert daily_texts.full_days(daily_texts.plan_days(pool, {0, 1, 10}, 4)) == 5
    # A pool shaped like the demo's: 3 categories of 40 passages, each shown all human, by two
    # model continuations and by two splices with another passage of its category.
    rng = random.Random(7)
    pool = []
    for passage in range(120):
        category, first = passage % 3, 100 * passage
        pool.append(text(first, HUMAN, category, passages=(passage,)))
        for i in (1, 2):
            pool.append(text(first + i, MACHINE, category, rng.randint(1, N - 1), (passage,)))
        for i in (3, 4):
            other = (passage + 3 * rng.randint(1, 39)) % 120
            pool.append(text(first + i, SPLICE, category, rng.randint(1, N - 1), (passage, other)))
    days = daily_texts.plan_days(pool, set(), 5)
    assert daily_texts.full_days(days) >= 22  # at most 24: 120 passages, 5 a day
    for day in days[:22]:
        assert daily_texts.broken_rules(daily_texts.rules_for(5, 3, 3), day.texts) == []


POOLS = st.lists(
    st.tuples(
        st.sampled_from([HUMAN, MACHINE, MACHINE, SPLICE]),
        st.integers(0, 2),  # category
        st.integers(1, N - 1),  # boundary
        st.integers(0, 8),  # own passage: variants of one passage share it
        st.integers(0, 8),  # a splice's second passage
    ),
    min_size=1,
    max_size=12,
)


def make_pool(rows) -> list[Candidate]:
    pool = []
    for i, (kind, category, boundary, own, other) in enumerate(rows):
        passages = (own, 10 + other) if kind == SPLICE else (own,)
        pool.append(text(i, kind, category, boundary, passages))
    return pool


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=POOLS,
    count=st.integers(1, 6),
    used=st.sets(st.integers(0, 18), max_size=4),
    seed=st.integers(0, 2**16),
)
def test_a_day_keeps_the_rules_whenever_the_pool_allows(rows, count, used, seed):
    pool = make_pool(rows)
    fresh = [c for c in pool if not used.intersection(c.passages)]
    rules = daily_texts.pool_rules(fresh, count)
    days = [d for d in itertools.combinations(fresh, count) if disjoint(d)]
    picked = daily_texts.pick_texts(pool, set(used), count, random.Random(seed))
    if not days:
        assert picked is None
        return
    assert picked is not None and len(picked.texts) == count
    assert disjoint(picked.texts) and not used.intersection(
        p for c in picked.texts for p in c.passages
    )
    assert picked.rules == rules
    assert list(picked.missed) == daily_texts.broken_rules(rules, picked.texts)
    if any(not daily_texts.broken_rules(rules, d) for d in days):
        assert picked.complete
    # The best possible day: the first rule in RULE_ORDER is kept whenever some day keeps it.
    for name in daily_texts.RULE_ORDER[:1]:
        if any(name not in daily_texts.broken_rules(rules, d) for d in days):
            assert name not in picked.missed


@settings(max_examples=60, deadline=None)
@given(rows=POOLS, count=st.integers(1, 5))
def test_full_days_are_days_that_keep_the_rules_and_never_share_a_passage(rows, count):
    pool = make_pool(rows)
    days = daily_texts.plan_days(pool, set(), count)
    passages = [p for day in days for c in day.texts for p in c.passages]
    assert len(passages) == len(set(passages))  # nobody meets a passage twice
    available = daily_texts.full_days(days)
    assert all(day.complete for day in days[:available])
    assert available == len(days) or not days[available].complete


# -- the pool in the database --------------------------------------------------------------------


@pytest.fixture
def thin_app(app_with):
    """A held-back pool of all-human texts only: a day can be drawn, but not a full one."""
    app = app_with(TODAY_OVERRIDE=DAY, DAILY_WARN_DAYS=1)
    with app.app_context():
        for i in range(6):
            factories.example(boundary=N, passage=f"held-{i}", kind="daily")
    return app


def test_a_thin_pool_is_drawn_and_reported(thin_app, caplog):
    runner = thin_app.test_cli_runner()
    status = runner.invoke(args=["daily", "status"])
    assert status.exit_code == 1
    assert "Days left: about 0 more challenge(s)." in status.output
    assert "After that, about 1 more that cannot keep the composition rules" in status.output
    assert "at least 3 texts a language model continued" in status.output
    with thin_app.app_context():
        found = daily.challenge(DAY)
        assert found is not None and len(found.example_ids) == 5
    assert "drawn without: at least 3 texts a language model continued" in caplog.text


def test_the_database_pool_knows_each_text_kind_and_position(app_with):
    app = app_with(TODAY_OVERRIDE=DAY)
    with app.app_context():
        human = factories.example(boundary=N, passage="a", kind="daily")
        machine = factories.example(boundary=8, passage="b", kind="daily")
        splice = factories.example(
            boundary=2, passage="c", splice="d", system_name="splice-baseline", p=None, kind="daily"
        )
        factories.example(boundary=3, passage="e")  # normal play: not a candidate
        found = {c.example_id: c for c in daily._candidates()}
        assert set(found) == {human.id, machine.id, splice.id}
        assert (found[human.id].kind, found[human.id].position) == (HUMAN, None)
        assert (found[machine.id].kind, found[machine.id].position) == (MACHINE, 2)
        assert (found[splice.id].kind, found[splice.id].position) == (SPLICE, 0)
        assert len(found[splice.id].passages) == 2

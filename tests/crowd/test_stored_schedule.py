"""Each worker's schedule, texts included, is computed when they enter and stored: a reload, a
second tab or a return serves the same texts in the same order; no source passage appears twice
in it, checks and spare checks included; workers who entered before schedules were stored get
theirs on their next round, keeping what they played."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import delete, select

from app.crowd import lookup, schedule, slots
from app.extensions import db
from app.models import ExamplePassage, Participant, Round, StudySlot
from tests import factories
from tests.crowd.helpers import (
    answer,
    join,
    make_pool,
    make_study,
    play_lazy,
    play_slot,
    study_round,
)


def stored(participant) -> list[tuple[int, str, int | None]]:
    return [(s.position, s.kind, s.example_id) for s in slots.stored(participant)]


def passages_of(example_ids) -> Counter:
    found: Counter = Counter()
    for example_id in example_ids:
        passages = db.session.scalars(
            select(ExamplePassage.passage_id).where(ExamplePassage.example_id == example_id)
        ).all()
        assert passages, f"example {example_id} has no passage"
        found.update(passages)
    return found


def played(participant) -> list[int]:
    rounds_ = db.session.scalars(
        select(Round)
        .where(Round.participant_id == participant.id, Round.guess.is_not(None))
        .order_by(Round.answered_at, Round.id)
    )
    return [r.example_id for r in rounds_ if r.kind != "practice"]


def versions(passages: int, each: int, boundary: int = 3, name: str = "doc") -> None:
    for i in range(passages):
        for _version in range(each):
            factories.example(boundary=boundary, category_slug="news", passage=f"{name}-{i}")


def test_the_schedule_is_stored_at_entry_and_a_return_serves_the_same_texts(ctx):
    make_pool(normal=14, human=4)
    study = make_study(rounds=6, attention_check_rate=0.34)
    worker = join(study, "w1", "s1")
    plan = stored(worker)
    assert [kind for _p, kind, _e in plan] == worker.schedule
    assert len(plan) == 6 and all(example for _p, _k, example in plan)
    assert {kind for _p, kind, _e in plan} == {schedule.NORMAL, schedule.INSIDE}

    first = study_round(study, worker)
    again = study_round(study, worker)  # a reload
    assert again.id == first.id and first.example_id == plan[0][2]
    answer(first, first.example.boundary)  # right, check or not: the schedule stays
    db.session.refresh(worker)
    back = join(study, "w1", "s1")  # the platform's link opened again
    assert back.id == worker.id and stored(back) == plan
    while study_round(study, worker) is not None:
        play_slot(study, worker)
    assert played(worker) == [example for _p, _k, example in plan]


def test_two_workers_who_enter_together_share_out_the_pool(ctx):
    make_pool(normal=8, human=0)
    study = make_study(rounds=4, attention_check_rate=0, target_per_example=1)
    first, second = join(study, "w1", "s1"), join(study, "w2", "s2")
    # Nobody has played yet: the second worker's texts count the first one's schedule.
    mine = {e for _p, _k, e in stored(first)}
    theirs = {e for _p, _k, e in stored(second)}
    assert len(mine) == len(theirs) == 4 and not mine & theirs


def test_a_worker_who_leaves_frees_the_texts_ahead_in_their_schedule(ctx):
    make_pool(normal=4, human=0)
    study = make_study(rounds=4, attention_check_rate=0, target_per_example=1)
    first = join(study, "w1", "s1")
    play_slot(study, first)
    first.status = "returned"
    db.session.commit()
    second = join(study, "w2", "s2")
    kept = played(first)[0]
    # The three texts the first worker never reached are the least read, so they come first.
    assert [e for _p, _k, e in stored(second)][-1] == kept


def test_no_passage_twice_in_any_schedule_with_checks_and_spares(ctx):
    versions(8, 3)
    versions(4, 2, boundary=10, name="human")
    study = make_study(rounds=6, attention_check_rate=0.34, target_per_example=1)
    for n in range(6):
        worker = join(study, f"w{n}", f"s{n}")
        assert max(passages_of(e for _p, _k, e in stored(worker)).values()) == 1
        if n % 2:
            play_lazy(study, worker, "first")  # voids every inside check: spares come in
            db.session.refresh(worker)
            assert worker.checks_void >= 1
            kinds = [k for _p, k, _e in stored(worker)]
            assert kinds == worker.schedule
            assert {schedule.SPARE, schedule.SPARE_ADDED} & set(kinds)
        else:
            while study_round(study, worker) is not None:
                play_slot(study, worker, flag_at=2)
        plan = stored(worker)
        assert max(passages_of(e for _p, _k, e in plan).values()) == 1
        assert played(worker) == [e for _p, _k, e in plan][: len(played(worker))]
        assert max(passages_of(played(worker)).values()) == 1


def test_a_spare_check_is_put_in_the_stored_schedule_the_same_way_each_time(app):
    def lazy_run() -> list[tuple[int, str, int | None]]:
        with app.app_context():
            db.drop_all()
            db.create_all()
            versions(10, 2)
            versions(4, 1, boundary=10, name="human")
            study = make_study(rounds=5, attention_check_rate=0.4, target_per_example=1)
            worker = join(study, "w1", "s1")
            play_lazy(study, worker, "first")
            return stored(worker)

    first, second = lazy_run(), lazy_run()
    assert first == second
    assert any(kind in (schedule.SPARE, schedule.SPARE_ADDED) for _p, kind, _e in first)


def test_a_worker_who_entered_before_schedules_were_stored_keeps_playing(ctx):
    versions(10, 2)
    study = make_study(rounds=5, attention_check_rate=0.2, target_per_example=1)
    worker = join(study, "w1", "s1")
    play_slot(study, worker)
    play_slot(study, worker)
    open_now = study_round(study, worker)
    # As a worker who entered before the table existed: no stored slots.
    db.session.execute(delete(StudySlot).where(StudySlot.participant_id == worker.id))
    db.session.commit()
    assert not slots.has_schedule(worker)
    assert study_round(study, worker).id == open_now.id
    answer(open_now, 3 if open_now.kind == "normal" else open_now.example.boundary)
    db.session.refresh(worker)
    while study_round(study, worker) is not None:
        play_slot(study, worker)
    plan = stored(worker)
    assert [k for _p, k, _e in plan] == worker.schedule
    # The rounds played before keep their places; the rest follow the stored schedule.
    assert played(worker) == [e for _p, _k, e in plan]
    assert max(passages_of(played(worker)).values()) == 1
    assert db.session.get(Participant, worker.id).rounds_done == 5


def test_a_spare_added_after_the_last_required_round_moves_the_extra_rounds_on(ctx):
    versions(14, 2)
    study = make_study(rounds=4, max_rounds=6, attention_check_rate=0.25, target_per_example=1)
    worker = join(study, "w1", "s1")
    before = stored(worker)
    assert [s.optional for s in slots.stored(worker)] == [
        False, False, False, False, True, True,
    ]  # fmt: skip
    # As if the void check were the last required round: one more round, right there.
    worker.rounds_done = 4
    assert slots.add_spare(study, worker, lookup.config_of(study))
    db.session.commit()
    after = stored(worker)
    assert [p for p, _k, _e in after] == list(range(7))
    assert [k for _p, k, _e in after] == worker.schedule
    assert after[4][1] == schedule.SPARE_ADDED and after[4][2] in study.pool["spare_checks"]
    # The rounds before stay; the optional ones move one on, with their texts.
    assert [(k, e) for _p, k, e in after[:4]] == [(k, e) for _p, k, e in before[:4]]
    assert [(k, e) for _p, k, e in after[5:]] == [(k, e) for _p, k, e in before[4:]]
    assert [s.optional for s in slots.stored(worker)][4:] == [False, True, True]
    assert max(passages_of(e for _p, _k, e in after).values()) == 1

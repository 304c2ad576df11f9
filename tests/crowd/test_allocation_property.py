"""Balanced block randomisation under any sequence of entries, reloads, second tabs, returns
and time-outs (a hypothesis state machine on a real database).

After every step: the allocation sequence is whole blocks, each condition once per block; every
place is held by a worker still in the study or free; places nobody ever took are only at the
end of the last block; a new block is added only when no place is free; the next worker gets
the condition of the first free place; and no worker's condition ever changes.
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from sqlalchemy import select

from app.crowd import admission
from app.extensions import db
from app.models import ConditionSlot, Participant, ParticipantStatus
from tests.crowd.helpers import join, make_pool, make_study

NAMES = ("a", "b", "c")
# Condition c has its own, longer time limit: a worker of c outlasts one of a or b.
LIMITS = {"a": 30, "b": 30, "c": 90}
SLUGS = itertools.count()


class Arrivals(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.study = make_study(
            slug=f"alloc-{next(SLUGS)}",
            rounds=3,
            attention_check_rate=0,
            time_limit_minutes=LIMITS["a"],
            expected_minutes=12,
            conditions=[
                {"name": "a"},
                {"name": "b", "show_feedback": False},
                {"name": "c", "time_limit_minutes": LIMITS["c"]},
            ],
        )
        self.seen: dict[str, str] = {}  # worker -> condition first given
        self.ages: dict[str, int] = {}  # worker -> minutes since they started
        self.left: set[str] = set()
        self.workers = itertools.count()

    def _slots(self) -> list[ConditionSlot]:
        return list(
            db.session.scalars(
                select(ConditionSlot)
                .where(ConditionSlot.study_id == self.study.id)
                .order_by(ConditionSlot.seq)
            )
        )

    def _holding(self, worker: str) -> bool:
        condition = self.seen[worker]
        return worker not in self.left and self.ages[worker] < LIMITS[condition]

    def _first_free(self) -> str | None:
        owner = {p.id: p.worker_id for p in self._participants()}
        for slot in self._slots():
            worker = owner.get(slot.participant_id)
            if worker is None or not self._holding(worker):
                return slot.condition
        return None

    def _participants(self) -> list[Participant]:
        return list(
            db.session.scalars(select(Participant).where(Participant.study_id == self.study.id))
        )

    @rule()
    def enter(self):
        expected = self._first_free()
        before = len(self._slots())
        worker = f"w{next(self.workers)}"
        participant = join(self.study, worker, session=f"s-{worker}")
        assert participant.condition in NAMES
        if expected is not None:
            assert participant.condition == expected
            assert len(self._slots()) == before  # a free place is taken before a new block
        else:
            assert len(self._slots()) == before + len(NAMES)
        self.seen[worker] = participant.condition
        self.ages[worker] = 0

    @rule(data=st.data())
    def reload_or_second_tab(self, data):
        if not self.seen:
            return
        worker = data.draw(st.sampled_from(sorted(self.seen)))
        again = join(self.study, worker, session=f"s-{worker}")
        assert again.condition == self.seen[worker]

    @rule(data=st.data())
    def returns(self, data):
        # Drawn from every worker seen, the same list whatever conditions the study's random
        # blocks gave them (hypothesis replays a draw only from the same choices).
        if not self.seen:
            return
        worker = data.draw(st.sampled_from(sorted(self.seen)))
        if not self._holding(worker):
            return
        participant = next(p for p in self._participants() if p.worker_id == worker)
        admission.mark_left(participant, ParticipantStatus.returned)
        db.session.commit()
        self.left.add(worker)

    @rule(minutes=st.sampled_from([20, 45]))
    def time_passes(self, minutes):
        """Everyone started `minutes` earlier (a's and b's workers time out after 30)."""
        for participant in self._participants():
            participant.started_at -= timedelta(minutes=minutes)
        db.session.commit()
        for worker in self.ages:
            self.ages[worker] += minutes

    @invariant()
    def balanced(self):
        slots = self._slots()
        k = len(NAMES)
        assert len(slots) % k == 0
        blocks = len(slots) // k
        assert [s.seq for s in slots] == list(range(len(slots)))
        for b in range(blocks):
            assert sorted(s.condition for s in slots[b * k : (b + 1) * k]) == list(NAMES)
        # Places nobody took yet are only at the end of the last block.
        untaken = [s.seq for s in slots if s.participant_id is None]
        assert untaken == list(range(len(slots) - len(untaken), len(slots)))
        assert len(untaken) < k or not slots
        # Held places per condition: a whole number of blocks less the free ones.
        owner = {p.id: p.worker_id for p in self._participants()}
        held = Counter(
            s.condition
            for s in slots
            if s.participant_id is not None and self._holding(owner[s.participant_id])
        )
        free = Counter(s.condition for s in slots) - held
        for name in NAMES:
            assert held[name] + free[name] == blocks
        # With nothing freed, counts differ by at most one.
        if all(self._holding(w) for w in self.seen):
            assert max(held[n] for n in NAMES) - min(held[n] for n in NAMES) <= 1

    @invariant()
    def conditions_never_change(self):
        for participant in self._participants():
            assert participant.condition == self.seen[participant.worker_id]


def test_block_allocation_stays_balanced(app, ctx):
    make_pool(normal=12, human=4)
    run_state_machine_as_test(
        Arrivals,
        settings=settings(
            max_examples=20,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )

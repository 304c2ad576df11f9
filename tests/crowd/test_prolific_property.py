"""Money and messages exactly once through Prolific's API, over any sequence of commands.

A hypothesis state machine plays a researcher against the local stand-in for Prolific
(prolific_standin.py), on a real database: apply (verify --apply --send through the API) with
a failure injected anywhere (a server error, a refused payment, a payment made whose answer is
lost, a payment never made whose answer is lost, a set-up made whose answer is lost),
undo-verify, sync, a worker returning on Prolific, messages (with lost answers), `study edit`
raising the bonus cap, and the operator settling unconfirmed payments by looking at what
Prolific shows. After every step the stand-in's own records agree with the ledger: each bulk
bonus was paid at most once, what each worker was paid is exactly what the ledger says was paid
(so no ledger key, of which there is one live row, was paid twice), never more than the study
owes, and each message went out at most once. Once the researcher settles, every approved worker
has been paid exactly what the study owes them.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from sqlalchemy import delete, func, select

from app.crowd import lookup, prolific, prolific_pay, verify, verify_runs, verify_submissions
from app.crowd.prolific_api import ProlificClient, ProlificError
from app.crowd.reports import worker_stats
from app.extensions import db
from app.models import Participant, StudyBonus, StudyDecision
from app.models.studies import BONUS_LIVE, StudyMessage, StudyRun
from tests.crowd.helpers import join, make_pool, play_lazy, play_slot
from tests.crowd.prolific_standin import TOKEN, FakeProlific, serve
from tests.crowd.test_verify import BONUS, create

CAPS = (0.10, 0.20, 0.30, 0.40)
FAILURES = {
    None: None,
    "read fails once": ("GET", r"/api/v1/submissions/", "500", False),
    "set-up made, answer lost": ("POST", r"/bonus-payments/", "timeout", True),
    "set-up fails": ("POST", r"/bonus-payments/", "500", False),
    "payment refused": ("POST", r"/pay/$", "400", False),
    "paid, answer lost": ("POST", r"/pay/$", "timeout", True),
    "not paid, answer lost": ("POST", r"/pay/$", "timeout", False),
    "paid, then a server error": ("POST", r"/pay/$", "500", True),
}
TEXTS = ("Thank you for your careful work.", "Your bonus is on its way.")


class Researcher(RuleBasedStateMachine):
    study = None
    state: ClassVar[dict] = {}

    def __init__(self):
        super().__init__()
        study = self.study
        for model in (StudyBonus, StudyDecision, StudyRun, StudyMessage):
            db.session.execute(delete(model).where(model.study_id == study.id))
        study.config = {**study.config, "bonus": {"per_exact": 0.05, "cap": CAPS[0]}}
        left = db.session.scalar(
            select(Participant).where(
                Participant.study_id == study.id, Participant.worker_id == "w-left"
            )
        )
        left.status, left.left_at = "started", None
        db.session.commit()
        self.fake = FakeProlific("st1")
        self.fake.slow_seconds = 0.5
        for worker in ("w-a", "w-b", "w-lazy"):
            self.fake.seed("st1", worker)
        self.left_sub = self.fake.seed("st1", "w-left", "ACTIVE")
        self.state["fake"] = self.fake
        self.client = ProlificClient(TOKEN, self.state["url"], timeout=0.25, pause=0)
        self.cap = 0

    def owed(self) -> dict[str, int]:
        config = lookup.config_of(self.study)
        return {w.worker_id: verify.owed_minor(config, w) for w in worker_stats(self.study)}

    def _inject(self, failure):
        spec = FAILURES[failure]
        if spec:
            method, pattern, mode, after = spec
            self.fake.fail(method, pattern, mode, after=after)

    @rule(failure=st.sampled_from(sorted(FAILURES, key=str)))
    def apply(self, failure):
        self._inject(failure)
        try:
            submissions = verify_submissions.from_prolific_api(self.client.submissions("st1"))
            decisions = verify.decide(self.study, submissions)
            verify_runs.apply_decisions(self.study, decisions, via_api=True)
            prolific_pay.send_to_prolific(self.client, self.study, "st1", decisions)
        except ProlificError:
            assert failure is not None
        finally:
            self.fake.failures.clear()

    @rule(drop=st.booleans())
    def undo_verify(self, drop):
        try:
            verify_runs.undo_last_run(self.study, drop_bonuses=drop)
        except Exception as error:  # nothing left to undo
            assert "no recorded verify run" in str(error)

    @rule()
    def worker_returns_on_prolific(self):
        self.fake.submissions[self.left_sub]["status"] = "RETURNED"

    @rule()
    def sync(self):
        prolific.sync(self.client, self.study)

    @rule(
        worker=st.sampled_from(["w-a", "w-b"]),
        text=st.sampled_from(TEXTS),
        lost=st.booleans(),
    )
    def message(self, worker, text, lost):
        if lost:
            self.fake.fail("POST", r"/api/v1/messages/", "timeout", after=True)
        try:
            prolific.message(self.client, self.study, worker, text)
        except ProlificError:
            assert lost
        finally:
            self.fake.failures.clear()

    @rule()
    def edit_raises_the_cap(self):
        if self.cap < len(CAPS) - 1:
            self.cap += 1
            self.study.config = {
                **self.study.config,
                "bonus": {"per_exact": 0.05, "cap": CAPS[self.cap]},
            }
            db.session.commit()

    @rule()
    def operator_settles_unconfirmed_payments(self):
        for payment in prolific_pay.unconfirmed(self.study):
            prolific_pay.resolve_payment(self.study, payment, payment in self.fake.pay_calls)

    @invariant()
    def prolific_paid_exactly_what_the_ledger_says_and_each_key_once(self):
        fake = self.fake
        assert len(fake.pay_calls) == len(set(fake.pay_calls))
        assert fake.shape_errors == []
        workers = dict(
            db.session.execute(
                select(Participant.id, Participant.worker_id).where(
                    Participant.study_id == self.study.id
                )
            ).all()
        )
        ledger: dict[str, Decimal] = {}
        for row in db.session.scalars(
            select(StudyBonus).where(
                StudyBonus.study_id == self.study.id, StudyBonus.state.in_(("paid", "sent"))
            )
        ):
            payment = json.loads(row.platform_ref).get("bulk_bonus_payment")
            if row.state == "paid" or payment in fake.pay_calls:
                worker = workers[row.participant_id]
                ledger[worker] = ledger.get(worker, Decimal(0)) + Decimal(row.amount_minor) / 100
        paid = fake.paid_per_worker()
        assert paid == ledger, (paid, ledger)
        owed = self.owed()
        for worker, amount in paid.items():
            assert amount * 100 <= owed[worker], (worker, amount, owed[worker])
        live = db.session.execute(
            select(func.count())
            .select_from(StudyBonus)
            .where(StudyBonus.study_id == self.study.id, StudyBonus.state.in_(BONUS_LIVE))
            .group_by(StudyBonus.participant_id, StudyBonus.reason)
        ).all()
        assert all(n == 1 for (n,) in live)
        sent = [(m["recipient_id"], m["body"]) for m in fake.messages]
        assert len(sent) == len(set(sent))

    def teardown(self):
        # The researcher settles: looks up every unconfirmed payment, then applies once more.
        self.operator_settles_unconfirmed_payments()
        self.apply(None)
        self.operator_settles_unconfirmed_payments()
        owed = self.owed()
        paid = self.fake.paid_per_worker()
        for worker in ("w-a", "w-b"):
            assert paid.get(worker, Decimal(0)) * 100 == owed[worker], (worker, paid, owed)
        assert "w-lazy" not in paid  # rejected: no bonus
        assert prolific_pay.unconfirmed(self.study) == {}


def test_every_bonus_and_message_once_through_the_api_whatever_the_commands(
    app, runner, ctx, tmp_path
):
    make_pool(normal=20, human=6)
    assert create(runner, tmp_path, BONUS).exit_code == 0
    study = lookup.get_study("pilot")
    a = join(study, "w-a", "sa")
    for _ in range(6):
        play_slot(study, a, flag_at=None)
    b = join(study, "w-b", "sb")
    for i in range(6):
        play_slot(study, b, flag_at=None if i % 2 else 2)
    play_lazy(study, join(study, "w-lazy", "sl"), "human")
    join(study, "w-left", "sx")
    study.prolific_study_id = "st1"
    db.session.commit()
    state: ClassVar[dict] = {}
    server = serve(state)
    try:
        Researcher.study, Researcher.state = study, state
        run_state_machine_as_test(
            Researcher,
            settings=settings(
                max_examples=25,
                stateful_step_count=10,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        server.shutdown()

"""Money exactly once, over any sequence of commands.

A hypothesis state machine plays a researcher on a real database and a local stand-in for
Prolific's API (tests/crowd/test_prolific_api.py): verify --apply writing bonus.csv, uploading a
bonus.csv (the researcher pays what it says), verify --apply --send through the API (whose
set-up may be refused, or whose pay call may be answered with an error after paying), undo-verify
with or without --drop-bonuses (as the docs advise: only for a bonus.csv never uploaded),
`study edit` raising the bonus cap, and `study review --bonus` (once per worker and reason),
which is owed in the ledger until the next bonus.csv holds it or the API pays it, whichever
comes first. The bonus.csv uploaded is the file verify writes, read back. After every step no
worker was paid more than owed, each ledger key has at most one live row, each bulk bonus was
paid once, and no ledger row was ever deleted; once the researcher settles (uploads what is
pending and runs verify again), every worker's paid total equals what the study owes them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import delete, func, select

from app.crowd import ledger, lookup, review, verify, verify_files, verify_runs, verify_submissions
from app.crowd.prolific_api import ProlificClient, ProlificError
from app.crowd.prolific_pay import send_to_prolific
from app.crowd.reports import worker_stats
from app.errors import Conflict
from app.extensions import db
from app.models import StudyBonus, StudyDecision
from app.models.studies import BONUS_LIVE, StudyRun
from tests.crowd.helpers import join, make_pool, play_lazy, play_slot
from tests.crowd.test_prolific_api import TOKEN, FakeProlific, prolific  # noqa: F401
from tests.crowd.test_verify import BONUS, create

CAPS = (0.10, 0.20, 0.30, 0.40)


class FlakyProlific(FakeProlific):
    """Prolific, refusing bonus set-ups (every try, until told otherwise: the client tries a
    set-up again after a server error) or losing the answer after the next pay."""

    def __init__(self, *args):
        super().__init__(*args)
        self.fail_next: str | None = None
        self.paid_bulks: list[str] = []

    def handle(self, method, path, body):
        if path == "/api/v1/submissions/bonus-payments/" and self.fail_next == "set_up":
            return 503, {"error": "try again later"}
        status, payload = super().handle(method, path, body)
        if path.endswith("/pay/"):
            self.paid_bulks.append(path)
            if self.fail_next == "pay":
                self.fail_next = None
                return 504, {"error": "gateway timeout"}  # paid, but the answer was lost
        return status, payload


def paid_per_worker(fake: FlakyProlific, uploads: dict[str, int]) -> dict[str, int]:
    total = dict(uploads)
    for worker, amount in fake.paid:
        total[worker] = total.get(worker, 0) + round(amount * 100)
    return total


class Researcher(RuleBasedStateMachine):
    def __init__(self, study, url):
        super().__init__()
        self.study = study
        for model in (StudyBonus, StudyDecision, StudyRun):
            db.session.execute(delete(model).where(model.study_id == study.id))
        study.config = {**study.config, "bonus": {"per_exact": 0.05, "cap": CAPS[0]}}
        db.session.commit()
        self.fake = FlakyProlific(
            "st1",
            [
                {"id": f"sub{i}", "participant_id": w, "status": "AWAITING REVIEW",
                 "study_code": None}
                for i, w in enumerate(("w-a", "w-b", "w-lazy", "w-out"))
            ],
        )  # fmt: skip
        URL["fake"] = self.fake
        self.client = ProlificClient(TOKEN, url, pause=0)
        self.cap = 0
        self.files: dict[int, list[tuple[str, int]]] = {}  # run -> bonus.csv not yet uploaded
        self.uploaded_runs: set[int] = set()
        self.uploads: dict[str, int] = {}
        self.rows_seen = 0
        self.review_given: dict[tuple[str, str], tuple[int, int]] = {}  # key -> (run, amount)

    def submissions(self):
        return verify_submissions.from_prolific_api(self.fake.submissions.values())

    def owed(self) -> dict[str, int]:
        """The score bonus by the rule, and the screen-out payment of the screened-out."""
        config = lookup.config_of(self.study)
        owed = {w.worker_id: verify.owed_minor(config, w) for w in worker_stats(self.study)}
        owed["w-out"] += SCREEN_OUT_PAY
        return owed

    def owed_in_all(self) -> dict[str, int]:
        """The score bonus by the rule, plus the bonuses given in review and not cancelled."""
        owed = self.owed()
        for (worker, _reason), (_run, amount) in self.review_given.items():
            owed[worker] += amount
        return owed

    @initialize()
    def start(self):
        pass

    def write_bonus_csv(self) -> tuple[int | None, list[tuple[str, int]]]:
        """verify --apply, and the bonus.csv it writes, as the researcher would upload it."""
        decisions = verify.decide(self.study, self.submissions())
        applied = verify_runs.apply_decisions(self.study, decisions)
        with tempfile.TemporaryDirectory() as out:
            verify_files.write_files(Path(out), self.study, decisions, "st1", applied, None)
            text = (Path(out) / "bonus.csv").read_text()
        lines = []
        for line in text.splitlines():
            worker, amount = line.split(",")
            lines.append((worker, round(float(amount) * 100)))
        assert len({w for w, _a in lines}) == len(lines)  # one line a worker
        return applied.run, lines

    @rule()
    def verify_and_write_bonus_csv(self):
        run, lines = self.write_bonus_csv()
        if run is not None and lines:
            self.files[run] = lines

    @precondition(lambda self: self.files)
    @rule(data=st.data())
    def upload_a_bonus_csv(self, data):
        run = data.draw(st.sampled_from(sorted(self.files)))
        for worker, amount in self.files.pop(run):
            self.uploads[worker] = self.uploads.get(worker, 0) + amount
        self.uploaded_runs.add(run)

    @rule(failure=st.sampled_from([None, None, "set_up", "pay"]))
    def verify_and_send_through_the_api(self, failure):
        self.fake.fail_next = failure
        decisions = verify.decide(self.study, self.submissions())
        verify_runs.apply_decisions(self.study, decisions, via_api=True)
        try:
            send_to_prolific(self.client, self.study, "st1", decisions)
        except ProlificError:
            assert failure is not None
        self.fake.fail_next = None

    @rule(drop=st.booleans())
    def undo_verify(self, drop):
        latest = db.session.scalar(
            select(func.max(StudyRun.run)).where(
                StudyRun.study_id == self.study.id, StudyRun.undone_at.is_(None)
            )
        )
        if latest is None:
            return
        # As the docs advise: --drop-bonuses only when that run's bonus.csv was never uploaded.
        drop = drop and latest not in self.uploaded_runs
        before = self.review_rows()
        verify_runs.undo_last_run(self.study, drop_bonuses=drop)
        after = self.review_rows()
        if drop:
            self.files.pop(latest, None)  # that bonus.csv is thrown away
        for key, (run, _amount) in list(self.review_given.items()):
            row = before[key]
            if run == latest and row.state == ledger.REQUESTED:
                # Undoing the review that gave it, before anything paid it: cancelled.
                assert key not in after
                del self.review_given[key]
            elif row.state == ledger.ISSUED and ledger.file_run(row) == latest and drop:
                # Taken out of a bonus.csv thrown away: owed again, for the next file or apply.
                assert after[key].state == ledger.REQUESTED
            else:
                assert after[key].state == row.state, key

    def review_rows(self) -> dict[tuple[str, str], StudyBonus]:
        found = {}
        for worker, reason in self.review_given:
            pid = next(w.participant_id for w in worker_stats(self.study) if w.worker_id == worker)
            row = db.session.scalar(
                select(StudyBonus).where(
                    StudyBonus.study_id == self.study.id,
                    StudyBonus.participant_id == pid,
                    StudyBonus.reason == review.REVIEW_PREFIX + reason,
                    StudyBonus.state.in_(BONUS_LIVE),
                )
            )
            if row is not None:
                db.session.expunge(row)
                found[(worker, reason)] = row
        return found

    @rule(worker=st.sampled_from(["w-a", "w-b"]), reason=st.sampled_from(["kind", "careful"]))
    def review_gives_a_bonus(self, worker, reason):
        try:
            row = review.give_bonus(self.study, worker, 0.15, reason)
        except Conflict:
            assert (worker, reason) in self.review_given  # that reason is paid once
            return
        assert (worker, reason) not in self.review_given
        assert row.state == ledger.REQUESTED  # owed: the next bonus.csv or apply pays it
        self.review_given[(worker, reason)] = (row.run, 15)

    @precondition(lambda self: self.cap < len(CAPS) - 1)
    @rule()
    def edit_raises_the_cap(self):
        self.cap += 1
        self.study.config = {
            **self.study.config,
            "bonus": {"per_exact": 0.05, "cap": CAPS[self.cap]},
        }
        db.session.commit()

    @invariant()
    def never_paid_more_than_owed_and_each_key_once(self):
        owed = self.owed_in_all()
        for worker, amount in paid_per_worker(self.fake, self.uploads).items():
            assert amount <= owed[worker], (worker, amount, owed[worker])
        live = db.session.execute(
            select(StudyBonus.participant_id, StudyBonus.reason, func.count())
            .where(StudyBonus.study_id == self.study.id, StudyBonus.state.in_(BONUS_LIVE))
            .group_by(StudyBonus.participant_id, StudyBonus.reason)
        ).all()
        assert all(n == 1 for _pid, _reason, n in live)
        assert len(self.fake.paid_bulks) == len(set(self.fake.paid_bulks))
        rows = db.session.scalar(select(func.count()).select_from(StudyBonus))
        assert rows >= self.rows_seen  # a ledger row is never deleted
        self.rows_seen = rows
        runs = list(
            db.session.scalars(select(StudyRun.run).where(StudyRun.study_id == self.study.id))
        )
        assert len(runs) == len(set(runs))

    def teardown(self):
        # The researcher settles: uploads every bonus.csv still pending, then verifies once more
        # and uploads that file too.
        for run in sorted(self.files):
            self.upload_a_bonus_csv_now(run)
        _run, lines = self.write_bonus_csv()
        for worker, amount in lines:
            self.uploads[worker] = self.uploads.get(worker, 0) + amount
        _run, lines = self.write_bonus_csv()
        assert lines == []  # nothing is owed twice
        owed = self.owed_in_all()
        paid = paid_per_worker(self.fake, self.uploads)
        decided = {d.worker_id: d.decision for d in verify.decide(self.study, self.submissions())}
        for worker in ("w-a", "w-b"):
            assert decided[worker] == verify_submissions.APPROVE, (worker, decided)
            assert paid.get(worker, 0) == owed[worker], (worker, paid, owed)
        assert paid.get("w-lazy", 0) == 0  # rejected: no bonus
        # Screened out: asked to return, and paid the screen-out payment once.
        assert decided["w-out"] == verify_submissions.RETURNED
        assert paid.get("w-out", 0) == owed["w-out"] == SCREEN_OUT_PAY

    def upload_a_bonus_csv_now(self, run):
        for worker, amount in self.files.pop(run):
            self.uploads[worker] = self.uploads.get(worker, 0) + amount


URL: dict = {}
# No speed rule: the workers here play at machine speed, and how fast that is depends on the
# machine's load; a "too fast" worker would go to review and change what is owed between runs.
SCREEN_OUT_PAY = 30  # screened_out_pay = 0.30, in minor units
STEADY = (
    "speeder_fraction = 0\nscreened_out_pay = 0.30\n"
    + BONUS
    + '\n[screening]\nquestion = "Do you read English daily?"\noptions = ["Yes", "No"]\n'
    + 'accept = ["Yes"]\n'
)


def test_every_bonus_is_paid_exactly_once_whatever_the_commands(
    app,
    runner,
    ctx,
    tmp_path,
    prolific,  # noqa: F811
):
    make_pool(normal=20, human=6)
    assert create(runner, tmp_path, STEADY).exit_code == 0
    study = lookup.get_study("pilot")
    a = join(study, "w-a", "sa", screening="Yes")
    for _ in range(6):
        play_slot(study, a, flag_at=None)  # 4 exact hits: 0.20 at most
    b = join(study, "w-b", "sb", screening="Yes")
    for i in range(6):
        play_slot(study, b, flag_at=None if i % 2 else 2)
    play_lazy(study, join(study, "w-lazy", "sl", screening="Yes"), "human")
    assert join(study, "w-out", "so", screening="No").status == "screened_out"

    class Bound(Researcher):
        def __init__(self):
            super().__init__(study, prolific["url"])
            prolific["fake"] = self.fake

    run_state_machine_as_test(
        Bound,
        settings=settings(
            max_examples=30,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_the_api_path_records_what_prolific_answered_and_never_pays_a_row_twice(
    app,
    runner,
    ctx,
    tmp_path,
    prolific,  # noqa: F811
):
    make_pool(normal=20, human=6)
    assert create(runner, tmp_path, STEADY).exit_code == 0
    study = lookup.get_study("pilot")
    worker = join(study, "w-a", "sa", screening="Yes")
    for _ in range(6):
        play_slot(study, worker, flag_at=None)
    fake = prolific["fake"] = FlakyProlific(
        "st1", [{"id": "sub1", "participant_id": "w-a", "status": "AWAITING REVIEW"}]
    )
    app.config.update(PROLIFIC_API_TOKEN=TOKEN, PROLIFIC_API_URL=prolific["url"])
    args = ["study", "verify", "pilot", "--prolific-api", "st1", "--apply", "--send"]
    fake.fail_next = "set_up"
    refused = runner.invoke(args=[*args, "--out", str(tmp_path / "one")])
    assert refused.exit_code != 0 and "HTTP 503" in refused.output
    row = db.session.scalars(select(StudyBonus)).one()
    assert (row.state, row.amount_minor) == ("failed", 20) and "503" in row.platform_ref
    assert fake.paid == []
    fake.fail_next = "pay"  # Prolific pays, then the answer is lost
    lost = runner.invoke(args=[*args, "--out", str(tmp_path / "two")])
    assert lost.exit_code != 0 and "HTTP 504" in lost.output
    assert fake.paid == [("w-a", 0.2)]
    sent = db.session.scalars(select(StudyBonus).where(StudyBonus.state == "sent")).one()
    assert '"bulk_bonus_payment": "bulk1"' in sent.platform_ref and "504" in sent.platform_ref
    undone = runner.invoke(args=["study", "undo-verify", "pilot", "--drop-bonuses"])
    assert "Kept its 1 bonus(es) sent through Prolific's API" in undone.output
    again = runner.invoke(args=[*args, "--out", str(tmp_path / "three")])
    assert again.exit_code == 0, again.output
    assert "0 bonus(es) paid" in again.output
    assert fake.paid == [("w-a", 0.2)]  # the sent row is never sent again
    assert ledger.given_bonuses(study) == {worker.id: 20}

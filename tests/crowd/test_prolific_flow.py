"""Prolific end to end through its API, against the local stand-in (prolific_standin.py),
which checks every request against Prolific's documented shapes: `flask study prolific create`,
publish, workers take part, sync, pause and start, message, apply (approve / reject / bonus),
then everything again, with no second payment, approval or message; and the failures between
the steps: a server error, a lost answer, a refused payment, a crash half-way.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.crowd import lookup, prolific_pay, verify, verify_runs, verify_submissions
from app.crowd.prolific_api import ProlificClient, ProlificError
from app.errors import Conflict
from app.extensions import db
from app.models import ParticipantStatus, StudyBonus
from app.models.studies import StudyMessage
from tests.crowd.helpers import join, make_pool, play_lazy, play_slot
from tests.crowd.prolific_standin import TOKEN, FakeProlific, serve
from tests.crowd.test_verify import BONUS, create

THANKS = "Thank you for taking part: your bonus is on its way."


@pytest.fixture
def stand_in(app):
    state: dict = {"fake": FakeProlific()}
    server = serve(state)
    state["fake"].slow_seconds = 0.8
    app.config.update(
        PUBLIC_URL="https://roft.example.org",
        PROLIFIC_API_TOKEN=TOKEN,
        PROLIFIC_API_URL=state["url"],
        PROLIFIC_API_TIMEOUT=0.4,
    )
    yield state["fake"]
    server.shutdown()


def cli(runner, *args, ok=True):
    result = runner.invoke(args=["study", "prolific", *args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def study(runner, ctx, tmp_path, stand_in):
    make_pool(normal=20, human=6)
    toml = BONUS.replace("rounds = 6", "rounds = 6\nplaces = 5").replace(
        'title = "Spot the machine"',
        'title = "Spot the machine"\ndescription = "Read short texts and say where a machine '
        'took over."',
    )
    assert create(runner, tmp_path, toml).exit_code == 0
    return lookup.get_study("pilot")


def play(study):
    """A careful worker (4 exact hits: bonus 0.20), one who fails the checks, one still playing
    who returns the submission on Prolific, one who runs out of Prolific's time."""
    good = join(study, "5f00good", "sub-good")
    for _ in range(6):
        play_slot(study, good, flag_at=None)
    play_lazy(study, join(study, "5f00lazy", "sub-lazy"), "human")
    join(study, "5f00gone", "sub-gone")
    join(study, "5f00slow", "sub-slow")


def ledger(study):
    return list(
        db.session.scalars(
            select(StudyBonus).where(StudyBonus.study_id == study.id).order_by(StudyBonus.id)
        )
    )


def test_the_whole_life_of_a_study_and_everything_run_twice(runner, study, stand_in, tmp_path):
    fake = stand_in
    made = cli(runner, "create", "pilot")
    db.session.refresh(study)
    pid = study.prolific_study_id
    assert pid and f"Created the Prolific draft {pid}" in made.output
    draft = fake.studies[pid]
    assert draft["status"] == "UNPUBLISHED"
    assert draft["external_study_url"] == (
        "https://roft.example.org/study/pilot?PROLIFIC_PID={{%PROLIFIC_PID%}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    assert (draft["name"], draft["reward"], draft["estimated_completion_time"]) == (
        "Spot the machine",
        150,
        6,
    )
    assert draft["total_available_places"] == 5
    assert draft["description"].startswith("Read short texts")
    assert {c["code"]: (c["code_type"], c["actions"]) for c in draft["completion_codes"]} == {
        "C1DONE01": ("COMPLETED", [{"action": "MANUALLY_REVIEW"}]),
        "C2FAIL02": ("FAILED_ATTENTION_CHECK", [{"action": "MANUALLY_REVIEW"}]),
    }
    again = cli(runner, "create", "pilot", ok=False)
    assert again.exit_code != 0 and f"already has the Prolific study {pid}" in again.output
    assert len(fake.studies) == 1

    assert "Prolific says ACTIVE" in cli(runner, "publish", "pilot").output
    assert "Nothing to do" in cli(runner, "publish", "pilot").output

    play(study)
    subs = {
        w: fake.seed(pid, w, status, code)
        for w, status, code in (
            ("5f00good", "AWAITING REVIEW", "C1DONE01"),
            ("5f00lazy", "AWAITING REVIEW", "C2FAIL02"),
            ("5f00gone", "RETURNED", None),
            ("5f00slow", "TIMED-OUT", None),
            ("5f00stranger", "ACTIVE", None),
        )
    }
    synced = cli(runner, "sync", "pilot").output
    assert "Marked returned or timed out here: 2 (5f00gone, 5f00slow)" in synced
    assert "never seen on the site: 5f00stranger" in synced
    statuses = {p.worker_id: p.status for p in study_participants(study)}
    assert statuses["5f00gone"] == ParticipantStatus.returned
    assert statuses["5f00slow"] == ParticipantStatus.timed_out
    assert statuses["5f00good"] == ParticipantStatus.completed  # finished: never touched
    assert "Marked" not in cli(runner, "sync", "pilot").output  # nothing new the second time

    assert "Paused" in cli(runner, "pause", "pilot").output
    assert fake.studies[pid]["status"] == "PAUSED"
    assert "Started again" in cli(runner, "start", "pilot").output

    out = tmp_path / "decisions"
    first = cli(runner, "apply", "pilot", "--out", str(out)).output
    assert "Sent to Prolific: 1 approved, 1 rejected, 1 bonus(es) paid." in first
    assert fake.submissions[subs["5f00good"]]["status"] == "APPROVED"
    rejected = fake.submissions[subs["5f00lazy"]]
    assert rejected["status"] == "REJECTED" and rejected["rejection"][0] == "FAILED_CHECK"
    assert len(rejected["rejection"][1]) >= 100
    assert fake.submissions[subs["5f00gone"]]["status"] == "RETURNED"
    assert fake.paid == [("5f00good", 0.2)]
    [row] = ledger(study)
    answer = json.loads(row.platform_ref)
    assert row.state == "paid" and answer["bulk_bonus_payment"] == fake.pay_calls[0]
    assert answer["set_up"]["total_amount"] == 20 and "processed" in answer["paid"]

    assert cli(runner, "message", "pilot", "5f00good", "--text", THANKS).output.startswith("Sent")
    # Everything once more: nothing is approved, rejected, paid or sent a second time.
    calls = len(fake.calls)
    second = cli(runner, "apply", "pilot", "--out", str(out)).output
    assert "Sent to Prolific: 0 approved, 0 rejected, 0 bonus(es) paid." in second
    repeat = cli(runner, "message", "pilot", "5f00good", "--text", THANKS).output
    assert "Not sent again" in repeat
    assert "Nothing to do" in cli(runner, "publish", "pilot").output
    cli(runner, "sync", "pilot")
    assert fake.paid == [("5f00good", 0.2)] and len(fake.pay_calls) == 1
    assert [m["recipient_id"] for m in fake.messages] == ["5f00good"]
    posts = [c for c in fake.calls[calls:] if c[0] == "POST"]
    assert posts == []  # the second round only read
    assert fake.shape_errors == []


def study_participants(study):
    from app.models import Participant

    return db.session.scalars(select(Participant).where(Participant.study_id == study.id))


def test_the_token_comes_from_the_environment_and_bad_input_is_refused(
    app, runner, study, stand_in
):
    app.config["PROLIFIC_API_TOKEN"] = None
    missing = cli(runner, "create", "pilot", ok=False)
    assert missing.exit_code == 1 and "PROLIFIC_API_TOKEN is not set" in missing.output
    app.config["PROLIFIC_API_TOKEN"] = TOKEN
    not_yet = cli(runner, "publish", "pilot", ok=False)
    assert "run `flask study prolific create pilot` first" in not_yet.output
    assert "no study called 'nope'" in cli(runner, "sync", "nope", ok=False).output
    app.config["PUBLIC_URL"] = None
    no_link = cli(runner, "create", "pilot", ok=False)
    assert "set PUBLIC_URL" in no_link.output and stand_in.studies == {}
    app.config["PUBLIC_URL"] = "https://roft.example.org"
    cli(runner, "create", "pilot")
    both = cli(runner, "message", "pilot", "5f00good", ok=False)
    assert both.exit_code == 2 and "exactly one of --text and --file" in both.output
    stranger = cli(runner, "message", "pilot", "nobody", "--text", THANKS, ok=False)
    assert "never joined study 'pilot'" in stranger.output
    unknown = cli(runner, "resolve-payment", "pilot", "bulk9", "--paid", ok=False)
    assert "no unconfirmed payment 'bulk9'" in unknown.output
    assert stand_in.shape_errors == []


def test_a_study_without_places_is_refused_before_any_call(runner, ctx, tmp_path, stand_in):
    make_pool(normal=20, human=6)
    assert create(runner, tmp_path, BONUS).exit_code == 0
    refused = cli(runner, "create", "pilot", ok=False)
    assert "Prolific needs a number of places" in refused.output
    assert stand_in.calls == []
    cli(runner, "create", "pilot", "--places", "30")
    [draft] = stand_in.studies.values()
    assert draft["total_available_places"] == 30


def client(stand_in_url: str) -> ProlificClient:
    return ProlificClient(TOKEN, stand_in_url, timeout=0.4, pause=0)


def started(runner, study, fake):
    cli(runner, "create", "pilot")
    db.session.refresh(study)
    fake.studies[study.prolific_study_id]["status"] = "ACTIVE"
    play(study)
    for worker in ("5f00good", "5f00lazy"):
        fake.seed(study.prolific_study_id, worker)
    return study.prolific_study_id


def test_reads_and_set_ups_are_retried_after_a_server_error(runner, study, stand_in):
    fake = stand_in
    started(runner, study, fake)
    fake.fail("GET", r"/api/v1/submissions/", "500")
    fake.fail("POST", r"/bonus-payments/", "timeout", after=True)  # a set-up made, answer lost
    out = cli(runner, "apply", "pilot").output
    assert "1 bonus(es) paid" in out
    assert len(fake.bulk) == 2  # the lost set-up is left unpaid; the second is paid
    assert fake.paid == [("5f00good", 0.2)] and len(fake.pay_calls) == 1


def test_a_payment_refused_is_paid_later_with_the_same_set_up(runner, study, stand_in):
    fake = stand_in
    started(runner, study, fake)
    fake.fail("POST", r"/pay/$", "400")
    refused = cli(runner, "apply", "pilot", ok=False)
    assert refused.exit_code == 1 and "HTTP 400" in refused.output
    [row] = ledger(study)
    assert row.state == "requested" and "pay_refused" in row.platform_ref
    set_up = json.loads(row.platform_ref)["bulk_bonus_payment"]
    assert fake.paid == []
    cli(runner, "apply", "pilot")
    assert fake.pay_calls == [set_up] and len(fake.bulk) == 1  # no second set-up
    assert fake.paid == [("5f00good", 0.2)]
    assert ledger(study)[0].state == "paid"


def test_a_crash_between_set_up_and_pay_pays_that_set_up_once(
    runner, study, stand_in, app, monkeypatch
):
    """The process dies after Prolific set the bonus up and the ledger recorded it, before the
    pay call: the next run pays that set-up, and makes no new one."""
    fake = stand_in
    prolific_id = started(runner, study, fake)
    decisions = verify.decide(
        study, verify_submissions.from_prolific_api(client_of(app).submissions(prolific_id))
    )
    verify_runs.apply_decisions(study, decisions, via_api=True)

    def dies(*args):
        raise KeyboardInterrupt  # the machine goes down right after the set-up was recorded

    with monkeypatch.context() as patch:
        patch.setattr(prolific_pay, "_pay", dies)
        with pytest.raises(KeyboardInterrupt):
            prolific_pay.pay_requested(client_of(app), study, prolific_id)
    [row] = ledger(study)
    set_up = json.loads(row.platform_ref)["bulk_bonus_payment"]
    assert row.state == "requested" and fake.paid == []
    cli(runner, "apply", "pilot")
    assert fake.pay_calls == [set_up] and len(fake.bulk) == 1
    assert fake.paid == [("5f00good", 0.2)]


def test_a_crash_during_the_pay_call_is_left_to_the_operator(runner, study, stand_in, app):
    """The process dies while the pay call is out: whether Prolific paid is unknown, so the
    tool never pays that row again; the operator looks and says."""
    fake = stand_in
    prolific_id = started(runner, study, fake)
    decisions = verify.decide(
        study, verify_submissions.from_prolific_api(client_of(app).submissions(prolific_id))
    )
    verify_runs.apply_decisions(study, decisions, via_api=True)

    class Dies(ProlificClient):
        def pay_bulk_bonus(self, payment_id):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prolific_pay.pay_requested(Dies(TOKEN, app.config["PROLIFIC_API_URL"]), study, prolific_id)
    [row] = ledger(study)
    assert row.state == "sent"  # committed before the call
    payment = json.loads(row.platform_ref)["bulk_bonus_payment"]
    waiting = cli(runner, "apply", "pilot").output
    assert "0 bonus(es) paid" in waiting and f"Payment {payment}" in waiting
    assert fake.paid == []
    resolved = cli(runner, "resolve-payment", "pilot", payment, "--not-paid").output
    assert "1 bonus(es), 0.20 GBP, are owed again" in resolved
    cli(runner, "apply", "pilot")
    assert fake.paid == [("5f00good", 0.2)] and len(fake.pay_calls) == 1
    assert payment not in fake.pay_calls  # the abandoned set-up is never paid
    assert [r.state for r in ledger(study)] == ["paid"]


def client_of(app) -> ProlificClient:
    return client(app.config["PROLIFIC_API_URL"])


def test_a_lost_answer_to_a_payment_is_never_paid_twice(runner, study, stand_in):
    fake = stand_in
    started(runner, study, fake)
    fake.fail("POST", r"/pay/$", "timeout", after=True)  # paid, but the answer never comes
    lost = cli(runner, "apply", "pilot", ok=False)
    assert lost.exit_code == 1
    payment = fake.pay_calls[0]
    assert f"Payment {payment} (0.20 GBP) went out but Prolific's answer never came" in (
        lost.output
    )
    [row] = ledger(study)
    assert row.state == "sent" and "pay_unconfirmed" in row.platform_ref
    for _ in range(2):
        again = cli(runner, "apply", "pilot").output
        assert "0 bonus(es) paid" in again and "went out but" in again
    assert fake.paid == [("5f00good", 0.2)]
    done = cli(runner, "resolve-payment", "pilot", payment, "--paid").output
    assert "Recorded 1 bonus(es), 0.20 GBP, as paid." in done
    assert ledger(study)[0].state == "paid"
    assert "went out but" not in cli(runner, "apply", "pilot").output
    assert fake.paid == [("5f00good", 0.2)]


def test_a_message_whose_answer_is_lost_is_not_sent_again(runner, study, stand_in):
    fake = stand_in
    started(runner, study, fake)
    fake.fail("POST", r"/api/v1/messages/", "timeout", after=True)
    lost = cli(runner, "message", "pilot", "5f00good", "--text", THANKS, ok=False)
    assert lost.exit_code == 1 and "no answer" in lost.output
    again = cli(runner, "message", "pilot", "5f00good", "--text", THANKS).output
    assert "got no answer" in again
    assert len(fake.messages) == 1
    # A refusal sends nothing: the next run may try again, and sends it once.
    fake.fail("POST", r"/api/v1/messages/", "400")
    other = "A second note, about the study's last round."
    refused = cli(runner, "message", "pilot", "5f00lazy", "--text", other, ok=False)
    assert "HTTP 400" in refused.output
    state = db.session.scalar(
        select(StudyMessage.state).where(StudyMessage.worker_id == "5f00lazy")
    )
    assert state == "failed"
    assert cli(runner, "message", "pilot", "5f00lazy", "--text", other).output.startswith("Sent")
    assert [m["recipient_id"] for m in fake.messages] == ["5f00good", "5f00lazy"]


def test_the_client_never_repeats_a_payment_or_a_message(stand_in, app):
    fake = stand_in
    fake.studies["st1"] = {"id": "st1", "status": "ACTIVE"}
    fake.seed("st1", "w1")
    api = client_of(app)
    setup = api.set_up_bonuses("st1", [("w1", "0.50")])
    fake.fail("POST", r"/pay/$", "500", after=True)
    with pytest.raises(ProlificError) as lost:
        api.pay_bulk_bonus(setup["id"])
    assert lost.value.uncertain and lost.value.status == 500
    assert fake.pay_calls == [setup["id"]]  # one call, not retried
    fake.fail("GET", r"/api/v1/studies/st1/", "timeout", times=1)
    assert api.study("st1")["status"] == "ACTIVE"  # a read is tried again
    with pytest.raises(ProlificError, match="not one of Prolific's categories"):
        api.reject("sub1", "BAD_MOOD", "x" * 120)
    assert fake.shape_errors == []


def test_two_runs_that_read_the_same_bonuses_pay_them_once(runner, study, stand_in, app):
    """Run A reads the bonuses of a recorded set-up; run B pays them first; A then pays
    nothing."""
    fake = stand_in
    prolific_id = started(runner, study, fake)
    submissions = verify_submissions.from_prolific_api(client_of(app).submissions(prolific_id))
    verify_runs.apply_decisions(study, verify.decide(study, submissions), via_api=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prolific_pay, "_pay", lambda *args: None)  # stop after the set-up
        prolific_pay.pay_requested(client_of(app), study, prolific_id)
    rows_read_by_a = ledger(study)
    set_up = json.loads(rows_read_by_a[0].platform_ref)["bulk_bonus_payment"]
    cli(runner, "apply", "pilot")  # run B
    assert fake.pay_calls == [set_up]
    with pytest.raises(Conflict, match="taken by another run"):
        prolific_pay._pay(client_of(app), set_up, rows_read_by_a, prolific_pay.Paid())
    assert fake.pay_calls == [set_up] and fake.paid == [("5f00good", 0.2)]
    assert [r.state for r in ledger(study)] == ["paid"]


def test_a_draft_whose_answer_was_lost_can_be_adopted(runner, study, stand_in):
    fake = stand_in
    fake.fail("POST", r"/api/v1/studies/$", "timeout", after=True)
    lost = cli(runner, "create", "pilot", ok=False)
    assert "look on Prolific for a draft with the internal name roft:pilot" in lost.output
    [(made_id, draft)] = fake.studies.items()
    assert draft["internal_name"] == "roft:pilot"
    db.session.refresh(study)
    assert study.prolific_study_id is None  # never retried: no second draft
    fake.studies["other"] = {"id": "other", "external_study_url": "https://elsewhere.org/x"}
    wrong = cli(runner, "create", "pilot", "--use-existing", "other", ok=False)
    assert "does not lead to this study's link" in wrong.output
    kept = cli(runner, "create", "pilot", "--use-existing", made_id).output
    assert f"now uses the Prolific study {made_id}" in kept
    db.session.refresh(study)
    assert study.prolific_study_id == made_id
    assert len([c for c in fake.calls if c == ("POST", "/api/v1/studies/")]) == 1


def test_sync_lists_decisions_made_on_prolific_and_keeps_ours(runner, study, stand_in):
    fake = stand_in
    prolific_id = started(runner, study, fake)
    approved_there = next(s for s in fake.submissions.values() if s["participant_id"] == "5f00lazy")
    approved_there["status"] = "APPROVED"
    fake.seed(prolific_id, "5f00gone", "RETURNED")
    out = cli(runner, "sync", "pilot").output
    assert "Approved or rejected on Prolific, with no such decision here: 5f00lazy" in out
    assert "Marked returned or timed out here: 1 (5f00gone)" in out
    statuses = {p.worker_id: p.status for p in study_participants(study)}
    assert statuses["5f00lazy"] == ParticipantStatus.failed_checks  # the evidence stays

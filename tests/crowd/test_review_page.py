"""The researcher's review page: a worker's evidence, and approve / reject / bonus decided from
it through the same service as `flask study review`, into the store `flask study verify` reads.
Researchers only, CSRF-checked, idempotent, with a clear 4xx for bad input."""

from __future__ import annotations

import csv
import io
import re
import threading

import pytest
from sqlalchemy import func, select

from app.crowd import lookup, review, verify, verify_files, verify_runs, verify_submissions
from app.errors import Conflict
from app.extensions import db
from app.models import StudyBonus, StudyDecision
from tests.conftest import csrf_token, sign_in
from tests.crowd.helpers import join, make_pool, make_study, play_lazy, play_slot
from tests.crowd.test_review import MESSAGE, rows, verify_run
from tests.crowd.test_verify import BONUS, create


@pytest.fixture
def study(app, runner, tmp_path):
    """Two workers verify sends to review (a mistyped code each), one who never got a decision.
    The HTTP clients run outside any app context (one shared context would share the login)."""
    with app.app_context():
        make_pool(normal=20, human=6)
        assert create(runner, tmp_path, BONUS).exit_code == 0
        made = lookup.get_study("pilot")
        for name in ("w-typo", "w-other", "w-quiet"):
            worker = join(made, name, name)
            for n in range(6):
                done = play_slot(made, worker, flag_at=None)
                if n == 1:
                    done.explanation = f"the tone changed <b>suddenly</b> for {name}"
                    db.session.commit()
    verify_run(runner, tmp_path, "first", "AWAITING REVIEW", "--apply")
    return app


@pytest.fixture
def lab(app, study):
    return sign_in(app)


def token_of(client, path="/research/studies/pilot/review/w-typo") -> str:
    return csrf_token(client, path)


def decisions(app) -> int:
    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(StudyDecision))


def bonuses(app) -> int:
    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(StudyBonus))


def listed(client, show: str) -> list[str]:
    page = client.get(f"/research/studies/pilot/review?show={show}")
    assert page.status_code == 200
    return re.findall(r'<tr data-worker="([^"]+)">', page.get_data(as_text=True))


def test_only_researchers_see_or_post(app, study, lab):
    anonymous = app.test_client()
    assert anonymous.get("/research/studies/pilot/review").status_code == 302  # to the login
    player = sign_in(app, "player", researcher=False)
    assert player.get("/research/studies/pilot/review").status_code == 403
    token = csrf_token(player, "/")
    refused = player.post(
        "/research/studies/pilot/review/w-typo/approve", data={"csrf_token": token}
    )
    assert refused.status_code == 403
    # A researcher's form without its CSRF token (another site posting it) is refused.
    assert lab.post("/research/studies/pilot/review/w-typo/approve").status_code == 400
    assert decisions(app) == 2  # verify's two (w-quiet is not in its file), nothing more


def test_the_list_filters_by_decision(study, lab):
    assert listed(lab, "review") == ["w-typo", "w-other"]
    assert listed(lab, "undecided") == ["w-quiet"]
    assert listed(lab, "approved") == [] and listed(lab, "rejected") == []
    assert listed(lab, "all") == ["w-typo", "w-other", "w-quiet"]
    assert listed(lab, "nonsense") == ["w-typo", "w-other"]  # an unknown filter: the default
    tabs = lab.get("/research/studies/pilot/review").get_data(as_text=True)
    for label in ("To review (2)", "Undecided (1)", "Approved (0)", "Rejected (0)", "All (3)"):
        assert label in tabs
    token = token_of(lab)
    lab.post("/research/studies/pilot/review/w-typo/approve", data={"csrf_token": token})
    assert listed(lab, "approved") == ["w-typo"]
    assert listed(lab, "review") == ["w-other"]
    # The study page links to the review page and counts who waits, from the same decisions.
    page = lab.get("/research/studies/pilot").get_data(as_text=True)
    assert "Review workers (1 waiting)" in page


def test_the_worker_page_shows_rounds_checks_flags_and_explanations(app, study, lab):
    page = lab.get("/research/studies/pilot/review/w-typo")
    assert page.status_code == 200
    body = page.get_data(as_text=True)
    with app.app_context():
        view = review.worker_view(lookup.get_study("pilot"), "w-typo")
    assert len(view.rounds) == 6 and len(view.checks) == 2
    assert all(r.verdict == "pass" and r.evidence_seen for r in view.checks)
    checks = body[body.index('id="review-checks"') : body.index('id="explanations"')]
    assert checks.count("<tr>") == 3  # the header and the two checks
    assert checks.count("<td>yes</td><td>pass</td>") == 2
    assert body.count('<details class="review-round">') == 6
    assert body.count("the check's instruction") == 2  # one per check, at its sentence
    assert "matches no code of this study" in body  # verify's reason for the review
    # The worker's explanation is text, never markup.
    assert "the tone changed &lt;b&gt;suddenly&lt;/b&gt; for w-typo" in body
    assert "<b>suddenly" not in body
    assert lab.get("/research/studies/pilot/review/w-nobody").status_code == 404
    assert lab.get("/research/studies/nope/review").status_code == 404


def test_a_void_check_shows_its_evidence_was_not_seen(app, study, lab):
    with app.app_context():
        made = lookup.get_study("pilot")
        worker = join(made, "w-early", "w-early")
        # Flag the second sentence every time: an inside check's sentence comes later: void.
        play_lazy(made, worker, "first")
        view = review.worker_view(made, "w-early")
    void = [r for r in view.checks if r.verdict == "void"]
    assert void and all(r.evidence_seen is False for r in void)
    assert view.worker.checks_void == len(void)
    body = lab.get("/research/studies/pilot/review/w-early").get_data(as_text=True)
    assert body.count("<td>no</td><td>void</td>") == len(void)


def test_approve_twice_or_replayed_records_one_decision(app, study, lab, runner, tmp_path):
    token = token_of(lab)
    form = {"csrf_token": token, "show": "review"}
    first = lab.post("/research/studies/pilot/review/w-typo/approve", data=form)
    assert first.status_code == 302
    assert decisions(app) == 3
    again = lab.post("/research/studies/pilot/review/w-typo/approve", data=form)  # a replay
    assert again.status_code == 302 and decisions(app) == 3
    page = lab.get(again.headers["Location"]).get_data(as_text=True)
    assert "already approved; nothing new was recorded" in page
    # The next verify writes the page's decision into the platform's files, bonus once.
    out, _ = verify_run(runner, tmp_path, "second", "AWAITING REVIEW", "--apply")
    assert rows(out / "decisions.csv")["w-typo"]["decision"] == "approve"
    assert (out / "approve.txt").read_text() == "w-typo\n"
    assert (out / "bonus.csv").read_text() == "w-typo,0.20\n"
    lab.post("/research/studies/pilot/review/w-typo/approve", data=form)
    out, _ = verify_run(runner, tmp_path, "third", "AWAITING REVIEW", "--apply")
    assert (out / "bonus.csv").read_text() == ""  # paid once


def test_reject_needs_a_real_message_and_goes_to_reject_csv(app, study, lab, runner, tmp_path):
    token = token_of(lab, "/research/studies/pilot/review/w-other")
    url = "/research/studies/pilot/review/w-other/reject"
    short = lab.post(url, data={"csrf_token": token, "message": "bad work", "category": "OTHER"})
    assert short.status_code == 400
    body = short.get_data(as_text=True)
    assert "at least 100 characters" in body and "this one has 8" in body
    assert ">bad work</textarea>" in body  # what was typed comes back to be finished
    nul = lab.post(
        url, data={"csrf_token": token, "message": MESSAGE + "\x00", "category": "OTHER"}
    )
    assert nul.status_code == 400 and "NUL character" in nul.get_data(as_text=True)
    unknown = lab.post(url, data={"csrf_token": token, "message": MESSAGE, "category": "RUDE"})
    assert unknown.status_code == 400 and "unknown rejection category" in unknown.get_data(
        as_text=True
    )
    nobody = lab.post(
        "/research/studies/pilot/review/w-nobody/reject",
        data={"csrf_token": token, "message": MESSAGE, "category": "OTHER"},
    )
    assert nobody.status_code == 404 and "no worker" in nobody.get_data(as_text=True)
    assert decisions(app) == 2
    form = {"csrf_token": token, "message": MESSAGE, "category": "BAD_CODE"}
    assert lab.post(url, data=form).status_code == 302
    assert lab.post(url, data=form).status_code == 302  # a double submit: nothing new
    assert decisions(app) == 3
    out, _ = verify_run(runner, tmp_path, "second", "AWAITING REVIEW", "--apply")
    assert rows(out / "decisions.csv")["w-other"]["decision"] == "reject"
    reject = list(csv.DictReader(io.StringIO((out / "reject.csv").read_text())))
    assert reject == [
        {"participant_id": "w-other", "rejection_category": "BAD_CODE", "message": MESSAGE}
    ]
    assert "w-other" not in (out / "bonus.csv").read_text()


def test_a_bonus_is_given_once_and_bad_amounts_are_refused(app, study, lab, runner):
    token = token_of(lab)
    url = "/research/studies/pilot/review/w-typo/bonus"

    def give(amount, reason="careful explanations"):
        return lab.post(url, data={"csrf_token": token, "amount": amount, "reason": reason})

    for amount, words in (
        ("-1", "positive amount"),
        ("0", "positive amount"),
        ("0.505", "whole cents"),
        ("lots", "is not a number"),
        ("nan", "not a sensible amount"),
        ("1e400", "not a sensible amount"),
        ("1.51", "at most 1.50 GBP"),  # the study's reward, 1.50, is larger than its cap
    ):
        refused = give(amount)
        assert refused.status_code == 400, amount
        assert words in refused.get_data(as_text=True), amount
    assert give("0.50", "   ").status_code == 400
    assert give("0.50", "nul\x00byte").status_code == 400
    assert bonuses(app) == 0
    given = give("0,50")
    assert given.status_code == 302
    replay = give("0.50")
    assert replay.status_code == 409 and "paid once" in replay.get_data(as_text=True)
    assert give("0.50", "careful   explanations").status_code == 409
    assert bonuses(app) == 1
    with app.app_context():
        row = db.session.scalar(select(StudyBonus))
    assert (row.amount_minor, row.reason, row.state) == (
        50,
        "review: careful explanations",
        "requested",
    )
    # Owed in the ledger, with the one way it is paid; no file of its own to upload twice.
    page = lab.get(given.headers["Location"]).get_data(as_text=True)
    assert "next <code>verify --apply</code> bonus.csv" in page
    assert lab.get(f"/research/studies/pilot/review/bonus-{row.run}.csv").status_code == 404
    # The CLI refuses the same key too: one store, one rule.
    again = runner.invoke(
        args=["study", "review", "pilot", "--bonus", "w-typo", "--amount", "0.50",
              "--reason", "careful explanations"]
    )  # fmt: skip
    assert again.exit_code != 0 and "paid once" in again.output
    assert bonuses(app) == 1


def test_the_cli_applies_the_same_bonus_limit(app, study, runner):
    too_much = runner.invoke(
        args=["study", "review", "pilot", "--bonus", "w-typo", "--amount", "15",
              "--reason", "typo"]
    )  # fmt: skip
    assert too_much.exit_code != 0 and "at most 1.50 GBP" in too_much.output
    assert bonuses(app) == 0


def test_simultaneous_decisions_record_one(app, study):
    """Six requests at the same moment (a double click on a slow line, a replay): one decision
    and one bonus are recorded; the others are told it is done or refused with a 409."""

    def at_once(action) -> list:
        barrier = threading.Barrier(6)
        results: list = []

        def one():
            with app.app_context():
                barrier.wait()
                try:
                    results.append(action(lookup.get_study("pilot")))
                except Conflict as refused:
                    results.append(refused)
                finally:
                    db.session.remove()

        threads = [threading.Thread(target=one) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(results) == 6
        return results

    before = decisions(app)
    runs = at_once(lambda s: review.decide(s, "w-typo", "approve"))
    assert sum(isinstance(r, int) for r in runs) == 1
    assert all(r is None or isinstance(r, (int, Conflict)) for r in runs)
    assert decisions(app) == before + 1
    given = at_once(lambda s: review.give_bonus(s, "w-typo", 0.3, "fast and careful"))
    assert sum(isinstance(r, StudyBonus) for r in given) == 1
    assert all("paid once" in r.message for r in given if isinstance(r, Conflict))
    assert bonuses(app) == 1


def test_an_mturk_review_bonus_goes_into_verifys_sendbonus_file(ctx, tmp_path):
    make_pool(normal=12, human=4)
    study = make_study(platform="mturk", completion_codes={}, rounds=3, attention_check_rate=0)
    worker = join(study, "A1TURKER", "ASSIGN77")
    for _ in range(3):
        play_slot(study, worker, flag_at=None)
    review.give_bonus(study, "A1TURKER", 0.25, "clear, careful notes")
    decisions = verify.decide(study, [verify_submissions.Submission("A1TURKER", None, "SUBMITTED")])
    applied = verify_runs.apply_decisions(study, decisions)
    verify_files.write_files(tmp_path, study, decisions, "batch.csv", applied, None)
    assert (tmp_path / "mturk-bonus.csv").read_text() == (
        'WorkerId,AssignmentId,BonusAmount,Reason\nA1TURKER,ASSIGN77,0.25,"clear, careful notes"\n'
    )
    assert (tmp_path / "bonus.csv").read_text() == "A1TURKER,0.25\n"

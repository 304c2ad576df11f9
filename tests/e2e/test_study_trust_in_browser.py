"""Study flows a study runner must be able to trust, in Chromium: a worker who flags at once,
comprehension questions, hidden feedback with ratings that cannot be skipped, the live dashboard,
and MTurk in a frame whose cookies the browser blocks."""

from __future__ import annotations

import re
import ssl
import subprocess
import threading
from collections import Counter
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from playwright.sync_api import expect
from sqlalchemy import select
from werkzeug.serving import make_server

from app.accounts import service as accounts
from app.crowd import admin
from app.crowd.study_file import parse_study
from app.extensions import db
from app.models import Participant, Round
from tests.e2e.test_study_in_browser import STUDY, enter, flag_latest, play_round, play_study

pytestmark = pytest.mark.browser

QUESTIONS = [
    {
        "question": "What do you do when a sentence asks you to say a machine wrote it?",
        "options": ["Say a machine wrote it", "Ignore it"],
        "answer": "Say a machine wrote it",
    }
]
CODES = {"completed": "C1DONE01", "failed_checks": "C2FAIL02", "screened_out": "C3SCRN03"}
LIKERT = {
    "name": "fluency",
    "question": "How fluent is the sentence you flagged?",
    "question_all_human": "How fluent is the whole text?",
    "labels": ["Unreadable", "Awkward", "Acceptable", "Good", "Perfect"],
}


def make(app, **changes):
    with app.app_context():
        return admin.create_study(parse_study({**STUDY, **changes}, "test")).slug


@pytest.fixture
def server(app, live_server):
    make(app)
    return live_server


def test_worker_flagging_the_first_sentence_fails_the_checks(server, page):
    enter(page, server, "pw-first")
    # Flagging at the first chance voids both inside checks (their sentence was never shown);
    # a spare check, instruction first, comes in for each, and both are failed.
    assert play_study(page, "first") == 4
    expect(page.locator(".done")).to_contain_text("did not pass enough of the attention checks")
    expect(page.locator("#failed-checks")).to_contain_text("2 of the 2 attention checks")
    expect(page.locator("#completion-code")).to_have_text("C2FAIL02")


def test_failing_the_comprehension_questions_twice_screens_out_before_any_round(
    app, live_server, page
):
    make(app, slug="quiz", comprehension=QUESTIONS, completion_codes=CODES)
    page.goto(f"{live_server}/study/quiz?PROLIFIC_PID=pq1&STUDY_ID=st1&SESSION_ID=sq1")
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_role("heading", name="Before you start")).to_be_visible()
    for attempt in range(2):
        page.get_by_label("Ignore it").check()
        page.get_by_role("button", name="Start the first round").click()
        if attempt == 0:
            expect(page.get_by_role("alert")).to_contain_text("one more try")
            expect(page.locator("#comprehension")).to_contain_text("This is your last try.")
    expect(page.locator(".done")).to_contain_text("not right in two tries")
    expect(page.locator("#completion-code")).to_have_text("C3SCRN03")
    with app.app_context():
        assert db.session.scalar(select(Participant.rounds_done)) == 0


def test_hidden_feedback_unskippable_ratings_and_the_platforms_name(app, live_server, page):
    make(
        app,
        slug="sona",
        platform="generic",
        platform_name="SONA",
        completion_codes={},
        completion_url="https://sona.example.edu/finish?code={code}",
        attention_check_rate=0,
        rounds=2,
        show_feedback=False,
        likert=[LIKERT],
    )
    page.goto(f"{live_server}/study/sona?pid=s-worker-1")
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start").click()
    page.get_by_role("button", name="Start the first round").click()
    play_round(page, "human")
    result = page.locator("#result")
    expect(result).to_contain_text("Your answer is recorded")
    expect(page.locator(".points")).to_have_count(0)  # no points, no truth
    expect(page.locator(".tag")).to_have_count(0)
    expect(page.get_by_text("How fluent is the whole text?")).to_be_visible()
    # The lazy way round the ratings: the study's own "continue" address.
    page.goto(f"{live_server}/study/sona/continue")
    expect(page.get_by_text("How fluent is the whole text?")).to_be_visible()
    page.get_by_label(re.compile("Acceptable")).check()
    page.get_by_role("button", name="Next").click()
    flag_latest(page)
    expect(page.get_by_text("How fluent is the sentence you flagged?")).to_be_visible()
    page.goto(f"{live_server}/study/sona/done")  # no code before the last ratings
    expect(page.get_by_text("How fluent is the sentence you flagged?")).to_be_visible()
    page.get_by_label(re.compile("Good")).check()
    page.get_by_role("button", name="Finish and get your code").click()
    link = page.locator("#return-to-platform")
    expect(link).to_have_text("Return to SONA with this code")
    expect(link).to_have_attribute("href", re.compile(r"^https://sona\.example\.edu/finish\?code="))


def test_dashboard_refreshes_workers_status_and_agreement(make_app, db_uri, browser):
    app = make_app(STUDY_DASHBOARD_REFRESH_SECONDS=1)
    with app.app_context():
        if db_uri.startswith("postgresql"):
            db.drop_all()
        db.create_all()
        from app import PROJECT_ROOT
        from app.catalog.importer import import_file

        import_file(PROJECT_ROOT / "data" / "demo" / "examples.jsonl")
        admin.create_study(
            parse_study({**STUDY, "attention_check_rate": 0, "time_limit_minutes": 30}, "t")
        )
        accounts.sign_up("lab", "a long password here", consent=False, researcher=True)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{base}/login")
        page.get_by_label("Username").fill("lab")
        page.get_by_label("Password").fill("a long password here")
        page.get_by_role("button", name="Log in").click()
        page.goto(f"{base}/research/studies/pilot")
        expect(page.locator("#study-workers")).to_contain_text("No one has joined yet")
        workers = [context.browser.new_context() for _ in range(2)]
        for i, worker_context in enumerate(workers):
            worker = worker_context.new_page()
            enter(worker, base, f"dash{i}")
            worker.locator("html[data-keys='ready']").wait_for(state="attached")
            # Both flag the first sentence of the texts they get.
            for _ in range(2):
                play_round(worker, "first")
                worker.get_by_role("button", name=re.compile("^Next")).click()
        table = page.locator("#study-workers")
        expect(table).to_contain_text("dash0", timeout=10000)
        expect(table).to_contain_text("dash1")
        with app.app_context():
            late = db.session.scalar(select(Participant).where(Participant.worker_id == "dash1"))
            late.started_at -= timedelta(minutes=31)
            db.session.commit()
        expect(table.locator("tr", has_text="dash1")).to_contain_text("timed_out", timeout=10000)
        expect(page.locator("[data-field='left']")).to_have_text("1")
        with app.app_context():
            answered = Counter(
                db.session.scalars(select(Round.example_id).where(Round.guess.is_not(None)))
            )
        # Both flagged the first sentence: every pair of answers to one text agrees exactly.
        pairs = sum(n * (n - 1) // 2 for n in answered.values())
        expect(page.locator("[data-field='agreement.pairs']")).to_have_text(str(pairs))
        if pairs:
            expect(page.locator("[data-field='agreement.exact_rate']")).to_have_text("100%")
        for worker_context in workers:
            worker_context.close()
        context.close()
    finally:
        server.shutdown()


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for 127.0.0.1 and localhost, made with openssl."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def test_mturk_task_works_with_third_party_cookies_blocked(make_app, db_uri, certificate, browser):
    """MTurk frames the task from its own site: in the frame our cookie is a third-party cookie,
    which Chromium here (like Safari and private windows) does not keep. The frame offers a tab
    of the task's own, the worker finishes there and pastes the code back into the frame, which
    posts it to MTurk's externalSubmit."""
    hit_server = ThreadingHTTPServer(("127.0.0.1", 0), None)
    hit_port = hit_server.server_port
    app = make_app(MTURK_FRAME_ANCESTORS=f"https://localhost:{hit_port}")
    with app.app_context():
        if db_uri.startswith("postgresql"):
            db.drop_all()
        db.create_all()
        from app import PROJECT_ROOT
        from app.catalog.importer import import_file

        import_file(PROJECT_ROOT / "data" / "demo" / "examples.jsonl")
        admin.create_study(
            parse_study(
                {
                    **STUDY,
                    "slug": "turk",
                    "platform": "mturk",
                    "completion_codes": {},
                    "rounds": 2,
                    "attention_check_rate": 0.5,
                },
                "t",
            )
        )
    site = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=certificate)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    site_url = f"https://127.0.0.1:{site.server_port}"
    task = (
        f"{site_url}/study/turk?workerId=AW1&assignmentId=ASG1&hitId=H1"
        "&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"
    )

    class Hit(BaseHTTPRequestHandler):
        def do_GET(self):  # MTurk's HIT page: the task in a frame
            body = f'<h1>HIT</h1><iframe id="task" src="{task}" width="900" height="700"></iframe>'
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    hit_server.RequestHandlerClass = Hit
    hit_server.socket = certificate.wrap_socket(
        hit_server.socket, server_side=True, do_handshake_on_connect=False
    )
    threading.Thread(target=hit_server.serve_forever, daemon=True).start()
    submitted = []

    def external_submit(route):
        submitted.append(parse_qs(route.request.post_data or ""))
        route.fulfill(status=200, content_type="text/html", body="<p id=ok>Submitted</p>")

    try:
        # Chromium's default settings, as in the shared browser: third-party cookies blocked.
        context = browser.new_context(ignore_https_errors=True)
        context.route("https://workersandbox.mturk.com/**", external_submit)
        page = context.new_page()
        page.set_default_timeout(15000)
        page.goto(f"https://localhost:{hit_port}/hit")
        frame = page.frame_locator("#task")
        expect(frame.get_by_text("does not let this task keep its place")).to_be_visible()
        with context.expect_page() as opened:
            frame.get_by_role("link", name="Open the task in a new tab").click()
        tab = opened.value
        tab.set_default_timeout(15000)
        expect(tab.get_by_role("heading", name="Consent")).to_be_visible()
        tab.get_by_label("I have read the information above").check()
        tab.get_by_role("button", name="Start").click()
        tab.get_by_role("button", name="Start the first round").click()
        checks = 0
        while "/play/round/" in tab.url:
            checks += play_round(tab, "careful")
            tab.get_by_role("button", name=re.compile("^(Next|Finish)")).click()
        assert checks == 1
        code = tab.locator("#completion-code").inner_text()
        expect(tab.locator(".done")).to_contain_text("go back to the Mechanical Turk tab")
        frame.get_by_label("Completion code").fill(code)
        frame.get_by_role("button", name="Submit the task to MTurk").click()
        expect(frame.locator("#ok")).to_have_text("Submitted")
        context.close()
    finally:
        site.shutdown()
        hit_server.shutdown()
    assert submitted == [{"assignmentId": ["ASG1"], "completion_code": [code]}]
    with app.app_context():
        worker = db.session.scalar(select(Participant))
        assert worker.status == "completed" and worker.checks_passed == 1
        db.session.remove()

"""Study pages over HTTP: entry links, binding, codes, framing, cookies; the study CLI."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.extensions import db
from app.models import Participant, ParticipantStatus, Round
from tests.conftest import csrf_token
from tests.crowd.helpers import make_pool, make_study
from tests.game_helpers import FETCH, answer_http, reveal_http, same_but_token, start_http

PROLIFIC = "/study/pilot?PROLIFIC_PID=5f1a2b3c&STUDY_ID=st1&SESSION_ID=sess1"


def setup_study(app, **changes):
    with app.app_context():
        make_pool()
        make_study(**changes)


def join_http(client, link=PROLIFIC):
    # MTurk's landing page first checks, with one redirect, that this browser keeps a cookie.
    page = client.get(link, follow_redirects=True)
    assert page.status_code == 200, page.get_data(as_text=True)
    body = page.get_data(as_text=True)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', body))
    fields["consent"] = "yes"
    slug = link.split("/")[2].split("?")[0]
    return client.post(f"/study/{slug}/join", data=fields)


def play_round_http(client, token, careful: bool = True, slug: str = "pilot"):
    """From the study's next step, play one round and return its id (None when done).

    A careful worker reads every sentence and follows a check's instruction (the sentence that
    asks to be flagged, or "all human" when the first sentence asks for it); otherwise the worker
    says "human" at every step, the laziest path.
    """
    response = client.post(f"/study/{slug}/next", data={"csrf_token": token})
    if "/done" in response.headers["Location"]:
        return None
    round_id = int(re.search(r"/play/round/(\d+)", response.headers["Location"]).group(1))
    seen = 1
    while True:
        page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
        latest = re.findall(r'<li class="sentence[^"]*"[^>]*>([^<]*)</li>', page)[-1]
        if careful and "say that a machine wrote this sentence" in latest:
            data = {"choice": "machine", "explanation": "the sentence said so"}
            break
        if seen == 10:
            data = {"choice": "human"}
            break
        reveal_http(client, token, round_id, seen)
        seen += 1
    answered = answer_http(client, token, round_id, seen, **data)
    assert answered.status_code == 302, answered.get_data(as_text=True)
    return round_id


def test_missing_or_malformed_ids_get_a_clear_page(app, client):
    setup_study(app)
    missing = client.get("/study/pilot?STUDY_ID=x")
    assert missing.status_code == 400
    assert "missing your PROLIFIC_PID" in missing.get_data(as_text=True)
    bad = client.get("/study/pilot?PROLIFIC_PID=%3Cscript%3E&SESSION_ID=s")
    assert bad.status_code == 400
    assert client.get("/study/nothing?PROLIFIC_PID=a&SESSION_ID=b").status_code == 404


def test_prolific_worker_from_link_to_code(app, client):
    setup_study(app)
    assert join_http(client).status_code == 302
    instructions = client.get("/study/pilot/continue")
    assert "Instructions" in instructions.get_data(as_text=True)
    token = csrf_token(client)
    assert client.get("/study/pilot/done").status_code == 302  # no code before the quota
    ids = []
    while (round_id := play_round_http(client, token)) is not None:
        ids.append(round_id)
        page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
        assert "Spot the machine" in page
    assert len(ids) == 10
    done = client.get("/study/pilot/done").get_data(as_text=True)
    # A careful worker passes both checks: the "completed" code.
    assert "C1DONE01" in done
    assert "https://app.prolific.com/submissions/complete?cc=C1DONE01" in done
    with app.app_context():
        participant = db.session.scalar(select(Participant))
        assert participant.status == ParticipantStatus.completed
        assert participant.worker_id == "5f1a2b3c" and participant.platform_session == "sess1"


def test_another_browser_with_the_same_ids_cannot_take_over(app, client):
    setup_study(app)
    join_http(client)
    intruder = app.test_client()
    refused = join_http(intruder, "/study/pilot?PROLIFIC_PID=5f1a2b3c&SESSION_ID=guess")
    assert refused.status_code == 403
    assert "already started this study" in refused.get_data(as_text=True)
    assert intruder.get("/study/pilot/continue").status_code == 403
    with app.app_context():
        assert len(db.session.scalars(select(Participant)).all()) == 1


def test_worker_cannot_answer_someone_elses_round(app, client):
    setup_study(app)
    join_http(client)
    token = csrf_token(client)
    location = client.post("/study/pilot/next", data={"csrf_token": token}).headers["Location"]
    round_id = int(re.search(r"/play/round/(\d+)", location).group(1))
    other = app.test_client()
    join_http(other, "/study/pilot?PROLIFIC_PID=other77&SESSION_ID=s2")
    other_token = csrf_token(other)
    response = reveal_http(other, other_token, round_id, 1)
    assert response.status_code == 404
    with app.app_context():
        assert db.session.get(Round, round_id).revealed == 1


def test_a_study_round_drawn_for_the_script_is_its_page(app, client):
    """A study's round revealed, then answered, by the page's script: the fragment has the
    study's parts (the `round_page` hook, which reads the `Round`), as the round's page does."""
    setup_study(app)
    join_http(client)
    token = csrf_token(client)
    location = client.post("/study/pilot/next", data={"csrf_token": token}).headers["Location"]
    url = re.search(r"/play/round/\d+", location).group(0)
    for action, data in (
        ("next", {"seen": "1"}),
        ("answer", {"seen": "2", "choice": "machine", "reasons": "hunch"}),
    ):
        drawn = client.post(f"{url}/{action}", data={"csrf_token": token, **data}, headers=FETCH)
        assert drawn.status_code == 200 and "Spot the machine" in drawn.text, drawn.text
        assert same_but_token(drawn.text) == same_but_token(client.get(url, headers=FETCH).text)


def test_public_game_sends_crowd_workers_back_to_their_study(app, client):
    setup_study(app)
    join_http(client)
    token = csrf_token(client)
    response = start_http(client, token)
    assert response.headers["Location"].endswith("/study/current")


def test_mturk_preview_cannot_start_and_framing_is_limited(app, client):
    setup_study(app, slug="turk", platform="mturk", completion_codes={})
    preview = client.get("/study/turk?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    body = preview.get_data(as_text=True)
    assert preview.status_code == 200
    assert "This is a preview" in body and "/join" not in body
    csp = preview.headers["Content-Security-Policy"]
    assert "frame-ancestors https://www.mturk.com https://workersandbox.mturk.com" in csp
    assert "X-Frame-Options" not in preview.headers


def test_framed_study_cookies_are_samesite_none_over_https(app):
    setup_study(app, slug="turk", platform="mturk", completion_codes={})
    app.config["TRUSTED_HOSTS"] = ["roft.example"]
    client = app.test_client()
    link = (
        "/study/turk?workerId=A1&assignmentId=AS1&hitId=H1"
        "&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"
    )
    response = client.get(link, base_url="https://roft.example")
    cookie = response.headers["Set-Cookie"]
    assert "SameSite=None" in cookie and "Secure" in cookie
    plain = app.test_client().get("/", base_url="https://roft.example")
    assert all("SameSite=None" not in c for c in plain.headers.getlist("Set-Cookie"))


def test_mturk_completion_posts_back_to_mturk(app, client):
    setup_study(app, slug="turk", platform="mturk", completion_codes={}, rounds=3,
                attention_check_rate=0)  # fmt: skip
    link = (
        "/study/turk?workerId=A1&assignmentId=AS1&hitId=H1"
        "&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"
    )
    join_http(client, link)
    token = csrf_token(client)
    for _ in range(3):
        location = client.post("/study/turk/next", data={"csrf_token": token}).headers["Location"]
        round_id = int(re.search(r"/play/round/(\d+)", location).group(1))
        read_on(client, round_id, token)
        answer_http(client, token, round_id, 2, reasons="generic")
    done = client.get("/study/turk/done")
    body = done.get_data(as_text=True)
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in body
    assert 'name="assignmentId" value="AS1"' in body
    assert "https://workersandbox.mturk.com" in done.headers["Content-Security-Policy"]


def test_dashboard_is_for_researchers(app, client, runner):
    setup_study(app)
    assert client.get("/research/studies/pilot").status_code == 302
    runner.invoke(args=["create-researcher", "lab", "--password", "a long password"])
    token = csrf_token(client)
    client.post(
        "/login", data={"csrf_token": token, "username": "lab", "password": "a long password"}
    )
    page = client.get("/research/studies/pilot")
    assert page.status_code == 200 and "Spot the machine" in page.get_data(as_text=True)
    data = client.get("/research/studies/pilot.json").get_json()
    assert data["participants"] == 0 and data["pool_size"] == 16
    csv = client.get("/research/studies/pilot.csv")
    assert csv.mimetype == "text/csv" and csv.get_data(as_text=True).startswith("worker_id,")


LIKERT = {
    "name": "fluency",
    "question": "How fluent is the flagged sentence?",
    "labels": ["Unreadable", "Awkward", "Acceptable", "Good", "Perfect"],
}


def first_normal_round(client, token):
    """The first round, with its second sentence shown (the first is never machine-written)."""
    location = client.post("/study/pilot/next", data={"csrf_token": token}).headers["Location"]
    round_id = int(re.search(r"/play/round/(\d+)", location).group(1))
    read_on(client, round_id, token)
    return round_id


def read_on(client, round_id, token):
    reveal_http(client, token, round_id, 1)


def test_ratings_after_the_reveal_are_required_before_moving_on(app, client):
    setup_study(app, likert=[LIKERT], attention_check_rate=0)
    join_http(client)
    token = csrf_token(client)
    round_id = first_normal_round(client, token)
    answer_http(client, token, round_id, 2, reasons="generic")
    result = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    assert 'name="rating_fluency"' in result and "How fluent is the flagged sentence?" in result
    missing = client.post(
        "/study/pilot/next", data={"csrf_token": token, "round_id": str(round_id)}
    )
    assert missing.status_code == 400
    assert "Please rate" in missing.get_data(as_text=True)
    rated = client.post(
        "/study/pilot/next",
        data={"csrf_token": token, "round_id": str(round_id), "rating_fluency": "4"},
    )
    assert rated.status_code == 302
    with app.app_context():
        assert db.session.get(Round, round_id).ratings == {"fluency": 4}


def test_ratings_before_the_reveal_come_with_the_answer(app, client):
    setup_study(app, likert=[LIKERT], likert_when="before", attention_check_rate=0)
    join_http(client)
    token = csrf_token(client)
    round_id = first_normal_round(client, token)
    why = client.get(f"/play/round/{round_id}?flag=1").get_data(as_text=True)
    assert 'name="rating_fluency"' in why
    data = {"csrf_token": token, "seen": "2", "choice": "machine", "reasons": "generic"}
    refused = client.post(f"/play/round/{round_id}/answer", data=data)
    assert refused.status_code == 400
    with app.app_context():
        assert db.session.get(Round, round_id).guess is None
    stored = client.post(f"/play/round/{round_id}/answer", data={**data, "rating_fluency": "2"})
    assert stored.status_code == 302
    with app.app_context():
        answered = db.session.get(Round, round_id)
        assert answered.guess == 1 and answered.ratings == {"fluency": 2}
    result = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    assert 'name="rating_fluency"' not in result

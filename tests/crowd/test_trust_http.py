"""The study flow over HTTP where a lazy or unlucky worker could go wrong: comprehension
questions, ratings that cannot be skipped, hidden feedback, time limits, the done page, MTurk
without third-party cookies, the dashboard."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import select

from app.extensions import db
from app.models import Participant, ParticipantStatus, Round
from tests.conftest import csrf_token
from tests.crowd.helpers import join, make_pool, make_study, study_round
from tests.crowd.test_crowd_http import PROLIFIC, join_http, play_round_http, setup_study
from tests.game_helpers import answer_http, reveal_http

QUESTIONS = [
    {"question": "Who wrote the first sentence?", "options": ["A person", "A machine"],
     "answer": "A person"},
    {"question": "What do you do when a sentence asks to be flagged?",
     "options": ["Flag it", "Ignore it"], "answer": "Flag it"},
]  # fmt: skip
LIKERT = {
    "name": "fluency",
    "question": "How fluent is the sentence you flagged?",
    "question_all_human": "How fluent is the whole text?",
    "labels": ["Unreadable", "Awkward", "Acceptable", "Good", "Perfect"],
}
CODES = {"completed": "C1DONE01", "failed_checks": "C2FAIL02", "screened_out": "C3SCRN03"}


def participant(app):
    with app.app_context():
        found = db.session.scalar(select(Participant))
        db.session.expunge(found)
        return found


def first_round(client, token, slug="pilot"):
    location = client.post(f"/study/{slug}/next", data={"csrf_token": token}).headers["Location"]
    return int(re.search(r"/play/round/(\d+)", location).group(1))


def answer_human(client, token, round_id):
    for seen in range(1, 10):
        reveal_http(client, token, round_id, seen)
    return answer_http(client, token, round_id, 10, "human")


def test_comprehension_questions_come_before_any_round_and_allow_two_tries(app, client):
    setup_study(app, comprehension=QUESTIONS, completion_codes=CODES)
    join_http(client)
    page = client.get("/study/pilot/continue").get_data(as_text=True)
    assert "Before you start" in page and 'name="comprehension_1"' in page
    assert "You have 2 tries." in page and "last try" not in page
    token = csrf_token(client, "/study/pilot/continue")
    skipped = client.post("/study/pilot/next", data={"csrf_token": token})
    assert skipped.status_code == 409  # no round before the questions are answered
    wrong = {"csrf_token": token, "comprehension_0": "A person", "comprehension_1": "Ignore it"}
    form = client.get("/study/pilot/continue").get_data(as_text=True)
    sent = {**wrong, "try": re.search(r'name="try" value="([^"]+)"', form).group(1)}
    first = client.post("/study/pilot/comprehension", data=sent)
    assert first.status_code == 400
    assert "one more try" in first.get_data(as_text=True)
    # One count of tries: the page says this is the last one, and no longer "2 tries".
    assert "This is your last try." in first.get_data(as_text=True)
    assert "2 tries" not in first.get_data(as_text=True)
    # The same form sent twice (a double click) is one try, not two: it is not graded.
    double = client.post("/study/pilot/comprehension", data=sent)
    assert double.status_code == 400 and participant(app).comprehension_failures == 1
    assert "already sent" in double.get_data(as_text=True)
    # Nor can an old form or a made-up field buy a try: ungraded, even with the right answers.
    right = {**wrong, "comprehension_1": "Flag it", "attempt": "0", "try": sent["try"]}
    replay = client.post("/study/pilot/comprehension", data=right)
    assert replay.status_code == 400 and participant(app).instructions_at is None
    # The same wrong answers again, from the form now shown, are the second try.
    form = client.get("/study/pilot/continue").get_data(as_text=True)
    sent = {**wrong, "try": re.search(r'name="try" value="([^"]+)"', form).group(1)}
    second = client.post("/study/pilot/comprehension", data=sent)
    assert second.headers["Location"].endswith("/study/pilot/done")
    done = client.get("/study/pilot/done").get_data(as_text=True)
    assert "C3SCRN03" in done and "two tries" in done
    found = participant(app)
    assert found.status == ParticipantStatus.screened_out and found.rounds_done == 0
    with app.app_context():
        assert db.session.scalar(select(Round.id)) is None  # no paid round was ever made


def test_right_answers_lead_to_the_first_round(app, client):
    setup_study(app, comprehension=QUESTIONS, completion_codes=CODES)
    join_http(client)
    form = client.get("/study/pilot/continue").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
    right = {"csrf_token": token, "comprehension_0": "A person", "comprehension_1": "Flag it"}
    right["try"] = re.search(r'name="try" value="([^"]+)"', form).group(1)
    response = client.post("/study/pilot/comprehension", data=right)
    assert "/play/round/" in response.headers["Location"]
    again = client.post("/study/pilot/comprehension", data=right)  # sent twice: same round
    assert again.headers["Location"] == response.headers["Location"]


def test_ratings_cannot_be_skipped_by_any_path(app, client):
    setup_study(app, likert=[LIKERT], attention_check_rate=0, rounds=2)
    join_http(client)
    token = csrf_token(client)
    round_id = first_round(client, token)
    assert answer_human(client, token, round_id).status_code == 302
    page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    # After an "all human" answer no sentence was flagged: the question says so.
    assert "How fluent is the whole text?" in page and "you flagged" not in page
    # The lazy ways round the ratings: /continue, a bare "next", the done page.
    resumed = client.get("/study/pilot/continue")
    assert resumed.headers["Location"].endswith(f"/play/round/{round_id}#result")
    bare = client.post("/study/pilot/next", data={"csrf_token": token})
    assert bare.headers["Location"].endswith(f"/play/round/{round_id}#result")
    with app.app_context():
        assert db.session.scalar(select(Round).where(Round.id != round_id)) is None
    rated = client.post(
        "/study/pilot/next",
        data={"csrf_token": token, "round_id": str(round_id), "rating_fluency": "3"},
    )
    second = int(re.search(r"/play/round/(\d+)", rated.headers["Location"]).group(1))
    reveal_http(client, token, second, 1)
    answer_http(client, token, second, 2, reasons="generic")
    assert participant(app).status == ParticipantStatus.completed
    # The last round too: no code before its ratings.
    assert client.get("/study/pilot/done").headers["Location"].endswith("/study/pilot/continue")
    flagged = client.get(f"/play/round/{second}").get_data(as_text=True)
    assert "How fluent is the sentence you flagged?" in flagged
    client.post(
        "/study/pilot/next",
        data={"csrf_token": token, "round_id": str(second), "rating_fluency": "5"},
    )
    assert "C1DONE01" in client.get("/study/pilot/done").get_data(as_text=True)


def test_hidden_feedback_shows_neither_truth_nor_points(app, client):
    setup_study(app, show_feedback=False, attention_check_rate=0, rounds=2)
    join_http(client)
    token = csrf_token(client)
    round_id = first_round(client, token)
    reveal_http(client, token, round_id, 1)  # two sentences seen
    answer_http(client, token, round_id, 2, reasons="generic")
    page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    assert "Your answer is recorded" in page and "You said a machine wrote sentence 2" in page
    shown = page.split("<main", 1)[1]  # the page itself, not its meta description
    for truth in ("Machine</span>", "point", "Written by", "took over", "gpt2"):
        assert truth not in shown
    with app.app_context():
        example = db.session.get(Round, round_id).example
        hidden = example.sentences[2:]
    assert not any(sentence in page for sentence in hidden)  # nothing the worker did not see
    assert client.get("/profile").headers["Location"].endswith("/study/current")
    # Nor from the account's other pages (workers given the same texts could pool answers).
    assert client.get("/profile/rounds").status_code == 404
    data = client.get("/account/data.json").get_json()
    answered = [r for r in data["rounds"] if "answered_at" in r]
    assert answered and answered[0]["guess"] == 1
    for key in ("boundary", "points", "text_id", "counted"):
        assert all(key not in r for r in data["rounds"]), key


def test_time_limit_ends_the_study_and_refuses_late_answers(app, client):
    setup_study(app, time_limit_minutes=30, attention_check_rate=0)
    join_http(client)
    token = csrf_token(client)
    round_id = first_round(client, token)
    reveal_http(client, token, round_id, 1)
    with app.app_context():
        found = db.session.scalar(select(Participant))
        found.started_at -= timedelta(minutes=31)
        db.session.commit()
    late = reveal_http(client, token, round_id, 2)  # no more sentences
    assert late.status_code == 409 and "has run out" in late.get_data(as_text=True)
    assert participant(app).status == ParticipantStatus.timed_out
    late = answer_http(client, token, round_id, 2, reasons="generic")  # nor an answer
    assert late.status_code == 409 and "time for this study has run out" in late.get_data(True)
    with app.app_context():
        stored = db.session.get(Round, round_id)
        assert stored.guess is None and stored.revealed == 2
    page = client.get("/study/pilot/continue")
    assert page.status_code == 410
    assert "return your submission on Prolific" in page.get_data(as_text=True)
    assert participant(app).status == ParticipantStatus.timed_out
    assert client.get("/study/pilot/done").status_code == 302  # no code


def test_the_done_page_names_its_platform(app, client):
    setup_study(
        app,
        platform="generic",
        platform_name="SONA",
        completion_codes={},
        completion_url="https://sona.example.edu/finish?code={code}",
        attention_check_rate=0,
        rounds=1,
    )
    join_http(client, "/study/pilot?pid=w42")
    token = csrf_token(client)
    play_round_http(client, token)
    done = client.get("/study/pilot/done").get_data(as_text=True)
    assert "Return to SONA with this code" in done and "Prolific" not in done


def test_mturk_without_third_party_cookies_opens_the_task_in_a_tab(app):
    setup_study(app, slug="turk", platform="mturk", completion_codes={})
    link = (
        "/study/turk?workerId=A1&assignmentId=AS1&hitId=H1"
        "&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"
    )
    framed = app.test_client(use_cookies=False)  # what a frame with blocked cookies does
    probe = framed.get(link)
    assert probe.status_code == 302 and "cookie_check=1" in probe.headers["Location"]
    page = framed.get(probe.headers["Location"])
    body = page.get_data(as_text=True)
    assert page.status_code == 200 and "Open the task in a new tab" in body
    assert 'target="_blank"' in body and "tab=1" in body and "cookie_check" not in body
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in body
    assert 'name="assignmentId" value="AS1"' in body
    assert "frame-ancestors https://www.mturk.com" in page.headers["Content-Security-Policy"]
    # A browser that keeps the cookie sees the consent page after the one redirect.
    kept = app.test_client().get(link, follow_redirects=True).get_data(as_text=True)
    assert "Consent" in kept and "new tab" not in kept
    # A link with parameters of its own, even ones named like the route's, is carried along.
    odd = framed.get(link + "&slug=x&_external=1")
    assert odd.status_code == 302 and "slug=x" in odd.headers["Location"]


def test_abandoned_rounds_stop_counting_towards_k(ctx):
    make_pool(normal=2, human=0)
    study = make_study(rounds=1, attention_check_rate=0, target_per_example=1,
                       time_limit_minutes=30)  # fmt: skip
    first = join(study, "w1", "s1")
    held = study_round(study, first)
    second = join(study, "w2", "s2")
    other = study_round(study, second)
    assert other.example_id != held.example_id  # the held text counts while w1 may finish
    first.started_at -= timedelta(minutes=31)
    db.session.commit()
    third = join(study, "w3", "s3")  # w2's text is held; w1's is free again
    assert study_round(study, third).example_id == held.example_id


def test_dashboard_shows_the_public_link_agreement_and_worker_decisions(app, client, runner):
    app.config["PUBLIC_URL"] = "https://roft.example.org"
    setup_study(app)
    join_http(client)
    runner.invoke(args=["create-researcher", "lab", "--password", "a long password"])
    researcher = app.test_client()
    token = csrf_token(researcher)
    researcher.post(
        "/login", data={"csrf_token": token, "username": "lab", "password": "a long password"}
    )
    page = researcher.get("/research/studies/pilot").get_data(as_text=True)
    assert "https://roft.example.org/study/pilot?PROLIFIC_PID=" in page
    assert "Krippendorff" in page and 'id="study-workers"' in page and "5f1a2b3c" in page
    data = researcher.get("/research/studies/pilot.json").get_json()
    assert data["workers"][0]["worker_id"] == "5f1a2b3c"
    assert data["agreement"]["pairs"] == 0 and data["left"] == 0


def test_a_closed_study_shows_no_consent_page_to_newcomers(app, client, runner):
    setup_study(app)
    join_http(client)  # already in: may go on
    assert runner.invoke(args=["study", "close", "pilot"]).exit_code == 0
    newcomer = app.test_client().get("/study/pilot?PROLIFIC_PID=5fnew&STUDY_ID=st1&SESSION_ID=s9")
    body = newcomer.get_data(as_text=True)
    assert newcomer.status_code == 409 and "closed" in body and 'name="consent"' not in body
    assert client.get(PROLIFIC, follow_redirects=False).status_code == 302  # back to their study

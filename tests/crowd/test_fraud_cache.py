"""The fraud flags are cached per study (app/crowd/fraud_report.py, study_flags), and a new
answer shows up in them at the next load of the study page and the review page: the cache is
keyed by what the flags are computed from, so it can never serve flags older than the study's
answers."""

from __future__ import annotations

from app.crowd import fraud, fraud_report, lookup
from app.extensions import db
from app.game import answers, reveals
from app.models import Participant, Player
from tests.conftest import csrf_token, sign_in
from tests.crowd.helpers import join, make_pool, make_study, study_round
from tests.game_helpers import answer_http, reveal_http

COPIED = "The second paragraph invents a mayor who was never mentioned in the opening lines."


def answer_with(study, participant: Participant, explanation: str) -> None:
    round_ = study_round(study, participant)
    player = db.session.get(Player, round_.player_id)
    while round_.revealed < 4:
        reveals.reveal_next(player, round_.id, round_.revealed)
    parsed = answers.parse_answer("machine", round_.revealed, ["generic"], explanation)
    answers.submit_answer(player, round_.id, parsed)
    db.session.refresh(participant)


def pages(lab) -> tuple[str, str]:
    study_page = lab.get("/research/studies/pilot").get_data(as_text=True)
    review_page = lab.get("/research/studies/pilot/review?show=all").get_data(as_text=True)
    worker_page = lab.get("/research/studies/pilot/review/w-b").get_data(as_text=True)
    flags = study_page[study_page.index('id="study-fraud-flags"') :]
    return flags, review_page + worker_page


def test_a_new_answer_shows_in_the_flags_at_the_next_load(app):
    with app.app_context():
        make_pool(normal=12, human=4)
        study = make_study(rounds=4, attention_check_rate=0)
        a, b = join(study, "w-a", "sa"), join(study, "w-b", "sb")
        b_id = b.id
        answer_with(study, a, COPIED)
        answer_with(study, b, "It repeats the same idea twice in a row, which people rarely do.")
    lab = sign_in(app)

    before, review = pages(lab)
    assert "No worker is flagged." in before
    assert "copied_explanation" not in review
    with app.app_context():
        cached = app.extensions["roft_fraud_flags"]
        assert list(cached) == [lookup.get_study("pilot").id]  # the load filled the cache
        stamp = cached[lookup.get_study("pilot").id][0]
        # A second load with nothing new is served from the cache.
        assert fraud_report.inputs_stamp(lookup.get_study("pilot")) == stamp

    with app.app_context():
        study = lookup.get_study("pilot")
        b = db.session.get(Participant, b_id)
        answer_with(study, b, COPIED)  # a new answer copies w-a's word for word
    after, review = pages(lab)
    assert 'data-signal="copied_explanation"' in after
    assert "w-a" in after and "w-b" in after
    assert 'data-signal="copied_explanation"' in review
    with app.app_context():
        study = lookup.get_study("pilot")
        assert {w.worker_id for w in fraud_report.study_flags(study)} == {"w-a", "w-b"}
        assert fraud_report.study_flags(study) == fraud_report.compute_flags(study)


def play_study_round(client) -> None:
    token = csrf_token(client)
    response = client.post("/study/pilot/next", data={"csrf_token": token})
    round_id = int(response.headers["Location"].rsplit("/", 1)[1])
    for seen in (1, 2, 3):
        reveal_http(client, token, round_id, seen)
    answered = answer_http(client, token, round_id, 4, explanation="odd")
    assert answered.status_code == 302, answered.get_data(as_text=True)


def test_a_second_id_in_a_shared_browser_shows_at_the_next_load(client, app):
    """Through the worker's pages: the flags are cached after the first id answered; the second
    id's first answer in the same browser flags both at the next call."""
    from tests.crowd.test_crowd_http import join_http

    with app.app_context():
        make_pool(normal=12, human=4)
        make_study(rounds=4, attention_check_rate=0)
    join_http(client, "/study/pilot?PROLIFIC_PID=one&STUDY_ID=st&SESSION_ID=s1")
    play_study_round(client)
    with app.app_context():
        assert fraud_report.study_flags(lookup.get_study("pilot")) == []
    join_http(client, "/study/pilot?PROLIFIC_PID=two&STUDY_ID=st&SESSION_ID=s2")
    play_study_round(client)
    with app.app_context():
        flagged = {w.worker_id: w for w in fraud_report.study_flags(lookup.get_study("pilot"))}
        assert set(flagged) == {"one", "two"}
        assert flagged["two"].flags[0].signal == fraud.SHARED_DEVICE

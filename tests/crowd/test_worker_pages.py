"""Worker pages speak to workers: the study's own layout without the public game's menu, the
researcher's contact on every page (errors too), instructions that follow the study's settings,
the bonus rule where pay is discussed, and no points badge on a practice round."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.extensions import db
from app.models import Example
from tests.conftest import csrf_token
from tests.crowd.helpers import make_pool, make_study
from tests.crowd.test_crowd_http import PROLIFIC, join_http, play_round_http

CONTACT = "Dr Ada Reader, roft-study@example.org"
MENU = ("Leaderboard", "Sign up", "Daily")
BONUS = {"per_exact": 0.05, "cap": 0.4}
LIKERT = {
    "name": "fluency",
    "question": "How fluent is the sentence you flagged?",
    "labels": ["Unreadable", "Awkward", "Acceptable", "Good", "Perfect"],
}


def study_pages(app, **changes):
    with app.app_context():
        make_pool()
        first = db.session.scalar(select(Example.external_id).order_by(Example.id))
        settings = {
            "rounds": 3,
            "attention_check_rate": 0,
            "contact": CONTACT,
            "bonus": BONUS,
            "reward": 1.6,
            "time_limit_minutes": 30,
            "tutorial": [first],
            "likert": [LIKERT],
        }
        make_study(**{**settings, **changes})


def worker_page(page: str) -> None:
    """The study layout: contact, and none of the game's menu."""
    assert CONTACT in page, page
    for item in MENU:
        assert f">{item}<" not in page, item


def text(page: str) -> str:
    """The page as a reader sees it: tags dropped, white space collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


def test_every_worker_page_is_the_study_layout_with_the_contact(app, client):
    study_pages(app, show_feedback=False)
    landing = client.get(PROLIFIC).get_data(as_text=True)
    worker_page(landing)
    # Each fact of its own: no "1.60 GBP.Time limit".
    assert "Reward: 1.60 GBP." in text(landing) and "GBP.Time" not in text(landing)
    assert "0.05 GBP for each text where you flag exactly the sentence" in landing
    assert "up to 0.40 GBP in all" in landing

    join_http(client)
    instructions = client.get("/study/pilot/continue").get_data(as_text=True)
    worker_page(instructions)
    # Feedback off: the steps do not promise the answer; one scale is "a scale".
    assert "Then you see the answer" not in instructions
    assert "you do not see the right answer" in instructions
    assert "rate the text on a scale from 1 to 5" in text(instructions)
    assert "1 scale" not in instructions
    assert "The practice round shows you the right answer" in instructions
    assert 'id="bonus-rule"' in instructions

    token = csrf_token(client, "/study/pilot/continue")
    practice = play_round_http(client, token)
    page = client.get(f"/play/round/{practice}").get_data(as_text=True)
    worker_page(page)
    assert "Practice round: not counted" in page and "points-badge" not in page

    # An error a worker meets: the contact, and the way back to the study, not the game.
    error = client.get("/play/round/999999")
    assert error.status_code in (403, 404)
    worker_page(error.get_data(as_text=True))
    assert "Back to the study" in error.get_data(as_text=True)


def test_instructions_with_feedback_and_several_scales(app, client):
    fluency = dict(LIKERT)
    sense = {**LIKERT, "name": "sense", "question": "Does the text make sense?"}
    study_pages(app, likert=[fluency, sense], tutorial=[])
    join_http(client)
    page = client.get("/study/pilot/continue").get_data(as_text=True)
    assert "Then you see the answer" in page
    assert "on 2 scales, each from 1 to 5" in text(page)
    assert "The scales are independent" in page


def test_the_done_page_names_the_bonus_rule(app, client):
    study_pages(app, tutorial=[], likert=[])
    join_http(client)
    token = csrf_token(client, "/study/pilot/continue")
    while play_round_http(client, token) is not None:
        pass
    done = client.get("/study/pilot/done").get_data(as_text=True)
    worker_page(done)
    assert "C1DONE01" in done and 'id="bonus-rule"' in done
    assert "paid once your submission is approved" in done

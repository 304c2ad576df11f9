"""A reveal over HTTP: the page's script gets the round as its page then draws it (the state the
reveal returns is the stored one), and stale, repeated or foreign reveals are refused."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import Reveal, Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import (
    answer_http,
    as_its_page_draws_it,
    reveal_http,
    round_id_of,
    same_but_token,
    start_http,
)
from tests.test_sets_and_daily import daily_app  # noqa: F401  (a fixture)


@pytest.fixture
def opened(app, client) -> tuple[str, int]:
    """A guest's CSRF token and open round on a text of 4 sentences (turning at the fourth)."""
    with app.app_context():
        factories.example(boundary=3, n=4, passage="one")
    token = csrf_token(client)
    return token, round_id_of(start_http(client, token))


def test_a_reveal_shows_the_round_as_its_page_draws_it(app, client):
    with app.app_context():
        factories.example(boundary=3, n=4, passage="one")
        factories.example(boundary=2, n=4, passage="two")
    token = csrf_token(client)
    round_id = round_id_of(start_http(client, token))
    for seen in range(1, 4):  # up to the last sentence, whose form says "all human"
        shown = reveal_http(client, token, round_id, seen, fetch=True)
        assert shown.status_code == 200
        body = shown.get_data(as_text=True)
        assert f"Sentence {seen + 1} of 4" in body and "text 1 of" in body
        assert same_but_token(body) == as_its_page_draws_it(client, round_id)
    with app.app_context():
        assert db.session.get(Round, round_id).revealed == 4
        reveals = select(func.count()).select_from(Reveal).where(Reveal.round_id == round_id)
        assert db.session.scalar(reveals) == 4


def test_a_reveal_of_a_round_outside_a_set(app, client, opened):
    """A round with no set (a study's or an older one) has no set bar."""
    token, round_id = opened
    with app.app_context():
        db.session.get(Round, round_id).set_id = None
        db.session.commit()
    shown = reveal_http(client, token, round_id, 1, fetch=True)
    assert shown.status_code == 200
    body = shown.get_data(as_text=True)
    assert "set-bar" not in body
    assert same_but_token(body) == as_its_page_draws_it(client, round_id)


def test_a_stale_or_repeated_reveal_is_refused_and_changes_nothing(app, client, opened):
    token, round_id = opened
    assert reveal_http(client, token, round_id, 1, fetch=True).status_code == 200
    # The same click again (a double click, a second tab): refused, and the round as it stands.
    again = reveal_http(client, token, round_id, 1, fetch=True)
    assert again.status_code == 409
    assert "out of date" in again.text and "Sentence 2 of 4" in again.text
    for seen in (2, 3):
        assert reveal_http(client, token, round_id, seen, fetch=True).status_code == 200
    # Past the last sentence.
    done = reveal_http(client, token, round_id, 4, fetch=True)
    assert done.status_code == 409 and "already shown" in done.text
    # Bad input is a 400, never a 500.
    assert reveal_http(client, token, round_id, "x", fetch=True).status_code == 400
    # No token: the CSRF check still refuses it before anything moves.
    url = f"/play/round/{round_id}/next"
    assert (
        client.post(url, data={"seen": "4"}, headers={"X-Requested-With": "fetch"}).status_code
        == 400
    )
    with app.app_context():
        assert db.session.get(Round, round_id).revealed == 4


def test_an_answered_round_is_not_revealed_further(app, client, opened):
    token, round_id = opened
    # Refused: "human" only at the last sentence.
    answer_http(client, token, round_id, 1, "human", fetch=True)
    with app.app_context():
        stored = db.session.get(Round, round_id)
        stored.guess, stored.points = 1, 0
        db.session.commit()
    refused = reveal_http(client, token, round_id, 1, fetch=True)
    assert refused.status_code == 409 and "already answered" in refused.text
    with app.app_context():
        assert db.session.get(Round, round_id).revealed == 1


def test_a_plain_form_reveal_redirects_to_the_latest_sentence(app, client, opened):
    token, round_id = opened
    moved = reveal_http(client, token, round_id, 1)
    assert moved.status_code == 302
    assert moved.headers["Location"] == f"/play/round/{round_id}#latest"
    with app.app_context():
        assert db.session.get(Round, round_id).revealed == 2


def test_a_reveal_and_an_answer_in_the_daily_challenge_show_its_header(daily_app):  # noqa: F811
    """A daily set's round: the challenge's header and score bar, revealed and answered."""
    client = daily_app.test_client()
    token = csrf_token(client)
    round_id = round_id_of(client.post("/daily/start", data={"csrf_token": token}))
    for seen in (1, 2):
        shown = reveal_http(client, token, round_id, seen, fetch=True)
        assert shown.status_code == 200
        assert "Daily challenge" in shown.text and "today" in shown.text
        assert same_but_token(shown.text) == as_its_page_draws_it(client, round_id)
    answered = answer_http(client, token, round_id, 3, reasons=["grammar", "generic"], fetch=True)
    assert answered.status_code == 200
    assert "Daily challenge" in answered.text and "today" in answered.text
    assert same_but_token(answered.text) == as_its_page_draws_it(client, round_id)

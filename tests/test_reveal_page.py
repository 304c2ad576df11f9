"""A reveal over HTTP: the page's script gets the round as its page then draws it (the state the
reveal returns is the stored one), and stale, repeated or foreign reveals are refused."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.extensions import db
from app.models import Reveal, Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import answer_http, reveal_http, start_http
from tests.test_sets_and_daily import daily_app  # noqa: F401  (a fixture)

FETCH = {"X-Requested-With": "fetch"}
ROUND_PATH = re.compile(r"/play/round/(\d+)")
TOKEN = re.compile(r'name="csrf_token" value="[^"]+"')


def _same_but_token(page: str) -> str:
    # A GET signs a new token for its forms; a post reuses the one it checked. Both are valid.
    return TOKEN.sub('name="csrf_token" value="-"', page)


def _start(client, token: str) -> int:
    started = start_http(client, token)
    return int(ROUND_PATH.search(started.headers["Location"]).group(1))


def _as_its_page_draws_it(client, round_id: int) -> str:
    page = client.get(f"/play/round/{round_id}", headers=FETCH)
    assert page.status_code == 200
    return _same_but_token(page.get_data(as_text=True))


def test_a_reveal_shows_the_round_as_its_page_draws_it(app, client):
    with app.app_context():
        factories.example(boundary=3, n=4, passage="one")
        factories.example(boundary=2, n=4, passage="two")
    token = csrf_token(client)
    round_id = _start(client, token)
    for seen in range(1, 4):  # up to the last sentence, whose form says "all human"
        shown = reveal_http(client, token, round_id, seen, fetch=True)
        assert shown.status_code == 200
        body = shown.get_data(as_text=True)
        assert f"Sentence {seen + 1} of 4" in body and "text 1 of" in body
        assert _same_but_token(body) == _as_its_page_draws_it(client, round_id)
    with app.app_context():
        stored = db.session.get(Round, round_id)
        assert stored.revealed == 4
        assert (
            db.session.scalar(
                select(func.count()).select_from(Reveal).where(Reveal.round_id == round_id)
            )
            == 4
        )


def test_a_reveal_of_a_round_outside_a_set(app, client):
    """A round with no set (a study's or an older one) has no set bar."""
    with app.app_context():
        factories.example(boundary=3, n=4, passage="one")
    token = csrf_token(client)
    _start(client, token)  # signs the guest in
    with app.app_context():
        open_round = db.session.scalar(select(Round))
        open_round.set_id = None
        db.session.commit()
        round_id = open_round.id
    shown = reveal_http(client, token, round_id, 1, fetch=True)
    assert shown.status_code == 200
    body = shown.get_data(as_text=True)
    assert "set-bar" not in body
    assert _same_but_token(body) == _as_its_page_draws_it(client, round_id)


def test_a_stale_or_repeated_reveal_is_refused_and_changes_nothing(app, client):
    with app.app_context():
        factories.example(boundary=3, n=4, passage="one")
    token = csrf_token(client)
    round_id = _start(client, token)
    url = f"/play/round/{round_id}/next"
    assert (
        client.post(url, data={"csrf_token": token, "seen": "1"}, headers=FETCH).status_code == 200
    )
    # The same click again (a double click, a second tab): refused, and the round as it stands.
    again = client.post(url, data={"csrf_token": token, "seen": "1"}, headers=FETCH)
    assert again.status_code == 409
    assert "out of date" in again.get_data(as_text=True)
    assert "Sentence 2 of 4" in again.get_data(as_text=True)
    for seen in ("2", "3"):
        assert (
            client.post(url, data={"csrf_token": token, "seen": seen}, headers=FETCH).status_code
            == 200
        )
    # Past the last sentence.
    done = client.post(url, data={"csrf_token": token, "seen": "4"}, headers=FETCH)
    assert done.status_code == 409 and "already shown" in done.get_data(as_text=True)
    # Bad input is a 400, never a 500.
    assert (
        client.post(url, data={"csrf_token": token, "seen": "x"}, headers=FETCH).status_code == 400
    )
    # No token: the CSRF check still refuses it before anything moves.
    assert client.post(url, data={"seen": "4"}, headers=FETCH).status_code == 400
    with app.app_context():
        assert db.session.get(Round, round_id).revealed == 4


def test_an_answered_round_is_not_revealed_further(app, client):
    with app.app_context():
        factories.example(boundary=3, n=4, passage="one")
    token = csrf_token(client)
    round_id = _start(client, token)
    # Refused: "human" only at the last sentence.
    answer_http(client, token, round_id, 1, "human", fetch=True)
    with app.app_context():
        stored = db.session.get(Round, round_id)
        stored.guess, stored.points = 1, 0
        db.session.commit()
    refused = reveal_http(client, token, round_id, 1, fetch=True)
    assert refused.status_code == 409 and "already answered" in refused.get_data(as_text=True)
    with app.app_context():
        assert db.session.get(Round, round_id).revealed == 1


def test_a_plain_form_reveal_redirects_to_the_latest_sentence(app, client):
    with app.app_context():
        factories.example(boundary=3, n=4, passage="one")
    token = csrf_token(client)
    round_id = _start(client, token)
    moved = reveal_http(client, token, round_id, 1)
    assert moved.status_code == 302
    assert moved.headers["Location"] == f"/play/round/{round_id}#latest"
    with app.app_context():
        assert db.session.get(Round, round_id).revealed == 2


def test_a_reveal_in_the_daily_challenge_shows_its_header(daily_app):  # noqa: F811
    """A daily set's round: the challenge's header and score bar."""
    client = daily_app.test_client()
    token = csrf_token(client)
    location = client.post("/daily/start", data={"csrf_token": token}).headers["Location"]
    round_id = int(ROUND_PATH.search(location).group(1))
    shown = reveal_http(client, token, round_id, 1, fetch=True)
    assert shown.status_code == 200
    body = shown.get_data(as_text=True)
    assert "Daily challenge" in body and "today" in body
    assert _same_but_token(body) == _as_its_page_draws_it(client, round_id)

"""The game over HTTP as a browser sees it: flow, leaks, CSRF, forged input, escaping."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.extensions import db
from app.models import Player, PlayerTotal, Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import answer_http, reveal_http, round_id_of, start_http

SECRET_SYSTEM = "sys-zq-hidden"
SECRET_ID = "ext-zq-hidden-id"
SECRET_P = 0.123457


def secret_example(boundary: int = 4, n: int = 10):
    return factories.example(
        boundary=boundary, n=n, system_name=SECRET_SYSTEM, external_id=SECRET_ID, p=SECRET_P
    )


def start(client, category: str = "news", consent: bool = False) -> int:
    token = csrf_token(client)
    data = {"csrf_token": token, "category": category}
    if consent:
        data["consent"] = "yes"
    response = client.post("/play", data=data)
    assert response.status_code == 302, response.get_data(as_text=True)
    return round_id_of(response)


def reveal(client, round_id: int, seen: int, token: str):
    return reveal_http(client, token, round_id, seen)


def session_payload(app, client) -> str:
    """The decoded session cookie: it is signed, not encrypted, so it must hold no secrets."""
    cookie = client.get_cookie(app.config.get("SESSION_COOKIE_NAME", "session"))
    if cookie is None:
        return ""
    serializer = app.session_interface.get_signing_serializer(app)
    return repr(serializer.loads(cookie.value))


def assert_no_leak(body: str, example, revealed: int) -> None:
    for index in range(revealed, example.n_sentences):
        marker = re.search(r"zq\d+x\d+q", example.sentences[index]).group(0)
        assert marker not in body, f"unrevealed sentence {index} leaked"
    assert SECRET_SYSTEM not in body
    assert SECRET_ID not in body
    assert str(SECRET_P) not in body
    assert not re.search(r"boundary\W{0,3}[=:]", body, re.IGNORECASE)


def test_guest_plays_a_round_and_nothing_leaks_before_the_answer(app, client):
    with app.app_context():
        example = secret_example(boundary=4)
        example_id = example.id
    responses = []
    home = client.get("/")
    assert home.status_code == 200
    responses.append(home)
    round_id = start(client)
    token = csrf_token(client)
    with app.app_context():
        example = db.session.get(type(example), example_id)
        for seen in range(1, 5):
            page = client.get(f"/play/round/{round_id}")
            responses.append(page)
            body = page.get_data(as_text=True)
            assert_no_leak(body, example, seen)
            assert f"Sentence {seen} of 10" in body
            assert example.sentences[seen - 1] in body
            moved = reveal(client, round_id, seen, token)
            assert moved.status_code == 302
            responses.append(moved)
        flag = client.get(f"/play/round/{round_id}?flag=1")
        responses.append(flag)
        assert "Why sentence 5?" in flag.get_data(as_text=True)
        for extra in ("/leaderboard", "/profile", "/help", "/about", "/play/continue"):
            responses.append(client.get(extra, follow_redirects=True))
        # A refused answer (no reason) is also a response before the guess is stored.
        refused = answer_http(client, token, round_id, 5)
        assert refused.status_code == 400
        responses.append(refused)
        for response in responses:
            body = response.get_data(as_text=True)
            assert_no_leak(body, example, 5)
            assert_no_leak(str(response.headers), example, 5)
        assert_no_leak(session_payload(app, client), example, 5)

        answered = answer_http(
            client, token, round_id, 5, reasons=["irrelevant", "generic"], explanation="It drifts."
        )
        assert answered.status_code == 302
        result = client.get(f"/play/round/{round_id}").get_data(as_text=True)
        assert "Exact!" in result
        # The truth is told in plain words, with the decoding settings; never the internal name.
        assert "A language model continued the text, choosing among its likelier words" in result
        assert f"Decoding settings: nucleus sampling, p = {SECRET_P:g}." in result
        assert SECRET_SYSTEM not in result
        assert all(sentence in result for sentence in example.sentences)
        assert result.count('class="sentence machine') == 6
        assert result.count('class="sentence human') == 4


def test_points_cannot_be_chosen_by_the_client(app, client):
    with app.app_context():
        factories.example(boundary=2)
    round_id = start(client)
    token = csrf_token(client)
    reveal(client, round_id, 1, token)
    reveal(client, round_id, 2, token)
    forged = {"points": "1000000000", "guess": "2", "boundary": "2"}
    answer_http(client, token, round_id, 3, reasons="grammar", **forged)
    with app.app_context():
        stored = db.session.get(Round, round_id)
        assert stored.guess == 2  # index of the latest revealed sentence, not the form's field
        assert stored.points == 5
        total = db.session.scalar(select(PlayerTotal.points))
        assert total == 5


def test_guessing_an_unrevealed_sentence_or_skipping_ahead_is_refused(app, client):
    with app.app_context():
        factories.example(boundary=6)
    round_id = start(client)
    token = csrf_token(client)
    skip = reveal(client, round_id, 4, token)
    assert skip.status_code == 409
    assert answer_http(client, token, round_id, 7, reasons="grammar").status_code == 409
    assert answer_http(client, token, round_id, 1, "human").status_code == 400  # too early
    with app.app_context():
        stored = db.session.get(Round, round_id)
        assert stored.revealed == 1 and stored.guess is None and len(stored.reveals) == 1


def client_answer(client, round_id, token, seen):
    return answer_http(client, token, round_id, seen, reasons="grammar")


def test_every_post_needs_a_csrf_token(app, client):
    with app.app_context():
        factories.example(boundary=3)
    assert client.post("/play", data={"category": "news"}).status_code == 400
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Player)) == 0
    round_id = start(client)
    for path, data in (
        (f"/play/round/{round_id}/next", {"seen": "1"}),
        (
            f"/play/round/{round_id}/answer",
            {"seen": "1", "choice": "machine", "reasons": "grammar"},
        ),
        ("/logout", {}),
        ("/profile/settings", {"profile_public": "yes"}),
        ("/signup", {"username": "mallory", "password": "long enough pw"}),
        ("/login", {"username": "mallory", "password": "long enough pw"}),
    ):
        response = client.post(path, data=data)
        assert response.status_code == 400, path
        assert "expired or came from another site" in response.get_data(as_text=True)
    with app.app_context():
        stored = db.session.get(Round, round_id)
        assert stored.revealed == 1 and stored.guess is None
        assert db.session.scalar(select(func.count()).where(Player.username.is_not(None))) == 0


def test_dataset_and_player_text_is_escaped(app, client):
    script = "<script>alert('x')</script>"
    with app.app_context():
        factories.example(
            boundary=1, n=3, sentences=[f"Hello {script} world.", "Second.", "Third."]
        )
    round_id = start(client)
    token = csrf_token(client)
    page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    assert script not in page
    assert "&lt;script&gt;" in page
    reveal(client, round_id, 1, token)
    answer_http(client, token, round_id, 2, explanation=script)
    result = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    assert script not in result
    assert result.count("&lt;script&gt;") >= 2


def test_round_pages_are_not_cached(app, client):
    with app.app_context():
        factories.example(boundary=3)
    round_id = start(client)
    assert client.get(f"/play/round/{round_id}").headers["Cache-Control"] == "no-store"


def test_consent_on_first_play_is_recorded_with_a_timestamp(app, client):
    with app.app_context():
        factories.example(boundary=3)
    start(client, consent=True)
    with app.app_context():
        guest = db.session.scalar(select(Player))
        assert guest.is_guest and guest.research_consent_at is not None


def test_unknown_category_gets_a_404_page(app, client):
    token = csrf_token(client)
    response = start_http(client, token, "poetry")
    assert response.status_code == 404
    assert "no category called" in response.get_data(as_text=True)


def test_seen_everything_is_a_clear_message(app, client):
    with app.app_context():
        factories.example(boundary=1)
    round_id = start(client)
    token = csrf_token(client)
    reveal(client, round_id, 1, token)
    client_answer(client, round_id, token, seen=2)
    response = start_http(client, token)
    assert response.status_code == 409
    assert "You have read every text in News" in response.get_data(as_text=True)


def test_round_pages_need_a_player(client):
    response = client.get("/play/round/1")
    assert response.status_code == 302

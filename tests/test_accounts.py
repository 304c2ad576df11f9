"""Sign-up, login, logout, guests keeping their rounds, profiles, rate limits."""

from __future__ import annotations

from sqlalchemy import func, select

from app.extensions import db
from app.models import Player, PlayerTotal, Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import reveal_http
from tests.test_game_http import client_answer, start


def signup(client, username="ada", password="correct horse battery", consent=True):
    data = {"csrf_token": csrf_token(client, "/signup"), "username": username, "password": password}
    if consent:
        data["consent"] = "yes"
    return client.post("/signup", data=data)


def login(client, username="ada", password="correct horse battery"):
    token = csrf_token(client, "/login")
    return client.post(
        "/login", data={"csrf_token": token, "username": username, "password": password}
    )


def test_sign_up_log_out_and_log_in(app, client):
    response = signup(client)
    assert response.status_code == 302
    with app.app_context():
        player = db.session.scalar(select(Player).where(Player.username == "ada"))
        assert not player.is_guest
        assert player.password_hash and "correct horse" not in player.password_hash
        assert player.password_hash.startswith(("scrypt:", "pbkdf2:"))
        assert player.research_consent_at is not None
    assert "ada" in client.get("/").get_data(as_text=True)
    token = csrf_token(client)
    assert client.post("/logout", data={"csrf_token": token}).status_code == 302
    assert client.get("/profile").status_code == 302  # login required again
    assert login(client, password="wrong password").status_code == 401
    assert login(client, username="ADA").status_code == 302  # usernames are case-insensitive
    assert client.get("/profile").status_code == 200


def test_guest_who_signs_up_keeps_rounds_and_points(app, client):
    with app.app_context():
        factories.example(boundary=1)
    round_id = start(client)
    token = csrf_token(client)
    reveal_http(client, token, round_id, 1)
    client_answer(client, round_id, token, seen=2)  # sentence index 1 = boundary: 5 points
    page = client.get("/signup").get_data(as_text=True)
    assert "You keep the 1 round and 5 points" in page
    assert signup(client, username="grace").status_code == 302
    with app.app_context():
        players = db.session.scalars(select(Player)).all()
        assert len(players) == 1
        assert players[0].username == "grace" and not players[0].is_guest
        assert db.session.get(Round, round_id).player_id == players[0].id
        assert db.session.get(PlayerTotal, players[0].id).points == 5
    board = client.get("/leaderboard").get_data(as_text=True)
    assert "grace" in board


def test_signup_validation_and_taken_names(app, client):
    assert signup(client, username="x").status_code == 400
    assert signup(client, username="bad name!").status_code == 400
    assert signup(client, password="short").status_code == 400
    assert signup(client, username="ada").status_code == 302
    other = app.test_client()
    response = signup(other, username="Ada")
    assert response.status_code == 409
    assert "taken" in response.get_data(as_text=True)
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Player)) == 1


def test_profile_is_private_by_default_and_can_be_made_public(app, client):
    signup(client, username="ada")
    visitor = app.test_client()
    private = visitor.get("/players/ada")
    assert private.status_code == 404  # as for a name nobody has (tests/security)
    token = csrf_token(client, "/profile")
    client.post(
        "/profile/settings", data={"csrf_token": token, "profile_public": "yes", "consent": "yes"}
    )
    public = visitor.get("/players/ada")
    assert public.status_code == 200
    assert "points" in public.get_data(as_text=True)
    assert visitor.get("/players/nobody").status_code == 404


def test_profile_shows_figures(app, client):
    with app.app_context():
        factories.example(boundary=1, category_slug="news")
        factories.example(boundary=2, category_slug="stories")
    signup(client)
    token = csrf_token(client)
    r1 = start(client, "news")
    reveal_http(client, token, r1, 1)
    client_answer(client, r1, token, seen=2)  # exact, 5
    r2 = start(client, "stories")
    reveal_http(client, token, r2, 1)
    client_answer(client, r2, token, seen=2)  # too early, 0
    page = client.get("/profile").get_data(as_text=True)
    assert "<strong>5</strong><span>points</span>" in page
    assert "<strong>2</strong><span>rounds</span>" in page
    assert "<strong>1</strong><span>exact hits</span>" in page
    assert "<strong>-0.50</strong>" in page  # mean signed distance (0 + -1) / 2
    assert "Stories" in page and "News" in page
    assert "Too early, by 1 sentence." in page


def test_withdrawing_consent_clears_the_timestamp(app, client):
    signup(client, consent=True)
    token = csrf_token(client, "/profile")
    client.post("/profile/settings", data={"csrf_token": token})
    with app.app_context():
        assert db.session.scalar(select(Player.research_consent_at)) is None


def test_login_is_rate_limited(app, client):
    # A new name each time: the per-name lock (tests/security/test_login_limits.py) stays out of it.
    statuses = [login(client, f"user{i}", password=f"wrong-{i}").status_code for i in range(12)]
    assert statuses[:10] == [401] * 10
    assert statuses[10] == 429


def test_a_refusal_by_a_rate_limit_says_when_to_try_again(app, client):
    responses = [login(client, f"user{i}", password=f"wrong-{i}") for i in range(11)]
    refused = responses[10]
    assert refused.status_code == 429
    # The login limit's window is a minute: the refusal names the rest of it.
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # Answers within the limit carry no limiter headers (each cost a storage read).
    assert not [k for k, _ in responses[0].headers.items() if k.startswith("X-RateLimit")]


def test_signup_is_rate_limited(app, client):
    statuses = [signup(client, username=f"user{i}", password="x").status_code for i in range(7)]
    assert 429 in statuses


def test_open_redirect_is_refused(app, client):
    signup(client)
    token = csrf_token(client)
    client.post("/logout", data={"csrf_token": token})
    token = csrf_token(client, "/login")
    response = client.post(
        "/login?next=https://evil.example/",
        data={"csrf_token": token, "username": "ada", "password": "correct horse battery"},
    )
    assert response.headers["Location"] == "/"


def test_researcher_page_needs_a_researcher(app, client, runner):
    assert client.get("/research/").status_code == 302  # not logged in
    signup(client)
    assert client.get("/research/").status_code == 403
    result = runner.invoke(args=["create-researcher", "ada"])
    assert result.exit_code == 0 and "now a researcher" in result.output
    assert client.get("/research/").status_code == 200


def test_create_researcher_and_overview_counts(app, runner):
    result = runner.invoke(args=["create-researcher", "lab", "--password", "a long password"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        factories.example(boundary=10, category_slug="news")
        factories.example(boundary=3, category_slug="news", system_name="gpt2")
    client = app.test_client()
    login(client, "lab", "a long password")
    page = client.get("/research/").get_data(as_text=True)
    assert "News" in page and "gpt2" in page and "human" in page
    bad = runner.invoke(args=["create-researcher", "x", "--password", "a long password"])
    assert bad.exit_code != 0 and "3 to 32" in bad.output

"""Probes, the 503 page when the database is away, and the proxy setting."""

from __future__ import annotations

from app.extensions import db


def test_healthz_and_readyz(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["database"] == "ok"


def test_unreachable_database_gets_503_and_recovers(make_app, app):
    broken = make_app(SQLALCHEMY_DATABASE_URI="postgresql+psycopg://nobody@127.0.0.1:1/none")
    client = broken.test_client()
    assert client.get("/readyz").status_code == 503
    page = client.get("/leaderboard")
    assert page.status_code == 503
    assert "cannot reach its database" in page.get_data(as_text=True)
    assert page.headers["Retry-After"] == "30"
    # The healthy app on the real database is unaffected.
    assert app.test_client().get("/readyz").status_code == 200


def test_database_that_comes_back_is_used_without_restart(make_app, tmp_path):
    """A request while the tables are missing fails with 503; once they exist, it works."""
    path = tmp_path / "later.sqlite3"
    later = make_app(SQLALCHEMY_DATABASE_URI=f"sqlite:///{path}")
    client = later.test_client()
    assert client.get("/leaderboard").status_code == 503
    with later.app_context():
        db.create_all()
    assert client.get("/leaderboard").status_code == 200


def test_proxy_fix_trusts_forwarded_headers_only_when_enabled(make_app):
    from flask import request

    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "roft.example"}
    for enabled, expected in (
        (False, "http://localhost/where"),
        (True, "https://roft.example/where"),
    ):
        app = make_app(PROXY_FIX=enabled, TRUSTED_HOSTS=["localhost", "roft.example"])
        app.add_url_rule("/where", "where", lambda: request.url)
        assert app.test_client().get("/where", headers=headers).get_data(as_text=True) == expected


def test_signed_in_player_gets_the_503_page_too(make_app, app, tmp_path):
    """Loading the player fails as well; the page must still render (as for a visitor)."""
    from tests import factories
    from tests.test_game_http import start

    with app.app_context():
        factories.example(boundary=3)
    client = app.test_client()
    start(client)
    broken = make_app(SQLALCHEMY_DATABASE_URI="postgresql+psycopg://nobody@127.0.0.1:1/none")
    broken_client = broken.test_client()
    # Same secret key: the session cookie of the player is valid for the broken app.
    for cookie in client._cookies.values():
        broken_client.set_cookie(cookie.key, cookie.value)
    page = broken_client.get("/")
    assert page.status_code == 503
    assert "cannot reach its database" in page.get_data(as_text=True)


def test_unexpected_error_of_a_signed_in_player_gets_the_500_page(make_app, app):
    from tests import factories
    from tests.test_game_http import start

    failing = make_app(TESTING=False)

    @failing.get("/fails")
    def fails():
        raise RuntimeError("bug")

    with failing.app_context():
        factories.example(boundary=3)
    client = failing.test_client()
    start(client)
    page = client.get("/fails")
    assert page.status_code == 500
    assert "Our fault, not yours" in page.get_data(as_text=True)

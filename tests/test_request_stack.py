"""What every request's stack around its view lets through, and what it answers.

- Session cookies (app/__init__.py, `FramedSessionInterface`): a changed cookie, an expired one,
  or one signed with a dropped key is refused, and a session's nested values are never shared
  between requests; a session kept as it was is saved as Flask saves it.
- CSRF tokens (Flask-WTF): a token is refused after the session's secret changes, in another
  session, under another key, and, with a time limit, once it is too old.
- Rate limits (Flask-Limiter): application, default and blueprint limits refuse.
- The security headers are the same headers in the same order; the access line's time is
  `datetime`'s text.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

import pytest
from flask import request, session
from flask.globals import request_ctx
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import TimestampSigner

from app.extensions import limiter
from app.logs import iso_time
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import start_http
from tests.security.helpers import PASSWORD, signed_in, thief_of
from tests.test_accounts import login, signup

FETCH = {"X-Requested-With": "fetch"}


def _later(monkeypatch, seconds: int) -> None:
    """Every signer's clock (session cookies and CSRF tokens) `seconds` ahead from now on."""
    now = int(time.time())
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda signer: now + seconds)


# --- Session cookies ------------------------------------------------------------------------


def test_a_verified_session_cookie_changed_by_one_character_is_refused(app, client):
    signup(client, username="ada")
    assert signed_in(client) and signed_in(client)  # its cookie is verified, then known
    value = client.get_cookie("session").value
    # The signature's last character carries bits base64 drops: change whole ones.
    for position in (len(value) - 5, len(value) // 2, 0):
        changed = (
            value[:position] + ("A" if value[position] != "A" else "B") + value[position + 1 :]
        )
        forger = app.test_client()
        forger.set_cookie("session", changed)
        assert not signed_in(forger), position
    assert signed_in(thief_of(app, client, names=("session",), user_agent=None))


def test_a_known_session_cookie_expires_as_a_verified_one_does(app, client, monkeypatch):
    signup(client, username="ada")
    copied = thief_of(app, client, names=("session",))
    assert signed_in(copied) and signed_in(copied)
    lifetime = int(app.permanent_session_lifetime.total_seconds())
    _later(monkeypatch, lifetime - 5)
    assert signed_in(copied)
    _later(monkeypatch, lifetime + 5)
    assert not signed_in(copied)
    # A cookie that claims to be signed later than now is refused as itsdangerous refuses it.
    _later(monkeypatch, -60)
    assert not signed_in(copied)


def test_a_known_session_cookie_is_refused_after_its_key_is_dropped(app, client):
    signup(client, username="ada")
    copied = thief_of(app, client, names=("session",))
    assert signed_in(copied) and signed_in(copied)
    app.secret_key = app.config["SECRET_KEY"] = "a new key for this deployment"
    assert not signed_in(copied)


def test_a_session_cookie_follows_the_keys_and_their_fallbacks(app, client):
    """The serializer is kept per set of keys: a new key with the old one as a fallback still
    reads the cookie, and dropping the fallback refuses it."""
    signup(client, username="ada")
    copied = thief_of(app, client, names=("session",))
    assert signed_in(copied)
    old = app.secret_key
    app.secret_key = app.config["SECRET_KEY"] = "a new key for this deployment"
    app.config["SECRET_KEY_FALLBACKS"] = [old]
    assert signed_in(copied)
    app.config["SECRET_KEY_FALLBACKS"] = []
    assert not signed_in(copied)


def test_a_known_cookie_never_shares_nested_values_between_requests(app):
    """Two requests with the same cookie get equal sessions, and changing a list in one (in
    place, as a view may) leaves the other's, and the next request's, as the cookie says."""

    @app.get("/stack/put")
    def put():
        session["items"] = [1, 2]
        session["name"] = "x"
        return "ok"

    @app.get("/stack/take")
    def take():
        items = session.get("items")
        seen = list(items)
        items.append(3)  # in place: Flask does not notice, and must not keep it anywhere
        return {"seen": seen, "name": session.get("name")}

    client = app.test_client()
    client.get("/stack/put")
    assert [client.get("/stack/take").json for _ in range(3)] == [{"seen": [1, 2], "name": "x"}] * 3


@pytest.mark.parametrize("secure", [False, True])
@pytest.mark.parametrize("path", ["/", "/study/pilot", "/healthz"])
@pytest.mark.parametrize(
    "contents",
    [{}, {"_user_id": "1:1"}, {"_user_id": "1:1", "_permanent": True}, {"frame_mturk": True}],
)
@pytest.mark.parametrize("modified", [False, True])
@pytest.mark.parametrize("read", [False, True])
def test_saving_a_session_answers_as_flasks_own_save(
    app, monkeypatch, secure, path, contents, modified, read
):
    """The short way for a session kept as it was gives the response Flask's full pass gives it
    (the same cookie, the same `Vary`), whatever the session holds and however it was used."""
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda signer: 1_800_000_000)
    interface = app.session_interface

    def saved(save) -> list:
        base_url = "https://localhost" if secure else "http://localhost"
        with app.test_request_context(path, base_url=base_url):
            kept = interface.session_class(contents)
            request_ctx._session = kept  # the request's session, as `session` finds it
            kept.modified, kept.accessed = modified, read
            response = app.response_class("page")
            save(app, kept, response)
            return list(response.headers)

    flasks = saved(lambda a, s, r: SecureCookieSessionInterface.save_session(interface, a, s, r))
    assert saved(interface.save_session) == flasks


# --- CSRF tokens ------------------------------------------------------------------------------


def test_a_checked_token_is_refused_once_the_session_secret_changes(app, client):
    with app.app_context():
        factories.player("ada", password=PASSWORD)
        factories.example(boundary=3)
    before = csrf_token(client, "/login")
    # Checked (and kept) twice: a failed login is a post whose token was good.
    assert login(client, "ada", "wrong password").status_code == 401
    assert (
        client.post(
            "/login", data={"csrf_token": before, "username": "ada", "password": "wrong"}
        ).status_code
        == 401
    )
    assert login(client, "ada", PASSWORD).status_code == 302  # a new CSRF secret
    assert csrf_token(client, "/profile") != before  # now in the session
    refused = client.post("/profile/settings", data={"csrf_token": before})
    assert refused.status_code == 400 and "This form had expired" in refused.text


def test_a_checked_token_is_refused_in_another_session(app):
    with app.app_context():
        factories.example(boundary=3)
    mine, theirs = app.test_client(), app.test_client()
    token = csrf_token(mine, "/")
    for _ in range(2):
        assert start_http(mine, token).status_code == 302
    csrf_token(theirs, "/")  # a session with its own secret
    refused = start_http(theirs, token)
    assert refused.status_code == 400
    missing = app.test_client().post("/play", data={"csrf_token": token, "category": "news"})
    assert missing.status_code == 400  # no secret in the session at all


def test_a_checked_token_is_refused_under_another_key(app, client):
    with app.app_context():
        factories.example(boundary=3)
    token = csrf_token(client, "/")
    assert start_http(client, token).status_code == 302
    # The session cookie stays readable (the old key as a fallback); the token's key is gone.
    old = app.secret_key
    app.secret_key = app.config["SECRET_KEY"] = "a new key for this deployment"
    app.config["SECRET_KEY_FALLBACKS"] = [old]
    refused = start_http(client, token)
    assert refused.status_code == 400


def test_with_a_time_limit_a_checked_token_still_expires(app, make_app, monkeypatch):
    with app.app_context():
        factories.example(boundary=3)
    timed = make_app(WTF_CSRF_TIME_LIMIT=60)
    client = timed.test_client()
    token = csrf_token(client, "/")
    assert start_http(client, token).status_code == 302
    _later(monkeypatch, 120)
    refused = start_http(client, token)
    assert refused.status_code == 400


# --- Rate limits --------------------------------------------------------------------------


@pytest.fixture
def app_wide_limits():
    """Lets a test give the (process-wide) limiter app-wide limits, and takes them back."""
    manager = limiter.limit_manager
    saved = (list(manager._application_limits), list(manager._default_limits))
    blueprints = dict(manager._blueprint_limits)
    yield manager
    manager.set_application_limits(saved[0])
    manager.set_default_limits(saved[1])
    manager._blueprint_limits.clear()
    manager._blueprint_limits.update(blueprints)


@pytest.mark.parametrize("setting", ["RATELIMIT_APPLICATION", "RATELIMIT_DEFAULT"])
def test_app_wide_limits_still_refuse_unlimited_routes(app, make_app, app_wide_limits, setting):
    limited = make_app(**{setting: "2 per minute"})
    client = limited.test_client()
    statuses = [client.get("/healthz").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_a_blueprint_limit_still_refuses(app, app_wide_limits):
    limiter.limit("2 per minute")(app.blueprints["health"])
    client = app.test_client()
    assert [client.get("/healthz").status_code for _ in range(3)] == [200, 200, 429]


def test_a_limit_counted_after_the_response_is_still_counted(app):
    """Flask-Limiter's after-request hook runs for a request that checked a limit: a limit that
    counts only some responses (`deduct_when`) is counted there."""

    @app.get("/stack/counted")
    @limiter.limit("2 per minute", deduct_when=lambda response: response.status_code == 400)
    def counted():
        return ("bad", 400) if request.args.get("bad") else "good"

    client = app.test_client()
    assert [client.get("/stack/counted").status_code for _ in range(4)] == [200] * 4
    bad = [client.get("/stack/counted?bad=1").status_code for _ in range(3)]
    assert bad == [400, 400, 429]


# --- Headers and the access line -------------------------------------------------------------


def test_security_headers_keep_their_order_and_a_views_own(app):
    @app.get("/stack/own-policy")
    def own_policy():
        return "ok", 200, {"Content-Security-Policy": "default-src 'none'", "X-Frame-Options": "X"}

    client = app.test_client()
    plain = client.get("/healthz")
    names = [name for name, _ in plain.headers]
    security = ["X-Frame-Options", "Content-Security-Policy", "X-Content-Type-Options"]
    security.append("Referrer-Policy")
    assert [name for name in names if name in security] == security
    assert names.index("Referrer-Policy") < names.index("X-Request-ID")
    assert plain.headers["Content-Security-Policy"] == (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
    own = client.get("/stack/own-policy")
    assert own.headers.getlist("Content-Security-Policy") == ["default-src 'none'"]
    assert own.headers.getlist("X-Frame-Options") == ["X"]
    assert own.headers["X-Content-Type-Options"] == "nosniff"


def test_the_access_lines_time_is_datetimes_text():
    rng = random.Random(23)
    now = time.time()
    moments = [rng.uniform(0, 4e9) for _ in range(20000)]
    moments += [int(now) + k / 10_000 for k in range(20000)]  # one second after another
    moments += [int(now) + fraction for fraction in (0.9999995, 0.0000005, 0.0005, 0.9995)]
    for moment in moments:
        expected = datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")
        assert iso_time(moment) == expected, moment

"""Sessions end on the server: logout, a password change and an operator's reset make copied
session cookies and remember tokens useless (they worked after logout before)."""

from __future__ import annotations

from app.extensions import db
from app.models import Player
from tests.security.helpers import PASSWORD, post_form, signed_in, thief_of
from tests.test_accounts import login, signup


def test_logout_ends_the_session_for_copied_cookies_and_remember_tokens(app, client):
    signup(client, username="ada")
    session_only = thief_of(app, client, names=("session",))
    remember_only = thief_of(app, client, names=("remember_token",))
    assert signed_in(session_only) and signed_in(remember_only)
    post_form(client, "/logout", {})
    assert not signed_in(client)
    assert not signed_in(session_only)  # a copy of the session cookie made before logout
    assert not signed_in(remember_only)  # a copy of the remember token made before logout
    # Logging in again works, with new cookies.
    assert login(client, "ada", PASSWORD).status_code == 302
    assert signed_in(client)
    assert not signed_in(session_only)


def test_changing_the_password_ends_every_other_session_but_this_one(app, client):
    signup(client, username="ada")
    laptop = app.test_client()
    assert login(laptop, "ada", PASSWORD).status_code == 302
    copied = thief_of(app, client, names=("remember_token",))
    response = post_form(
        client,
        "/account/password",
        {
            "current_password": PASSWORD,
            "new_password": "a new and better phrase",
            "confirm_password": "a new and better phrase",
        },
        "/account",
    )
    assert response.status_code == 302
    assert signed_in(client)  # this browser stays signed in
    client.delete_cookie("session")  # ...and its new remember token works too
    assert signed_in(client)
    assert not signed_in(laptop)
    assert not signed_in(copied)
    assert login(laptop, "ada", PASSWORD).status_code == 401
    assert login(laptop, "ada", "a new and better phrase").status_code == 302


def test_password_change_needs_the_current_password_and_a_good_new_one(app, client):
    signup(client, username="ada")
    cases = [
        ({"current_password": "wrong guess!", "new_password": "x" * 12}, "not right"),
        ({"current_password": PASSWORD, "new_password": "password"}, "most common"),
        ({"current_password": PASSWORD, "new_password": "12345678"}, "most common"),
        ({"current_password": PASSWORD, "new_password": "ADA"}, "8 to 200"),
        ({"current_password": PASSWORD, "new_password": " " * 8}, "only spaces"),
    ]
    for form, message in cases:
        form["confirm_password"] = form["new_password"]
        response = post_form(client, "/account/password", form, "/account")
        assert response.status_code == 400, form
        assert message in response.get_data(as_text=True), form
    mismatch = post_form(
        client,
        "/account/password",
        {
            "current_password": PASSWORD,
            "new_password": "one good phrase",
            "confirm_password": "another phrase",
        },
        "/account",
    )
    assert mismatch.status_code == 400 and "differ" in mismatch.get_data(as_text=True)
    with app.app_context():
        assert db.session.query(Player).one().check_password(PASSWORD)
    assert signed_in(client)


def test_operator_reset_password_ends_sessions_and_lifts_a_lock(app, client, runner):
    app.config["LOGIN_RATE_LIMIT"] = "1000 per minute"  # the per-address limit stays out of it
    signup(client, username="ada")
    for _ in range(10):
        login(app.test_client(), "ada", "not the password")
    locked = login(app.test_client(), "ada", PASSWORD)
    assert locked.status_code == 429 and "failed logins for this name" in locked.text
    assert runner.invoke(args=["reset-password", "ada"], input="short\nshort\n").exit_code == 1
    result = runner.invoke(args=["reset-password", "ada", "--generate"])
    assert result.exit_code == 0, result.output
    new_password = result.output.strip().rsplit(": ", 1)[1]
    assert not signed_in(client)
    assert login(app.test_client(), "ada", new_password).status_code == 302
    assert runner.invoke(args=["reset-password", "nobody"]).exit_code == 1
    assert "--generate" in runner.invoke(args=["reset-password", "--help"]).output


def test_a_new_secret_key_refuses_session_cookies_signed_with_the_old_one(app, client):
    """The session cookie's signer is built once per key (app/__init__.py): a new key, or the old
    one dropped from the fallbacks, must still refuse a cookie signed with the old key."""
    signup(client, username="ada")
    old = app.secret_key
    copied = thief_of(app, client, names=("session",))
    assert signed_in(copied)
    app.secret_key = app.config["SECRET_KEY"] = "another secret key of this deployment"
    app.config["SECRET_KEY_FALLBACKS"] = [old]
    assert signed_in(thief_of(app, client, names=("session",)))  # the old key still verifies
    app.config["SECRET_KEY_FALLBACKS"] = []
    assert not signed_in(thief_of(app, client, names=("session",)))  # and now it does not

"""Helpers for the security tests: copying a browser's cookies, as a thief would."""

from __future__ import annotations

from tests.conftest import csrf_token

PASSWORD = "correct horse battery"
COOKIES = ("session", "remember_token")


def thief_of(app, victim, names=COOKIES, user_agent: str = "Thief/1.0"):
    """Another browser (another user agent) holding copies of the victim's cookies."""
    thief = app.test_client()
    thief.environ_base["HTTP_USER_AGENT"] = user_agent
    for name in names:
        cookie = victim.get_cookie(name)
        assert cookie is not None, f"the victim has no {name} cookie"
        thief.set_cookie(name, cookie.value)
    return thief


def signed_in(response_client, path: str = "/profile") -> bool:
    return response_client.get(path).status_code == 200


def post_form(client, path: str, data: dict, token_page: str = "/"):
    return client.post(path, data={"csrf_token": csrf_token(client, token_page), **data})

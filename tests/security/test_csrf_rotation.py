"""The CSRF secret changes when the identity does: at login, sign-up and study join. A token
read before (or planted in a shared session cookie) is refused afterwards."""

from __future__ import annotations

from tests.conftest import csrf_token
from tests.crowd.helpers import make_pool, make_study
from tests.security.helpers import PASSWORD
from tests.test_accounts import login, signup


def _refused_after(client, old_token: str) -> bool:
    response = client.post("/profile/settings", data={"csrf_token": old_token})
    return response.status_code == 400 and "This form had expired" in response.text


def test_login_gives_a_new_csrf_secret(app, client):
    signup(client, username="ada")
    client.post("/logout", data={"csrf_token": csrf_token(client)})
    before = csrf_token(client, "/login")
    assert login(client, "ada", PASSWORD).status_code == 302
    assert csrf_token(client, "/profile") != before
    assert _refused_after(client, before)


def test_sign_up_gives_a_new_csrf_secret(app, client):
    before = csrf_token(client, "/signup")
    assert signup(client, username="ada").status_code == 302
    assert csrf_token(client, "/profile") != before
    assert _refused_after(client, before)


def test_study_join_gives_a_new_csrf_secret(app, client):
    with app.app_context():
        make_pool()
        make_study(slug="test-study", platform="generic")
    landing = "/study/test-study?pid=w1"
    before = csrf_token(client, landing)
    joined = client.post(
        "/study/test-study/join", data={"csrf_token": before, "pid": "w1", "consent": "yes"}
    )
    assert joined.status_code == 302, joined.text
    after = csrf_token(client, "/study/test-study/continue")
    assert after != before
    refused = client.post("/study/test-study/next", data={"csrf_token": before})
    assert refused.status_code == 400

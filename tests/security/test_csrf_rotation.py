"""The CSRF secret changes when the identity does: at login, sign-up and study join. A token
read before (or planted in a shared session cookie) is refused afterwards."""

from __future__ import annotations

import time

from itsdangerous import TimestampSigner

from tests import factories
from tests.conftest import CSRF_RE, csrf_token
from tests.crowd.helpers import make_pool, make_study
from tests.game_helpers import start_http
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


def test_a_checked_post_answers_with_the_token_it_sent_and_no_other(app, client, monkeypatch):
    """The page's script gets its forms back with the token it posted (checked a moment before,
    with no time limit on tokens: worth exactly a new one), which keeps working; a token that
    failed its check is never put into a page."""
    with app.app_context():
        factories.example(boundary=3)
    token = csrf_token(client, "/")
    # From here a newly signed token would differ from `token` (it carries its signing time).
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda signer: int(time.time()) + 100)
    started = start_http(client, token)
    assert started.status_code == 302
    url = started.headers["Location"]
    fetch = {"X-Requested-With": "fetch"}
    for seen in (1, 2):
        page = client.post(
            f"{url}/next", data={"csrf_token": token, "seen": str(seen)}, headers=fetch
        )
        assert page.status_code == 200
        assert CSRF_RE.findall(page.text) and set(CSRF_RE.findall(page.text)) == {token}
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    refused = client.post(f"{url}/next", data={"csrf_token": forged, "seen": "3"}, headers=fetch)
    assert refused.status_code == 400 and forged not in refused.text

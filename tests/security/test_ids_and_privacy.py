"""What a stranger cannot learn or slip in: private profiles answer as missing ones, ids with a
trailing newline are refused (`$` let `abc\\n` in as a new worker), and only the browser bound to a
worker learns that the worker id has joined."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from app.crowd.platforms import EntryError, parse_entry
from app.extensions import db
from app.models import Participant
from tests.conftest import csrf_token
from tests.crowd.helpers import make_pool, make_study
from tests.test_accounts import signup


def _main(page: str) -> str:
    """The page without what differs per request (tokens, the asked-for name)."""
    return re.sub(r'value="[^"]*"', "", page).replace("ada", "NAME").replace("nobody", "NAME")


def test_a_private_profile_answers_like_a_missing_one(app, client):
    signup(client, username="ada")
    visitor = app.test_client()
    private, missing = visitor.get("/players/ada"), visitor.get("/players/nobody")
    assert private.status_code == missing.status_code == 404
    assert _main(private.text) == _main(missing.text)
    assert client.get("/players/ada").status_code == 200  # the owner still sees it


@pytest.mark.parametrize("value", ["abc\n", "abc\r\n", "\nabc", "abc\x00", "a" * 129, ""])
def test_worker_ids_must_match_entirely(value):
    with pytest.raises(EntryError):
        parse_entry("generic", {"pid": value})
    assert parse_entry("generic", {"pid": "abc"}).worker_id == "abc"


def test_a_worker_id_with_a_newline_is_no_new_participant(app, client):
    with app.app_context():
        make_pool()
        make_study(slug="test-study", platform="generic")
    assert client.get("/study/test-study?pid=abc%0A").status_code == 400
    token = csrf_token(client, "/study/test-study?pid=abc")
    for pid in ("abc", "abc\n"):
        client.post(
            "/study/test-study/join", data={"csrf_token": token, "pid": pid, "consent": "yes"}
        )
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Participant)) == 1


@pytest.mark.parametrize("path", ["/leaderboard/news%0A", "/study/test-study%0A?pid=abc"])
def test_slugs_with_a_newline_are_not_found(app, client, path):
    with app.app_context():
        make_pool()
        make_study(slug="test-study", platform="generic")
    assert client.get(path).status_code == 404


def test_only_the_bound_browser_learns_that_a_worker_id_has_joined(app, client):
    with app.app_context():
        make_pool()
        make_study(slug="test-study", platform="generic")
    token = csrf_token(client, "/study/test-study?pid=w1")
    client.post("/study/test-study/join", data={"csrf_token": token, "pid": "w1", "consent": "yes"})
    # The bound browser goes on to its study.
    back = client.get("/study/test-study?pid=w1")
    assert back.status_code == 302 and back.headers["Location"].endswith("/continue")
    # A fresh browser sees the same page for the joined id as for an id never seen.
    stranger = app.test_client()
    joined = stranger.get("/study/test-study?pid=w1").text
    unseen = stranger.get("/study/test-study?pid=w2").text
    assert "Welcome back" not in joined
    assert _main(joined).replace("w1", "ID") == _main(unseen).replace("w2", "ID")

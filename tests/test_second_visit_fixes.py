"""What broke on a second visit: board links to private profiles, a category that did not stick,
a second identity up-voting the first, today's daily answers on public profiles, and page
numbers that gave a 500. Services on a real database, flows over HTTP."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.accounts import service as accounts
from app.extensions import db
from app.models import Example, Player, Round
from tests import factories
from tests import test_sets_and_daily as shared
from tests.conftest import csrf_token
from tests.game_helpers import answer, answer_http, play_over_http, reveal_http, start_http
from tests.test_accounts import login, signup
from tests.test_honest_numbers import play_daily_exactly
from tests.test_sets_and_daily import DAY

daily_app = shared.daily_app
ROUND_RE = re.compile(r"/play/round/(\d+)")
PASSWORD = "correct horse battery"


# -- boards link public profiles only ----------------------------------------------------------


def test_the_board_links_only_public_profiles(app, client):
    with app.app_context():
        example = factories.example()
        for name in ("bea", "cy"):
            answer(factories.player(name), example if name == "bea" else factories.example(), 4)
    board = client.get("/leaderboard?by=points").get_data(as_text=True)
    assert "bea" in board and 'href="/players/bea"' not in board
    assert client.get("/players/bea").status_code == 404
    with app.app_context():
        accounts.set_profile_public(
            db.session.scalar(select(Player).filter_by(username="bea")), True
        )
    board = client.get("/leaderboard?by=points").get_data(as_text=True)
    assert 'href="/players/bea"' in board and 'href="/players/cy"' not in board
    assert client.get("/players/bea").status_code == 200


# -- the chosen category sticks ----------------------------------------------------------------


@pytest.fixture
def two_categories(app_with):
    app = app_with(SET_SIZE=2)
    with app.app_context():
        for i in range(6):
            factories.example(boundary=3 + i % 3, category_slug="news")
            factories.example(boundary=3 + i % 3, category_slug="stories")
    return app


def category_of(app, round_id: int) -> str:
    with app.app_context():
        return db.session.get(Round, round_id).example.category.slug


def flag_third(client, token: str, round_id: int) -> None:
    for seen in (1, 2):
        reveal_http(client, token, round_id, seen)
    answer_http(client, token, round_id, 3, reasons="hunch")


def main_button(page: str) -> str:
    return re.search(r'name="category" value="([^"]+)" class="button primary play"', page).group(1)


def test_the_chosen_category_sticks_across_rounds_and_sets(two_categories):
    app = two_categories
    client = app.test_client()
    token = csrf_token(client)
    started = start_http(client, token, "stories")
    first = int(ROUND_RE.search(started.headers["Location"]).group(1))
    assert category_of(app, first) == "stories"
    flag_third(client, token, first)
    # Home in the middle of the set: "Continue your set" keeps the category.
    home = client.get("/").get_data(as_text=True)
    assert "Continue your set" in home and main_button(home) == "stories"
    resumed = start_http(client, token, main_button(home))
    second = int(ROUND_RE.search(resumed.headers["Location"]).group(1))
    assert category_of(app, second) == "stories"
    flag_third(client, token, second)
    page = client.get(f"/play/round/{second}").get_data(as_text=True)
    summary_path = re.search(r'href="(/sets/\d+)"', page).group(1)
    summary = client.get(summary_path).get_data(as_text=True)
    assert "Play another set · Stories" in summary and main_button(summary) == "stories"
    another = start_http(client, token, main_button(summary))
    third = int(ROUND_RE.search(another.headers["Location"]).group(1))
    assert category_of(app, third) == "stories"
    flag_third(client, token, third)
    page = client.get(f"/play/round/{third}").get_data(as_text=True)
    onward = re.search(r'action="(/sets/\d+/next)"', page).group(1)
    fourth = int(
        ROUND_RE.search(client.post(onward, data={"csrf_token": token}).headers["Location"]).group(
            1
        )
    )
    assert category_of(app, fourth) == "stories"
    # A new visit to the home page, between sets, offers the same category first.
    flag_third(client, token, fourth)
    assert main_button(client.get("/").get_data(as_text=True)) == "stories"


# -- a second identity cannot up-vote the first ------------------------------------------------


def test_a_second_identity_in_the_same_browser_cannot_up_vote_the_first(app):
    with app.app_context():
        example = factories.example(boundary=2)
        example_id = example.id
    browser = app.test_client()
    token = csrf_token(browser)
    first = play_over_http(browser, token, flag_at=2, explanation="The tone changes here.")
    browser.post("/logout", data={"csrf_token": token})
    token = csrf_token(browser)
    play_over_http(browser, token, flag_at=2)
    with app.app_context():
        assert db.session.get(Example, example_id).annotation_count == 2
    refused = browser.post(f"/explanations/{first}/vote", data={"csrf_token": token})
    assert refused.status_code == 403
    with app.app_context():
        assert db.session.get(Round, first).upvotes == 0
    # Someone in another browser may.
    other = app.test_client()
    other_token = csrf_token(other)
    play_over_http(other, other_token, flag_at=2)
    voted = other.post(f"/explanations/{first}/vote", data={"csrf_token": other_token})
    assert voted.status_code == 302
    with app.app_context():
        assert db.session.get(Round, first).upvotes == 1


# -- a public profile keeps today's daily to those who played it ------------------------------


def round_rows(page: str) -> int:
    table = (
        page.split('aria-label="Rounds"')[1].split("</table>")[0]
        if 'aria-label="Rounds"' in page
        else ""
    )
    return table.count("<tr>") - 1 if table else 0


def test_a_public_profile_hides_todays_daily_from_who_has_not_played_it(daily_app):
    ann = daily_app.test_client()
    signup(ann, username="ann")
    play_daily_exactly(daily_app, ann, csrf_token(ann, "/daily"))
    ann.post(
        "/profile/settings",
        data={"csrf_token": csrf_token(ann, "/profile"), "profile_public": "yes"},
    )
    assert round_rows(ann.get("/profile").get_data(as_text=True)) == 5
    stranger = daily_app.test_client()
    assert round_rows(stranger.get("/players/ann").get_data(as_text=True)) == 0
    play_daily_exactly(daily_app, stranger, csrf_token(stranger, "/daily"))
    assert round_rows(stranger.get("/players/ann").get_data(as_text=True)) == 5
    # The next day, yesterday's challenge is no secret.
    daily_app.config["TODAY_OVERRIDE"] = DAY.replace(day=DAY.day + 1)
    assert round_rows(daily_app.test_client().get("/players/ann").get_data(as_text=True)) == 5


# -- every paginated route answers any page without a 500 -------------------------------------

# (path, query parameter, who may open it)
PAGINATED = [
    ("/profile/rounds", "page", "player"),
    ("/research/explanations", "before", "researcher"),
]
ODD_PAGES = ["0", "-1", "abc", str(2**63), str(2**31), "99999", "1.5", "", " 2", "٣", "1e3"]


@pytest.fixture
def paged(app):
    with app.app_context():
        example = factories.example()
        player = factories.player("pat", PASSWORD)
        answer(player, example, 4, explanation="Because.")
        accounts.sign_up("lab", PASSWORD, consent=False, researcher=True)
    clients = {}
    for who, name in (("player", "pat"), ("researcher", "lab")):
        clients[who] = app.test_client()
        assert login(clients[who], name, PASSWORD).status_code == 302
    return clients


@pytest.mark.parametrize("path, name, who", PAGINATED)
@pytest.mark.parametrize("value", ODD_PAGES)
def test_odd_page_numbers_get_a_4xx_or_the_last_page(paged, path, name, who, value):
    response = paged[who].get(path, query_string={name: value})
    assert response.status_code in (200, 400), response.status_code
    if value.isascii() and value.isdigit() and int(value) >= 1 and len(value) <= 12:
        assert response.status_code == 200
    if path == "/profile/rounds" and response.status_code == 200:
        assert round_rows(response.get_data(as_text=True)) == 1  # the last (only) page


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=st.one_of(st.text(max_size=30), st.integers().map(str)))
def test_fuzzed_page_numbers_never_give_a_500(paged, value):
    for path, name, who in PAGINATED:
        response = paged[who].get(path, query_string={name: value})
        assert response.status_code in (200, 400), (path, value, response.status_code)

"""The home page's own reads in one statement (app/game/home.py): the same state as the reads
one by one, and the same page."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta

import pytest

from app.extensions import db
from app.game import daily, home, next_text, reveals, sets, starts
from app.models import Example, GameSet, Player, PlayerTotal, Round
from app.models.base import utcnow
from app.models.sets import DAILY_SET
from tests import factories
from tests.conftest import CSRF_RE, csrf_token
from tests.game_helpers import answer, answer_http, finish, play_over_http, reveal_http, start_http


def separate_reads(player, day) -> home.HomeState:
    """What the home page read before, one statement each."""
    found = reveals.open_round(player)
    return home.HomeState(
        daily.own_set(player, day),
        sets.open_normal_set(player),
        home.OpenRound(found.id) if found is not None else None,
        sets.last_choice(player),
        db.session.get(PlayerTotal, player.id),
    )


def daily_set(player, day, finished: bool, points: int = 0) -> GameSet:
    row = GameSet(player_id=player.id, kind=DAILY_SET, size=5, day=day)
    if finished:
        row.answered, row.points, row.finished_at = 5, points, utcnow()
    db.session.add(row)
    db.session.commit()
    return row


def test_home_state_is_what_the_separate_reads_find(ctx):
    today = daily.today()
    for slug in ("news", "stories"):
        for boundary in (2, 3, 4, 5, 6, 7):
            factories.example(boundary=boundary, category_slug=slug)
    fresh = factories.player("fresh")
    playing = factories.player("playing")
    # A set of stories with one text answered and the next one open.
    first = db.session.get(Round, sets.play(playing, "stories").id)
    finish(playing, first, 2)
    next_text.next_round(playing, first.set_id)
    daily_set(playing, today, finished=True, points=7)
    # Yesterday's daily set and a text outside any set: neither is today's set or a choice.
    between = factories.player("between")
    daily_set(between, today - timedelta(days=1), finished=True, points=3)
    answer(between, db.session.get(Example, first.example_id), None)
    daily_set(between, today, finished=False)
    db.session.expire_all()
    for player in (fresh, playing, between):
        together = home.home_state(player, today)
        apart = separate_reads(player, today)
        assert together == apart, player.username
    state = home.home_state(playing, today)
    assert state.choice == "stories" and state.open_round is not None
    assert state.open_set is not None and state.open_set.answered == 1
    assert state.today_set.finished and state.today_set.points == 7
    assert state.totals is not None and state.totals.rounds == 1
    assert home.home_state(fresh, today) == home.HomeState(None, None, None, starts.RANDOM, None)


def _page(client, path: str = "/") -> str:
    """A page without what differs from one response to the next: its CSRF tokens, which are
    signed with the second they were made in."""
    page = client.get(path).get_data(as_text=True)
    return CSRF_RE.sub('name="csrf_token" value=""', page)


@pytest.mark.parametrize("state", ["first visit", "set and text open", "daily done"])
def test_the_home_page_is_the_same_as_with_the_separate_reads(app, client, monkeypatch, state):
    with app.app_context():
        for slug in ("news", "stories"):
            for boundary in (2, 3, 4, 5, 6, 7):
                factories.example(boundary=boundary, category_slug=slug)
        factories.player("reader", "reader-password")
    token = csrf_token(client)
    login = {"csrf_token": token, "username": "reader", "password": "reader-password"}
    assert client.post("/login", data=login).status_code == 302
    token = csrf_token(client, "/")
    shown = {
        "first visit": "Your first text comes with a short guide",
        "set and text open": "Continue your set · text 2 of 5 · News",
        "daily done": "Done for today: <strong>9/25</strong>",
    }[state]
    if state != "first visit":
        play_over_http(client, token)  # a text of News answered: a set of 5 open
    if state == "set and text open":
        assert start_http(client, token).status_code
    if state == "daily done":
        with app.app_context():
            reader = db.session.scalar(db.select(Player).filter_by(username="reader"))
            daily_set(reader, daily.today(), finished=True, points=9)
    together = _page(client)
    monkeypatch.setattr("app.game.routes.home_state", separate_reads)
    apart = _page(client)
    assert together == apart
    assert shown in together
    if state == "set and text open":
        assert "Continue reading" in together


def test_the_set_summary_is_the_same_as_with_its_separate_reads(app_with, monkeypatch):
    """A set of two categories, the choice changed for its last text: the summary names each
    text's category and offers the last choice, as when both were read one by one."""
    app = app_with(SET_SIZE=3)
    with app.app_context():
        for slug in ("news", "stories"):
            for boundary in (2, 3, 4):
                factories.example(boundary=boundary, category_slug=slug)
    client = app.test_client()
    token = csrf_token(client)
    for category in ("news", "news", "stories"):  # the set's texts, each started from home
        started = start_http(client, token, category)
        round_id = int(re.search(r"/play/round/(\d+)", started.headers["Location"]).group(1))
        reveal_http(client, token, round_id, 1)
        answered = answer_http(client, token, round_id, 2, reasons="hunch")
        assert answered.status_code == 302
    with app.app_context():
        game_set = db.session.scalar(db.select(GameSet))
        assert game_set.finished
        set_id = game_set.id
    together = _page(client, f"/sets/{set_id}")
    # The summary as read before: each category by its text, the last choice by a query.
    read = sets.summary_of
    monkeypatch.setattr(
        sets, "summary_of", lambda s: dataclasses.replace(read(s), last_chosen=None)
    )
    apart = _page(client, f"/sets/{set_id}")
    assert together == apart
    assert "Play another set · Stories" in together
    assert together.count("<td>News</td>") == 2 and together.count("<td>Stories</td>") == 1

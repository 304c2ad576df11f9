"""Starting a round (`starts.start_round`, `starts.new_round`) from "Play" and "Next text": the
page's script gets the round's page, the round, its first reveal, its set and the passages read
are stored, a lost race serves the other tab's round or joins its set, and an empty pool is
refused with nothing stored. On PostgreSQL (one statement) and SQLite (its parts one by one)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.extensions import db
from app.game import starts
from app.models import Example, GameSet, PassageRead, Reveal, Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import (
    FETCH,
    answer_http,
    play_over_http,
    reveal_http,
    same_but_token,
    start_http,
)

# What may differ between two players' rounds started the same way.
OWN = {"id", "player_id", "example_id", "set_id", "started_at", "share_token"}


@pytest.fixture
def sets_of_three(app_with):
    """Sets of 3 texts; 4 news texts and a sports text (the lowest id, so a pick from the start
    of the range would take it if the category were ignored)."""
    app = app_with(SET_SIZE=3)
    with app.app_context():
        factories.example(boundary=3, category_slug="sports", passage="s")
        for number in range(4):
            factories.example(boundary=2 + number, passage=f"n{number}")
    return app


def _next_path(client, round_id: int) -> str:
    page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    return re.search(r'action="(/sets/\d+/next)"', page).group(1)


def _next_text(client, token: str, path: str):
    return client.post(path, data={"csrf_token": token}, headers=FETCH)


def example_set(round_id: int) -> int:
    return db.session.scalar(select(Round.set_id).where(Round.id == round_id))


def _row(app, round_id: int) -> tuple[dict, list, int]:
    """The round's columns, its reveals and how many passages its player has read."""
    with app.app_context():
        table = Round.__table__
        row = dict(db.session.execute(select(table).where(table.c.id == round_id)).one()._mapping)
        reveals = db.session.execute(
            select(Reveal.sentence_index, Reveal.revealed_at).where(Reveal.round_id == round_id)
        ).all()
        read = db.session.scalar(
            select(func.count())
            .select_from(PassageRead)
            .where(PassageRead.player_id == row["player_id"])
        )
        return row, [tuple(reveal) for reveal in reveals], read


def _drawn_as_its_page(client, started, where: str) -> int:
    """The id of the round just started, whose fragment (at sentence 1, `where` in its set) is
    the round's page."""
    assert started.status_code == 200
    url = started.headers["X-Round-URL"]
    body = started.get_data(as_text=True)
    assert where in body and "Sentence 1 of" in body
    assert same_but_token(body) == same_but_token(client.get(url, headers=FETCH).text)
    return int(re.fullmatch(r"/play/round/(\d+)", url).group(1))


@pytest.mark.parametrize("category", ["news", starts.RANDOM])
def test_play_and_next_text_store_the_round_and_draw_its_page(sets_of_three, category):
    """ "Play a set" (a new set) and "Next text" (into it): the fragment the script gets is the
    round's page, and the round, its first reveal, its set and the passages read are stored."""
    app = sets_of_three
    client = app.test_client()
    token = csrf_token(client)
    started = start_http(client, token, category, fetch=True)
    first = _drawn_as_its_page(client, started, "text 1 of 3")
    reveal_http(client, token, first, 1)
    answered = answer_http(client, token, first, 2, reasons="hunch")
    assert answered.status_code == 302
    shown = _next_text(client, token, _next_path(client, first))
    round_id = _drawn_as_its_page(client, shown, "text 2 of 3")
    for number, started_id in enumerate((first, round_id), start=1):
        row, reveals, read = _row(app, started_id)
        assert reveals[0] == (0, row["started_at"]) and len(reveals) == 3 - number
        assert row["order_index"] == number and row["chosen_category"] == category
        assert row["kind"] == "normal" and row["participant_id"] is None
        assert (row["guess"] is None) == (number == 2)
        assert read == 2  # both texts' passages
    with app.app_context():
        example = db.session.get(Round, round_id).example
        assert category == starts.RANDOM or example.category.slug == category
        sets_made = db.session.execute(select(GameSet.__table__)).all()
        assert len(sets_made) == 1 and example_set(first) == example_set(round_id)
        made = sets_made[0]._mapping
        assert made["answered"] == 1 and made["size"] == 3 and made["kind"] == "normal"
        assert made["finished_at"] is None and made["level"] is None


def _another_tab_first(monkeypatch, other_tab) -> list:
    """What `starts.new_round` returned, each call; `other_tab(player_id)` runs once, in a
    session of its own, just before the first."""
    real = starts.new_round
    outcome: list = []

    def after_another_tab(player, *args, **kwargs):
        if not outcome:
            with Session(db.engine) as other:
                other_tab(other, player.id)
                other.commit()
        outcome.append(real(player, *args, **kwargs))
        return outcome[-1]

    monkeypatch.setattr(starts, "new_round", after_another_tab)
    return outcome


def test_a_round_opened_meanwhile_is_served(sets_of_three, monkeypatch):
    """Another tab starts a round between the look for an open round and the insert: the unique
    index refuses the second, nothing of it is stored, and the open round is served."""
    app = sets_of_three
    client = app.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token, 1)
    path = _next_path(client, first)
    with app.app_context():
        set_id = db.session.scalar(select(GameSet.id))
        read_before = db.session.scalar(select(func.count()).select_from(PassageRead))
    theirs = []

    def another_tab(other, player_id):
        played = select(Round.example_id).where(Round.player_id == player_id)
        example_id = other.scalar(
            select(Example.id).where(Example.id.not_in(played)).order_by(Example.id.desc())
        )
        other.add(
            Round(
                player_id=player_id,
                example_id=example_id,
                order_index=2,
                chosen_category="news",
                set_id=set_id,
                revealed=1,
                reasons=[],
                explanation="",
            )
        )
        other.flush()
        theirs.append(other.scalar(select(Round.id).where(Round.guess.is_(None))))

    outcome = _another_tab_first(monkeypatch, another_tab)
    shown = _next_text(client, token, path)
    assert shown.status_code == 200
    assert shown.headers["X-Round-URL"] == f"/play/round/{theirs[0]}"
    assert outcome == [None]  # refused by the unique index
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Round)) == 2
        assert (
            db.session.scalar(
                select(func.count()).select_from(Reveal).where(Reveal.round_id == theirs[0])
            )
            == 0
        )
        # The refused start recorded no passage as read.
        assert db.session.scalar(select(func.count()).select_from(PassageRead)) == read_before


def test_an_empty_pool_is_refused_and_stores_nothing(app_with):
    app = app_with(SET_SIZE=3)
    with app.app_context():
        factories.example(boundary=3, passage="only")
        factories.example(boundary=3, category_slug="sports", passage="other")
    client = app.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token, 1)
    refused = _next_text(client, token, _next_path(client, first))
    assert refused.status_code == 409
    assert "You have read every text in News" in refused.get_data(as_text=True)
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Round)) == 1
        assert db.session.scalar(select(func.count()).select_from(Reveal)) == 2


def test_play_continues_the_open_set(sets_of_three):
    """ "Play" again with a set open (no round open): the next text of that set."""
    app = sets_of_three
    client = app.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token, 1)
    shown = start_http(client, token, fetch=True)
    assert shown.status_code == 200
    url = shown.headers["X-Round-URL"]
    body = shown.get_data(as_text=True)
    assert "text 2 of 3" in body
    assert same_but_token(body) == same_but_token(client.get(url, headers=FETCH).text)
    with app.app_context():
        second = int(url.rsplit("/", 1)[1])
        assert example_set(second) == example_set(first)
        assert db.session.scalar(select(func.count()).select_from(GameSet)) == 1


def test_a_set_made_meanwhile_is_joined(sets_of_three, monkeypatch):
    """Another tab makes the player's set between the look for it and the insert: the unique
    index refuses a second set, and the round starts in theirs."""
    app = sets_of_three
    with app.app_context():
        factories.player("reader", "reader-password")
    client = app.test_client()
    token = csrf_token(client)
    login = {"csrf_token": token, "username": "reader", "password": "reader-password"}
    assert client.post("/login", data=login).status_code == 302
    token = csrf_token(client, "/")  # a login rotates it
    theirs = []

    def another_tab(other, player_id):
        made = GameSet(player_id=player_id, kind="normal", size=3)
        other.add(made)
        other.flush()
        theirs.append(made.id)

    outcome = _another_tab_first(monkeypatch, another_tab)
    started = start_http(client, token, fetch=True)
    assert started.status_code == 200 and "text 1 of 3" in started.text
    assert outcome[0] is None and outcome[1].set_id == theirs[0]  # refused, then in theirs
    with app.app_context():
        assert db.session.scalars(select(GameSet.id)).all() == theirs
        assert db.session.scalars(select(Round.set_id)).all() == theirs
        assert db.session.scalar(select(func.count()).select_from(Reveal)) == 1


def test_a_new_level_for_the_open_set_is_stored(sets_of_three):
    """A set whose level changes: the level is stored with the round."""
    app = sets_of_three
    with app.app_context():
        for example in db.session.scalars(select(Example)):
            example.level = "easy"
        db.session.commit()
    client = app.test_client()
    token = csrf_token(client)
    play_over_http(client, token, 1)
    started = client.post(
        "/play", data={"csrf_token": token, "category": "news", "level": "easy"}, headers=FETCH
    )
    assert started.status_code == 200 and "text 2 of 3" in started.text
    with app.app_context():
        assert db.session.scalar(select(GameSet.level)) == "easy"

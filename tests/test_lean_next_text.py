""" "Next text" started in one statement (`starts.start_at_once`, PostgreSQL): the page's
script gets exactly the round the full path draws, the same rows are stored, and a lost race or
an empty pool ends as it did before. On SQLite the full path serves, and the same tests hold."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.extensions import db
from app.game import starts
from app.models import Example, GameSet, PassageRead, Player, Reveal, Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import play_over_http
from tests.test_reveal_page import FETCH, _same_but_token

# What may differ between two players' rounds started the same way.
OWN = {"id", "player_id", "example_id", "set_id", "started_at", "share_token"}


@pytest.fixture
def sets_of_three(make_app, db_uri):
    """Sets of 3 texts; 4 news texts and a sports text (the lowest id, so a pick from the start
    of the range would take it if the category were ignored)."""
    app = make_app(SET_SIZE=3)
    with app.app_context():
        if db_uri.startswith("postgresql"):
            db.drop_all()
        db.create_all()
        factories.example(boundary=3, category_slug="sports", passage="s")
        for number in range(4):
            factories.example(boundary=2 + number, passage=f"n{number}")
    yield app
    with app.app_context():
        db.session.remove()
        if db_uri.startswith("postgresql"):
            db.drop_all()


def _on_postgresql(app) -> bool:
    with app.app_context():
        return db.engine.dialect.name == "postgresql"


def _watch_lean(monkeypatch, full_path: bool = False) -> list:
    """The views `start_at_once` returned; with `full_path` it serves nothing, so the
    full path starts every round."""
    served: list = []
    real = starts.start_at_once

    def watched(*args, **kwargs):
        view = None if full_path else real(*args, **kwargs)
        served.append(view)
        return view

    monkeypatch.setattr(starts, "start_at_once", watched)
    return served


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


@pytest.mark.parametrize("category", ["news", starts.RANDOM])
def test_next_text_draws_and_stores_the_round_as_the_full_path(
    sets_of_three, monkeypatch, category
):
    app = sets_of_three
    monkeypatch.setattr(starts.random, "random", lambda: 0.0)
    drawn = {}
    for path_name in ("lean", "full"):
        served = _watch_lean(monkeypatch, full_path=path_name == "full")
        client = app.test_client()
        token = csrf_token(client)
        started = client.post(
            "/play", data={"csrf_token": token, "category": category}, headers=FETCH
        )
        assert started.status_code == 200
        first_url = started.headers["X-Round-URL"]
        first = int(re.fullmatch(r"/play/round/(\d+)", first_url).group(1))
        body = started.get_data(as_text=True)
        assert "text 1 of 3" in body and "Sentence 1 of" in body
        page = client.get(first_url, headers=FETCH)
        assert _same_but_token(body) == _same_but_token(page.get_data(as_text=True))
        drawn[path_name, "first"] = _row(app, first)
        client.post(f"/play/round/{first}/next", data={"csrf_token": token, "seen": "1"})
        answered = client.post(
            f"/play/round/{first}/answer",
            data={"csrf_token": token, "seen": "2", "choice": "machine", "reasons": "hunch"},
        )
        assert answered.status_code == 302
        shown = _next_text(client, token, _next_path(client, first))
        assert shown.status_code == 200
        url = shown.headers["X-Round-URL"]
        round_id = int(re.fullmatch(r"/play/round/(\d+)", url).group(1))
        body = shown.get_data(as_text=True)
        assert "text 2 of 3" in body and "Sentence 1 of" in body
        page = client.get(url, headers=FETCH)
        assert _same_but_token(body) == _same_but_token(page.get_data(as_text=True))
        lean = [view for view in served if view is not None]
        # "Play a set" (a new set) and "Next text" (into it).
        assert len(lean) == (2 if path_name == "lean" and _on_postgresql(app) else 0)
        drawn[path_name, "next"] = _row(app, round_id)
        with app.app_context():
            example = db.session.get(Round, round_id).example
            assert category == starts.RANDOM or example.category.slug == category
            sets_made = db.session.execute(
                select(GameSet.__table__).where(GameSet.id == example_set(round_id))
            ).all()
            assert len(sets_made) == 1
            drawn[path_name, "set"] = {
                k: v for k, v in sets_made[0]._mapping.items() if k not in OWN
            }
    for which in ("first", "next"):
        lean, full = drawn["lean", which][0], drawn["full", which][0]
        assert {k: v for k, v in lean.items() if k not in OWN} == {
            k: v for k, v in full.items() if k not in OWN
        }
        assert drawn["lean", which][1] == [(0, lean["started_at"])]
        assert drawn["full", which][1] == [(0, full["started_at"])]
    assert drawn["lean", "set"] == drawn["full", "set"]
    assert drawn["lean", "set"]["answered"] == 1 and drawn["lean", "set"]["size"] == 3
    lean_row, _, lean_read = drawn["lean", "next"]
    full_read = drawn["full", "next"][2]
    assert lean_row["order_index"] == 2 and lean_row["revealed"] == 1
    assert lean_row["set_id"] is not None and lean_row["chosen_category"] == category
    assert lean_read == full_read == 2  # both texts' passages


def test_a_round_opened_meanwhile_is_served(sets_of_three, monkeypatch):
    """Another tab starts a round between the look for an open round and the insert: the unique
    index refuses the second, nothing of it is stored, and the open round is served."""
    app = sets_of_three
    client = app.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token, 1)
    path = _next_path(client, first)
    with app.app_context():
        player_id = db.session.scalar(select(Player.id))
        set_id = db.session.scalar(select(GameSet.id))
        read_before = db.session.scalar(select(func.count()).select_from(PassageRead))
    real = starts.start_at_once
    theirs = []

    def after_another_tab(*args, **kwargs):
        with Session(db.engine) as other:
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
            other.commit()
            theirs.append(other.scalar(select(Round.id).where(Round.guess.is_(None))))
        outcome.append(real(*args, **kwargs))
        return outcome[-1]

    outcome: list = []
    monkeypatch.setattr(starts, "start_at_once", after_another_tab)
    shown = _next_text(client, token, path)
    assert shown.status_code == 200
    assert shown.headers["X-Round-URL"] == f"/play/round/{theirs[0]}"
    assert outcome == [None]  # refused by the unique index, on PostgreSQL
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


def test_an_empty_pool_is_refused_and_stores_nothing(make_app, db_uri):
    app = make_app(SET_SIZE=3)
    with app.app_context():
        if db_uri.startswith("postgresql"):
            db.drop_all()
        db.create_all()
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
        db.session.remove()
        if db_uri.startswith("postgresql"):
            db.drop_all()


def test_a_finished_set_leads_to_its_summary(sets_of_three):
    app = sets_of_three
    client = app.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token, 1)
    path = _next_path(client, first)
    for _ in range(2):
        play_over_http(client, token, 1, start=path)
    after = _next_text(client, token, path)
    assert after.status_code == 302 and after.headers["Location"].endswith(path[: -len("/next")])
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Round)) == 3


def test_play_continues_the_open_set(sets_of_three, monkeypatch):
    """ "Play" again with a set open (no round open): the next text of that set, as drawn by the
    full path, from one statement on PostgreSQL."""
    app = sets_of_three
    served = _watch_lean(monkeypatch)
    client = app.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token, 1)
    shown = client.post("/play", data={"csrf_token": token, "category": "news"}, headers=FETCH)
    assert shown.status_code == 200
    url = shown.headers["X-Round-URL"]
    body = shown.get_data(as_text=True)
    assert "text 2 of 3" in body
    assert _same_but_token(body) == _same_but_token(client.get(url, headers=FETCH).text)
    with app.app_context():
        second = int(url.rsplit("/", 1)[1])
        assert example_set(second) == example_set(first)
        assert db.session.scalar(select(func.count()).select_from(GameSet)) == 1
    assert len([view for view in served if view is not None]) == (2 if _on_postgresql(app) else 0)


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
    real = starts.start_at_once
    theirs = []

    def after_another_tab(*args, **kwargs):
        with Session(db.engine) as other:
            made = GameSet(player_id=args[0].id, kind="normal", size=3)
            other.add(made)
            other.commit()
            theirs.append(made.id)
        outcome.append(real(*args, **kwargs))
        return outcome[-1]

    outcome: list = []
    monkeypatch.setattr(starts, "start_at_once", after_another_tab)
    started = client.post("/play", data={"csrf_token": token, "category": "news"}, headers=FETCH)
    assert started.status_code == 200 and "text 1 of 3" in started.text
    assert outcome == [None]  # refused by the unique index, on PostgreSQL
    with app.app_context():
        assert db.session.scalars(select(GameSet.id)).all() == theirs
        assert db.session.scalars(select(Round.set_id)).all() == theirs
        assert db.session.scalar(select(func.count()).select_from(Reveal)) == 1


def test_a_new_level_for_the_open_set_is_stored(sets_of_three):
    """A set whose level changes takes the full path: the level is stored with the round."""
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

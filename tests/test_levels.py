"""Difficulty levels on a real database (SQLite, and PostgreSQL in its pass): `flask difficulty
refresh` rates texts from counted answers only, a text needs enough answers for a level, the home
page offers levels only when there are enough rated texts, and a set of a level draws only texts
of that level the player has not read (passage rules as in normal play)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.extensions import db
from app.game import levels
from app.models import Example, GameSet, Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import answer, finish, start_http

ROUND_RE = re.compile(r"/play/round/(\d+)")
# Of eleven readers, how many find the boundary of each kind of text exactly.
HITS = {"easy": 10, "medium": 5, "hard": 1}


@pytest.fixture
def rated(app_with):
    """Fifteen news texts, five of each kind, answered by eleven players; one text with only
    three answers; every text of passage "shared-hard" is hard."""
    app = app_with(SET_SIZE=3, LEVEL_MIN_ANSWERS=10)
    with app.app_context():
        kinds = {}
        for kind in HITS:
            for i in range(5):
                passage = "shared-hard" if (kind, i) == ("hard", 0) else None
                example = factories.example(boundary=3, passage=passage)
                kinds[example.id] = kind
        few = factories.example(boundary=3)
        readers = [factories.player() for _ in range(11)]
        for example_id, kind in kinds.items():
            example = db.session.get(Example, example_id)
            for number, reader in enumerate(readers):
                answer(reader, example, 3 if number < HITS[kind] else 5)
        for reader in readers[:3]:
            answer(reader, few, 5)
        app.kinds = kinds
        app.few_id = few.id
    return app


def refresh(app, *args: str) -> str:
    result = app.test_cli_runner().invoke(args=["difficulty", "refresh", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_refresh_rates_texts_by_how_players_did(rated):
    output = refresh(rated)
    assert "Fitted 16 text(s) on 168 counted answer(s)." in output
    assert "Rated (at least 10 answers): 5 easy, 5 medium, 5 hard." in output
    with rated.app_context():
        stored = {e.id: e for e in db.session.scalars(select(Example))}
        for example_id, kind in rated.kinds.items():
            assert stored[example_id].level == kind
        few = stored[rated.few_id]
        # Three misses: estimated harder than average, but no level with three answers.
        assert few.level is None and few.difficulty is not None and few.difficulty > 0
        hard = [stored[i].difficulty for i, k in rated.kinds.items() if k == "hard"]
        easy = [stored[i].difficulty for i, k in rated.kinds.items() if k == "easy"]
        assert min(hard) > max(easy)
    # The threshold is the operator's: with four answers needed, nothing changes (three < 4).
    assert "5 easy, 5 medium, 5 hard" in refresh(rated, "--min-answers", "4")
    counts = re.search(
        r"(\d+) easy, (\d+) medium, (\d+) hard", refresh(rated, "--min-answers", "3")
    ).groups()
    assert sum(map(int, counts)) == 16


def test_uncounted_answers_say_nothing_about_a_text(rated):
    with rated.app_context():
        easy = [i for i, k in rated.kinds.items() if k == "easy"]
        # A second identity's replays of an easy text (all uncounted) leave too few answers.
        rounds_of = db.session.scalars(select(Round).where(Round.example_id == easy[0])).all()
        for round_ in rounds_of[:5]:
            round_.uncounted = "truth_seen_device"
        db.session.commit()
    output = refresh(rated)
    assert "on 163 counted answer(s)" in output
    with rated.app_context():
        assert db.session.get(Example, easy[0]).level is None


def test_a_set_of_a_level_draws_only_that_level_and_unread_passages(rated):
    refresh(rated)
    with rated.app_context():
        # A variant of the shared hard passage (not rated), which our player reads first.
        variant_id = factories.example(boundary=4, passage="shared-hard").id
    client = rated.test_client()
    token = csrf_token(client)
    served = []

    def play(level: str) -> None:
        started = client.post(
            "/play", data={"csrf_token": token, "category": "news", "level": level}
        )
        assert started.status_code == 302, started.get_data(as_text=True)[-400:]
        round_id = int(ROUND_RE.search(started.headers["Location"]).group(1))
        page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
        assert f"News · {level.capitalize()}" in page
        with rated.app_context():
            round_ = db.session.get(Round, round_id)
            served.append((round_.example_id, level))
            finish(round_.player, round_, 2)
            if len(served) == 1:
                answer(round_.player, db.session.get(Example, variant_id), 2)

    play("easy")
    for _ in range(4):
        play("hard")
    with rated.app_context():
        stored = {e.id: e for e in db.session.scalars(select(Example))}
        assert all(stored[i].level == level for i, level in served)
        shared = next(
            i
            for i, e in stored.items()
            if e.source.get("doc_id") == "shared-hard" and i != variant_id
        )
        hard = [i for i, level in served if level == "hard"]
        assert shared not in hard and len(set(hard)) == 4
        # The level stays with the set: its "Next text" draws from it too.
        game_set = db.session.scalars(select(GameSet).order_by(GameSet.id.desc())).first()
        assert game_set.level == "hard"
    # Every hard text this player may read is read: a kind 409 names the level.
    done = client.post("/play", data={"csrf_token": token, "category": "news", "level": "hard"})
    assert done.status_code == 409
    assert "You have read every hard text in News" in done.get_data(as_text=True)
    home = client.get("/").get_data(as_text=True)
    assert re.search(r'value="hard" class="choice" disabled', home)
    # "Any level" clears it.
    anything = client.post("/play", data={"csrf_token": token, "category": "news", "level": "any"})
    assert anything.status_code == 302
    with rated.app_context():
        assert db.session.scalars(select(GameSet).order_by(GameSet.id.desc())).first().level is None


def test_home_offers_levels_only_when_enough_texts_are_rated(rated):
    client = rated.test_client()
    token = csrf_token(client)
    start_http(client, token)
    home = client.get("/").get_data(as_text=True)
    assert "Easy, medium and hard sets open once enough texts in News have 10 answers" in home
    assert 'name="level"' not in home
    refresh(rated)
    home = client.get("/").get_data(as_text=True)
    assert 'name="level" value="easy"' in home and 'name="level" value="hard"' in home
    assert "5 texts new to you" in home
    # A level that does not exist is a clear 400, not a 500.
    bad = client.post("/play", data={"csrf_token": token, "category": "news", "level": "extreme"})
    assert bad.status_code == 400 and "easy, medium or hard" in bad.get_data(as_text=True)
    # Too few rated texts in the category for a set of each level: no levels offered.
    refresh(rated, "--min-answers", "12")
    home = client.get("/").get_data(as_text=True)
    assert 'name="level"' not in home


def test_offer_counts_what_the_player_may_still_read(rated):
    refresh(rated)
    with rated.app_context():
        player = factories.player()
        offer = levels.offer(player, "news")
        assert offer.open and [c.left for c in offer.choices] == [5, 5, 5]
        hard = next(i for i, k in rated.kinds.items() if k == "hard")
        answer(player, db.session.get(Example, hard), 3)
        offer = levels.offer(player, "news")
        assert [c.left for c in offer.choices] == [5, 5, 4]
        assert levels.offer(None, "random").choices[0].rated == 5
        with pytest.raises(levels.BadRequest):
            levels.parse("extreme")

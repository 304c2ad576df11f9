"""Deleting an account (confirmed with the password) erases it, its explanations and survey;
its rounds stay only as anonymous research rows with consent; boards and counts stay consistent.
"Download my data" gives everything, and nothing about a round still in play."""

from __future__ import annotations

import json
from collections import Counter

from sqlalchemy import func, select

from app.extensions import db
from app.leaderboard import standings
from app.models import (
    BoardTotal,
    Example,
    LoginFailure,
    Player,
    PlayerSurvey,
    PlayerTotal,
    Round,
    TruthView,
)
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import answer_http, reveal_http
from tests.security.helpers import PASSWORD, post_form
from tests.test_accounts import login, signup
from tests.test_game_http import start
from tests.test_leaderboard import counts_from_totals, play, stored_counts


def _play_two_rounds(client) -> None:
    token = csrf_token(client)
    for _ in range(2):
        round_id = start(client)
        reveal_http(client, token, round_id, 1)
        answer_http(client, token, round_id, 2, reasons="grammar", explanation="My secret thought")


def _setup(app, client, consent: bool) -> int:
    with app.app_context():
        for _ in range(3):
            factories.example(boundary=1)
        play(factories.player("bob"), "news", 1)  # another player on the same boards and texts
    signup(client, username="ada", consent=consent)
    _play_two_rounds(client)
    post_form(client, "/survey", {"news_familiarity": "3"}, "/survey")
    login(app.test_client(), "ada", "a wrong guess")  # a failure kept under ada's name
    with app.app_context():
        return db.session.scalar(select(Player.id).where(Player.username == "ada"))


def _consistent() -> None:
    assert stored_counts() == counts_from_totals()
    answered = Counter(
        db.session.scalars(
            select(Round.example_id).where(Round.kind == "normal", Round.guess.is_not(None))
        )
    )
    counts = dict(db.session.execute(select(Example.id, Example.annotation_count)).all())
    assert counts == {eid: answered.get(eid, 0) for eid in counts}


def test_deleting_without_consent_erases_everything_and_keeps_the_boards_consistent(app, client):
    ada_id = _setup(app, client, consent=False)
    wrong = post_form(client, "/account/delete", {"password": "not it"}, "/account")
    assert wrong.status_code == 400 and "nothing was deleted" in wrong.text
    done = post_form(client, "/account/delete", {"password": PASSWORD}, "/account")
    assert done.status_code == 302 and client.get("/profile").status_code == 302
    with app.app_context():
        assert db.session.get(Player, ada_id) is None
        assert db.session.scalar(select(func.count()).select_from(Player)) == 1  # bob
        assert db.session.scalar(select(func.count()).select_from(Round)) == 1  # bob's
        assert db.session.scalar(select(func.count()).select_from(PlayerSurvey)) == 0
        assert db.session.scalar(select(func.count()).select_from(LoginFailure)) == 0
        # The truth views stay, without the player: a new account in this browser still cannot
        # score the texts ada saw.
        assert (
            db.session.scalar(
                select(func.count()).select_from(TruthView).where(TruthView.player_id.is_(None))
            )
            == 2
        )
        assert [s.name for s in standings.top(measure="points")] == ["bob"]
        _consistent()
    assert login(client, "ada", PASSWORD).status_code == 401
    assert signup(client, username="ada").status_code == 302  # the name is free again


def test_deleting_with_consent_keeps_rounds_as_an_anonymous_player_without_explanations(
    app, client
):
    ada_id = _setup(app, client, consent=True)
    assert (
        post_form(client, "/account/delete", {"password": PASSWORD}, "/account").status_code == 302
    )
    with app.app_context():
        assert db.session.get(Player, ada_id) is None
        anonymous = db.session.scalars(
            select(Player).where(Player.id != ada_id, Player.username.is_(None))
        ).one()
        assert anonymous.password_hash is None and anonymous.research_consent_at is not None
        kept = db.session.scalars(select(Round).where(Round.player_id == anonymous.id)).all()
        assert len(kept) == 2 and all(r.explanation == "" for r in kept)
        assert [r.reasons for r in kept] == [["grammar"], ["grammar"]]
        assert db.session.get(PlayerTotal, anonymous.id).rounds == 2
        assert all(
            not row.listed
            for row in db.session.scalars(
                select(BoardTotal).where(BoardTotal.player_id == anonymous.id)
            )
        )
        assert db.session.scalar(select(func.count()).select_from(PlayerSurvey)) == 0
        assert [s.name for s in standings.top(measure="points")] == ["bob"]
        _consistent()


def test_crowd_workers_and_guests(app, client):
    with app.app_context():
        factories.example(boundary=1)
    start(client)  # a guest
    assert "Delete my account" in client.get("/account").text
    refused = post_form(client, "/account/delete", {}, "/account")
    assert refused.status_code == 400 and "Tick the box" in refused.text
    assert post_form(client, "/account/delete", {"confirm": "yes"}, "/account").status_code == 302
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Player)) == 0
        crowd = factories.player()
        crowd.kind = "crowd"
        db.session.commit()
        from app.accounts import lifecycle
        from app.errors import Forbidden

        try:
            lifecycle.delete_account(crowd, confirmed=True)
        except Forbidden as refused_crowd:
            assert "researcher" in refused_crowd.message
        else:
            raise AssertionError("a crowd worker deleted their study data")


def test_download_my_data_has_everything_and_nothing_about_a_round_in_play(app, client):
    _setup(app, client, consent=True)
    open_round = start(client)
    response = client.get("/account/data.json")
    assert response.status_code == 200
    assert "attachment" in response.headers["Content-Disposition"]
    data = json.loads(response.text)
    assert data["account"]["username"] == "ada"
    assert [r.get("explanation") for r in data["rounds"]][:2] == ["My secret thought"] * 2
    assert data["explanations"][0]["explanation"] == "My secret thought"
    assert data["survey"]["news_familiarity"] == 3 and data["votes"] == []
    in_play = data["rounds"][-1]
    with app.app_context():
        example = db.session.get(Round, open_round).example
        shown = {"order", "kind", "category", "started_at", "sentences_revealed", "set_id"}
        assert set(in_play) == shown | {"reveals"}
        assert [r["sentence"] for r in in_play["reveals"]] == [1]
        assert example.external_id not in json.dumps(in_play)
    assert app.test_client().get("/account/data.json").status_code == 302  # login required

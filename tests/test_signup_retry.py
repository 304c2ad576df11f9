"""A guest's sign-up that PostgreSQL aborts as a deadlock's victim is run again, over HTTP.

Signing up puts the guest's board rows on the boards in the same transaction as the player's
row; a concurrent transaction of the same player (an answer in another tab) can hold one of those
board rows and then want the player's row. PostgreSQL breaks such a deadlock by aborting one
side: when that is the sign-up, it is rolled back and run again instead of answering 503.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import BoardTotal, Player
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import reveal_http
from tests.test_accounts import signup
from tests.test_answer_deadlock import act_as_deadlock_victim
from tests.test_game_http import client_answer, start


def test_sign_up_aborted_as_a_deadlock_victim_is_retried_and_the_guest_keeps_everything(
    app, client
):
    with app.app_context():
        if db.engine.dialect.name != "postgresql":
            pytest.skip("row locks and deadlock detection are PostgreSQL's (SQLite has one writer)")
        factories.example(boundary=1)
    round_id = start(client)
    token = csrf_token(client)
    reveal_http(client, token, round_id, 1)
    client_answer(client, round_id, token, seen=2)  # the boundary: 5 points
    with app.app_context():
        guest_id = db.session.scalar(select(Player.id))
        boards = db.session.scalars(select(BoardTotal).where(BoardTotal.player_id == guest_id))
        assert [row.listed for row in boards] == [False] * 6  # a guest is on no board

    # The rival holds one of the guest's board rows, which the sign-up moves onto the boards,
    # then asks for the player's row, which the sign-up's UPDATE holds.
    response, seen, retried = act_as_deadlock_victim(
        app,
        "SELECT 1 FROM board_totals WHERE player_id = :id AND period = 'all' AND scope = 0 "
        "FOR UPDATE",
        "SELECT username FROM players WHERE id = :id FOR UPDATE",
        {"id": guest_id},
        lambda: signup(client, username="grace"),
    )

    assert response.status_code == 302, response.get_data(as_text=True)[:500]
    assert seen == [None]  # the rival saw the guest, before the retry
    assert retried == [f"sign-up of guest {guest_id} retried (attempt 1 failed with 40P01)"]
    with app.app_context():
        players = db.session.scalars(select(Player)).all()
        assert [(p.id, p.username, p.is_guest) for p in players] == [(guest_id, "grace", False)]
        boards = db.session.scalars(select(BoardTotal).where(BoardTotal.player_id == guest_id))
        assert sorted((row.listed, row.points) for row in boards) == [(True, 5)] * 6
    assert "grace" in client.get("/").get_data(as_text=True)

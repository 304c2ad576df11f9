"""Concurrent answers to one round store exactly one answer (SQLite WAL and PostgreSQL)."""

from __future__ import annotations

import threading

from sqlalchemy import func, select

from app.extensions import db
from app.game import answers, reveals
from app.models import Example, Player, PlayerTotal, Round
from tests import factories

THREADS = 4
ROUNDS = 6


def test_simultaneous_machine_submissions_store_one_answer(app):
    with app.app_context():
        for _ in range(ROUNDS):
            factories.example(boundary=2)
        player_id = factories.player("ada").id
    outcomes: list[str] = []
    lock = threading.Lock()

    for _ in range(ROUNDS):
        with app.app_context():
            player = db.session.get(Player, player_id)
            round_ = factories.started(player, "news")
            reveals.reveal_next(player, round_.id, 1)
            reveals.reveal_next(player, round_.id, 2)
            round_id = round_.id
        barrier = threading.Barrier(THREADS)

        def submit(reason: str, round_id=round_id, barrier=barrier):
            with app.app_context():
                player = db.session.get(Player, player_id)
                answer = answers.parse_answer("machine", 3, [reason], "")
                barrier.wait()
                try:
                    answers.submit_answer(player, round_id, answer)
                    result = "stored"
                except answers.AlreadyAnswered:
                    result = "already"
                finally:
                    db.session.remove()
                with lock:
                    outcomes.append(result)

        reasons = ["grammar", "repetition", "generic", "irrelevant"]
        threads = [threading.Thread(target=submit, args=(reasons[i],)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)

    assert outcomes.count("stored") == ROUNDS
    assert outcomes.count("already") == ROUNDS * (THREADS - 1)
    with app.app_context():
        answered = db.session.scalars(select(Round).where(Round.guess.is_not(None))).all()
        assert len(answered) == ROUNDS
        assert all(len(r.reasons) == 1 for r in answered)
        total = db.session.get(PlayerTotal, player_id)
        assert total.rounds == ROUNDS
        assert total.points == db.session.scalar(select(func.sum(Round.points)))
        assert db.session.scalar(select(func.sum(Example.annotation_count))) == ROUNDS

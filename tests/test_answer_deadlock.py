"""Concurrent answers on PostgreSQL: the board counts' locks, and the answer's retry.

An answer moves its board counts (`board_counts`, one row per board and value) in one statement
in key order. An answer that also takes its player off the boards (an implausible record) used
to move the counts a second time, for every board row of the player, after holding the first
set: a count of another category, low in the order, then waited on a concurrent answer that held
it and waited on a count the first answer held (PostgreSQL: "deadlock detected", the request
answered 503). The first test makes that interleaving happen every time; the others check that
an answer aborted by PostgreSQL as a deadlock's victim is run again and stored once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import event, select, text, update

from app.extensions import db
from app.game import rounds
from app.game.scoring import Verdict
from app.leaderboard import fairness, standings
from app.models import BoardTotal, Example, Player, PlayerTotal, Round
from app.models.base import utcnow
from tests import factories
from tests.conftest import csrf_token
from tests.test_game_http import client_answer, reveal, start
from tests.test_leaderboard import counts_from_totals, stored_counts

WAIT = 10  # seconds any thread waits for the other before giving up (the test then fails)


def _postgres_only() -> None:
    if db.engine.dialect.name != "postgresql":
        pytest.skip("row locks and deadlock detection are PostgreSQL's (SQLite has one writer)")


def _open_round(player: Player, example: Example, seen: int = 3) -> int:
    """A round of `example` read to sentence `seen` (answering "machine" flags index seen-1)."""
    round_ = rounds.create_round(player, example, example.category.slug)
    while round_.revealed < seen:
        rounds.reveal_next(player, round_.id, round_.revealed)
    return round_.id


class RetryLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        if "retried" in record.getMessage():
            self.messages.append(record.getMessage())


def _wait_for_lock_wait(pids: dict[str, int]) -> bool:
    """Poll until the backend in `pids["bob"]` waits on a lock (or WAIT passes)."""
    deadline = time.monotonic() + WAIT
    with db.engine.connect() as watch:
        while time.monotonic() < deadline:
            pid = pids.get("bob")
            if pid is not None:
                # Activity is read once per transaction unless its snapshot is cleared.
                watch.execute(text("SELECT pg_stat_clear_snapshot()"))
                waiting = watch.scalar(
                    text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid"),
                    {"pid": pid},
                )
                if waiting == "Lock":
                    return True
            time.sleep(0.01)
    return False


def test_answer_that_unlists_does_not_deadlock_with_an_answer_sharing_counts(app):
    """Ada's answer makes her record implausible (fast rounds): her rows leave the boards in the
    same transaction, including her all-time row in "stories". Bob answers in "stories" at the
    same moment; their all-time "stories" rows and their new monthly/weekly overall rows share
    counts. Bob's answer is let in right after Ada's counts moved and holds its first counts
    until Ada goes on, which is the interleaving that deadlocked when unlisting moved the counts
    in a second statement."""
    with app.app_context():
        _postgres_only()
        news = factories.example(boundary=2, category_slug="news")
        story = factories.example(boundary=2, category_slug="stories")
        factories.example(boundary=2, category_slug="poems")
        ada, bob = factories.player("ada"), factories.player("bob")
        ids = {"news": news.category_id, "stories": story.category_id}
        poems = factories.category("poems").id
        # A year ago (all-time boards only): both 3 points in "stories"; Bob 4 more in "poems",
        # so that their all-time overall rows (3 and 7) share no count.
        last_year = utcnow() - timedelta(days=400)
        standings.record_answer(ada.id, ids["stories"], Verdict(3, 1, ""), when=last_year)
        standings.record_answer(bob.id, ids["stories"], Verdict(3, 1, ""), when=last_year)
        standings.record_answer(bob.id, poems, Verdict(4, 1, ""), when=last_year)
        # One more fast round makes Ada's record implausible (more than half of them fast).
        db.session.execute(
            update(PlayerTotal)
            .where(PlayerTotal.player_id == ada.id)
            .values(rounds=fairness.JUDGE_AFTER - 1, fast_rounds=fairness.JUDGE_AFTER - 1)
        )
        db.session.commit()
        ada_round = _open_round(ada, news)
        bob_round = _open_round(bob, story)
        player_ids = {"ada": ada.id, "bob": bob.id}
        round_ids = {"ada": ada_round, "bob": bob_round}

    roles: dict[int, str] = {}
    pids: dict[str, int] = {}
    ada_counted = threading.Event()
    ada_waited: list[bool] = []
    bob_blocked: list[bool] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        role = roles.get(threading.get_ident())
        if role == "bob" and statement.startswith("INSERT INTO board_counts"):
            pids["bob"] = cursor.connection.info.backend_pid
            assert ada_counted.wait(WAIT), "Ada's answer never moved its counts"
        elif role == "ada" and ada_counted.is_set() and not ada_waited:
            ada_waited.append(True)
            bob_blocked.append(_wait_for_lock_wait(pids))

    def after(conn, cursor, statement, parameters, context, executemany):
        if roles.get(threading.get_ident()) == "ada" and statement.startswith(
            "INSERT INTO board_counts"
        ):
            ada_counted.set()

    outcomes: dict[str, str] = {}
    retries = RetryLog()

    def answer(name: str) -> None:
        roles[threading.get_ident()] = name
        with app.app_context():
            try:
                player = db.session.get(Player, player_ids[name])
                parsed = rounds.parse_answer("machine", 3, ["generic"], "")
                rounds.submit_answer(player, round_ids[name], parsed)
                outcomes[name] = "stored"
            except Exception as error:  # the test reports what failed
                outcomes[name] = repr(error)
                db.session.rollback()
            finally:
                db.session.remove()

    with app.app_context():
        engine = db.engine
        event.listen(engine, "before_cursor_execute", before)
        event.listen(engine, "after_cursor_execute", after)
    app.logger.addHandler(retries)
    try:
        threads = [threading.Thread(target=answer, args=(name,)) for name in ("ada", "bob")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        app.logger.removeHandler(retries)
        event.remove(engine, "before_cursor_execute", before)
        event.remove(engine, "after_cursor_execute", after)

    assert outcomes == {"ada": "stored", "bob": "stored"}
    assert retries.messages == []
    # The interleaving happened: Bob's counts waited on Ada's transaction while she went on.
    assert bob_blocked == [True]
    with app.app_context():
        ada = db.session.get(Player, player_ids["ada"])
        assert ada.unlisted_at is not None and ada.unlisted_reason
        assert not db.session.scalar(
            select(BoardTotal.listed).where(BoardTotal.player_id == ada.id).limit(1)
        )
        assert stored_counts() == counts_from_totals()


def _round_state(round_id: int) -> tuple:
    round_ = db.session.get(Round, round_id)
    return round_.guess, round_.points


def test_answer_aborted_as_a_deadlock_victim_is_retried_and_stored_once(client, app):
    """A second connection holds the count the answer needs, then asks for the answer's round:
    PostgreSQL aborts the answer (its wait came first, so its deadlock check runs first). The
    answer runs again, once the other transaction has let go, and is stored once, over HTTP."""
    with app.app_context():
        _postgres_only()
        example = factories.example(boundary=2, category_slug="news")
        rival = factories.player("rival")
        standings.record_answer(rival.id, example.category_id, Verdict(5, 0, ""))
        db.session.commit()
        key = {"period": "all", "scope": example.category_id, "measure": "points", "value": 5}
    round_id = start(client)
    token = csrf_token(client, f"/play/round/{round_id}")
    for seen in (1, 2):  # read on to sentence 3, the boundary: 5 points, like the rival
        assert reveal(client, round_id, seen, token).status_code in (200, 302, 303)
    with app.app_context():
        player_id = db.session.get(Round, round_id).player_id
        # Only a named player is on the boards (and so moves the counts).
        player = db.session.get(Player, player_id)
        player.username, player.is_guest = "ada", False
        db.session.commit()

    holding = threading.Event()
    seen: dict[str, object] = {}

    def rival_transaction() -> None:
        with app.app_context(), db.engine.connect() as conn:
            # Its own deadlock check waits long, so that the answer is the one aborted.
            conn.execute(text("SET LOCAL deadlock_timeout = '20s'"))
            conn.execute(
                text(
                    "SELECT players FROM board_counts WHERE period = :period AND "
                    "scope = :scope AND measure = :measure AND value = :value FOR UPDATE"
                ),
                key,
            )
            holding.set()
            # Wait until the answer waits on the count, then ask for its round.
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                conn.execute(text("SELECT pg_stat_clear_snapshot()"))
                waiting = conn.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND datname = current_database() AND pid <> pg_backend_pid()"
                    )
                )
                if waiting:
                    break
                time.sleep(0.01)
            # The answer's transaction has the round locked (its UPDATE): this waits until
            # PostgreSQL aborts the answer, whose first attempt then left the round open.
            seen["guess"] = conn.scalar(
                text("SELECT guess FROM rounds WHERE id = :id FOR UPDATE"), {"id": round_id}
            )
            conn.rollback()

    retries = RetryLog()
    app.logger.addHandler(retries)
    rival_thread = threading.Thread(target=rival_transaction)
    rival_thread.start()
    try:
        assert holding.wait(WAIT)
        response = client_answer(client, round_id, token, 3)
    finally:
        rival_thread.join(timeout=60)
        app.logger.removeHandler(retries)

    assert response.status_code in (200, 302, 303), response.get_data(as_text=True)[:500]
    assert seen == {"guess": None}  # the rival got the round only after the first attempt died
    assert len(retries.messages) == 1 and "40P01" in retries.messages[0]
    with app.app_context():
        assert _round_state(round_id) == (2, 5)
        total = db.session.get(PlayerTotal, player_id)
        assert (total.rounds, total.points, total.exact) == (1, 5, 1)
        rows = db.session.scalars(select(BoardTotal).where(BoardTotal.player_id == player_id))
        assert sorted((row.rounds, row.points) for row in rows) == [(1, 5)] * 6
        assert db.session.get(Example, example.id).annotation_count == 1
        assert stored_counts() == counts_from_totals()
        assert stored_counts()["all", example.category_id, "points", 5] == 2


CATEGORIES = ("news", "stories", "poems", "recipes")
JITTER = 0.03  # seconds


def test_many_concurrent_answers_some_unlisting_store_every_answer(app):
    """Waves of players answer at once (a barrier), every other one with a record that the
    answer makes implausible; their all-time rows in every category share counts a year old,
    their new rows this week's. A random pause of up to JITTER before each statement on the
    boards lets the answers interleave there as under load. Every answer is stored, none
    retried, and the counts match the rows."""
    waves, per_wave = 6, 12
    with app.app_context():
        _postgres_only()
        examples = {slug: factories.example(boundary=2, category_slug=slug) for slug in CATEGORIES}
        last_year = utcnow() - timedelta(days=400)
        values = random.Random(11)
        planned = []
        for wave in range(waves):
            batch = []
            for index in range(per_wave):
                player = factories.player(f"p{wave}x{index}")
                for slug in CATEGORIES:
                    # Few values per category (shared counts), sums spread over more values.
                    points = values.randint(2, 4)
                    standings.record_answer(
                        player.id,
                        examples[slug].category_id,
                        Verdict(points, 1, ""),
                        when=last_year,
                    )
                if index % 2 == 0:
                    db.session.execute(
                        update(PlayerTotal)
                        .where(PlayerTotal.player_id == player.id)
                        .values(rounds=fairness.JUDGE_AFTER - 1, fast_rounds=fairness.JUDGE_AFTER)
                    )
                db.session.commit()
                example = examples[CATEGORIES[(index * 3 + wave) % len(CATEGORIES)]]
                batch.append((player.id, _open_round(player, example)))
            planned.append(batch)

    outcomes: list[str] = []
    retries = RetryLog()
    jitter = random.Random(7)

    def pause(conn, cursor, statement, parameters, context, executemany):
        if statement.startswith(("INSERT INTO board_counts", "UPDATE board_totals")):
            time.sleep(jitter.uniform(0, JITTER))

    def answer(player_id: int, round_id: int, barrier: threading.Barrier) -> None:
        with app.app_context():
            try:
                player = db.session.get(Player, player_id)
                parsed = rounds.parse_answer("machine", 3, ["generic"], "")
                barrier.wait(WAIT)
                rounds.submit_answer(player, round_id, parsed)
                outcomes.append("stored")
            except Exception as error:  # the test reports what failed
                outcomes.append(repr(error)[:300])
                db.session.rollback()
            finally:
                db.session.remove()

    with app.app_context():
        engine = db.engine
        event.listen(engine, "before_cursor_execute", pause)
    app.logger.addHandler(retries)
    try:
        for batch in planned:
            barrier = threading.Barrier(len(batch))
            threads = [
                threading.Thread(target=answer, args=(player_id, round_id, barrier))
                for player_id, round_id in batch
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
    finally:
        app.logger.removeHandler(retries)
        event.remove(engine, "before_cursor_execute", pause)

    assert [outcome for outcome in outcomes if outcome != "stored"] == []
    assert len(outcomes) == waves * per_wave
    assert retries.messages == []
    with app.app_context():
        unlisted = db.session.scalars(select(Player).where(Player.unlisted_at.is_not(None))).all()
        assert len(unlisted) == waves * per_wave // 2
        assert stored_counts() == counts_from_totals()

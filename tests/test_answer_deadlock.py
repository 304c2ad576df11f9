"""Concurrent answers on PostgreSQL: the board counts take no lock, and the answer's retry.

An answer used to update its board counts (`board_counts`, one row per board and value) in place,
holding the rows until its commit: answers sharing a count queued on each other, and an answer
that also took its player off the boards (an implausible record), moving counts a second time,
could deadlock with a concurrent answer ("deadlock detected", the request answered 503). Now
every writer appends its changes to `board_count_deltas` and a fold adds them into the counts
(app/models/standings.py): the first test holds an unlisting answer open after its counts moved
and checks that an answer sharing those counts goes through meanwhile. The others check that an
answer aborted by PostgreSQL as a deadlock's victim is run again and stored once, and that waves
of concurrent answers, unlistings, sign-ups and folds leave the counts equal to a recount.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import pytest
from sqlalchemy import event, select, text, update

from app.extensions import db
from app.game import answers, reveals
from app.game.scoring import Verdict
from app.leaderboard import fairness, recording
from app.models import BoardTotal, Example, Player, PlayerTotal, Round
from app.models.base import utcnow
from tests import factories
from tests.conftest import csrf_token
from tests.test_game_http import client_answer, reveal, start
from tests.test_leaderboard import counts_from_totals, folded_counts, stored_counts

T = TypeVar("T")
WAIT = 10  # seconds any thread waits for the other before giving up (the test then fails)
DELTAS = "INSERT INTO board_count_deltas"


def wait_until_another_waits(conn) -> None:
    """Poll, on `conn`, until another backend of this database waits on a lock (or WAIT passes)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        # Activity is read once per transaction unless its snapshot is cleared.
        conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        waiting = conn.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
        if waiting:
            return
        time.sleep(0.01)


def _postgres_only() -> None:
    if db.engine.dialect.name != "postgresql":
        pytest.skip("row locks and deadlock detection are PostgreSQL's (SQLite has one writer)")


def _open_round(player: Player, example: Example, seen: int = 3) -> int:
    """A round of `example` read to sentence `seen` (answering "machine" flags index seen-1)."""
    round_ = factories.round_of(player, example, example.category.slug)
    while round_.revealed < seen:
        reveals.reveal_next(player, round_.id, round_.revealed)
    return round_.id


class MessageLog(logging.Handler):
    """The messages from `level` up that contain `word`."""

    def __init__(self, level: int, word: str):
        super().__init__(level)
        self.word, self.messages = word, []

    def emit(self, record):
        if self.word in record.getMessage():
            self.messages.append(record.getMessage())


def test_an_answer_sharing_counts_goes_through_while_an_unlisting_answer_is_open(app):
    """Ada's answer makes her record implausible (fast rounds): her rows leave the boards in the
    same transaction, including her all-time row in "stories". Bob answers in "stories": their
    all-time "stories" rows and their new monthly and weekly overall rows share counts. Ada's
    transaction is held open right after her counts moved until Bob's answer is stored: when the
    counts were updated in place, Bob waited there on Ada's row locks (and, with her second move
    of counts, deadlocked); appended, his answer does not wait on hers at all."""
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
        recording.record_answer(ada.id, ids["stories"], Verdict(3, 1, ""), when=last_year)
        recording.record_answer(bob.id, ids["stories"], Verdict(3, 1, ""), when=last_year)
        recording.record_answer(bob.id, poems, Verdict(4, 1, ""), when=last_year)
        # One more fast round makes Ada's record implausible (more than half of them fast).
        db.session.execute(
            update(PlayerTotal)
            .where(PlayerTotal.player_id == ada.id)
            .values(rounds=fairness.JUDGE_AFTER - 1, fast_rounds=fairness.JUDGE_AFTER - 1)
        )
        db.session.commit()
        # Folded: the shared counts are rows of `board_counts` that the answers change.
        folded_counts()
        ada_round = _open_round(ada, news)
        bob_round = _open_round(bob, story)
        player_ids = {"ada": ada.id, "bob": bob.id}
        round_ids = {"ada": ada_round, "bob": bob_round}

    roles: dict[int, str] = {}
    ada_counted = threading.Event()
    bob_done = threading.Event()
    bob_while_ada_open: list[bool] = []

    def after(conn, cursor, statement, parameters, context, executemany):
        if roles.get(threading.get_ident()) == "ada" and statement.startswith(DELTAS):
            ada_counted.set()
            # Ada's transaction stays open, her counts moved, until Bob's answer is stored.
            bob_while_ada_open.append(bob_done.wait(WAIT))

    outcomes: dict[str, str] = {}
    retries = MessageLog(logging.WARNING, "retried")

    def answer(name: str) -> None:
        roles[threading.get_ident()] = name
        with app.app_context():
            try:
                player = db.session.get(Player, player_ids[name])
                parsed = answers.parse_answer("machine", 3, ["generic"], "")
                if name == "bob":
                    assert ada_counted.wait(WAIT), "Ada's answer never moved its counts"
                answers.submit_answer(player, round_ids[name], parsed)
                outcomes[name] = "stored"
            except Exception as error:  # the test reports what failed
                outcomes[name] = repr(error)
                db.session.rollback()
            finally:
                if name == "bob":
                    bob_done.set()
                db.session.remove()

    with app.app_context():
        engine = db.engine
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
        event.remove(engine, "after_cursor_execute", after)

    assert outcomes == {"ada": "stored", "bob": "stored"}
    assert retries.messages == []
    # Bob's answer was stored while Ada's transaction held her counts' changes.
    assert bob_while_ada_open == [True]
    with app.app_context():
        ada = db.session.get(Player, player_ids["ada"])
        assert ada.unlisted_at is not None and ada.unlisted_reason
        assert not db.session.scalar(
            select(BoardTotal.listed).where(BoardTotal.player_id == ada.id).limit(1)
        )
        assert stored_counts() == counts_from_totals()
        assert folded_counts() == counts_from_totals()


def _round_state(round_id: int) -> tuple:
    round_ = db.session.get(Round, round_id)
    return round_.guess, round_.points


def act_as_deadlock_victim(app, hold: str, then: str, params: dict, act: Callable[[], T]):
    """Run `act` (a request) while a rival transaction makes it a deadlock's victim: the rival
    locks the row of `hold` (a `SELECT ... FOR UPDATE`), waits until `act`'s transaction waits on
    it, then asks for the row of `then`, which `act` holds. PostgreSQL aborts `act`'s transaction
    (the rival's own deadlock check waits 20 s, so it is not the one aborted).

    Returns what `act` returned, what the rival's `then` read (the row as the aborted first
    attempt left it) and the "retried" warnings logged meanwhile.
    """
    holding = threading.Event()
    seen: list[object] = []

    def rival_transaction() -> None:
        with app.app_context(), db.engine.connect() as conn:
            conn.execute(text("SET LOCAL deadlock_timeout = '20s'"))
            conn.execute(text(hold), params)
            holding.set()
            wait_until_another_waits(conn)
            seen.append(conn.scalar(text(then), params))
            conn.rollback()

    retries = MessageLog(logging.WARNING, "retried")
    app.logger.addHandler(retries)
    rival = threading.Thread(target=rival_transaction)
    rival.start()
    try:
        assert holding.wait(WAIT)
        result = act()
    finally:
        rival.join(timeout=60)
        app.logger.removeHandler(retries)
    return result, seen, retries.messages


def test_answer_aborted_as_a_deadlock_victim_is_retried_and_stored_once(client, app):
    """A second connection holds the player's statistics row, which the answer updates after
    its round, then asks for the answer's round: PostgreSQL aborts the answer (its wait came
    first, so its deadlock check runs first). The answer runs again, once the other transaction
    has let go, and is stored once, over HTTP. (This test held a board count until counts were
    appended instead of updated: an answer no longer waits on a count.)"""
    with app.app_context():
        _postgres_only()
        example = factories.example(boundary=2, category_slug="news")
        rival = factories.player("rival")
        recording.record_answer(rival.id, example.category_id, Verdict(5, 0, ""))
        db.session.commit()
        example_id, category_id = example.id, example.category_id
    round_id = start(client)
    token = csrf_token(client, f"/play/round/{round_id}")
    for seen in (1, 2):  # read on to sentence 3, the boundary: 5 points, like the rival
        assert reveal(client, round_id, seen, token).status_code in (200, 302, 303)
    with app.app_context():
        player_id = db.session.get(Round, round_id).player_id
        # Only a named player is on the boards (and so moves the counts).
        player = db.session.get(Player, player_id)
        player.username, player.is_guest = "ada", False
        # A statistics row (with nothing in it yet) for the rival to lock.
        db.session.add(PlayerTotal(player_id=player_id))
        db.session.commit()

    # The rival holds the player's statistics row, which the answer waits for, then asks for
    # the answer's round, which the answer's UPDATE holds.
    response, seen, retried = act_as_deadlock_victim(
        app,
        "SELECT rounds FROM player_totals WHERE player_id = :player FOR UPDATE",
        "SELECT guess FROM rounds WHERE id = :round FOR UPDATE",
        {"player": player_id, "round": round_id},
        lambda: client_answer(client, round_id, token, 3),
    )

    assert response.status_code in (200, 302, 303), response.get_data(as_text=True)[:500]
    assert seen == [None]  # the rival got the round only after the first attempt died
    assert len(retried) == 1 and "40P01" in retried[0]
    with app.app_context():
        assert _round_state(round_id) == (2, 5)
        total = db.session.get(PlayerTotal, player_id)
        assert (total.rounds, total.points, total.exact) == (1, 5, 1)
        rows = db.session.scalars(select(BoardTotal).where(BoardTotal.player_id == player_id))
        assert sorted((row.rounds, row.points) for row in rows) == [(1, 5)] * 6
        assert db.session.get(Example, example_id).annotation_count == 1
        assert stored_counts() == counts_from_totals()
        assert stored_counts()["all", category_id, "points", 5] == 2


CATEGORIES = ("news", "stories", "poems", "recipes")
JITTER = 0.03  # seconds


def test_many_concurrent_answers_sign_ups_and_folds_keep_the_counts_exact(app):
    """Waves of players answer at once (a barrier), every other one with a record that the
    answer makes implausible, while guests with rounds sign up and folds run (every 17th delta
    folds after its answer's commit, and one more fold per wave on its own); their all-time rows
    in every category share counts a year old, their new rows this week's. A random pause of up
    to JITTER before each statement on the boards lets them interleave there as under load.
    Every answer and sign-up is stored, none retried, no fold fails, and the counts plus the
    deltas match a recount of the board rows, as do the counts alone after a last fold."""
    waves, per_wave, guests_per_wave = 6, 12, 3
    app.config["BOARD_FOLD_EVERY"] = 17
    with app.app_context():
        _postgres_only()
        examples = {slug: factories.example(boundary=2, category_slug=slug) for slug in CATEGORIES}
        last_year = utcnow() - timedelta(days=400)
        values = random.Random(11)
        planned = []
        for wave in range(waves):
            batch, guests = [], []
            for index in range(per_wave + guests_per_wave):
                guest = index >= per_wave
                player = factories.player(None if guest else f"p{wave}x{index}")
                for slug in CATEGORIES:
                    # Few values per category (shared counts), sums spread over more values.
                    points = values.randint(2, 4)
                    recording.record_answer(
                        player.id,
                        examples[slug].category_id,
                        Verdict(points, 1, ""),
                        when=last_year if index % 3 else utcnow(),
                    )
                if index % 2 == 0 and not guest:
                    db.session.execute(
                        update(PlayerTotal)
                        .where(PlayerTotal.player_id == player.id)
                        .values(rounds=fairness.JUDGE_AFTER - 1, fast_rounds=fairness.JUDGE_AFTER)
                    )
                db.session.commit()
                if guest:
                    guests.append(player.id)
                else:
                    example = examples[CATEGORIES[(index * 3 + wave) % len(CATEGORIES)]]
                    batch.append((player.id, _open_round(player, example)))
            planned.append((batch, guests))

    outcomes: list[str] = []
    retries, failed_folds = (
        MessageLog(logging.WARNING, "retried"),
        MessageLog(logging.ERROR, "fold"),
    )
    jitter = random.Random(7)
    folded: list[int | None] = []

    def pause(conn, cursor, statement, parameters, context, executemany):
        boards = DELTAS in statement or statement.startswith("UPDATE board_totals")
        if boards or "DELETE FROM board_count_deltas" in statement:  # the answers' and the folds'
            time.sleep(jitter.uniform(0, JITTER))

    def answer(player_id: int, round_id: int, barrier: threading.Barrier) -> None:
        with app.app_context():
            try:
                player = db.session.get(Player, player_id)
                parsed = answers.parse_answer("machine", 3, ["generic"], "")
                barrier.wait(WAIT)
                answers.submit_answer(player, round_id, parsed)
                outcomes.append("stored")
            except Exception as error:  # the test reports what failed
                outcomes.append(repr(error)[:300])
                db.session.rollback()
            finally:
                db.session.remove()

    def sign_up(player_id: int, barrier: threading.Barrier) -> None:
        with app.app_context():
            try:
                player = db.session.get(Player, player_id)
                barrier.wait(WAIT)
                player.username, player.is_guest = f"guest{player_id}", False
                db.session.commit()  # the Player event lists the rows and moves their counts
                outcomes.append("signed up")
            except Exception as error:  # the test reports what failed
                outcomes.append(repr(error)[:300])
                db.session.rollback()
            finally:
                db.session.remove()

    def fold(barrier: threading.Barrier) -> None:
        with app.app_context():
            barrier.wait(WAIT)
            folded.append(recording.fold())
            db.session.remove()

    with app.app_context():
        engine = db.engine
        event.listen(engine, "before_cursor_execute", pause)
    app.logger.addHandler(retries)
    app.logger.addHandler(failed_folds)
    try:
        for batch, guests in planned:
            barrier = threading.Barrier(len(batch) + len(guests) + 1)
            threads = [
                threading.Thread(target=answer, args=(player_id, round_id, barrier))
                for player_id, round_id in batch
            ]
            threads += [threading.Thread(target=sign_up, args=(g, barrier)) for g in guests]
            threads.append(threading.Thread(target=fold, args=(barrier,)))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
    finally:
        app.logger.removeHandler(retries)
        app.logger.removeHandler(failed_folds)
        event.remove(engine, "before_cursor_execute", pause)

    assert [o for o in outcomes if o not in ("stored", "signed up")] == []
    assert outcomes.count("stored") == waves * per_wave
    assert outcomes.count("signed up") == waves * guests_per_wave
    assert retries.messages == [] and failed_folds.messages == []
    assert len(folded) == waves and None not in folded
    with app.app_context():
        unlisted = db.session.scalars(select(Player).where(Player.unlisted_at.is_not(None))).all()
        assert len(unlisted) == waves * per_wave // 2
        # The answers' own folds ran too: fewer deltas are left than were appended.
        left = db.session.scalar(text("SELECT count(*) FROM board_count_deltas"))
        appended = db.session.scalar(text("SELECT last_value FROM board_count_deltas_id_seq"))
        assert left < appended
        assert stored_counts() == counts_from_totals()
        assert folded_counts() == counts_from_totals()

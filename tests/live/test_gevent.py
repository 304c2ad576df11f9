"""gunicorn's gevent worker (GUNICORN_WORKER_CLASS=gevent): many requests of one process at once.

Greenlets share one thread, so a request makes way for the others only where it waits through
gevent: sockets, `select`, `time.sleep`. psycopg 3 waits for PostgreSQL through `select` when
gevent has patched it before psycopg is imported (gunicorn.conf.py refuses a worker where it has
not); SQLite waits for its write lock inside the library, which holds up the whole process.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from tests.gunicorn_server import wait_until
from tests.live.invariants import check_database, check_seen_rounds, count_players
from tests.live.player import PlayedRound, Player

GEVENT = {"GUNICORN_WORKER_CLASS": "gevent"}
PLAYERS = 16
ROUNDS_EACH = 3
REASONS = ["grammar", "repetition", "irrelevant", "generic", "common_sense"]
DEADLINE = 30.0
# How long the test holds a lock over a request that waits for it, and watches another request
# wait too; well under SQLite's busy timeout (10 s) and gunicorn's worker timeout (30 s).
HOLD = 1.5


def test_gevent_workers_store_every_round_once_under_concurrent_players(app, serve):
    """Players playing at once through 2 gevent workers: every answer is stored once, with the
    points its page showed, and the totals add up (on SQLite too: its write lock is taken and
    released within a request, which never waits for the network while it holds it)."""
    postgresql = app.config["SQLALCHEMY_DATABASE_URI"].startswith("postgresql")
    before = _connections(app) if postgresql else 0
    server = serve(workers=2, env=GEVENT)
    start_together = threading.Barrier(PLAYERS)
    most = [0]
    done = threading.Event()

    def count_connections():
        while not done.wait(0.02):
            most[0] = max(most[0], _connections(app) - before)

    def play(index: int) -> list[PlayedRound]:
        rng = random.Random(index)
        player = Player(server.url)
        player.get("/")
        start_together.wait(timeout=DEADLINE)
        rounds = []
        for _ in range(ROUNDS_EACH):
            reveal_to = rng.randint(1, 10)
            choice = "human" if reveal_to == 10 and rng.random() < 0.5 else "machine"
            rounds.append(
                player.play_round(reveal_to, choice, rng.sample(REASONS, 2), f"player {index}")
            )
        return rounds

    sampler = threading.Thread(target=count_connections, daemon=True)
    if postgresql:
        sampler.start()
    try:
        with ThreadPoolExecutor(PLAYERS) as pool:
            per_player = list(pool.map(play, range(PLAYERS)))
    finally:
        done.set()
        if postgresql:
            sampler.join()

    played = [r for rounds in per_player for r in rounds]
    assert len(played) == PLAYERS * ROUNDS_EACH
    if postgresql:
        # gunicorn.conf.py gives each gevent process a pool of 4 and no overflow: however many
        # players, each worker holds at most 4 connections.
        assert 0 < most[0] <= 2 * 4, most[0]
    check_seen_rounds(check_database(app), played)
    assert count_players(app) == PLAYERS
    assert [s for s in server.served() if s.status >= 500] == []
    log = server.log_path.read_text()
    assert "Using worker: gevent" in log
    # gunicorn warns at start about gevent on SQLite (see the next test).
    assert ("gevent workers on SQLite" in log) is not postgresql


def _connections(app) -> int:
    """Connections to the test database on the server, the one asking included."""
    engine = create_engine(app.config["SQLALCHEMY_DATABASE_URI"], poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return conn.scalar(
                text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            )
    finally:
        engine.dispose()


def _hold_round_lock(db_uri: str, round_id: int):
    """Lock what a reveal of `round_id` must write: its row on PostgreSQL, the database on SQLite.
    Returns the function that releases it."""
    if db_uri.startswith("sqlite"):
        holder = sqlite3.connect(make_url(db_uri).database, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")

        def release_sqlite():
            holder.rollback()
            holder.close()

        return release_sqlite
    engine = create_engine(db_uri)
    holder = engine.connect()
    holder.execute(text("SELECT id FROM rounds WHERE id = :id FOR UPDATE"), {"id": round_id})

    def release_postgresql():
        holder.rollback()
        holder.close()
        engine.dispose()

    return release_postgresql


def _waiting_for_a_lock(db_uri: str) -> bool:
    """Whether a PostgreSQL backend of this database is waiting for a lock."""
    engine = create_engine(db_uri)
    try:
        with engine.connect() as conn:
            return bool(
                conn.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                )
            )
    finally:
        engine.dispose()


def _get_status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=DEADLINE) as reply:
        return reply.status


@pytest.mark.parametrize("worker_class", ["gevent", "gthread", "sync"])
def test_a_request_waiting_for_the_database_holds_up_others_only_where_it_must(
    app, serve, db_uri, worker_class
):
    """One worker; a player's "next sentence" waits for a lock the test holds. Meanwhile another
    request is answered by gthread (another thread) and, on PostgreSQL, by gevent (the waiting
    greenlet yields in `select`); a sync worker serves one request at a time, and on SQLite
    gevent's whole process waits inside SQLite's busy handler with it."""
    postgresql = db_uri.startswith("postgresql")
    others_go_on = worker_class == "gthread" or (worker_class == "gevent" and postgresql)
    server = serve(workers=1, env={"GUNICORN_WORKER_CLASS": worker_class})
    player = Player(server.url)
    page = player.reveal(player.start())
    assert page.revealed == 2

    release = _hold_round_lock(db_uri, page.round_id)
    with ThreadPoolExecutor(2) as pool:
        try:
            slow = pool.submit(player.reveal, page)
            if postgresql:
                wait_until(lambda: _waiting_for_a_lock(db_uri), DEADLINE, "the reveal never waited")
            else:
                # Accepted by the worker; SQLite gives no sign of a waiter, so give it time to
                # reach the lock (a request takes milliseconds here).
                wait_until(lambda: any(server.connections().values()), DEADLINE, "nobody took it")
                time.sleep(0.5)
            other = pool.submit(_get_status, server.url + "/healthz")
            if others_go_on:
                assert other.result(timeout=DEADLINE) == 200
            else:
                time.sleep(HOLD)
                assert not other.done(), "another request was answered meanwhile"
            assert not slow.done(), "the reveal went through a held lock"
        finally:
            release()
        assert slow.result(timeout=DEADLINE).revealed == 3
        assert other.result(timeout=DEADLINE) == 200
    check_seen_rounds(check_database(app), [])


def test_gevent_worker_refuses_psycopg_imported_before_patching(demo_db, serve):
    """With preload_app the app, and psycopg with it, is loaded before gevent patches `select`:
    psycopg would then wait for PostgreSQL in C, stopping the worker's every greenlet on each
    query. gunicorn.conf.py refuses to boot such a worker instead of serving slowly."""
    if not demo_db.startswith("postgresql"):
        pytest.skip("SQLite has no driver that waits through select")
    with pytest.raises(RuntimeError) as refused:
        serve(workers=1, env={**GEVENT, "GUNICORN_CMD_ARGS": "--preload"})
    assert "psycopg was imported before gevent patched" in str(refused.value)

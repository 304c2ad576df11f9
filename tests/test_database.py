"""Pooled connections: tested before use when idle or seen closed; dead ones replaced."""

from __future__ import annotations

import time

import psycopg
import pytest
from sqlalchemy import event, select
from sqlalchemy.engine import make_url

from app.database import is_plain_read, server_went_away
from app.extensions import db
from app.models import Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import start_http


def pooled_connections(app) -> list:
    """The DBAPI connections waiting in the app's pool."""
    with app.app_context():
        pool = db.engine.pool
    return [record.dbapi_connection for record in list(pool._pool.queue)]


def kill_pooled_connections(app) -> int:
    """Close every pooled connection under the pool's feet, as a database restart would."""
    dead = pooled_connections(app)
    for connection in dead:
        connection.close()
    return len(dead)


def terminate_pooled_backends(app, db_uri: str) -> int:
    """Have PostgreSQL end the server side of every pooled connection, as a restart does."""
    pooled = pooled_connections(app)
    url = make_url(db_uri).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(False), autocommit=True) as admin:
        for connection in pooled:
            admin.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
    # The backends are gone once the server has closed their sockets.
    deadline = time.monotonic() + 10
    while not all(server_went_away(connection) for connection in pooled):
        assert time.monotonic() < deadline, "PostgreSQL did not close the connections"
        time.sleep(0.01)
    return len(pooled)


@pytest.fixture
def built(make_app, db_uri):
    made = []

    def build(idle_seconds: float):
        app = make_app(DATABASE_PING_AFTER_IDLE_S=idle_seconds)
        with app.app_context():
            db.create_all()
        client = app.test_client()
        assert client.get("/readyz").status_code == 200  # a connection is now pooled
        made.append(app)
        return app, client

    return build


def test_an_idle_connection_is_tested_and_a_dead_one_replaced(built):
    app, client = built(0)  # every connection counts as idle
    assert kill_pooled_connections(app) >= 1
    assert client.get("/readyz").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_a_live_connection_used_a_moment_ago_shows_nothing_to_read(built):
    app, client = built(3600)
    for connection in pooled_connections(app):
        assert not server_went_away(connection)
    assert client.get("/").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert pooled_connections(app) and not any(map(server_went_away, pooled_connections(app)))


def test_a_connection_the_server_closed_is_replaced_before_any_request_fails(built, db_uri):
    if not db_uri.startswith("postgresql"):
        pytest.skip("an SQLite connection is a file: no server can close it")
    # Used a moment ago as far as the pool knows, so only the socket tells that it died.
    app, client = built(3600)
    assert terminate_pooled_backends(app, db_uri) >= 1
    assert client.get("/readyz").status_code == 200
    assert client.get("/").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_a_connection_closed_in_the_driver_is_replaced_before_any_request_fails(built, db_uri):
    if not db_uri.startswith("postgresql"):
        pytest.skip("sqlite3 does not tell whether a connection was closed")
    app, client = built(3600)
    assert kill_pooled_connections(app) >= 1
    assert client.get("/readyz").status_code == 200


def test_a_connection_that_dies_unseen_fails_one_request_cleanly_then_the_pool_is_new(
    built, db_uri
):
    if db_uri.startswith("postgresql"):
        pytest.skip("on PostgreSQL a closed connection is seen before use (tests above)")
    app, client = built(3600)
    assert kill_pooled_connections(app) >= 1
    # Nothing tells that the SQLite connection was closed: the request meets it and fails
    # cleanly, which replaces the pool, and the next request is served.
    refused = client.get("/readyz")
    assert refused.status_code == 503 and refused.get_json()["database"] == "unreachable"
    assert client.get("/readyz").status_code == 200


@pytest.fixture
def traced(make_app, db_uri, tmp_path):
    """An app on PostgreSQL whose connections write libpq's protocol trace to one file;
    `messages()` gives the commands (BEGIN, COMMIT, ...) and statements sent since the last call."""
    if not db_uri.startswith("postgresql"):
        pytest.skip("a trace of PostgreSQL's wire protocol")
    app = make_app()
    trace_path = tmp_path / "libpq.trace"
    trace = open(trace_path, "w")  # noqa: SIM115 (closed below)
    with app.app_context():
        db.drop_all()
        db.create_all()
        db.engine.dispose()
        event.listen(db.engine, "connect", lambda dbapi, record: dbapi.pgconn.trace(trace.fileno()))
    read_to = 0

    def messages() -> list[str]:
        nonlocal read_to
        trace.flush()
        lines = trace_path.read_text().splitlines()
        sent = [line for line in lines[read_to:] if "\tF\t" in line]
        read_to = len(lines)
        found = []
        for line in sent:
            if "\tQuery\t" in line:  # a command, or a statement without parameters
                word = line.rsplit("\t", 1)[-1].strip(' "').split()[0].upper()
                found.append(word if word in ("BEGIN", "COMMIT", "ROLLBACK") else "statement")
            elif line.endswith("\tSync"):  # the end of a statement with parameters
                found.append("statement")
        return found

    yield app, messages
    with app.app_context():
        db.session.remove()
        db.engine.dispose()
        db.drop_all()
    trace.close()


def test_a_request_that_only_reads_sends_no_begin_and_no_rollback(traced):
    app, messages = traced
    with app.app_context():
        factories.example(boundary=3)
    client = app.test_client()
    token = csrf_token(client)
    started = start_http(client, token)
    round_url = started.headers["Location"]
    messages()
    assert client.get(round_url).status_code == 200
    shown = messages()
    assert "statement" in shown and not {"BEGIN", "COMMIT", "ROLLBACK"} & set(shown), shown
    # A reveal is one statement that is a transaction by itself: no BEGIN, no COMMIT.
    revealed = client.post(f"{round_url}/next", data={"csrf_token": token, "seen": "1"})
    assert revealed.status_code == 302
    sent = messages()
    assert sent == ["statement", "statement"], sent  # the round, then the reveal
    with app.app_context():
        stored = db.session.scalar(select(Round))
        assert stored.revealed == 2
        assert [reveal.sentence_index for reveal in stored.reveals] == [0, 1]
    # A write of several statements begins a transaction before its first write and commits it,
    # reads before it ran on their own.
    answer = {"csrf_token": token, "seen": "2", "choice": "machine", "reasons": "grammar"}
    answered = client.post(f"{round_url}/answer", data=answer)
    assert answered.status_code in (200, 302), answered.status_code
    sent = messages()
    assert sent.count("BEGIN") == 1 and sent.count("COMMIT") == 1 and "ROLLBACK" not in sent
    assert sent.index("BEGIN") > sent.index("statement"), sent
    with app.app_context():
        assert db.session.scalar(select(Round)).guess == 1


def test_a_locking_read_and_a_requested_isolation_keep_their_transaction(traced):
    app, messages = traced
    with app.app_context():
        db.session.execute(select(Round.id).with_for_update())
        db.session.rollback()
        assert messages()[:2] == ["BEGIN", "statement"]
        with db.engine.connect() as conn:
            snapshot = conn.execution_options(isolation_level="REPEATABLE READ")
            snapshot.execute(select(Round.id))
            snapshot.execute(select(Round.id))
            snapshot.rollback()
        sent = messages()
        assert sent.count("BEGIN") == 1 and sent.count("statement") == 2, sent


@pytest.mark.parametrize(
    ("statement", "plain"),
    [
        ("SELECT players.id FROM players WHERE players.id = %(id)s", True),
        ("  select 1", True),
        ("(SELECT 1) UNION (SELECT 2)", True),
        ("SELECT studies.id FROM studies WHERE studies.id = 1 FOR UPDATE", False),
        ("SELECT 1 FROM rounds FOR NO KEY UPDATE", False),
        ("SELECT 1 FROM rounds FOR SHARE", False),
        ("SELECT 1 FROM rounds\nFOR KEY SHARE", False),
        ("UPDATE rounds SET revealed = 2", False),
        ("INSERT INTO reveals (round_id) SELECT 1", False),
        ("WITH moved AS (DELETE FROM rounds RETURNING id) SELECT id FROM moved", False),
        ("SHOW standard_conforming_strings", False),
    ],
)
def test_only_a_select_without_row_locks_counts_as_a_plain_read(statement, plain):
    assert is_plain_read(statement) is plain

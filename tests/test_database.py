"""Pooled connections: tested before use when idle or seen closed; dead ones replaced."""

from __future__ import annotations

import time

import psycopg
import pytest
from sqlalchemy.engine import make_url

from app.database import server_went_away
from app.extensions import db


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

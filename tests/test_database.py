"""Pooled connections: tested before use only after being idle, and replaced when dead."""

from __future__ import annotations

import pytest

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


def test_a_connection_used_a_moment_ago_is_not_tested(built):
    app, client = built(3600)
    assert kill_pooled_connections(app) >= 1
    # Nobody tested the connection: the request meets the dead connection and fails cleanly.
    refused = client.get("/readyz")
    assert refused.status_code == 503 and refused.get_json()["database"] == "unreachable"
    # The failure replaced the pool: the next request is served.
    assert client.get("/readyz").status_code == 200

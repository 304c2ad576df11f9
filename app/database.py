"""Connections that survive a database restart without a test query on every request.

SQLAlchemy's `pool_pre_ping` tests a pooled connection each time it is taken from the pool, and a
request takes one again after every commit: two round trips per request on PostgreSQL, for
connections used a millisecond before. Here a connection is tested only when it has been idle
longer than `DATABASE_PING_AFTER_IDLE_S` (1 s by default); one that fails the test, and every
connection pooled with it, is replaced before use. A connection that dies within that second
fails its request with the 503 page (`app/__init__.py`), and SQLAlchemy then replaces the pool.
"""

from __future__ import annotations

import time

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import InvalidatePoolError

_IDLE_SINCE = "roft_idle_since"


def ping_after_idle(engine: Engine, idle_seconds: float) -> None:
    """Test connections idle longer than `idle_seconds` when they leave `engine`'s pool."""
    dialect = engine.dialect

    @event.listens_for(engine.pool, "checkin")
    def _idle_from_now(dbapi_connection, record) -> None:
        if dbapi_connection is not None:
            record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine.pool, "checkout")
    def _ping_if_idle(dbapi_connection, record, proxy) -> None:
        idle_since = record.info.pop(_IDLE_SINCE, None)
        if idle_since is None or time.monotonic() - idle_since < idle_seconds:
            return  # a new connection, or one in use a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if not dialect.is_disconnect(error, dbapi_connection, None):
                raise
            # The database went away: replace this connection and the others of its time.
            raise InvalidatePoolError() from error

"""Connections that survive a database restart without a test query on every request.

SQLAlchemy's `pool_pre_ping` tests a pooled connection each time it is taken from the pool, and a
request takes one again after every commit: two round trips per request on PostgreSQL, for
connections used a millisecond before. Here a connection leaving the pool is tested with a query
only when

- it has been idle longer than `DATABASE_PING_AFTER_IDLE_S` (1 s by default), or
- its socket says the server has gone: the server closed its end (a restart, an outage, a killed
  backend) or sent something nobody asked for (PostgreSQL's "terminating connection" notice).
  Looking costs one `poll()` system call and no round trip.

A connection that fails the test, and every connection pooled with it, is replaced before use, so
after an outage no request meets a connection that died in it. A connection that dies while a
request uses it fails that request with the 503 page (`app/__init__.py`), and SQLAlchemy then
replaces the whole pool (its default on a disconnect error), so the next request starts afresh.
A failed statement is never retried here: it may have been a write whose outcome is unknown.
"""

from __future__ import annotations

import select
import time

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import InvalidatePoolError

_IDLE_SINCE = "roft_idle_since"
_GONE = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP


def server_went_away(dbapi_connection) -> bool:
    """Whether a pooled connection is known dead or has unread input, without a round trip.

    An idle connection between requests has nothing to read: input means the server closed the
    connection (end of file) or reported why it is about to. SQLite connections are files, with
    no socket to look at, and count as alive.
    """
    if getattr(dbapi_connection, "closed", False):
        return True
    fileno = getattr(dbapi_connection, "fileno", None)
    if fileno is None:
        return False
    try:
        descriptor = fileno()
    except Exception:  # the driver has already let go of the socket
        return True
    poller = select.poll()
    poller.register(descriptor, _GONE)
    return bool(poller.poll(0))


def ping_after_idle(engine: Engine, idle_seconds: float) -> None:
    """Test connections leaving `engine`'s pool when idle over `idle_seconds` or seen closed."""
    dialect = engine.dialect

    @event.listens_for(engine.pool, "checkin")
    def _idle_from_now(dbapi_connection, record) -> None:
        if dbapi_connection is not None:
            record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine.pool, "checkout")
    def _ping_if_idle_or_closed(dbapi_connection, record, proxy) -> None:
        idle_since = record.info.pop(_IDLE_SINCE, None)
        if idle_since is None:
            return  # a new connection
        if time.monotonic() - idle_since < idle_seconds and not server_went_away(dbapi_connection):
            return  # in use a moment ago, and the server has not closed it since
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if not dialect.is_disconnect(error, dbapi_connection, None):
                raise
            # The database went away: replace this connection and the others of its time.
            raise InvalidatePoolError() from error

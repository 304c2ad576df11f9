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

`begin_only_for_writes` saves PostgreSQL two round trips per transaction that only reads: a
plain SELECT outside a transaction runs on its own (autocommit) instead of after a BEGIN it would
later need a COMMIT or ROLLBACK for, and the first write of a transaction BEGINs as before. Under
READ COMMITTED, the default, every statement takes its own snapshot inside a transaction too, so
what a request reads is the same; a request that reads after its commit (the answer's page) no
longer leaves a transaction for the pool to roll back. SQLite's driver already begins only before
a write. Connections given another isolation level (the research export's REPEATABLE READ) and
SELECT ... FOR UPDATE/SHARE keep their transactions.

A write that is a whole transaction by itself (one statement that changes everything it must,
or nothing: the reveal's `WITH ... UPDATE ... INSERT`) may say so with the execution option
`ALONE` (`{"alone": True}`); run when no transaction is open, it commits on its own too, which
saves the BEGIN and the COMMIT. PostgreSQL runs a single statement atomically, all or nothing,
with the same row locks as inside a transaction. Later statements of the request begin a
transaction as usual.
"""

from __future__ import annotations

import functools
import re
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


# A statement that only reads: a SELECT (or a parenthesised one) that locks no rows.
_PLAIN_READ = re.compile(r"\s*\(*\s*SELECT\b", re.IGNORECASE)
_LOCKING_READ = re.compile(r"\bFOR\s+(NO\s+KEY\s+)?(UPDATE|SHARE|KEY\s+SHARE)\b", re.IGNORECASE)


# The execution option of a statement that is a whole transaction by itself (see above).
ALONE = {"alone": True}


@functools.lru_cache(maxsize=1024)
def is_plain_read(statement: str) -> bool:
    """Whether `statement` only reads (a SELECT without row locks).

    Asked before every statement, and a statement's text comes from SQLAlchemy's compiled cache,
    the same string each time: the answer is kept for the last 1,024 texts, so a round's statements
    are not scanned again for a `FOR UPDATE` on every request (the round's load is some 2,000
    characters).
    """
    return bool(_PLAIN_READ.match(statement)) and not _LOCKING_READ.search(statement)


def begin_only_for_writes(engine: Engine) -> None:
    """On PostgreSQL (psycopg), run plain reads, and writes marked `ALONE`, outside a
    transaction when none is open."""
    if engine.dialect.name != "postgresql" or engine.dialect.driver != "psycopg":
        return
    from psycopg.pq import TransactionStatus

    idle = TransactionStatus.IDLE

    @event.listens_for(engine, "before_cursor_execute")
    def _autocommit_plain_reads(conn, cursor, statement, parameters, context, executemany):
        dbapi_connection = conn.connection.dbapi_connection
        if dbapi_connection.info.transaction_status != idle:
            return  # inside a transaction: the statement joins it
        if "isolation_level" in conn.get_execution_options():
            return  # a transaction asked for on purpose (a snapshot across statements)
        # A server-side cursor (stream_results) lives in a transaction.
        streamed = context is not None and context.execution_options.get("stream_results")
        options = context.execution_options if context is not None else {}
        alone = not executemany and bool(options.get("alone"))
        read = not executemany and not streamed and is_plain_read(statement)
        if dbapi_connection.autocommit != (read or alone):
            dbapi_connection.autocommit = read or alone

    @event.listens_for(engine.pool, "checkin")
    def _transactions_again(dbapi_connection, record) -> None:
        if (
            dbapi_connection is not None
            and dbapi_connection.autocommit
            and not dbapi_connection.closed
            and dbapi_connection.info.transaction_status == idle
        ):
            dbapi_connection.autocommit = False

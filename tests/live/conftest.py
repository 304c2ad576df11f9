"""The real site under gunicorn (several workers) on the test database, with the demo set.

`serve(workers=3, env={...})` starts a server for the test and stops it afterwards (before the
`app` fixture drops the tables). Rate limits are raised out of the way unless a test sets them.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

import pytest
import redis

from app import PROJECT_ROOT
from app.catalog.importer import import_file
from app.extensions import db
from tests.gunicorn_server import GunicornServer

GENEROUS_LIMITS = {
    "LOGIN_RATE_LIMIT": "100000 per minute",
    "SIGNUP_RATE_LIMIT": "100000 per minute",
    "GUEST_RATE_LIMIT": "100000 per minute",
    "GUEST_GLOBAL_RATE_LIMIT": "100000 per minute",
}
# A Redis database of its own for the rate-limit tests, flushed before and after each test; the
# SQLite and the PostgreSQL run get different ones, so that they need not wait for each other.
REDIS_DB = 8 if os.environ.get("TEST_DATABASE_URL") else 7


@pytest.fixture
def demo_db(app, db_uri):
    """The test database (fresh tables) with the demo set imported."""
    with app.app_context():
        import_file(PROJECT_ROOT / "data" / "demo" / "examples.jsonl")
        db.session.remove()
    return db_uri


@pytest.fixture
def serve(demo_db, tmp_path):
    """Start gunicorn on the demo database: `serve(workers=3, env={...})`."""
    servers: list[GunicornServer] = []

    def start(
        workers: int = 3, env: dict[str, str] | None = None, database_url: str | None = None
    ) -> GunicornServer:
        server = GunicornServer(
            database_url or demo_db,
            tmp_path / f"gunicorn-{len(servers)}",
            workers=workers,
            # One listening socket shared by the workers unless a test asks otherwise: the
            # default wherever net.ipv4.tcp_migrate_req is off, which a test may turn on.
            env={**GENEROUS_LIMITS, "GUNICORN_REUSE_PORT": "0", **(env or {})},
            access_log=True,
        )
        servers.append(server)
        server.start()
        return server

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture
def gunicorn(serve):
    """gunicorn with 3 workers and generous rate limits."""
    return serve(workers=3)


@pytest.fixture
def redis_db() -> int:
    """The Redis database `redis_url` flushes (a test module may name its own)."""
    return REDIS_DB


@pytest.fixture
def redis_url(redis_db):
    """A flushed Redis database for rate-limit counters (and caches) shared by every worker.

    Test runs started side by side (another checkout, another database) would flush each other's
    counters, so a lock file makes them take turns on it.
    """
    url = f"redis://127.0.0.1:6379/{redis_db}"
    lock_path = Path(tempfile.gettempdir()) / f"roft-live-redis-{redis_db}.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        client = redis.Redis.from_url(url)
        try:
            client.ping()
        except redis.exceptions.ConnectionError:
            pytest.fail(f"Redis is not reachable at {url}: run `make services`.")
        client.flushdb()
        yield url
        client.flushdb()
        client.close()

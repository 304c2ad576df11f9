"""Configuration, read from environment variables.

`Config` is the embedded default (SQLite in `instance/`), `ProductionConfig` is picked when
`FLASK_ENV=production` or `ROFT_ENV=production`, and tests pass their overrides to `create_app`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

# The checkout's root (app/ is one level below it).
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _database_url(instance_path: Path) -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        return f"sqlite:///{instance_path / 'roft.sqlite3'}"
    # Heroku-style and plain URLs name the psycopg2 driver; we ship psycopg 3.
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def _int_env(name: str, default: int, minimum: int = 1) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {number}")
    return number


def _pool_options() -> dict:
    """SQLAlchemy's connection pool of each process, where the environment sizes it.

    DATABASE_POOL_SIZE connections stay open; DATABASE_MAX_OVERFLOW more are opened during a burst
    and closed when they come back to a full pool; a request that finds all of them taken waits
    for one, at most DATABASE_POOL_TIMEOUT seconds. Unset, SQLAlchemy's defaults hold (5, 10 and
    30 s), enough for a process of 4 threads. gunicorn.conf.py sizes it for gevent workers, whose
    greenlets each take a connection while they serve a request.
    """
    options = {}
    if os.environ.get("DATABASE_POOL_SIZE"):
        options["pool_size"] = _int_env("DATABASE_POOL_SIZE", 5)
    if os.environ.get("DATABASE_MAX_OVERFLOW"):
        options["max_overflow"] = _int_env("DATABASE_MAX_OVERFLOW", 10, minimum=0)
    if os.environ.get("DATABASE_POOL_TIMEOUT"):
        options["pool_timeout"] = _int_env("DATABASE_POOL_TIMEOUT", 30)
    return options


def load_secret_key(instance_path: Path) -> str:
    """Return SECRET_KEY from the environment, or one kept in `instance/secret_key`.

    The workers of a fresh host start together and may all find no key file: each writes a key
    to a file of its own and links it into place, which only the first manages, so all of them
    read the same whole key. (Several hosts each make their own: set SECRET_KEY there.)
    """
    key = os.environ.get("SECRET_KEY")
    if key:
        return key
    path = instance_path / "secret_key"
    if not path.exists():
        instance_path.mkdir(parents=True, exist_ok=True)
        # mkstemp creates the file readable by its owner only.
        fd, temporary = tempfile.mkstemp(dir=instance_path, prefix=".secret_key.")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(32))
            # Fails if another worker's key is in place already: that one is used.
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    key = path.read_text().strip()
    if not key:
        raise ConfigurationError(
            f"{path} is empty: delete it (a new key is made at the next start) or set SECRET_KEY."
        )
    return key


# Host names the site answers to when TRUSTED_HOSTS is not set (outside production).
# (Werkzeug cannot match an IPv6 literal such as [::1]: use localhost.)
LOCAL_HOSTS = ["localhost", "127.0.0.1"]


class ConfigurationError(RuntimeError):
    """The site refuses to start with this configuration; the message says what to set."""


def _trusted_hosts(production: bool) -> list[str] | None:
    names = [h.strip() for h in os.environ.get("TRUSTED_HOSTS", "").split(",") if h.strip()]
    if names:
        return names
    return None if production else LOCAL_HOSTS


def check_production(config: dict) -> None:
    """In production, refuse to start without what keeps limits and links honest: shared rate
    limit storage (each gunicorn worker would otherwise count alone) and the host names the site
    answers to (links and redirects are built from the Host header)."""
    if not config.get("PRODUCTION"):
        return
    if str(config.get("RATELIMIT_STORAGE_URI", "")).startswith("memory://"):
        raise ConfigurationError(
            "ROFT_ENV=production needs REDIS_URL (e.g. redis://localhost:6379/0): without it "
            "every gunicorn worker keeps its own rate-limit counts, so the limits multiply by "
            "the number of workers. See docs/operators.md."
        )
    if not config.get("TRUSTED_HOSTS"):
        raise ConfigurationError(
            "ROFT_ENV=production needs TRUSTED_HOSTS, the host names the site is reached at, "
            "comma-separated (e.g. roft.example.org). See docs/operators.md."
        )


def shared_state_warning(workers: int, redis_url: str | None) -> str | None:
    """Why `workers` processes without Redis would not share what they must; None when fine.

    Rate-limit counts live in each worker's memory without REDIS_URL, so every limit loosens by
    the number of workers; the leaderboard cache lives in files on one host, so a second app
    server would show a stale board. (Production refuses to start without Redis anyway.)
    """
    if redis_url or workers <= 1:
        return None
    return (
        f"{workers} workers without REDIS_URL: each worker counts rate limits alone, so every "
        f"limit allows {workers} times as much, and the leaderboard cache is files on this host "
        "only (a second app server would show stale boards). Set REDIS_URL; see docs/scaling.md."
    )


def gevent_sqlite_warning(worker_class: str, database_url: str | None) -> str | None:
    """Why gevent workers on SQLite can stall; None for other workers or databases.

    A greenlet that waits for SQLite's write lock waits inside SQLite (its busy timeout), where
    gevent cannot switch to another greenlet: every other request of that worker process waits
    too (tests/live/test_gevent.py). Were the lock held by a greenlet of the same process that
    is waiting for the network (Redis), that one could not go on until the waiter gave up.
    """
    if worker_class != "gevent" or (database_url or "sqlite").split(":", 1)[0] != "sqlite":
        return None
    return (
        "gevent workers on SQLite: a request waiting for SQLite's write lock holds up every "
        "request of its worker process. Use gthread workers (the default) with SQLite, or "
        "PostgreSQL with gevent; see docs/performance.md."
    )


# Linux (5.14 and later): 1 when a listening socket that closes hands the connections waiting on
# it to another socket of its SO_REUSEPORT group instead of resetting them. Per network
# namespace: a container has its own (docker-compose.yml sets it).
MIGRATE_REQUESTS = Path("/proc/sys/net/ipv4/tcp_migrate_req")


def kernel_migrates_requests(setting: Path = MIGRATE_REQUESTS) -> bool:
    """Whether net.ipv4.tcp_migrate_req is on (False where it cannot be read: not Linux, old)."""
    try:
        return int(setting.read_text().strip() or 0) != 0
    except (OSError, ValueError):
        return False


def socket_per_worker(requested: str | None, worker_class: str, migrates: bool) -> tuple[bool, str]:
    """Whether each gunicorn worker listens on a socket of its own (SO_REUSEPORT), and why.

    `requested` is GUNICORN_REUSE_PORT: "1" or "0" decide; unset or empty leaves it to the
    worker class and the kernel. With one shared socket, a kept-alive connection stays with
    whichever worker won the race to accept it, and under load one worker may hold twice the
    players of another; with a socket each, the kernel spreads new connections evenly. The cost
    is a worker's death: the connections waiting on its own socket are reset, unless the kernel
    migrates them to the other sockets (`migrates`, net.ipv4.tcp_migrate_req). Sync workers
    keep the shared socket, from which an idle worker takes the next connection: on a socket of
    its own a connection would wait for its busy worker while another sat idle.
    """
    if requested not in (None, "", "0", "1"):
        raise ValueError(f"GUNICORN_REUSE_PORT must be 0 or 1, not {requested!r}")
    if requested:
        chosen = requested == "1"
        return chosen, f"GUNICORN_REUSE_PORT={requested}"
    if worker_class == "sync":
        return False, "sync workers share one socket, the idle one accepting"
    if not migrates:
        return False, (
            "net.ipv4.tcp_migrate_req is off, so a worker that died would drop the connections "
            "waiting on a socket of its own"
        )
    return True, (
        "net.ipv4.tcp_migrate_req is on: the kernel spreads new connections over the workers "
        "and hands a dead worker's waiting connections to the others"
    )


def per_host_key_warning(production: bool, secret_key: str | None) -> str | None:
    """In production without SECRET_KEY, each host signs sessions with its own generated key."""
    if not production or secret_key:
        return None
    return (
        "SECRET_KEY is not set: this host signs sessions with its own key (instance/secret_key), "
        "so another app server would not accept them. Set the same SECRET_KEY on every host."
    )


# Seconds to wait for Redis (connecting, and each command) before treating it as unreachable.
REDIS_TIMEOUTS = {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}


def build_config(instance_path: Path) -> dict:
    """The settings every environment shares, resolved from the environment. One function: it
    is a table of settings, each with its comment, read top to bottom in one place."""
    redis_url = os.environ.get("REDIS_URL") or None
    production = os.environ.get("ROFT_ENV", os.environ.get("FLASK_ENV", "")) == "production"
    secure_cookies = os.environ.get("SESSION_COOKIE_SECURE", "1" if production else "0") == "1"
    return {
        "SECRET_KEY": load_secret_key(instance_path),
        "SQLALCHEMY_DATABASE_URI": _database_url(instance_path),
        "SQLALCHEMY_ENGINE_OPTIONS": _pool_options(),
        # A pooled connection idle longer than this is tested before use (`app/database.py`).
        "DATABASE_PING_AFTER_IDLE_S": float(os.environ.get("DATABASE_PING_AFTER_IDLE_S", "1")),
        "REDIS_URL": redis_url,
        "RATELIMIT_STORAGE_URI": redis_url or "memory://",
        # No X-RateLimit-* headers on every limited response: filling them asked the storage
        # (Redis) for the window again, 4 of the 6 storage calls of a visitor's "Play"
        # (bench/request_overhead.py). A refusal still says when to try again (app/__init__.py).
        "RATELIMIT_HEADERS_ENABLED": False,
        # While Redis cannot be reached, each worker counts limits in its own memory instead of
        # refusing the request; an unreachable Redis is given up on after a second.
        "RATELIMIT_IN_MEMORY_FALLBACK_ENABLED": True,
        "RATELIMIT_STORAGE_OPTIONS": REDIS_TIMEOUTS if redis_url else {},
        # Without Redis, a file cache in instance/ is shared by all gunicorn workers on the host,
        # so invalidating the leaderboard after an answer reaches every worker. With Redis, every
        # app server shares it, and an outage makes a miss, not an error (app/shared_cache.py).
        "CACHE_TYPE": "app.shared_cache.TolerantRedisCache" if redis_url else "FileSystemCache",
        "CACHE_REDIS_URL": redis_url,
        "CACHE_OPTIONS": dict(REDIS_TIMEOUTS) if redis_url else None,
        "CACHE_DIR": os.environ.get("CACHE_DIR") or str(instance_path / "cache"),
        "CACHE_DEFAULT_TIMEOUT": 300,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": secure_cookies,
        "REMEMBER_COOKIE_HTTPONLY": True,
        "REMEMBER_COOKIE_SAMESITE": "Lax",
        "REMEMBER_COOKIE_SECURE": secure_cookies,
        "REMEMBER_COOKIE_DURATION": 60 * 60 * 24 * 365,
        "WTF_CSRF_TIME_LIMIT": None,
        # Rate limits for the account endpoints; strings in Flask-Limiter's syntax.
        "LOGIN_RATE_LIMIT": os.environ.get("LOGIN_RATE_LIMIT", "10 per minute;50 per hour"),
        "SIGNUP_RATE_LIMIT": os.environ.get("SIGNUP_RATE_LIMIT", "5 per minute;30 per hour"),
        "GUEST_RATE_LIMIT": os.environ.get("GUEST_RATE_LIMIT", "20 per minute;200 per hour"),
        # Site-wide cap on new guest accounts, all addresses together (bots rotating addresses);
        # requests of signed-in players do not count.
        "GUEST_GLOBAL_RATE_LIMIT": os.environ.get("GUEST_GLOBAL_RATE_LIMIT", "600 per minute"),
        "DEMO_DATA_PATH": os.environ.get("DEMO_DATA_PATH", "data/demo/examples.jsonl"),
        "PRODUCTION": production,
        # Requests for any other Host get a 400 (links and redirects use the Host header).
        "TRUSTED_HOSTS": _trusted_hosts(production),
        "PROXY_FIX": os.environ.get("PROXY_FIX", "0") == "1",
        # COMPRESS=0: the site sends pages, CSS and JS uncompressed (a proxy compresses instead).
        "COMPRESS_REGISTER": os.environ.get("COMPRESS", "1") == "1",
        # JSON log lines on stderr; LOG_REQUESTS=0 drops the per-request access line.
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO").upper(),
        "LOG_REQUESTS": os.environ.get("LOG_REQUESTS", "1") == "1",
        # The game: texts per set, texts in the daily challenge, and whether a player may be
        # served another variant of a passage they have read (0 allows it).
        "SET_SIZE": _int_env("SET_SIZE", 5),
        "DAILY_SIZE": _int_env("DAILY_SIZE", 5),
        # `flask daily status` warns when fewer days of held-back texts are left.
        "DAILY_WARN_DAYS": _int_env("DAILY_WARN_DAYS", 14),
        # Share of the demo's passages `flask load-demo` holds back for the daily challenge: enough
        # for a month of challenges that keep the composition rules (tests/test_demo_data.py).
        "DEMO_DAILY_SHARE": float(os.environ.get("DEMO_DAILY_SHARE", "0.75")),
        "AVOID_REPEATED_PASSAGES": os.environ.get("AVOID_REPEATED_PASSAGES", "1") == "1",
        # Reveal: how many other answers a text needs before their spread is shown.
        "SPREAD_MIN_OTHERS": _int_env("SPREAD_MIN_OTHERS", 1),
        # Difficulty levels: counted answers a text needs before `flask difficulty refresh`
        # gives it a level (easy, medium, hard).
        "LEVEL_MIN_ANSWERS": _int_env("LEVEL_MIN_ANSWERS", 10),
        # The leaderboard counts' pending changes are folded into the counts after the answer
        # whose changes take an id that is a multiple of this (about every 50th answer; see
        # app/models/standings.py).
        "BOARD_FOLD_EVERY": _int_env("BOARD_FOLD_EVERY", 1024),
        # Crowd studies (docs/running-a-study.md). PUBLIC_URL is the site's address as workers
        # reach it (https://roft.example.org): every printed and shown link starts with it.
        "PUBLIC_URL": (os.environ.get("PUBLIC_URL") or "").rstrip("/") or None,
        # Hourly pay per currency, CURRENCY=AMOUNT: below the minimum a Prolific study is refused,
        # below the recommended figure `flask study create` warns (Prolific's figures).
        "STUDY_PAY_MINIMUM": os.environ.get("STUDY_PAY_MINIMUM", "GBP=6,USD=8"),
        "STUDY_PAY_RECOMMENDED": os.environ.get("STUDY_PAY_RECOMMENDED", "GBP=9,USD=12"),
        # The origins allowed to frame MTurk study pages (MTurk's own, by default).
        "MTURK_FRAME_ANCESTORS": os.environ.get(
            "MTURK_FRAME_ANCESTORS", "https://www.mturk.com https://workersandbox.mturk.com"
        ),
        "STUDY_DASHBOARD_REFRESH_SECONDS": _int_env("STUDY_DASHBOARD_REFRESH_SECONDS", 15),
        # Optional, from the environment only: with a token, `flask study prolific …` creates,
        # publishes, pauses and syncs the study, messages workers and acts and pays through
        # Prolific's API, and `flask study verify --prolific-api STUDY_ID` reads its submissions.
        # PROLIFIC_API_URL points the same code at another address (a test stand-in).
        "PROLIFIC_API_TOKEN": os.environ.get("PROLIFIC_API_TOKEN") or None,
        "PROLIFIC_API_URL": os.environ.get("PROLIFIC_API_URL", "https://api.prolific.com"),
        # Seconds to wait for each answer of Prolific's API.
        "PROLIFIC_API_TIMEOUT": _int_env("PROLIFIC_API_TIMEOUT", 30),
    }

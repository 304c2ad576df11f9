"""Configuration, read from environment variables.

`Config` is the embedded default (SQLite in `instance/`), `ProductionConfig` is picked when
`FLASK_ENV=production` or `ROFT_ENV=production`, and tests pass their overrides to `create_app`.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


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


def load_secret_key(instance_path: Path) -> str:
    """Return SECRET_KEY from the environment, or one kept in `instance/secret_key`."""
    key = os.environ.get("SECRET_KEY")
    if key:
        return key
    path = instance_path / "secret_key"
    if path.exists():
        return path.read_text().strip()
    instance_path.mkdir(parents=True, exist_ok=True)
    key = secrets.token_hex(32)
    # Create the file readable by its owner only.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
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


def build_config(instance_path: Path) -> dict:
    """The settings every environment shares, resolved from the environment."""
    redis_url = os.environ.get("REDIS_URL") or None
    production = os.environ.get("ROFT_ENV", os.environ.get("FLASK_ENV", "")) == "production"
    secure_cookies = os.environ.get("SESSION_COOKIE_SECURE", "1" if production else "0") == "1"
    return {
        "SECRET_KEY": load_secret_key(instance_path),
        "SQLALCHEMY_DATABASE_URI": _database_url(instance_path),
        "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": True},
        "REDIS_URL": redis_url,
        "RATELIMIT_STORAGE_URI": redis_url or "memory://",
        "RATELIMIT_HEADERS_ENABLED": True,
        # Without Redis, a file cache in instance/ is shared by all gunicorn workers on the host,
        # so invalidating the leaderboard after an answer reaches every worker.
        "CACHE_TYPE": "RedisCache" if redis_url else "FileSystemCache",
        "CACHE_REDIS_URL": redis_url,
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
        # JSON log lines on stderr; LOG_REQUESTS=0 drops the per-request access line.
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO").upper(),
        "LOG_REQUESTS": os.environ.get("LOG_REQUESTS", "1") == "1",
    }

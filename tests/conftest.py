"""A fresh app and database for every test (SQLite by default, PostgreSQL with TEST_DATABASE_URL).

`make test` runs the suite twice: once on SQLite files, once on PostgreSQL.
"""

from __future__ import annotations

import os
import re

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

os.environ.setdefault("SECRET_KEY", "test-secret-key")

from app import create_app
from app.extensions import db

PG_URL = os.environ.get("TEST_DATABASE_URL")


def _ensure_pg_database(url: str) -> None:
    """Create the test database on the server if it is missing."""
    target = make_url(url)
    admin = create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        exists = conn.scalar(
            text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": target.database}
        )
        if not exists:
            conn.execute(text(f'CREATE DATABASE "{target.database}"'))
    admin.dispose()


@pytest.fixture(scope="session")
def database_url(tmp_path_factory):
    if PG_URL:
        _ensure_pg_database(PG_URL)
        return PG_URL
    return None


@pytest.fixture
def db_uri(database_url, tmp_path):
    return database_url or f"sqlite:///{tmp_path / 'test.sqlite3'}"


@pytest.fixture
def make_app(db_uri):
    """Build an app on the test database; extra config overrides may be given."""
    made = []

    def factory(**overrides):
        config = {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": db_uri,
            "SECRET_KEY": "test-secret-key",
            "RATELIMIT_STORAGE_URI": "memory://",
            "CACHE_TYPE": "SimpleCache",
            # Real hashing, at a cost that keeps hundreds of logins fast (production: scrypt).
            "PASSWORD_HASH_METHOD": "pbkdf2:sha256:2000",
        }
        config.update(overrides)
        application = create_app(config)
        made.append(application)
        return application

    yield factory
    for application in made:
        with application.app_context():
            db.session.remove()
            db.engine.dispose()


@pytest.fixture
def app(make_app, db_uri):
    application = make_app()
    with application.app_context():
        if db_uri.startswith("postgresql"):
            db.drop_all()
        db.create_all()
    yield application
    with application.app_context():
        db.session.remove()
        if db_uri.startswith("postgresql"):
            db.drop_all()


@pytest.fixture
def ctx(app):
    with app.app_context():
        yield app


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_token(client, path: str = "/login") -> str:
    """The session's CSRF token, read from a page as a browser would."""
    page = client.get(path).get_data(as_text=True)
    found = CSRF_RE.search(page)
    assert found, f"no CSRF token on {path}"
    return found.group(1)

"""A fresh app and database for every test (SQLite by default, PostgreSQL with TEST_DATABASE_URL).

`make test` runs the suite twice: once on SQLite files, once on PostgreSQL.

Every test that asks for `app`, or builds one with `app_with(**config)`, starts on the freshly
created, empty schema. Creating it is the slow part, so it is made once and reused, never shared
half-used:
- SQLite: each test gets its own file, a copy of one made by `create_all` once per session.
- PostgreSQL: the tables stay between tests; before each test every row is deleted and every
  sequence restarted, after a check that the schema is still exactly the one `create_all` made
  (tables, columns, indexes, constraints, types). A test that changed the schema (dropped the
  tables, ran a migration) gets `drop_all` + `create_all` as before. A test that uses the database
  without `app` finds no tables, as before.

Under pytest-xdist (`-n 2`) each worker has its own PostgreSQL database: TEST_DATABASE_URL's
name with `_gw0`, `_gw1`, ... appended.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

os.environ.setdefault("SECRET_KEY", "test-secret-key")

from app import create_app
from app.accounts import service as accounts
from app.extensions import db

PG_URL = os.environ.get("TEST_DATABASE_URL")
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if PG_URL and XDIST_WORKER:
    # One database per xdist worker; the tests that derive names from TEST_DATABASE_URL
    # (test_migrations' "<name>_migrations") follow it.
    _url = make_url(PG_URL)
    PG_URL = _url.set(database=f"{_url.database}_{XDIST_WORKER}").render_as_string(
        hide_password=False
    )
    os.environ["TEST_DATABASE_URL"] = PG_URL

# The base config of every test app (make_app's overrides come on top).
TEST_CONFIG = {
    "TESTING": True,
    "SECRET_KEY": "test-secret-key",
    "RATELIMIT_STORAGE_URI": "memory://",
    "CACHE_TYPE": "SimpleCache",
    # Real hashing, at a cost that keeps hundreds of logins fast (production: scrypt).
    "PASSWORD_HASH_METHOD": "pbkdf2:sha256:2000",
}


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
        _pg_no_tables(PG_URL)  # nothing left over from an earlier run
        return PG_URL
    return None


# PostgreSQL: the schema `app` last created, while nothing has changed it since; None otherwise.
_pg_schema: dict[str, object] = {"fingerprint": None, "sequences": ()}

_FINGERPRINT_SQL = [
    "SELECT table_name, column_name, data_type, is_nullable, column_default,"
    " character_maximum_length, numeric_precision FROM information_schema.columns"
    " WHERE table_schema = current_schema() ORDER BY 1, 2",
    "SELECT tablename, indexname, indexdef FROM pg_indexes"
    " WHERE schemaname = current_schema() ORDER BY 1, 2",
    "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)"
    " FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace"
    " WHERE n.nspname = current_schema() ORDER BY 1, 2",
    "SELECT t.typname, t.typtype FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
    " WHERE n.nspname = current_schema() AND t.typtype IN ('e', 'd') ORDER BY 1",
    "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'S', 'v', 'm', 'p') ORDER BY 1",
    "SELECT t.tgrelid::regclass::text, t.tgname, t.tgenabled FROM pg_trigger t"
    " JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND NOT t.tgisinternal ORDER BY 1, 2",
]
# The sequences that belong to the models' tables (their serial/identity columns).
_SEQUENCES_SQL = (
    "SELECT DISTINCT s.relname FROM pg_class s"
    " JOIN pg_depend d ON d.objid = s.oid AND d.classid = 'pg_class'::regclass"
    " JOIN pg_class t ON t.oid = d.refobjid"
    " JOIN pg_namespace n ON n.oid = s.relnamespace"
    " WHERE s.relkind = 'S' AND n.nspname = current_schema() AND t.relname = ANY(:tables)"
    " ORDER BY 1"
)


def _pg_fingerprint(conn) -> tuple:
    return tuple(tuple(tuple(row) for row in conn.execute(text(sql))) for sql in _FINGERPRINT_SQL)


def _pg_fresh_schema() -> None:
    """The models' tables, created and empty, with their sequences at the start (app context)."""
    tables = [table.name for table in db.metadata.sorted_tables]
    with db.engine.connect() as conn:
        same = _pg_schema["fingerprint"] is not None and (
            _pg_fingerprint(conn) == _pg_schema["fingerprint"]
        )
    if same:
        try:
            with db.engine.begin() as conn:
                for name in reversed(tables):
                    conn.execute(text(f'DELETE FROM "{name}"'))
                for sequence in _pg_schema["sequences"]:
                    conn.execute(text(f'ALTER SEQUENCE "{sequence}" RESTART'))
            return
        except Exception:  # e.g. rows a foreign key the models do not know still points to
            pass
    _pg_schema["fingerprint"] = None
    db.drop_all()
    db.create_all()
    with db.engine.connect() as conn:
        _pg_schema["sequences"] = tuple(
            row[0] for row in conn.execute(text(_SEQUENCES_SQL), {"tables": tables})
        )
        _pg_schema["fingerprint"] = _pg_fingerprint(conn)


def _pg_no_tables(url: str) -> None:
    """The state a test without `app` always found: none of the models' tables."""
    application = create_app({**TEST_CONFIG, "SQLALCHEMY_DATABASE_URI": url})
    with application.app_context():
        db.drop_all()
        db.session.remove()
        db.engine.dispose()
    _pg_schema["fingerprint"] = None


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    """An SQLite file holding the freshly created, empty schema, made once per session."""
    path = tmp_path_factory.mktemp("schema") / "template.sqlite3"
    application = create_app({**TEST_CONFIG, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{path}"})
    with application.app_context():
        db.create_all()
        db.session.remove()
        db.engine.dispose()
    for suffix in ("-wal", "-shm", "-journal"):
        if path.with_name(path.name + suffix).exists():
            return None  # not a single self-contained file: let each test create its own
    return path


@pytest.fixture
def db_uri(request, database_url, tmp_path):
    fresh = {"app", "app_with"} & set(request.fixturenames)
    if database_url and not fresh and _pg_schema["fingerprint"]:
        _pg_no_tables(database_url)
    return database_url or f"sqlite:///{tmp_path / 'test.sqlite3'}"


@pytest.fixture
def make_app(db_uri):
    """Build an app on the test database; extra config overrides may be given."""
    made = []

    def factory(**overrides):
        config = {**TEST_CONFIG, "SQLALCHEMY_DATABASE_URI": db_uri}
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
def app_with(request, make_app, db_uri):
    """Build an app with config overrides on the freshly created, empty schema, as `app` is."""
    # The template is made now, before the test or its other fixtures change the environment.
    sqlite = db_uri.startswith("sqlite:///")
    template = request.getfixturevalue("sqlite_template") if sqlite else None

    def factory(**overrides):
        target = make_url(db_uri).database if sqlite else None
        if template is not None and target and not os.path.exists(target):
            shutil.copyfile(template, target)
        application = make_app(**overrides)
        with application.app_context():
            if db_uri.startswith("postgresql"):
                _pg_fresh_schema()
            db.create_all()  # a no-op on the copied or cleared schema
        return application

    return factory


@pytest.fixture
def app(app_with):
    application = app_with()
    yield application
    with application.app_context():
        db.session.remove()


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


def sign_in(app, username: str = "lab", researcher: bool = True, password: str = "a long password"):
    """A new browser signed in to a new account (by default the researcher "lab")."""
    with app.app_context():
        accounts.sign_up(username, password, consent=False, researcher=researcher)
    browser = app.test_client()
    login = {"csrf_token": csrf_token(browser), "username": username, "password": password}
    assert browser.post("/login", data=login).status_code == 302
    return browser

"""The Alembic migrations are the schema: upgrade an empty database to head, compare, downgrade."""

from __future__ import annotations

import os

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import downgrade, upgrade
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from app import PROJECT_ROOT
from app.extensions import db

MIGRATIONS = str(PROJECT_ROOT / "migrations")
TABLES = {
    "categories",
    "systems",
    "examples",
    "players",
    "rounds",
    "reveals",
    "player_totals",
    "category_totals",
}


def fresh_postgres_url() -> str:
    base = make_url(os.environ["TEST_DATABASE_URL"])
    name = f"{base.database}_migrations"
    admin = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


def backend_url(tmp_path, backend: str) -> str:
    """A fresh, empty database of this backend; PostgreSQL only in its pass of `make test`."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'migrate.sqlite3'}"
    if not os.environ.get("TEST_DATABASE_URL", "").startswith("postgresql"):
        pytest.skip("PostgreSQL runs in the TEST_DATABASE_URL pass of `make test`")
    return fresh_postgres_url()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_upgrade_to_head_matches_models_and_downgrades(make_app, tmp_path, backend):
    app = make_app(SQLALCHEMY_DATABASE_URI=backend_url(tmp_path, backend))
    with app.app_context():
        upgrade(directory=MIGRATIONS, revision="head")
        tables = set(inspect(db.engine).get_table_names())
        assert tables >= TABLES
        with db.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
        assert diff == [], f"models and migrations differ: {diff}"
        downgrade(directory=MIGRATIONS, revision="base")
        remaining = set(inspect(db.engine).get_table_names())
        assert remaining <= {"alembic_version"}
        db.engine.dispose()

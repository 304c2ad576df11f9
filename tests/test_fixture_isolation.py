"""The `app` fixture reuses the created schema (tests/conftest.py): every test must still start on
empty tables whose ids start again, and a test that changed the schema must not leak it."""

from __future__ import annotations

import pytest
from sqlalchemy import func, inspect, select

from app.extensions import db
from tests import conftest, factories


def _row_counts() -> dict[str, int]:
    return {
        table.name: db.session.scalar(select(func.count()).select_from(table))
        for table in db.metadata.sorted_tables
    }


def test_the_app_starts_on_every_table_empty(ctx):
    assert set(inspect(db.engine).get_table_names()) >= {t.name for t in db.metadata.sorted_tables}
    assert set(_row_counts().values()) == {0}
    assert factories.player("first_of_its_test").id == 1


def test_clearing_empties_the_tables_and_restarts_the_ids(ctx, db_uri):
    if not db_uri.startswith("postgresql"):
        pytest.skip("SQLite: each test has its own copy of the template file (test above)")
    first = factories.player("before_clearing").id
    factories.example(boundary=3)
    assert sum(_row_counts().values()) > 1
    db.session.remove()
    conftest._pg_fresh_schema()
    assert set(_row_counts().values()) == {0}
    assert factories.player("after_clearing").id == first


def test_a_changed_schema_is_created_again(ctx, db_uri):
    if not db_uri.startswith("postgresql"):
        pytest.skip("SQLite: a test's schema changes stay in its own file")
    players = db.metadata.tables["players"]
    db.session.remove()
    db.drop_all()
    with db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE players (id integer PRIMARY KEY)")
    conftest._pg_fresh_schema()
    columns = {c["name"] for c in inspect(db.engine).get_columns("players")}
    assert columns == {c.name for c in players.columns}
    assert set(inspect(db.engine).get_table_names()) >= {t.name for t in db.metadata.sorted_tables}
    assert set(_row_counts().values()) == {0}

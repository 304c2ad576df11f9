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
    "categories", "systems", "examples", "players", "rounds", "reveals", "player_totals",
    "category_totals",
}  # fmt: skip


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


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_passages_are_backfilled_from_existing_examples_and_rounds(make_app, tmp_path, backend):
    """0005 links every existing example to its passages and records what players have read;
    its downgrade, with data in the tables, keeps the examples."""
    app = make_app(SQLALCHEMY_DATABASE_URI=backend_url(tmp_path, backend))
    with app.app_context():
        upgrade(directory=MIGRATIONS, revision="0004_player_survey")
        with db.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO categories (id, slug, name, description) "
                    "VALUES (1, 'news', 'News', '')"
                )
            )
            conn.execute(text("INSERT INTO systems (id, name) VALUES (1, 'm')"))
            for ex_id, source in (
                (1, '{"dataset": "d", "doc_id": "a"}'),
                (2, '{"dataset": "d", "doc_id": "a"}'),
                (3, '{"dataset": "d", "doc_id": "b", "splice_doc_id": "c"}'),
                (4, "{}"),
            ):
                conn.execute(
                    text(
                        "INSERT INTO examples (id, external_id, category_id, system_id, "
                        "sentences, n_sentences, boundary, source, meta, kind, "
                        'annotation_count, imported_at) VALUES (:id, :ext, 1, 1, \'["a", "b"]\','
                        " 2, 1, :source, '{}', 'normal', 0, CURRENT_TIMESTAMP)"
                    ),
                    {"id": ex_id, "ext": f"ex-{ex_id}", "source": source},
                )
            conn.execute(
                text(
                    "INSERT INTO players (id, is_guest, is_researcher, kind, profile_public, "
                    "created_at, session_version) "
                    "VALUES (1, TRUE, FALSE, 'public', FALSE, CURRENT_TIMESTAMP, 1)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO rounds (id, player_id, example_id, order_index, kind, "
                    "chosen_category, revealed, reasons, explanation, started_at) VALUES "
                    "(1, 1, 3, 1, 'normal', 'news', 1, '[]', '', CURRENT_TIMESTAMP)"
                )
            )
        upgrade(directory=MIGRATIONS, revision="head")
        with db.engine.connect() as conn:
            keys = dict(conn.execute(text("SELECT id, key FROM passages")).all())
            links = conn.execute(
                text("SELECT example_id, passage_id FROM example_passages ORDER BY 1, 2")
            ).all()
            read = conn.execute(text("SELECT player_id, passage_id FROM passage_reads")).all()
        by_example: dict[int, set[str]] = {}
        for example_id, passage_id in links:
            by_example.setdefault(example_id, set()).add(keys[passage_id])
        assert by_example == {1: {"d/a"}, 2: {"d/a"}, 3: {"d/b", "d/c"}, 4: {"example/ex-4"}}
        assert {keys[p] for _, p in read} == {"d/b", "d/c"}
        # A new passage after the backfill gets a fresh id (the PostgreSQL sequence moved on).
        with db.engine.begin() as conn:
            conn.execute(text("INSERT INTO passages (key) VALUES ('new/one')"))
        downgrade(directory=MIGRATIONS, revision="0004_player_survey")
        with db.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM examples")).scalar() == 4
        db.engine.dispose()

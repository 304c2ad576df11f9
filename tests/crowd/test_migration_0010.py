"""Migration 0010 keeps the bonuses already issued as `issued` ledger rows, one key each, and
records the run numbers already used so that no later run takes them again."""

from __future__ import annotations

import pytest
from flask_migrate import downgrade, upgrade
from sqlalchemy import text

from app.extensions import db
from tests.crowd.test_migration_0007 import CROWD_PLAYER, NOW, PILOT_STUDY
from tests.test_migrations import MIGRATIONS, backend_url


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_old_bonuses_become_issued_rows_and_used_runs_stay_used(make_app, tmp_path, backend):
    app = make_app(SQLALCHEMY_DATABASE_URI=backend_url(tmp_path, backend))
    with app.app_context():
        upgrade(directory=MIGRATIONS, revision="0009_indexed_pick")
        with db.engine.begin() as conn:
            for statement in (
                PILOT_STUDY,
                CROWD_PLAYER,
                "INSERT INTO participants (id, study_id, player_id, worker_id, status, schedule, "
                "started_at, rounds_done, checks_passed, checks_failed, comprehension_failures) "
                "VALUES (1, 1, 1, 'w1', 'completed', '[]', :now, 6, 2, 0, 0)",
                "INSERT INTO study_decisions (study_id, participant_id, run, decision, reasons, "
                "message, created_at) VALUES (1, 1, 1, 'approve', '[]', '', :now)",
            ):
                conn.execute(text(statement), {"id": 1, "now": NOW})
            for run, amount in ((1, 20), (2, 10)):  # a top-up after the cap was raised
                conn.execute(
                    text(
                        "INSERT INTO study_bonuses (study_id, participant_id, run, amount_minor, "
                        "issued_at) VALUES (1, 1, :run, :amount, :now)"
                    ),
                    {"run": run, "amount": amount, "now": NOW},
                )
        upgrade(directory=MIGRATIONS, revision="head")
        with db.engine.connect() as conn:
            bonuses = conn.execute(
                text("SELECT run, amount_minor, state, reason FROM study_bonuses ORDER BY run")
            ).all()
            runs = conn.execute(text("SELECT run FROM study_runs ORDER BY run")).scalars().all()
            void = conn.execute(text("SELECT checks_void FROM participants")).scalar()
        assert [tuple(b) for b in bonuses] == [
            (1, 20, "issued", "score (run 1)"),
            (2, 10, "issued", "score (run 2)"),
        ]
        assert runs == [1, 2] and void == 0
        downgrade(directory=MIGRATIONS, revision="0009_indexed_pick")
        with db.engine.connect() as conn:
            back = conn.execute(text("SELECT run, amount_minor FROM study_bonuses")).all()
        assert sorted(tuple(b) for b in back) == [(1, 20), (2, 10)]
        db.engine.dispose()

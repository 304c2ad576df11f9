"""Migration 0007 moves decisions made by older code off the participant, and back."""

from __future__ import annotations

import pytest
from flask_migrate import downgrade, upgrade
from sqlalchemy import text

from app.extensions import db
from tests.test_migrations import MIGRATIONS, backend_url

NOW = "2026-11-01 10:00:00"
# A study and a crowd player (`:id`) as the tables stood from 0004 on.
PILOT_STUDY = (
    "INSERT INTO studies (id, slug, title, platform, config, pool, created_at, is_open) "
    "VALUES (1, 'pilot', 'P', 'prolific', '{}', '{}', :now, true)"
)
CROWD_PLAYER = (
    "INSERT INTO players (id, is_guest, is_researcher, kind, created_at, profile_public, "
    "session_version) VALUES (:id, true, false, 'crowd', :now, false, 0)"
)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_approved_and_rejected_become_decisions_and_the_outcome_comes_back(
    make_app, tmp_path, backend
):
    app = make_app(SQLALCHEMY_DATABASE_URI=backend_url(tmp_path, backend))
    with app.app_context():
        upgrade(directory=MIGRATIONS, revision="0004_player_survey")
        with db.engine.begin() as conn:
            conn.execute(text(PILOT_STUDY), {"now": NOW})
            for pid, status, outcome, note in (
                (1, "approved", "completed", ""),
                (2, "rejected", "failed_checks", "failed 2 attention check(s)"),
                (3, "started", None, ""),
            ):
                conn.execute(text(CROWD_PLAYER), {"id": pid, "now": NOW})
                conn.execute(
                    text(
                        "INSERT INTO participants (id, study_id, player_id, worker_id, status, "
                        "schedule, started_at, rounds_done, checks_passed, checks_failed, "
                        "outcome, decision_note) VALUES (:id, 1, :id, :w, :s, '[]', :now, 0, 0, "
                        "0, :o, :n)"
                    ),
                    {"id": pid, "w": f"w{pid}", "s": status, "o": outcome, "n": note, "now": NOW},
                )
        upgrade(directory=MIGRATIONS, revision="head")
        with db.engine.connect() as conn:
            statuses = dict(conn.execute(text("SELECT id, status FROM participants")).all())
            decisions = conn.execute(
                text("SELECT participant_id, run, decision, reasons FROM study_decisions")
            ).all()
        assert statuses == {1: "completed", 2: "failed_checks", 3: "started"}
        by_id = {row.participant_id: row for row in decisions}
        assert set(by_id) == {1, 2}
        assert by_id[1].decision == "approve" and by_id[2].decision == "reject"
        assert "failed 2 attention check(s)" in str(by_id[2].reasons)
        downgrade(directory=MIGRATIONS, revision="0004_player_survey")
        with db.engine.connect() as conn:
            back = dict(conn.execute(text("SELECT id, status FROM participants")).all())
        assert back == {1: "approved", 2: "rejected", 3: "started"}
        db.engine.dispose()

"""Every CSV the project writes neutralises cells a spreadsheet would run as formulas: an
explanation =HYPERLINK(...) reached rounds.csv verbatim, a worker id -A277576 the study CSV."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from analysis.load import load
from analysis.report import ReportSettings, build_report
from app import PROJECT_ROOT
from app.extensions import db
from app.models import Round
from app.research.export_options import ExportOptions
from app.research.exports import export
from roftcore.spreadsheet import neutralise, neutralise_frame, restore, restore_frame
from tests import factories
from tests.analysis.test_report import ROFT
from tests.crowd.helpers import join, make_pool, make_study, play_slot
from tests.test_accounts import signup
from tests.test_leaderboard import play

FORMULA = '=HYPERLINK("http://x.invalid","click")'
WORKER = "-A277576"


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        (FORMULA, "'" + FORMULA),
        (WORKER, "'" + WORKER),
        ("+1+1", "'+1+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("\rcmd", "'\rcmd"),
        ("'quoted", "''quoted"),  # so that restore is exact
        ("-1.5", "-1.5"),  # a plain number stays a number
        ("plain text", "plain text"),
        ("", ""),
        (-3, -3),
        (None, None),
    ],
)
def test_the_rule_and_its_inverse(cell, written):
    assert neutralise(cell) == written
    assert restore(neutralise(cell)) == cell


def test_frames_keep_numbers_and_round_trip():
    frame = pd.DataFrame({"text": [FORMULA, "ok", None], "n": [-1, 2, 3]})
    safe = neutralise_frame(frame)
    assert safe["text"].tolist()[:2] == ["'" + FORMULA, "ok"] and safe["n"].tolist() == [-1, 2, 3]
    assert restore_frame(safe).equals(frame)


def test_research_export_neutralises_player_text_and_analysis_reads_it_back(ctx, tmp_path):
    factories.example(boundary=2)
    ada = factories.player("ada")
    ada.research_consent_at = ada.created_at
    db.session.commit()
    play(ada, "news", 2)
    db.session.query(Round).update({"explanation": FORMULA})
    db.session.commit()
    export(ExportOptions(out=tmp_path / "csv", format="csv"))
    export(ExportOptions(out=tmp_path / "pq", format="parquet"))
    with open(tmp_path / "csv" / "rounds.csv", newline="", encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    assert row["explanation"] == "'" + FORMULA
    assert all(not value.startswith(("=", "+", "@")) for value in row.values())
    assert load(tmp_path / "csv")["explanation"].tolist() == [FORMULA]
    assert load(tmp_path / "pq")["explanation"].tolist() == [FORMULA]


def test_study_workers_csv_and_verify_files_neutralise_worker_ids(app, client, runner, tmp_path):
    with app.app_context():
        make_pool()
        study = make_study(slug="pilot", platform="generic", rounds=2, attention_check_rate=0)
        participant = join(study, worker=WORKER)
        for _ in range(2):
            play_slot(study, participant)
    signup(client, username="rita")
    runner.invoke(args=["create-researcher", "rita"])
    download = client.get("/research/studies/pilot.csv")
    rows = list(csv.reader(io.StringIO(download.text)))
    assert rows[1][0] == "'" + WORKER
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{WORKER}\n", encoding="utf-8")
    result = runner.invoke(
        args=["study", "verify", "pilot", "--ids", str(ids), "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    decisions = list(csv.DictReader(io.StringIO((tmp_path / "decisions.csv").read_text())))
    assert decisions[0]["worker_id"] == "'" + WORKER


def test_analysis_report_tables_neutralise_text(tmp_path):
    frame = pd.read_csv(ROFT)
    frame["dataset"] = frame["dataset"].replace({frame["dataset"].iloc[0]: "=cmd|' /C calc'!A0"})
    source = tmp_path / "roft.csv"
    frame.to_csv(source, index=False)
    build_report(source, tmp_path / "report", ReportSettings(straight_line_k=5, bootstrap=20))
    written = (tmp_path / "report" / "by_category.csv").read_text(encoding="utf-8")
    assert "\n'=cmd|" in written and "\n=cmd" not in written


def test_no_csv_writer_bypasses_the_rule():
    """Every place that writes CSV goes through the one rule (roftcore/spreadsheet.py)."""
    writers = []
    for folder in ("app", "analysis", "generation"):
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if ".to_csv(" in text or "csv.writer(" in text or "csv.DictWriter(" in text:
                writers.append((path.relative_to(PROJECT_ROOT), "neutralise" in text))
    assert writers and all(safe for _, safe in writers), writers

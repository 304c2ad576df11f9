"""`flask study create / check / link / report / edit / close / reopen / delete` on files
written here. Verification has its own file (test_verify.py)."""

from __future__ import annotations

import csv
import io
import json

from sqlalchemy import func, select

from app.crowd import lookup
from app.extensions import db
from app.models import Example, Participant, Player, Round, Study
from app.research import card
from tests.crowd.helpers import join, make_pool, play_slot

STUDY_TOML = """
slug = "pilot"
title = "Spot the machine"
platform = "prolific"
rounds = 6
attention_check_rate = 0.34
target_per_example = 2
reward = 1.50
currency = "GBP"
expected_minutes = 6
categories = ["news"]
consent = "You will read short texts."
instructions = "Say when a machine took over."
stop_after_failed_checks = false

[completion_codes]
completed = "C1DONE01"
failed_checks = "C2FAIL02"
"""


def create(runner, tmp_path, text=STUDY_TOML, command="create"):
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return runner.invoke(args=["study", command, str(path)])


def test_create_prints_pool_pay_and_a_public_link(app, runner, ctx, tmp_path):
    make_pool()
    app.config["PUBLIC_URL"] = "https://roft.example.org"
    result = create(runner, tmp_path)
    assert result.exit_code == 0, result.output
    assert "Created study 'pilot' (prolific)" in result.output
    assert "2 attention checks (2 inside a text, 0 all-human)" in result.output
    assert "15.00 GBP/hour" in result.output
    assert (
        "Entry link: https://roft.example.org/study/pilot?PROLIFIC_PID={{%PROLIFIC_PID%}}"
        in result.output
    )
    assert "localhost" not in result.output
    assert "Warning" not in result.output
    link = runner.invoke(args=["study", "link", "pilot"])
    assert link.output.startswith("Entry link: https://roft.example.org/study/pilot?")


def test_without_public_url_no_link_is_made_up(app, runner, ctx, tmp_path):
    make_pool()
    result = create(runner, tmp_path)
    assert result.exit_code == 0, result.output
    assert "Set PUBLIC_URL" in result.output and "localhost" not in result.output
    app.config["SERVER_NAME"] = "roft.example.net"
    app.config["PREFERRED_URL_SCHEME"] = "https"
    link = runner.invoke(args=["study", "link", "pilot"])
    assert "Entry link: https://roft.example.net/study/pilot?PROLIFIC_PID=" in link.output


def test_create_reports_file_errors_rule_breaks_and_warnings(runner, ctx, tmp_path):
    make_pool()
    bad = create(runner, tmp_path, STUDY_TOML.replace("rounds = 6", "rounds = -1"))
    assert bad.exit_code != 0 and "study.toml: rounds: must be at least 1" in bad.output
    syntax = create(runner, tmp_path, 'slug = "ok"\ntitle = \n')
    assert syntax.exit_code != 0 and "not valid TOML" in syntax.output and "line 2" in syntax.output
    cheap = create(runner, tmp_path, STUDY_TOML.replace("reward = 1.50", "reward = 0.25"))
    assert cheap.exit_code != 0 and "below Prolific's minimum of 6.00 GBP/h" in cheap.output
    assert db.session.scalar(select(func.count()).select_from(Study)) == 0
    one_check = STUDY_TOML.replace("attention_check_rate = 0.34", "attention_check_rate = 0.17")
    warned = create(runner, tmp_path, one_check)
    assert warned.exit_code == 0, warned.output
    assert "Warning:" in warned.output and "at least two attention checks" in warned.output


def test_check_validates_without_creating(runner, ctx, tmp_path):
    make_pool()
    examples = db.session.scalar(select(func.count()).select_from(Example))
    result = create(runner, tmp_path, command="check")
    assert result.exit_code == 0, result.output
    assert "valid for prolific" in result.output and "2 attention check(s)" in result.output
    assert "the schedules of 20 workers were built from it and none runs out" in result.output
    assert db.session.scalar(select(func.count()).select_from(Study)) == 0
    # Nor the attention-check texts it built to try the pool.
    assert db.session.scalar(select(func.count()).select_from(Example)) == examples
    # The file of a study that exists is tried as well, under a name of its own.
    assert create(runner, tmp_path).exit_code == 0
    again = create(runner, tmp_path, command="check")
    assert again.exit_code == 0, again.output
    assert db.session.scalar(select(func.count()).select_from(Study)) == 1


def finish_workers(study):
    """w-good completes; w-fail fails both checks; w-mid stops after one round."""
    good = join(study, worker="w-good", session="s1")
    for _ in range(6):
        play_slot(study, good)
    failing = join(study, worker="w-fail", session="s2")
    for _ in range(6):
        play_slot(study, failing, pass_check=False)
    middle = join(study, worker="w-mid", session="s3")
    play_slot(study, middle)
    return good, failing, middle


def test_report_shows_progress_agreement_and_flags(runner, ctx, tmp_path):
    make_pool()
    create(runner, tmp_path)
    finish_workers(lookup.get_study("pilot"))
    report = runner.invoke(args=["study", "report", "pilot"])
    assert report.exit_code == 0, report.output
    assert "Participants: 3 (completed 1, failed_checks 1, started 1)" in report.output
    assert "configured 15.00 GBP/h" in report.output
    assert "Agreement:" in report.output and "Krippendorff's alpha" in report.output
    workers = runner.invoke(args=["study", "report", "pilot", "--workers"])
    table = workers.output[workers.output.index("worker_id,") :]
    rows = {r["worker_id"]: r for r in csv.DictReader(io.StringIO(table))}
    assert rows["w-fail"]["checks_failed"] == "2" and rows["w-good"]["status"] == "completed"


def test_edit_changes_wording_but_not_what_workers_play(runner, ctx, tmp_path):
    make_pool()
    create(runner, tmp_path)
    study = lookup.get_study("pilot")
    assert len(study.pool["inside_checks"]) == 6  # 2 per worker, three times over
    # Nobody joined yet: anything may change, and the checks are built again.
    path = tmp_path / "study.toml"
    path.write_text(STUDY_TOML.replace("rounds = 6", "rounds = 9"), encoding="utf-8")
    result = runner.invoke(args=["study", "edit", "pilot", str(path)])
    assert result.exit_code == 0, result.output
    assert "Study 'pilot' updated: rounds." in result.output
    db.session.refresh(study)
    assert lookup.config_of(study).rounds == 9
    assert len(study.pool["inside_checks"]) == 9  # 3 per worker now
    # Spares: one per round and per inside check (3 + 9), so that a worker who read a passage
    # in every other round still finds one unread; the pool has 16 texts.
    assert len(study.pool["spare_checks"]) == 12
    # The old checks are gone: 9 inside checks and 12 spares.
    assert db.session.scalar(select(func.count()).where(Example.kind == "attention_check")) == 21
    join(study, worker="w1")
    locked = STUDY_TOML.replace("rounds = 6", "rounds = 12")
    path.write_text(locked, encoding="utf-8")
    refused = runner.invoke(args=["study", "edit", "pilot", str(path)])
    assert refused.exit_code != 0 and "cannot change: rounds" in refused.output
    wording = STUDY_TOML.replace("rounds = 6", "rounds = 9").replace(
        'title = "Spot the machine"', 'title = "Spot the machine (wave 2)"'
    )
    path.write_text(wording, encoding="utf-8")
    ok = runner.invoke(args=["study", "edit", "pilot", str(path)])
    assert ok.exit_code == 0 and "updated: title" in ok.output
    db.session.refresh(study)
    assert study.title == "Spot the machine (wave 2)"


def test_close_and_reopen(runner, ctx, tmp_path):
    make_pool()
    create(runner, tmp_path)
    assert "closed" in runner.invoke(args=["study", "close", "pilot"]).output
    study = lookup.get_study("pilot")
    assert not study.is_open
    assert "open to new workers" in runner.invoke(args=["study", "reopen", "pilot"]).output
    db.session.refresh(study)
    assert study.is_open


def test_delete_needs_force_and_an_export_when_workers_joined(runner, ctx, tmp_path):
    make_pool()
    create(runner, tmp_path)
    study = lookup.get_study("pilot")
    finish_workers(study)
    examples_before = db.session.scalar(select(func.count()).select_from(Example))
    checks = sum(len(study.pool[k]) for k in ("inside_checks", "checks", "spare_checks"))
    refused = runner.invoke(args=["study", "delete", "pilot", "--yes"])
    assert refused.exit_code != 0 and "3 participant(s)" in refused.output
    no_export = runner.invoke(args=["study", "delete", "pilot", "--yes", "--force"])
    assert no_export.exit_code != 0 and "--force needs --export" in no_export.output
    out = tmp_path / "before-delete"
    done = runner.invoke(
        args=["study", "delete", "pilot", "--yes", "--force", "--export", str(out)]
    )
    assert done.exit_code == 0, done.output
    rounds_csv = (out / "rounds.csv").read_text(encoding="utf-8")
    assert rounds_csv.startswith("date,") and "w-good" in rounds_csv  # private: worker ids
    assert "w-fail" in (out / "study-workers.csv").read_text(encoding="utf-8")  # the report's
    # The export's own workers table is left as the export wrote it (its digest still holds).
    assert "w-fail" in (out / "workers.csv").read_text(encoding="utf-8")
    croissant = json.loads((out / "croissant.json").read_text(encoding="utf-8"))
    digests = {f["contentUrl"]: f["sha256"] for f in croissant["distribution"]}
    assert digests["workers.csv"] == card.sha256_of(out / "workers.csv")
    for model in (Study, Participant, Round):
        assert db.session.scalar(select(func.count()).select_from(model)) == 0
    assert db.session.scalar(select(func.count()).where(Player.kind == "crowd")) == 0
    remaining = db.session.scalar(select(func.count()).select_from(Example))
    assert remaining == examples_before - checks  # its checks went with it, nothing else
    assert db.session.scalar(select(func.max(Example.annotation_count))) == 0


def test_delete_an_unused_study(runner, ctx, tmp_path):
    make_pool()
    create(runner, tmp_path)
    result = runner.invoke(args=["study", "delete", "pilot", "--yes"])
    assert result.exit_code == 0 and "0 participant(s)" in result.output
    assert db.session.scalar(select(func.count()).select_from(Study)) == 0


def test_the_guides_example_runs_on_the_demo_data_without_a_warning(app, runner, ctx):
    """docs/running-a-study.md, steps 1 to 3, with the shipped example file."""
    from app import PROJECT_ROOT

    app.config["PUBLIC_URL"] = "https://roft.example.org"
    example = PROJECT_ROOT / "docs" / "examples" / "study.toml"
    assert runner.invoke(args=["load-demo"]).exit_code == 0
    checked = runner.invoke(args=["study", "check", str(example)])
    assert checked.exit_code == 0 and "Warning" not in checked.output, checked.output
    created = runner.invoke(args=["study", "create", str(example)])
    assert created.exit_code == 0 and "Warning" not in created.output, created.output
    assert "3 attention checks (2 inside a text, 1 all-human)" in created.output
    assert "10.00 GBP/hour" in created.output
    assert "Entry link: https://roft.example.org/study/news-pilot?PROLIFIC_PID=" in created.output


def test_an_http_public_url_gets_a_warning_at_start_up(make_app, caplog, monkeypatch):
    from app.crowd import routes

    monkeypatch.setattr(routes, "_warned_about", set())
    with caplog.at_level("WARNING"):
        make_app(PUBLIC_URL="http://roft.example.org")
    assert "PUBLIC_URL is http://roft.example.org, not an https address" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):  # once a process, however often the app is built
        make_app(PUBLIC_URL="http://roft.example.org")
    assert "not an https address" not in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        make_app(PUBLIC_URL="https://roft.example.org")
    assert "not an https address" not in caplog.text


def test_verify_writes_outside_version_control_by_default(app, runner, ctx, tmp_path):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    # Flask's instance folder is the repository's instance/, which version control ignores.
    assert Path(app.instance_path) == repo / "instance"
    assert "instance/" in (repo / ".gitignore").read_text(encoding="utf-8").split()
    app.instance_path = str(tmp_path / "instance")  # this test writes nothing into the repo
    make_pool()
    create(runner, tmp_path)
    ids = tmp_path / "ids.txt"
    ids.write_text("w-nobody\n", encoding="utf-8")
    result = runner.invoke(args=["study", "verify", "pilot", "--ids", str(ids)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "instance" / "studies" / "pilot" / "decisions"
    assert f"Files in {out}/" in result.output and (out / "decisions.csv").exists()


def test_the_http_public_url_warning_prints_once_a_command_and_not_for_help(tmp_path):
    import os
    import subprocess
    import sys

    from app import PROJECT_ROOT

    env = {
        **os.environ,
        "PUBLIC_URL": "http://roft.example.org",
        "FLASK_APP": "wsgi.py",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "CACHE_DIR": str(tmp_path / "cache"),
    }

    def warnings(*args: str) -> int:
        done = subprocess.run(
            [sys.executable, "-m", "flask", *args],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return (done.stdout + done.stderr).count("not an https address")

    assert warnings("--help") == 0
    assert warnings("db", "--help") == 0
    assert warnings("routes") == 1

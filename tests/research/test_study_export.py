"""`flask export --study SLUG` is about that study alone: its texts, workers and rounds, and a
dataset card, Croissant file and datasheet that state the study's real pay, time limit,
instructions as shown, checks and exclusions, compared here with the study file itself."""

from __future__ import annotations

import json

import pandas as pd
from sqlalchemy import select

from analysis import heds
from analysis.load import load
from app.crowd import lookup
from app.crowd.study_file import load_study_file
from app.extensions import db
from app.models import Example
from tests import factories
from tests.crowd.helpers import join, make_pool, play_slot
from tests.crowd.test_study_cli import STUDY_TOML

STUDY = (
    STUDY_TOML.replace(
        "rounds = 6",
        "rounds = 6\ntime_limit_minutes = 30\nscreened_out_pay = 0.30\n"
        'contact = "Dr Ada Reader, roft-study@example.org"',
    ).replace(
        'instructions = "Say when a machine took over."',
        'instructions = """\nRead each text and say when a machine took over.\n\n'
        'Take your time."""',
    )
    + "\n[bonus]\nper_exact = 0.05\ncap = 0.40\n"
)
URL = "https://roft.example.org"


def test_a_study_export_describes_the_study_from_its_file(app, runner, ctx, tmp_path):
    app.config["PUBLIC_URL"] = URL
    make_pool()
    # Texts of the site outside the study: a demo set in another category.
    for _ in range(3):
        factories.example(boundary=4, category_slug="stories")
    path = tmp_path / "study.toml"
    path.write_text(STUDY, encoding="utf-8")
    assert runner.invoke(args=["study", "create", str(path)]).exit_code == 0
    config = load_study_file(path)
    study = lookup.get_study("pilot")
    careful = join(study, "w-careful", "s1")
    for _ in range(6):
        play_slot(study, careful)
    failing = join(study, "w-fail", "s2")
    for _ in range(6):
        play_slot(study, failing, pass_check=False)

    out = tmp_path / "dump"
    result = runner.invoke(args=["export", str(out), "--format", "csv", "--study", "pilot"])
    assert result.exit_code == 0, result.output

    # Only the study's texts: its pool, checks and practice, never the stories.
    examples = pd.read_csv(out / "examples.csv")
    pool = {i for ids in study.pool.values() for i in ids}
    wanted = set(db.session.scalars(select(Example.external_id).where(Example.id.in_(pool))))
    assert set(examples["example_id"]) == wanted
    assert "stories" not in set(examples["category"])
    assert len(pd.read_csv(out / "rounds.csv")) == 12

    manifest = json.loads((out / "manifest.json").read_text())
    facts = manifest["study"]
    assert (facts["reward"], facts["currency"]) == (config.reward, config.currency)
    assert facts["time_limit_minutes"] == config.time_limit_minutes == 30
    assert facts["instructions"] == config.instructions.strip()
    assert facts["consent"] == config.consent.strip()
    assert facts["outcomes"] == {"completed": 1, "failed_checks": 1}
    assert manifest["task_instruction"].startswith(config.instructions.strip())

    readme = (out / "README.md").read_text()
    assert "## The study" in readme
    assert f"{config.reward:.2f} GBP for about {config.expected_minutes:g} minutes" in readme
    assert "(time limit 30 minutes)" in readme
    assert config.bonus.describe(config.currency) in readme
    assert "> Read each text and say when a machine took over." in readme
    assert "> Take your time." in readme
    assert f"failed_checks: {config.fail_after_checks} or more of the 2 attention checks" in readme
    assert "Screen-out payment: 0.30 GBP" in readme
    assert "choose to play" not in readme and "Not known to the site" in readme

    croissant = json.loads((out / "croissant.json").read_text())
    assert croissant["url"] == URL and "github.com/roft" not in json.dumps(croissant)
    assert config.title in croissant["description"]
    assert "1.50 GBP for about 6 minutes" in croissant["description"]
    assert croissant["rai:dataAnnotationProtocol"] == manifest["task_instruction"]

    steps = pd.DataFrame(
        columns=["step", "why", "applicable", "rows_removed", "annotators_removed", "rule"]
    )
    frame = load(out)
    sheet = heds.datasheet(frame, frame, steps, {}, manifest)
    assert sheet["design"]["time_limits"] == "30 minutes from consent to the last answer"
    assert sheet["evaluators"]["paid"].startswith("yes: 1.50 GBP for about 6 minutes")
    assert "Prolific workers" in sheet["evaluators"]["recruitment"]
    assert sheet["criterion"]["verbatim_instruction"] == manifest["task_instruction"]


def test_without_a_public_url_the_croissant_file_names_no_address(app, runner, ctx, tmp_path):
    app.config["PUBLIC_URL"] = None
    app.config["EXPORT_DATASET_URL"] = None
    make_pool()
    out = tmp_path / "dump"
    assert runner.invoke(args=["export", str(out), "--format", "csv"]).exit_code == 0
    croissant = json.loads((out / "croissant.json").read_text())
    assert "url" not in croissant

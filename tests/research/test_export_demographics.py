"""The platform's demographic export joined to a study export: pseudonymised, optional, age in
bands, and a bad file named with its line and nothing written."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from app.research import demographics, export_options, exports
from tests.crowd.helpers import join, make_pool, make_study, play_slot

# Prolific's column names; answers made up by the team.
PROLIFIC_CSV = """Submission id,Participant id,Status,Age,Sex,Country of residence,Language,\
Student status,Employment status
s1,PIDAAA111,APPROVED,23,Female,United Kingdom,English,Yes,Part-Time
s2,PIDBBB222,APPROVED,67,Male,Ireland,Irish,DATA_EXPIRED,Full-Time
s3,PIDZZZ999,RETURNED,41,Male,Canada,French,No,Unemployed
"""


def run_study():
    make_pool()
    study = make_study(rounds=2, attention_check_rate=0)
    for worker in ("PIDAAA111", "PIDBBB222", "PIDCCC333"):
        participant = join(study, worker=worker, session=f"sess-{worker}")
        for _ in range(2):
            play_slot(study, participant)
    return study


def test_the_study_export_joins_demographics_by_worker_and_keeps_ids_out(ctx, tmp_path):
    study = run_study()
    path = tmp_path / "prolific_export.csv"
    path.write_text(PROLIFIC_CSV, encoding="utf-8")
    out = tmp_path / "dump"
    result = exports.export(
        export_options.ExportOptions(out=out, study=study.slug, demographics=path, private=True)
    )
    workers = pd.read_csv(out / "workers.csv", keep_default_na=False).set_index("worker_id")
    assert workers.loc["PIDAAA111", "age_band"] == "18-24"
    assert workers.loc["PIDAAA111", "country"] == "United Kingdom"
    assert workers.loc["PIDBBB222", "age_band"] == "65+"
    assert workers.loc["PIDBBB222", "student_status"] == ""  # withheld by the platform
    assert workers.loc["PIDCCC333", ["age_band", "sex", "country"]].tolist() == ["", "", ""]
    assert workers.loc["PIDBBB222", "first_language"] == "Irish"
    facts = json.loads((out / "manifest.json").read_text())["study"]
    assert facts["demographics"] == {
        "file": "prolific_export.csv",
        "columns": list(demographics.COLUMNS),
        "workers_matched": 2,
        "workers": 3,
        "rows_of_other_workers": 1,
    }
    assert not any("demographics" in item for item in facts["not_known_to_the_site"])
    card = (out / "README.md").read_text()
    assert "joined by worker id for 2 of 3 workers" in card
    assert "PIDZZZ999" not in " ".join((out / name).read_text() for name in result.files[:1])

    # Shared (not private): the same answers under pseudonyms, and no platform id anywhere.
    shared = tmp_path / "shared"
    made = exports.export(
        export_options.ExportOptions(out=shared, study=study.slug, demographics=path)
    )
    rows = pd.read_csv(shared / "workers.csv", keep_default_na=False)
    assert sorted(rows["age_band"]) == ["", "18-24", "65+"]
    for name in made.files:
        text = (shared / name).read_text(encoding="utf-8", errors="ignore")
        assert "PIDAAA111" not in text and "PIDZZZ999" not in text


def test_without_the_file_the_columns_are_empty_and_the_card_says_so(ctx, tmp_path):
    study = run_study()
    exports.export(export_options.ExportOptions(out=tmp_path / "d", study=study.slug))
    rows = pd.read_csv(tmp_path / "d" / "workers.csv", keep_default_na=False)
    assert set(rows["age_band"]) == {""} and set(rows["country"]) == {""}
    facts = json.loads((tmp_path / "d" / "manifest.json").read_text())["study"]
    assert facts["demographics"] is None
    assert any("--demographics FILE" in item for item in facts["not_known_to_the_site"])
    croissant = json.loads((tmp_path / "d" / "croissant.json").read_text())
    assert croissant["rai:annotatorDemographics"].startswith("Not collected by the site")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Age,Sex\n30,Male\n", "line 1: no worker id column"),
        ("Participant id,Status\nP1,APPROVED\n", "line 1: no demographic column"),
        ("Participant id,Age\nP1,30\nP2,thirty\n", "line 3: age 'thirty' is not an age"),
        ("Participant id,Age\nP1,30\nP2\n", "line 3: 1 cells where the header has 2"),
        ("Participant id,Age\nP1,30\nP1,45\n", "line 3: worker P1 appears again"),
        ("", "the file is empty"),
        ('Participant id,Sex\nP1,"Female\nsee notes"\nP2,Male\nP3,Male,extra\n', "line 5: 3 cells"),
    ],
)
def test_a_bad_file_is_named_with_its_line_and_nothing_is_written(
    ctx, runner, tmp_path, text, error
):
    study = run_study()
    path = tmp_path / "demo.csv"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    result = runner.invoke(
        args=["export", str(out), "--study", study.slug, "--demographics", str(path)]
    )
    assert result.exit_code != 0
    assert f"{path}" in result.output and error in result.output
    assert not out.exists()


def test_demographics_need_a_study(ctx, runner, tmp_path):
    path = tmp_path / "demo.csv"
    path.write_text(PROLIFIC_CSV, encoding="utf-8")
    result = runner.invoke(args=["export", str(tmp_path / "o"), "--demographics", str(path)])
    assert result.exit_code != 0 and "--demographics needs --study" in result.output


def test_age_bands():
    bands = [demographics.age_band(a) for a in ("17", "18", "24", "25", "64", "65", "90")]
    assert bands == ["under 18", "18-24", "18-24", "25-34", "55-64", "65+", "65+"]
    for bad in ("", "abc", "7", "250"):
        with pytest.raises(ValueError):
            demographics.age_band(bad)

"""`flask import --format roft-csv`: the texts of a roft.csv file become playable examples."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from sqlalchemy import select

from app.catalog.roft_csv import RoftCsvError, convert, read_roft_csv_counted
from app.extensions import db
from app.models import Example
from roftcore.roft import shown_sentences

ROFT = Path(__file__).parent.parent / "analysis" / "data" / "roft_sample.csv"


def test_converter_makes_one_example_per_text():
    read = read_roft_csv_counted(ROFT).records
    records = {r.meta["roft_model"]: r for r in read}
    assert len(read) == 5
    news = records["grover_mega"]
    assert news.boundary == 4 and len(news.sentences) == 10 and news.decoding_p == 0.4
    assert news.category == "news"
    human = records["human"]
    assert human.system == "human" and human.boundary == 10 and human.decoding is None
    stories = next(r for r in read if r.boundary == 1)
    assert stories.decoding is None  # p missing in the file


def test_converter_names_bad_rows():
    row = {
        "model": "m",
        "dataset": "news",
        "dec_strat_value": "0.5",
        "true_boundary_index": "2",
        "prompt_body": "One._SEP_Two.",
        "gen_body": "Three.",
    }
    with pytest.raises(RoftCsvError, match="row 2: the prompt has 2 sentence"):
        convert([row])
    with pytest.raises(RoftCsvError, match="no column"):
        convert([{"model": "m"}])


def test_import_roft_command(research_app, research_runner):
    result = research_runner.invoke(args=["import", "--format", "roft-csv", str(ROFT)])
    assert result.exit_code == 0, result.output
    assert "Imported 5 example(s)" in result.output
    with research_app.app_context():
        rows = db.session.scalars(select(Example)).all()
        assert sorted(e.boundary for e in rows) == [1, 4, 6, 7, 10]
    again = research_runner.invoke(args=["import", "--format", "roft-csv", str(ROFT)])
    assert again.exit_code != 0 and "already imported" in again.output
    assert str(ROFT) in again.output
    skipped = research_runner.invoke(
        args=["import", "--format", "roft-csv", str(ROFT), "--on-duplicate", "skip"]
    )
    assert skipped.exit_code == 0 and "Skipped 5" in skipped.output


def _long_rows() -> list[dict]:
    """A machine text whose generation runs on past the 10 shown sentences (as roft.csv's often
    do, up to 48), and an all-human text with a generation that was never shown."""
    machine = {
        "model": "gpt2-xl",
        "dataset": "Recipes",
        "dec_strat_value": "0.4",
        "true_boundary_index": "2",
        "prompt": "7",
        "prompt_body": "_SEP_".join(f"Human {i}." for i in range(3)),
        "generation": "8",
        "gen_body": "_SEP_".join(f"Machine {i}." for i in range(3, 15)),
    }
    human = {
        **machine,
        "true_boundary_index": "9",
        "prompt_body": "_SEP_".join(f"Person {i}." for i in range(10)),
        "gen_body": "_SEP_".join(f"Unseen {i}." for i in range(10, 14)),
    }
    return [machine, human]


def test_converter_keeps_exactly_the_ten_sentences_roft_showed():
    converted = convert(_long_rows())
    machine, human = converted.records
    assert machine.sentences == [
        *(f"Human {i}." for i in range(3)),
        *(f"Machine {i}." for i in range(3, 10)),
    ]
    assert machine.boundary == 3 and machine.system == "gpt2-xl"
    assert machine.meta["roft_sentences_dropped"] == 5
    # Only the prompt was on screen: all human, whatever the row's generation says.
    assert human.sentences == [f"Person {i}." for i in range(10)]
    assert human.boundary == 10 and human.system == "human" and human.decoding is None
    assert human.meta["roft_sentences_dropped"] == 4
    assert (converted.texts_trimmed, converted.sentences_dropped) == (2, 9)
    assert "Dropped 9 sentence(s)" in converted.dropped_message()
    assert "2 of 2 text(s)" in converted.dropped_message()
    # The analysis reads the same sentences for the detector.
    shown, dropped = shown_sentences(_long_rows()[0]["prompt_body"], _long_rows()[0]["gen_body"])
    assert shown == machine.sentences and dropped == 5


def test_import_command_says_how_many_sentences_it_dropped(research_app, research_runner, tmp_path):
    original = ROFT.read_text(encoding="utf-8")
    with ROFT.open(encoding="utf-8", newline="") as handle:
        fields = next(csv.reader(handle))
    path = tmp_path / "roft.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(original if original.endswith("\n") else original + "\n")
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        for row in _long_rows():
            writer.writerow(row)
    result = research_runner.invoke(args=["import", "--format", "roft-csv", str(path)])
    assert result.exit_code == 0, result.output
    assert "Dropped 9 sentence(s) that RoFT never showed, from 2 of 7 text(s)" in result.output
    with research_app.app_context():
        rows = db.session.scalars(select(Example)).all()
        assert len(rows) == 7
        assert max(len(e.sentences) for e in rows) == 10
    plain = research_runner.invoke(args=["import", "--format", "roft-csv", str(ROFT)])
    assert "nothing was dropped" in plain.output

"""Example files: validation (pure), and `flask import` against a real database."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from app.catalog.importer import ImportFailed, import_file
from app.catalog.records import RecordError, parse_lines, validate
from app.extensions import db
from app.models import Category, Example, ExamplePassage, Passage, System


def good(i: int = 1, **changes) -> dict:
    record = {
        "id": f"news-{i:04d}-gpt2xl",
        "category": "news",
        "system": "gpt2-xl",
        "sentences": [f"Sentence {k}." for k in range(10)],
        "boundary": 4,
        "decoding": {"strategy": "nucleus", "p": 0.73},
        "seed": 123,
        "source": {"dataset": "demo-news", "doc_id": "n17", "splitter": "pysbd 0.3.4"},
        "meta": {"prompt_format": "plain"},
    }
    record.update(changes)
    return record


def write(path, records) -> None:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records),
        encoding="utf-8",
    )


def count(model) -> int:
    return db.session.scalar(select(func.count()).select_from(model))


# -- pure validation ------------------------------------------------------------------------


def test_valid_record_parses_with_p():
    record = validate(good(), 1)
    assert record.boundary == 4
    assert record.decoding_p == 0.73
    assert len(record.sentences) == 10


def test_all_human_record_with_null_decoding():
    record = validate(good(boundary=10, decoding=None, system="human"), 1)
    assert record.boundary == 10
    assert record.decoding_p is None


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"boundary": 0}, "boundary must be an integer from 1 to 10"),
        ({"boundary": 11}, "boundary must be an integer from 1 to 10"),
        ({"boundary": "4"}, "boundary must be an integer"),
        ({"boundary": True}, "boundary must be an integer"),
        ({"sentences": ["only one"]}, "at least 2"),
        ({"sentences": ["a", ""]}, "sentences[1] must be a non-empty string"),
        ({"category": "News Stories"}, "category must be a lowercase slug"),
        ({"decoding": {"p": 1.5}}, "decoding.p must be a number in [0, 1]"),
        ({"decoding": {"p": -0.1}}, "decoding.p must be a number in [0, 1]"),
        ({"seed": "x"}, "seed must be an integer"),
        ({"system": ""}, "system must be a non-empty string"),
        ({"extra": 1}, "unknown field(s): extra"),
    ],
)
def test_invalid_records_name_the_problem(changes, fragment):
    with pytest.raises(RecordError) as error:
        validate(good(**changes), 7)
    assert fragment in str(error.value)
    assert error.value.line == 7


def test_missing_fields_are_listed():
    record = good()
    del record["boundary"], record["system"]
    with pytest.raises(RecordError, match="missing field"):
        validate(record, 1)


def test_parse_lines_reports_json_errors_and_duplicates_by_line():
    lines = [json.dumps(good(1)), "", "{not json", json.dumps(good(1))]
    results = list(parse_lines(lines))
    errors = [r for r in results if isinstance(r, RecordError)]
    assert [e.line for e in errors] == [3, 4]
    assert "not valid JSON" in errors[0].message
    assert "already appears on line 1" in errors[1].message


# -- import service and CLI -----------------------------------------------------------------


def test_import_creates_categories_systems_and_examples(ctx, tmp_path):
    path = tmp_path / "examples.jsonl"
    write(path, [good(1), good(2, category="stories", system="gpt2"), good(3, boundary=10)])
    report = import_file(path)
    assert report.imported == 3
    assert sorted(report.new_categories) == ["news", "stories"]
    assert count(Example) == 3
    assert count(Category) == 2
    assert count(System) == 2
    stored = db.session.scalar(select(Example).where(Example.external_id == "news-0001-gpt2xl"))
    assert stored.boundary == 4 and stored.n_sentences == 10 and stored.decoding_p == 0.73
    assert stored.source["splitter"] == "pysbd 0.3.4"


def test_malformed_file_names_file_and_line_and_imports_nothing(ctx, tmp_path):
    path = tmp_path / "bad.jsonl"
    write(path, [good(1), good(2), good(3, boundary=12), "[1, 2]"])
    with pytest.raises(ImportFailed) as failed:
        import_file(path)
    message = str(failed.value)
    assert f"{path}:3:" in message and "boundary" in message
    assert f"{path}:4:" in message and "expected a JSON object" in message
    assert count(Example) == 0
    assert count(Category) == 0


def test_reimport_is_refused_by_default_and_skipped_on_request(ctx, tmp_path):
    first = tmp_path / "a.jsonl"
    write(first, [good(1), good(2)])
    import_file(first)
    second = tmp_path / "b.jsonl"
    write(second, [good(2), good(3)])
    with pytest.raises(ImportFailed, match="already imported"):
        import_file(second)
    assert count(Example) == 2
    report = import_file(second, on_duplicate="skip")
    assert report.imported == 1
    assert report.skipped == ["news-0002-gpt2xl"]
    assert count(Example) == 3


def test_cli_import_success_and_failure(runner, ctx, tmp_path):
    path = tmp_path / "examples.jsonl"
    write(path, [good(i) for i in range(1, 6)])
    result = runner.invoke(args=["import", str(path)])
    assert result.exit_code == 0, result.output
    assert "Imported 5 example(s)" in result.output
    again = runner.invoke(args=["import", str(path)])
    assert again.exit_code != 0
    assert "already imported" in again.output
    bad = tmp_path / "bad.jsonl"
    write(bad, [good(10), "{"])
    failed = runner.invoke(args=["import", str(bad)])
    assert failed.exit_code != 0
    assert f"{bad}:2:" in failed.output
    assert count(Example) == 5


def test_cli_import_missing_file_is_a_clear_error(runner, tmp_path):
    result = runner.invoke(args=["import", str(tmp_path / "nope.jsonl")])
    assert result.exit_code != 0
    assert "cannot read file" in result.output


def test_cli_import_non_utf8_file(runner, ctx, tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(good(1)).encode() + b"\n\xff\xfe\n")
    result = runner.invoke(args=["import", str(path)])
    assert result.exit_code != 0
    assert "not UTF-8" in result.output
    assert count(Example) == 0


# -- display labels ---------------------------------------------------------------------------


def test_system_label_is_kept_with_each_example_and_passages_are_linked(ctx, tmp_path):
    with pytest.raises(RecordError, match="system_label"):
        validate(good(system_label="x" * 101), 3)
    path = tmp_path / "labelled.jsonl"
    write(path, [good(1, system_label="GPT-2 XL"), good(2)])
    import_file(path)
    labels = dict(db.session.execute(select(Example.external_id, Example.system_label)).all())
    assert labels == {"news-0001-gpt2xl": "GPT-2 XL", "news-0002-gpt2xl": None}
    # Every example is linked to its source passage (both variants of n17 share it).
    assert count(ExamplePassage) == 2 and count(Passage) == 1

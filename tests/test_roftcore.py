"""The contracts package: pure (no Flask, SQLAlchemy or pandas), one home for every contract, and
provenance carried from an example file through `flask import` into every export format."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from sqlalchemy import select

from app import PROJECT_ROOT
from app.catalog import records as app_records
from app.extensions import db
from app.game import reasons as app_reasons
from app.game import scoring as app_scoring
from app.models import Example
from app.research import export_files, export_options, exports
from roftcore import boundary, reasons, records
from tests import factories
from tests.research.helpers import consent, play

DIGEST = "ab" * 32
PROVENANCE = {
    "model": "/models/tiny-llama",
    "weights_sha256": DIGEST,
    "hub_commit": None,
    "code_version": "generation 0.2.0 (git 0123456789ab)",
    "generation": {"temperature": 1.0, "top_k": None, "model_defaults_overridden": {"top_k": 50}},
}


def record(**changes) -> dict:
    base = {
        "id": "news-prov-1",
        "category": "news",
        "system": "tiny-llama",
        "sentences": [f"Sentence {i}." for i in range(10)],
        "boundary": 4,
        "decoding": {"strategy": "sampling", "p": 0.9, "temperature": 0.7, "top_k": 40},
        "seed": 7,
        "source": {"dataset": "t", "doc_id": "d1", "splitter": "pysbd 0.3.4"},
        "meta": {},
        "system_label": "A small test model",
        "provenance": PROVENANCE,
    }
    base.update(changes)
    return base


def imported_after(code: str, roots: tuple[str, ...]) -> list[str]:
    found = f"{{m for m in sys.modules if m.split('.')[0] in {roots!r}}}"
    probe = f"import sys; {code}; print(sorted({found}))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    return eval(done.stdout)


def test_the_package_imports_nothing_heavy_and_the_app_re_exports_it():
    core = "import roftcore.boundary, roftcore.reasons, roftcore.records, roftcore.roft"
    assert imported_after(core, ("flask", "sqlalchemy", "pandas", "app", "torch")) == []
    analysis = "import analysis.load, analysis.report, analysis.comments"
    assert imported_after(analysis, ("flask", "sqlalchemy", "app")) == []
    assert app_scoring.points is boundary.points and app_scoring.verdict is boundary.verdict
    assert app_reasons.REASONS is reasons.REASONS
    assert app_records.validate is records.validate


def test_roft_index_conversion_is_one_less():
    assert boundary.to_roft_index(10) == 9 and boundary.from_roft_index(9) == 10
    assert boundary.points(4, 4) == 5 and boundary.points(6, 4) == 3 and boundary.points(3, 4) == 0


def test_provenance_and_label_are_validated():
    parsed = records.validate(record(), 3)
    assert parsed.system_label == "A small test model"
    assert parsed.provenance["weights_sha256"] == DIGEST
    assert parsed.to_json()["provenance"] == PROVENANCE
    bad = [
        ({"system_label": "x" * 101}, "system_label"),
        ({"system_label": ""}, "system_label"),
        ({"provenance": {**PROVENANCE, "weights_sha256": "abc"}}, "weights_sha256"),
        ({"provenance": "gpt2"}, "provenance must be an object"),
        ({"provenance": {**PROVENANCE, "generation": [1]}}, "provenance.generation"),
        ({"decoding": {"top_k": -1}}, "decoding.top_k"),
        ({"decoding": {"min_p": 2}}, "decoding.min_p"),
        ({"decoding": {"temperature": float("nan")}}, "decoding.temperature"),
    ]
    for changes, fragment in bad:
        with pytest.raises(records.RecordError, match=fragment):
            records.validate(record(**changes), 3)


@pytest.mark.parametrize("fmt", export_options.FORMATS)
def test_provenance_goes_through_import_into_the_database_and_every_export(
    app, runner, tmp_path, fmt
):
    path = tmp_path / "examples.jsonl"
    path.write_text(json.dumps(record()) + "\n", encoding="utf-8")
    result = runner.invoke(args=["import", str(path)])
    assert result.exit_code == 0, result.output
    with app.app_context():
        stored = db.session.scalar(select(Example).where(Example.external_id == "news-prov-1"))
        assert stored.system_label == "A small test model"
        assert stored.provenance == PROVENANCE
        factories.example(boundary=3)  # an example without provenance
        player = consent(factories.player())
        for _ in range(2):
            play(player, 5)
        result = exports.export(export_options.ExportOptions(out=tmp_path / "out", format=fmt))
    if fmt == "sqlite":
        import sqlite3

        with sqlite3.connect(tmp_path / "out" / export_files.SQLITE_NAME) as conn:
            tables = {t: pd.read_sql(f"SELECT * FROM {t}", conn) for t in ("rounds", "examples")}
    else:
        read = pd.read_csv if fmt == "csv" else pd.read_parquet
        tables = {t: read(tmp_path / "out" / f"{t}.{fmt}") for t in ("rounds", "examples")}
    assert result.counts["rounds"] == 2
    for name, table in tables.items():
        ours = table[table["example_id"] == "news-prov-1"]
        assert len(ours) >= 1, name
        row = ours.iloc[0]
        assert row["weights_sha256"] == DIGEST
        assert row["provenance_model"] == "/models/tiny-llama"
        assert row["code_version"].startswith("generation 0.2.0")
        assert row["system_label"] == "A small test model"
        assert json.loads(row["provenance"]) == PROVENANCE
        other = table[table["example_id"] != "news-prov-1"].iloc[0]
        assert pd.isna(other["weights_sha256"]) or other["weights_sha256"] == ""


def test_the_boundary_convention_is_in_docs_and_every_help(runner, capsys):
    doc = (PROJECT_ROOT / "docs" / "boundary.md").read_text(encoding="utf-8")
    assert "0-based index of the first machine-written sentence" in doc
    assert "boundary.md" in (PROJECT_ROOT / "docs" / "data-dictionary.md").read_text()
    assert "first machine-" in runner.invoke(args=["import", "--help"]).output
    from analysis.__main__ import main as analysis_main
    from generation.cli import main as generation_main

    for main, argv in (
        (generation_main, ["generate", "--help"]),
        (analysis_main, ["report", "--help"]),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        help_text = " ".join(capsys.readouterr().out.split())
        assert "first machine-written sentence" in help_text and "all human" in help_text

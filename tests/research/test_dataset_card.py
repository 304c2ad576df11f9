"""Exports others can load: a dataset card, Croissant 1.1 metadata, and tables (empty ones too)
whose columns keep the schema's types in pandas, Arrow, `datasets` and mlcroissant."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from app.extensions import db
from app.research import card, export_files, export_options, export_schema, exports
from tests import factories
from tests.research.helpers import consent, play

TABLES = ("rounds", "examples", "players", "votes", "workers")


def export_to(app, folder, fmt: str, **options) -> export_options.ExportResult:
    with app.app_context():
        return exports.export(export_options.ExportOptions(out=folder, format=fmt, **options))


def schema_tables(private: bool = False) -> dict[str, list[dict]]:
    return export_schema.schema(private)["tables"]


def front_matter(path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    header, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(header), body


@pytest.fixture
def played(research_app):
    """Two texts (one without a seed), one consenting player with two answered rounds."""
    with research_app.app_context():
        seeded = factories.example(boundary=3, category_slug="news")
        seeded.seed = 11
        unseeded = factories.example(boundary=10, category_slug="stories", p=None)
        unseeded.seed = None
        db.session.commit()
        player = consent(factories.player())
        play(player, 3, explanation="the topic changes")
        play(player, 10)
    return research_app


# --- types: empty tables and integers ---------------------------------------------------------


def test_an_empty_parquet_table_keeps_every_column_type(research_app, tmp_path):
    result = export_to(research_app, tmp_path / "empty", "parquet")
    assert result.counts == {name: 0 for name in TABLES}
    for table, columns in schema_tables().items():
        arrow = pq.read_schema(tmp_path / "empty" / f"{table}.parquet")
        assert arrow.names == [c["name"] for c in columns]
        for column in columns:
            expected = card.TYPES[column["type"]].arrow
            assert arrow.field(column["name"]).type == expected, (table, column["name"])
        frame = pd.read_parquet(tmp_path / "empty" / f"{table}.parquet")
        assert len(frame) == 0
        for column in columns:
            dtype = str(frame[column["name"]].dtype)
            if column["type"] == "integer":
                assert dtype in ("int64", "Int64"), (table, column["name"], dtype)
            if column["type"] in ("string", "date"):
                assert dtype in ("str", "string", "object"), (table, column["name"], dtype)
            assert dtype not in ("float64", "null") or column["type"] == "float"


def test_integer_columns_stay_integers_with_missing_values(played, tmp_path):
    export_to(played, tmp_path / "p", "parquet")
    examples = pd.read_parquet(tmp_path / "p" / "examples.parquet")
    assert str(examples["seed"].dtype) == "Int64"
    assert examples["seed"].isna().sum() == 1 and 11 in set(examples["seed"].dropna())
    rounds = pd.read_parquet(tmp_path / "p" / "rounds.parquet")
    for column in schema_tables()["rounds"]:
        if column["type"] == "integer":
            assert str(rounds[column["name"]].dtype) in ("int64", "Int64"), column["name"]
    assert sorted(rounds["boundary"]) == [3, 10]
    arrow = pq.read_schema(tmp_path / "p" / "examples.parquet")
    assert str(arrow.field("seed").type) == "int64"


def test_an_empty_csv_table_loads_with_pandas(research_app, tmp_path):
    export_to(research_app, tmp_path / "e", "csv")
    for table, columns in schema_tables().items():
        frame = pd.read_csv(tmp_path / "e" / f"{table}.csv")
        assert list(frame.columns) == [c["name"] for c in columns] and len(frame) == 0


# --- datasets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_datasets_loads_every_table_of_an_export_with_an_empty_table(played, tmp_path, fmt):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / fmt
    result = export_to(played, folder, fmt)
    assert result.counts["votes"] == 0  # an empty table among full ones
    for table, columns in schema_tables().items():
        # datasets builds no split of 0 rows from files; streaming reads an empty table's
        # features (the card says so).
        loaded = datasets.load_dataset(
            str(folder),
            table,
            split="train",
            cache_dir=str(tmp_path / "hf-cache"),
            streaming=result.counts[table] == 0,
        )
        assert len(list(loaded)) == result.counts[table]
        assert loaded.column_names == [c["name"] for c in columns]
        for column in columns:
            kind = card.TYPES[column["type"]]
            expected = kind.hf_parquet if fmt == "parquet" else kind.hf_text
            assert loaded.features[column["name"]].dtype == expected, (table, column["name"])
    # Without a config name: the default config, rounds.
    rounds = datasets.load_dataset(str(folder), split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert sorted(rounds["boundary"]) == [3, 10]


# --- the card ---------------------------------------------------------------------------------


def test_the_card_has_its_header_fields_sizes_and_sections(played, tmp_path):
    result = export_to(played, tmp_path / "c", "parquet")
    header, body = front_matter(tmp_path / "c" / "README.md")
    assert header["license"] == "cc-by-4.0"
    assert header["task_categories"] == ["text-classification"]
    assert header["size_categories"] == ["n<1K"]
    configs = {c["config_name"]: c for c in header["configs"]}
    assert set(configs) == set(TABLES)
    for table in TABLES:
        assert configs[table]["data_files"] == [{"split": "train", "path": f"{table}.parquet"}]
    info = {c["config_name"]: c for c in header["dataset_info"]}
    assert [f["name"] for f in info["examples"]["features"]] == [
        c["name"] for c in schema_tables()["examples"]
    ]
    for section in (
        "## Fields", "## Sizes", "## Licence", "## How the data was collected", "## Intended uses",
        "## Limitations", "## Pseudonymisation",
    ):  # fmt: skip
        assert section in body, section
    for columns in schema_tables().values():  # every column of the one schema table
        for column in columns:
            assert f"| `{column['name']}` | {column['type']} |" in body
    assert f"| `rounds` | {result.counts['rounds']} |" in body
    assert "keyed pseudonyms" in body and "zelda" not in body
    assert "Empty in this export: `votes`" in body and "streaming=True" in body


def test_the_licence_comes_from_the_config(played, tmp_path):
    played.config["EXPORT_LICENSE"] = "CC0-1.0"
    export_to(played, tmp_path / "l", "csv")
    header, body = front_matter(tmp_path / "l" / "README.md")
    assert header["license"] == "cc0-1.0" and "publicdomain/zero" in body
    metadata = json.loads((tmp_path / "l" / "croissant.json").read_text())
    assert metadata["license"] == "https://creativecommons.org/publicdomain/zero/1.0/"


def test_a_new_table_gets_its_card_and_croissant_entries_from_the_schema_alone():
    doc = export_schema.schema()
    doc["tables"]["workers"] = [
        {"name": "worker", "type": "string", "unit": "", "description": "pseudonym"},
        {"name": "rounds", "type": "integer", "unit": "rounds", "description": "rounds played"},
    ]
    manifest = {
        "format": "parquet",
        "counts": {"rounds": 5, "workers": 2},
        "private": False,
        "include_unconsented": False,
        "filters": {},
        "created_at": "2026-01-02T03:04:05+00:00",
        "pseudonyms": "keyed HMAC",
    }
    text = card.card(doc, manifest, {"workers.parquet": 10}, "cc-by-4.0", ["# Export", ""])
    header = yaml.safe_load(text[4:].split("\n---\n", 1)[0])
    assert {
        "config_name": "workers",
        "data_files": [{"split": "train", "path": "workers.parquet"}],
    } in (header["configs"])
    workers = next(c for c in header["dataset_info"] if c["config_name"] == "workers")
    assert workers["features"] == [
        {"name": "worker", "dtype": "string"},
        {"name": "rounds", "dtype": "int64"},
    ]
    assert "### workers" in text and "| `rounds` | integer | rounds |" in text
    metadata = card.croissant(doc, manifest, {"workers.parquet": "0" * 64}, "cc-by-4.0", "u")
    record = next(r for r in metadata["recordSet"] if r["@id"] == "workers")
    assert [(f["name"], f["dataType"]) for f in record["field"]] == [
        ("worker", "sc:Text"),
        ("rounds", "sc:Integer"),
    ]
    assert record["field"][1]["source"]["fileObject"] == {"@id": "workers.parquet"}


# --- Croissant --------------------------------------------------------------------------------


def test_croissant_lists_files_with_sha256_fields_with_types_and_rai(played, tmp_path):
    result = export_to(played, tmp_path / "x", "parquet")
    metadata = json.loads((tmp_path / "x" / "croissant.json").read_text())
    assert metadata["@type"] == "sc:Dataset"
    assert metadata["conformsTo"] == "http://mlcommons.org/croissant/1.1"
    files = {f["contentUrl"]: f for f in metadata["distribution"]}
    assert set(files) == {f"{t}.parquet" for t in TABLES}
    for name, entry in files.items():
        digest = hashlib.sha256((tmp_path / "x" / name).read_bytes()).hexdigest()
        assert entry["sha256"] == digest and entry["@type"] == "cr:FileObject"
    records = {r["@id"]: r for r in metadata["recordSet"]}
    for table, columns in schema_tables().items():
        fields = records[table]["field"]
        assert [f["name"] for f in fields] == [c["name"] for c in columns]
        assert [f["dataType"] for f in fields] == [card.TYPES[c["type"]].croissant for c in columns]
    for key in (
        "rai:dataCollection", "rai:personalSensitiveInformation", "rai:dataUseCases",
        "rai:annotatorDemographics", "rai:dataLimitations", "rai:dataBiases",
    ):  # fmt: skip
        assert metadata[key], key
    assert str(result.counts["rounds"]) in records["rounds"]["description"]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "sqlite"])
def test_mlcroissant_validates_the_metadata_and_reads_the_records(played, tmp_path, fmt):
    mlc = pytest.importorskip("mlcroissant")
    result = export_to(played, tmp_path / fmt, fmt)
    dataset = mlc.Dataset(jsonld=str(tmp_path / fmt / "croissant.json"))
    assert dataset.metadata.name == "roft-annotations"
    issues = dataset.metadata.ctx.issues
    assert not issues.errors and not issues.warnings, issues.report()
    if fmt == "sqlite":  # Croissant reads no records from SQLite: the file is listed alone
        assert [f.name for f in dataset.metadata.distribution] == [export_files.SQLITE_NAME]
        assert not dataset.metadata.record_sets
        return
    rows = list(dataset.records(record_set="rounds"))
    assert len(rows) == result.counts["rounds"] == 2
    assert sorted(int(r["rounds/boundary"]) for r in rows) == [3, 10]
    examples = list(dataset.records(record_set="examples"))
    assert len(examples) == result.counts["examples"]

"""Writing a research export's files: the tables as CSV, Parquet or SQLite, each column of its
schema type, then schema.json, schema.md, manifest.json, the dataset card (README.md) and the
Croissant metadata (app.research.card)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from flask import current_app

from app.research import card
from app.research.export_options import ExportOptions
from app.research.export_schema import arrow_schema, schema, schema_markdown, typed
from roftcore.spreadsheet import neutralise_frame

SQLITE_NAME = "roft-export.sqlite"


def _iso(values: pd.Series) -> pd.Series:
    converted = pd.to_datetime(values, utc=True)
    return converted.dt.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00").where(converted.notna(), None)


def _write_parquet(frame: pd.DataFrame, columns: list[dict], path: Path) -> None:
    """Parquet with the schema's Arrow types (a 0-row table keeps them; no null-typed columns).
    An empty table is written with no row group at all: readers such as `datasets` take the
    batch size from the first row group, and a row group of 0 rows stops them."""
    table = pa.Table.from_pandas(frame, schema=arrow_schema(columns), preserve_index=False)
    if table.num_rows == 0:
        with pq.ParquetWriter(path, table.schema):
            pass
        return
    pq.write_table(table, path)


def _readme(manifest: dict) -> list[str]:
    lines = []
    if manifest["private"]:
        lines += [
            "# PRIVATE RoFT export: contains usernames and worker ids",
            "",
            "This export was made with --private: the `username` and `worker_id` columns "
            "identify players and crowd workers. Do not share it outside the research team.",
        ]
    else:
        lines += [
            "# RoFT research export (pseudonymised)",
            "",
            "Players appear only as keyed pseudonyms; no usernames, emails, passwords or sessions.",
        ]
    lines += [
        "",
        f"Made {manifest['created_at']} as {manifest['format']}: "
        f"{manifest['counts']['rounds']} rounds, {manifest['counts']['examples']} examples, "
        f"{manifest['counts']['players']} players, "
        f"{manifest['counts'].get('workers', 0)} crowd workers.",
        "Rounds: "
        + (
            "ALL players, including those who did not consent to research use."
            if manifest["include_unconsented"]
            else "only players who consented to research use."
        ),
        f"Filters: {json.dumps(manifest['filters'])}.",
        "",
        "Columns: see schema.md (schema.json for programs) or the Fields section below; "
        "croissant.json describes the same in Croissant 1.1. Load in pandas with "
        "`analysis.load.load(folder)` or read rounds.* directly; run "
        "`python -m analysis report FOLDER --out REPORT` for the standard report.",
        "",
    ]
    if plan := manifest.get("preregistration"):
        lines += [
            f"Analysis plan: `{plan['file']}` holds the preregistration of study "
            f"`{plan['study']}` as frozen before its data ({plan['versions']} version(s); the "
            f"latest's SHA-256 of its canonical JSON is `{plan['sha256']}`). Workers' and "
            "rounds' `condition` is the condition each worker was randomised to.",
            "",
        ]
    return lines


def _for_text(frame: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """Timestamps as ISO 8601 text (CSV and SQLite have no time zone-aware type)."""
    frame = frame.copy()
    for name, (kind, _unit, _desc) in columns.items():
        if kind == "timestamp" and name in frame:
            frame[name] = _iso(frame[name])
    return frame


def write(tables: dict[str, pd.DataFrame], options: ExportOptions, manifest: dict) -> list[str]:
    folder = Path(options.out)
    doc = schema(options.private)
    specs = {
        name: {c["name"]: (c["type"], c["unit"], c["description"]) for c in cols}
        for name, cols in doc["tables"].items()
    }
    files = []
    tables = {name: typed(frame, doc["tables"][name]) for name, frame in tables.items()}
    if options.format == "csv":
        for name, frame in tables.items():
            neutralise_frame(_for_text(frame, specs[name])).to_csv(
                folder / f"{name}.csv", index=False
            )
            files.append(f"{name}.csv")
    elif options.format == "parquet":
        for name, frame in tables.items():
            _write_parquet(frame, doc["tables"][name], folder / f"{name}.parquet")
            files.append(f"{name}.parquet")
    else:
        path = folder / SQLITE_NAME
        with sqlite3.connect(path) as conn:
            for name, frame in tables.items():
                text = _for_text(frame, specs[name])
                for column in text.columns:
                    if str(text[column].dtype) in ("boolean", "bool"):
                        text[column] = text[column].astype("Int64")
                text.to_sql(name, conn, index=False)
            pd.DataFrame([{"key": k, "value": json.dumps(v)} for k, v in manifest.items()]).to_sql(
                "export_info", conn, index=False
            )
        conn.close()
        files.append(SQLITE_NAME)
    (folder / "schema.json").write_text(json.dumps(doc, indent=2))
    (folder / "schema.md").write_text(schema_markdown(options.private))
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    license = card.license_id(current_app.config.get("EXPORT_LICENSE"))
    sizes = {name: (folder / name).stat().st_size for name in files}
    (folder / card.CARD_NAME).write_text(
        card.card(doc, manifest, sizes, license, _readme(manifest)), encoding="utf-8"
    )
    digests = {name: card.sha256_of(folder / name) for name in files}
    # The project's own address from configuration; none rather than a made-up one.
    url = current_app.config.get("EXPORT_DATASET_URL") or current_app.config.get("PUBLIC_URL")
    metadata = card.croissant(doc, manifest, digests, license, url)
    (folder / card.CROISSANT_NAME).write_text(
        json.dumps(metadata, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    return [*files, "schema.json", "schema.md", "manifest.json", "README.md", card.CROISSANT_NAME]

"""Research exports: pseudonymised rounds, examples, players, votes and crowd workers as CSV,
Parquet or SQLite.

One export is one folder: the tables, `schema.md` and `schema.json` (every column, its type and
unit), `manifest.json` (what was exported, how, and with which filters), `README.md` (a Hugging
Face dataset card) and `croissant.json` (Croissant 1.1 metadata); see app.research.card. Every
column has the type the schema gives it in every format, also in an empty table.

- The rounds table starts with the twenty columns of the public RoFT dataset (`roft.csv`), in its
  order and meaning (positions converted at this edge: true_boundary_index = boundary - 1,
  predicted_boundary_index = guess - 1), followed by our richer columns.
- The workers table has one row per crowd-study participant of the exported studies, also those
  with no rounds (screened out, returned before answering), with their status and current
  decision; its `annotator` is the rounds table's pseudonym, so the two join.
- Only answered rounds are annotations; only rounds of players who consented to research use are
  exported unless `include_unconsented` is set.
- Players appear as pseudonyms: an HMAC-SHA256 of the player id keyed with EXPORT_PSEUDONYM_KEY
  (or SECRET_KEY), stable across exports made with the same key. No username, password material or
  session data is exported unless `private` is set, and a private export says so in its README,
  manifest, schema and (SQLite) `export_info` table.
- Every table is read in one transaction (REPEATABLE READ on PostgreSQL, one read transaction on
  SQLite in WAL mode), so the files agree with each other while the site keeps running.

`export` is the one entry point. Its steps live in their own modules: app.research.export_read
reads the database, app.research.export_tables builds the tables, app.research.export_files
writes them; app.research.export_schema holds every column and app.research.export_options what
an export is asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from sqlalchemy import select

from app.crowd import preregistration
from app.extensions import db
from app.models import Study
from app.models.base import utcnow
from app.research import card, demographics, study_facts
from app.research.export_files import SQLITE_NAME, write
from app.research.export_options import FORMATS, ExportError, ExportOptions, ExportResult
from app.research.export_read import collect
from app.research.export_tables import build_tables
from app.research.pseudonyms import pseudonym_key

# The study's frozen analysis plan, every version (app/crowd/preregistration.py).
PLAN_NAME = "preregistration.json"
KNOWN_FILES = (
    *(
        f"{t}.{ext}"
        for t in ("rounds", "examples", "players", "votes", "workers")
        for ext in ("csv", "parquet")
    ),
    "schema.json",
    "schema.md",
    "manifest.json",
    "README.md",
    card.CROISSANT_NAME,
    PLAN_NAME,
)
TASK_INSTRUCTION = (
    "Sentences of a text are revealed one at a time; the first is always written by a person. "
    "When you think the latest sentence was written by a machine, say so and tell us why; if you "
    "reach the end and think the whole text is human-written, say that."
)


CSV_CELLS = (
    "CSV only: a text cell that begins with =, +, -, @, a tab or a carriage return (or an "
    "apostrophe) is written with one more apostrophe in front, so that spreadsheets do not run it "
    "as a formula; analysis.load removes it"
)


def _plan_document(options: ExportOptions, workers: pd.DataFrame) -> dict | None:
    """The frozen analysis plan of the exported study: the one asked for with --study, or the
    only study the export's workers took part in."""
    slugs = [options.study] if options.study else sorted(set(workers["study"]))
    if len(slugs) != 1:
        return None
    study = db.session.scalar(select(Study).where(Study.slug == slugs[0]))
    return preregistration.export_document(study) if study is not None else None


def export(options: ExportOptions, progress: Callable[[str], None] | None = None) -> ExportResult:
    """Make one export folder (see the module docstring)."""
    if options.format not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}")
    folder = Path(options.out)
    if folder.exists() and any(folder.iterdir()) and not options.overwrite:
        raise ExportError(f"{folder} is not empty; choose a new folder or pass --overwrite")
    answers = None
    if options.demographics is not None:
        if not options.study:
            raise ExportError("--demographics needs --study: the file is one study's export")
        try:
            answers = demographics.read(Path(options.demographics))
        except demographics.DemographicsError as error:
            raise ExportError(str(error)) from None
    raw = collect(options, progress)
    raw["demographics"] = answers
    if options.overwrite and folder.exists():
        for name in (*KNOWN_FILES, SQLITE_NAME):
            (folder / name).unlink(missing_ok=True)
    tables = build_tables(raw, options, pseudonym_key())
    if progress:
        progress("tables")
    counts = {name: len(frame) for name, frame in tables.items()}
    manifest = {
        "source": "roft-site",
        "created_at": utcnow().isoformat(),
        "format": options.format,
        "private": options.private,
        "include_unconsented": options.include_unconsented,
        "filters": {
            "category": list(options.categories),
            "since": options.since.isoformat() if options.since else None,
            "study": options.study,
        },
        "counts": counts,
        "pseudonyms": "p_ + first 20 hex digits of HMAC-SHA256(key, 'roft-player:<id>'); key = "
        "EXPORT_PSEUDONYM_KEY or else SECRET_KEY (not stored here)",
        "positions": "true_boundary_index = boundary - 1; predicted_boundary_index = guess - 1",
        "survey": "recipe_familiarity, news_familiarity, stories_familiarity, gen_familiarity and "
        "native_speaker are the player's answers on the optional /survey page (-1 = not given); "
        "read_guide is not recorded (-1)",
        "task_instruction": TASK_INSTRUCTION,
        "csv_cells": CSV_CELLS,
    }
    plan = _plan_document(options, tables["workers"])
    if plan is not None:
        latest = plan["versions"][-1]
        manifest["preregistration"] = {
            "file": PLAN_NAME,
            "study": plan["study"],
            "versions": len(plan["versions"]),
            "sha256": latest["sha256"],
        }
    if options.study:
        # The study's own facts (pay, limits, checks, exclusions, its words as shown).
        joined = None
        if answers is not None:
            ids = raw["workers"]["worker_id"]
            joined = {
                "file": Path(options.demographics).name,
                "columns": list(demographics.COLUMNS),
                "workers_matched": int(ids.isin(answers).sum()),
                "workers": len(ids),
                "rows_of_other_workers": len(set(answers) - set(ids)),
            }
        manifest["study"] = study_facts.study_facts(options.study, joined)
        manifest["task_instruction"] = study_facts.instruction_text(manifest["study"])
    folder.mkdir(parents=True, exist_ok=True)
    if plan is not None:
        (folder / PLAN_NAME).write_text(json.dumps(plan, indent=2), encoding="utf-8")
    files = write(tables, options, manifest)
    if plan is not None:
        files.append(PLAN_NAME)
    if progress:
        progress("files")
    return ExportResult(folder=folder, files=files, counts=counts)

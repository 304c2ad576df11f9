"""Workers' demographics from the platform's own export, for `flask export --study SLUG
--demographics FILE`.

Prolific lets a researcher download, per study, a CSV with one row per submission: the worker's id
and the answers they gave Prolific (age, sex, country of residence, language, student and
employment status, ...). The site never asks these questions; the runner may give the file to the
export, which joins it to the `workers` table by worker id and keeps only the columns below. The
worker id itself never leaves the export (the rows carry the keyed pseudonym); age is given in
bands, so that age, sex and country together single out fewer people in a small study. Values the
platform withholds (DATA_EXPIRED, CONSENT_REVOKED, blank) are empty.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

# Exported column: (type, unit, description), as the export's data dictionary lists them.
COLUMNS: dict[str, tuple[str, str, str]] = {
    "age_band": (
        "string",
        "years",
        "age in bands (under 18, 18-24, 25-34, 35-44, 45-54, 55-64, 65+) from the platform's "
        "export; empty when not given (demographics are optional: see `--demographics`)",
    ),
    "sex": ("string", "", "sex or gender as the worker told the platform; empty when not given"),
    "country": ("string", "", "country of residence per the platform; empty when not given"),
    "nationality": ("string", "", "nationality per the platform; empty when not given"),
    "first_language": ("string", "", "first language per the platform; empty when not given"),
    "student_status": ("string", "", "student status per the platform; empty when not given"),
    "employment_status": (
        "string",
        "",
        "employment status per the platform; empty when not given",
    ),
}
# Header names in the platforms' exports (lower case, spaces and dashes as _) for each column.
HEADERS = {
    "age_band": ("age",),
    "sex": ("sex", "gender"),
    "country": ("country_of_residence", "country"),
    "nationality": ("nationality",),
    "first_language": ("first_language", "language"),
    "student_status": ("student_status",),
    "employment_status": ("employment_status",),
}
ID_HEADERS = ("participant_id", "prolific_pid", "participant", "workerid", "worker_id")
# What the platform writes where it withholds an answer.
WITHHELD = {"", "data_expired", "consent_revoked", "n/a", "none", "prefer not to say"}
BANDS = ((18, 24), (25, 34), (35, 44), (45, 54), (55, 64))
MAX_CELL = 80


class DemographicsError(ValueError):
    """The file cannot be read as a platform's demographic export; the message names the file
    and, where it can, the line."""


def _key(header: str) -> str:
    return re.sub(r"[\s\-]+", "_", header.strip().lower())


def age_band(value: str) -> str:
    """'18-24' … '65+' for an age in years; ValueError for anything else."""
    age = int(float(value))
    if not 16 <= age <= 120:
        raise ValueError(value)
    for low, high in BANDS:
        if age <= high:
            return f"{low}-{high}" if age >= low else f"under {low}"
    return "65+"


def read(path: Path) -> dict[str, dict[str, str]]:
    """{worker id: {column: value}} from a platform's export; raises DemographicsError naming the
    file and line of what it cannot read. Rows of one worker must agree."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise DemographicsError(f"{path}: cannot read the file ({error})") from None
    # A quoted cell may hold a line break: the reader counts the file's lines itself.
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next(rows, None)
    if not header:
        raise DemographicsError(f"{path}: the file is empty")
    keys = [_key(h) for h in header]
    id_at = next((keys.index(h) for h in ID_HEADERS if h in keys), None)
    if id_at is None:
        raise DemographicsError(
            f"{path}, line 1: no worker id column (one of: Participant id, PROLIFIC_PID, WorkerId)"
        )
    where = {
        column: next((keys.index(h) for h in names if h in keys), None)
        for column, names in HEADERS.items()
    }
    if all(at is None for at in where.values()):
        raise DemographicsError(
            f"{path}, line 1: no demographic column (looked for: Age, Sex, Country of residence, "
            "Nationality, Language, Student status, Employment status)"
        )
    found: dict[str, dict[str, str]] = {}
    for row in rows:
        line = rows.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise DemographicsError(
                f"{path}, line {line}: {len(row)} cells where the header has {len(header)}"
            )
        worker = row[id_at].strip()
        if not worker:
            raise DemographicsError(f"{path}, line {line}: the worker id is empty")
        values = {}
        for column, at in where.items():
            cell = row[at].strip() if at is not None else ""
            if cell.lower() in WITHHELD:
                cell = ""
            elif column == "age_band":
                try:
                    cell = age_band(cell)
                except ValueError:
                    raise DemographicsError(
                        f"{path}, line {line}: age {cell!r} is not an age in years"
                    ) from None
            values[column] = cell[:MAX_CELL]
        if found.get(worker, values) != values:
            raise DemographicsError(
                f"{path}, line {line}: worker {worker} appears again with other answers"
            )
        found[worker] = values
    return found

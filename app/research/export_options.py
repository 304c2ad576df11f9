"""What a research export is asked for (`ExportOptions`), what it returns (`ExportResult`),
and the error that refuses one (`ExportError`); app.research.exports makes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

FORMATS = ("csv", "parquet", "sqlite")


class ExportError(ValueError):
    """The export cannot be made as asked; the message says why."""


@dataclass
class ExportOptions:
    out: Path
    format: str = "csv"
    private: bool = False
    include_unconsented: bool = False
    categories: list[str] = field(default_factory=list)
    since: datetime | None = None
    study: str | None = None
    overwrite: bool = False
    # The platform's demographic export (CSV) to join to the study's workers; --study only.
    demographics: Path | None = None


@dataclass
class ExportResult:
    folder: Path
    files: list[str]
    counts: dict[str, int]

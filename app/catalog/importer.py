"""Import examples into the database: validate everything first, then write in one transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from app.catalog import pools
from app.catalog.records import ExampleRecord, RecordError, parse_lines
from app.extensions import all_or_nothing, db
from app.models import Category, Example, System

MAX_REPORTED_ERRORS = 20
CHUNK = 500


class ImportFailed(Exception):
    """Nothing was imported; `errors` name the file and line of every problem found."""

    def __init__(self, path: Path, errors: list[str]):
        self.path = path
        self.errors = errors
        shown = errors[:MAX_REPORTED_ERRORS]
        more = len(errors) - len(shown)
        tail = f"\n  … and {more} more" if more > 0 else ""
        super().__init__(
            f"{path}: nothing imported, {len(errors)} problem(s):\n  " + "\n  ".join(shown) + tail
        )


@dataclass
class ImportReport:
    path: Path
    imported: int = 0
    skipped: list[str] = field(default_factory=list)
    new_categories: list[str] = field(default_factory=list)
    new_systems: list[str] = field(default_factory=list)
    # How many imported examples went to normal play, the daily challenge, or neither.
    pools: dict[str, int] = field(default_factory=dict)


def read_records(path: Path) -> list[ExampleRecord]:
    """Every record of the file, or ImportFailed listing each bad line."""
    try:
        with path.open(encoding="utf-8") as handle:
            results = list(parse_lines(handle))
    except OSError as error:
        raise ImportFailed(path, [f"{path}: cannot read file ({error.strerror})"]) from None
    except UnicodeDecodeError as error:
        raise ImportFailed(path, [f"{path}: not UTF-8 text ({error.reason})"]) from None
    errors = [f"{path}:{r.line}: {r.message}" for r in results if isinstance(r, RecordError)]
    if errors:
        raise ImportFailed(path, errors)
    records = [r for r in results if isinstance(r, ExampleRecord)]
    if not records:
        raise ImportFailed(path, [f"{path}: no examples in the file"])
    return records


def _existing_ids(ids: list[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        found.update(
            db.session.scalars(select(Example.external_id).where(Example.external_id.in_(chunk)))
        )
    return found


def _get_or_create(model, key: str, value: str, created: list[str], **extra):
    row = db.session.scalar(select(model).where(getattr(model, key) == value))
    if row is None:
        row = model(**{key: value}, **extra)
        db.session.add(row)
        db.session.flush()
        created.append(value)
    return row


def import_file(
    path: Path,
    on_duplicate: str = "error",
    progress: Callable[[int], None] | None = None,
    reserve_daily: float = 0.0,
) -> ImportReport:
    """Import a JSONL file all-or-nothing (see import_records)."""
    return import_records(
        Path(path), read_records(Path(path)), on_duplicate, progress, reserve_daily
    )


def import_records(
    path: Path,
    records: list[ExampleRecord],
    on_duplicate: str = "error",
    progress: Callable[[int], None] | None = None,
    reserve_daily: float = 0.0,
) -> ImportReport:
    """Write validated records in one transaction; `path` names their source in messages.

    on_duplicate: "error" refuses everything when an id is already in the database;
    "skip" leaves those examples as they are and imports the rest.
    reserve_daily: the share of the file's new passages (per category) held back for the daily
    challenge (see app/catalog/pools.py).
    """
    if on_duplicate not in ("error", "skip"):
        raise ValueError("on_duplicate must be 'error' or 'skip'")
    if not 0 <= reserve_daily <= 1:
        raise ValueError("reserve_daily must be between 0 and 1")
    report = ImportReport(path)
    existing = _existing_ids([r.id for r in records])
    if existing and on_duplicate == "error":
        listed = sorted(existing)
        raise ImportFailed(
            path,
            [
                f"{path}: {len(listed)} id(s) already imported, e.g. {', '.join(listed[:5])}; "
                "use --on-duplicate skip to import only the new ones"
            ],
        )
    with all_or_nothing():
        categories: dict[str, Category] = {}
        systems: dict[str, System] = {}
        batch = []
        imported: list[Example] = []
        for record in records:
            if record.id in existing:
                report.skipped.append(record.id)
                if progress:
                    progress(1)
                continue
            if record.category not in categories:
                categories[record.category] = _get_or_create(
                    Category,
                    "slug",
                    record.category,
                    report.new_categories,
                    name=record.category.replace("-", " ").replace("_", " ").title(),
                    description="",
                )
            if record.system not in systems:
                systems[record.system] = _get_or_create(
                    System, "name", record.system, report.new_systems
                )
            batch.append(
                _example(record, categories[record.category].id, systems[record.system].id)
            )
            if len(batch) >= CHUNK:
                _write(batch, imported, progress)
                batch = []
        if batch:
            _write(batch, imported, progress)
        report.imported = len(imported)
        report.pools = pools.place_new_examples(imported, reserve_daily)
    return report


def _example(record: ExampleRecord, category_id: int, system_id: int) -> Example:
    """The new example of a validated record, not annotated yet."""
    return Example(
        external_id=record.id,
        category_id=category_id,
        system_id=system_id,
        sentences=record.sentences,
        n_sentences=len(record.sentences),
        boundary=record.boundary,
        decoding=record.decoding,
        decoding_p=record.decoding_p,
        seed=record.seed,
        source=record.source,
        meta=record.meta,
        system_label=record.system_label,
        provenance=record.provenance,
        annotation_count=0,
    )


def _write(batch: list[Example], imported: list[Example], progress) -> None:
    db.session.add_all(batch)
    db.session.flush()
    imported.extend(batch)
    if progress:
        progress(len(batch))

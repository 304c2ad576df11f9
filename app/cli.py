"""The app-wide operator commands: `flask import`, `flask load-demo` and `flask show-config`.

The other commands are on their blueprints' command lines (`Blueprint.cli`, each without a group
of its own, so a command keeps its name at the top of `flask`): each package's `*cli.py`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from flask import Flask, current_app
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from tqdm import tqdm

from app.catalog.importer import ImportFailed, import_records, read_records
from app.catalog.roft_csv import RoftCsvError, read_roft_csv_counted
from app.config import PROJECT_ROOT
from app.errors import ServiceError
from app.extensions import db
from app.models import Example


@contextmanager
def refusals(prefix: str = "") -> Iterator[None]:
    """A service's refusal (ServiceError) as the command's error: its message, after `prefix`."""
    try:
        yield
    except ServiceError as refused:
        raise click.ClickException(f"{prefix}{refused.message}") from None


def _read(path: Path, fmt: str) -> list:
    if fmt == "roft-csv":
        converted = read_roft_csv_counted(path)
        click.echo(converted.dropped_message())
        return converted.records
    return read_records(path)


def _run_import(
    path: Path, on_duplicate: str, fmt: str = "jsonl", reserve_daily: float = 0.0
) -> None:
    try:
        records = _read(path, fmt)
        with tqdm(total=len(records), unit="ex", desc=f"Importing {path.name}") as bar:
            report = import_records(
                path,
                records,
                on_duplicate=on_duplicate,
                progress=bar.update,
                reserve_daily=reserve_daily,
            )
    except (ImportFailed, RoftCsvError) as failed:
        raise click.ClickException(str(failed)) from None
    except IntegrityError:
        raise click.ClickException(
            f"{path}: nothing imported: another import added some of these ids at the same "
            "time. Run the import again with --on-duplicate skip."
        ) from None
    click.echo(f"Imported {report.imported} example(s) from {path}.")
    if report.skipped:
        click.echo(f"Skipped {len(report.skipped)} id(s) that were already imported.")
    if report.new_categories:
        click.echo(f"New categories: {', '.join(report.new_categories)}")
    if report.new_systems:
        click.echo(f"New systems: {', '.join(report.new_systems)}")
    if report.pools.get("daily") or report.pools.get("spare"):
        click.echo(
            f"Held back for the daily challenge: {report.pools['daily']} example(s); "
            f"in normal play: {report.pools['normal']}."
        )
        if report.pools["spare"]:
            click.echo(
                f"Not served anywhere: {report.pools['spare']} spliced example(s) that mix a "
                "passage of normal play with one held back."
            )


SHARE = click.FloatRange(0, 1)


def register_cli(app: Flask) -> None:
    """The app-wide commands, on app.cli: `import` and `load-demo` fill app/catalog, which has no
    blueprint, and `show-config` is about the whole site. Every other command is on the command
    line of its package's blueprint (each package's `cli` modules)."""

    @app.cli.command("import")
    @click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
    @click.option(
        "--on-duplicate",
        type=click.Choice(["error", "skip"]),
        default="error",
        show_default=True,
        help="What to do with ids already in the database: refuse the whole file, or skip them.",
    )
    @click.option(
        "--format",
        "fmt",
        type=click.Choice(["jsonl", "roft-csv"]),
        default="jsonl",
        show_default=True,
        help="jsonl: the example file format. roft-csv: the public RoFT dataset (roft.csv); "
        "each distinct text becomes an example of the sentences RoFT showed, the first 10 "
        "(boundary = true_boundary_index + 1); the sentences dropped are counted.",
    )
    @click.option(
        "--reserve-daily",
        type=SHARE,
        default=0.0,
        show_default=True,
        metavar="SHARE",
        help="Hold back this share (0-1) of the file's new passages, in each category, for the "
        "daily challenge: every variant of a held-back passage is served only there.",
    )
    def import_command(file: Path, on_duplicate: str, fmt: str, reserve_daily: float) -> None:
        """Import examples from FILE.

        Every record is validated first; if any is wrong, nothing is imported and each problem
        is reported with its file and line. Categories and systems are created as needed; each
        example's provenance and system_label (what players are told wrote the text) are stored
        with it.

        Positions: a record's boundary is the 0-based index of the first machine-written
        sentence, 1..N, and N means all human (docs/boundary.md); roft.csv's
        true_boundary_index is one less.
        """
        _run_import(file, on_duplicate, fmt, reserve_daily)

    @app.cli.command("load-demo")
    @click.option("--if-empty", is_flag=True, help="Do nothing when examples already exist.")
    @click.option(
        "--reserve-daily",
        type=SHARE,
        default=None,
        metavar="SHARE",
        help="Share of the demo's passages held back for the daily challenge "
        "(default: DEMO_DAILY_SHARE, 0.75).",
    )
    def load_demo(if_empty: bool, reserve_daily: float | None) -> None:
        """Import the shipped demo examples (data/demo/examples.jsonl)."""
        if if_empty and db.session.scalar(select(func.count(Example.id))):
            click.echo("The database already has examples; demo not loaded.")
            return
        path = Path(current_app.config["DEMO_DATA_PATH"])
        if not path.is_absolute():
            path = PROJECT_ROOT / path
        share = current_app.config["DEMO_DAILY_SHARE"] if reserve_daily is None else reserve_daily
        _run_import(path, "skip", reserve_daily=share)

    @app.cli.command("show-config")
    def show_config() -> None:
        """Print where the site keeps its data (no secrets)."""
        uri = current_app.config["SQLALCHEMY_DATABASE_URI"]
        redacted = uri.split("@")[-1] if "@" in uri else uri
        click.echo(f"database: {redacted}")
        click.echo(f"redis: {'set' if current_app.config.get('REDIS_URL') else 'not set'}")
        click.echo(f"instance folder: {current_app.instance_path}")
        click.echo(
            f"SECRET_KEY from environment: {'yes' if os.environ.get('SECRET_KEY') else 'no'}"
        )

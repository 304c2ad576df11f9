"""Operator commands: `flask import`, `flask load-demo`, `flask create-researcher`."""

from __future__ import annotations

import os
from pathlib import Path

import click
from flask import Flask, current_app
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from tqdm import tqdm

from app import PROJECT_ROOT
from app.accounts import service as accounts
from app.catalog.importer import ImportFailed, import_records, read_records
from app.catalog.roft_csv import RoftCsvError, read_roft_csv
from app.errors import ServiceError
from app.extensions import db
from app.models import Example


def _read(path: Path, fmt: str) -> list:
    if fmt == "roft-csv":
        return read_roft_csv(path)
    return read_records(path)


def _run_import(path: Path, on_duplicate: str, fmt: str = "jsonl") -> None:
    try:
        records = _read(path, fmt)
        with tqdm(total=len(records), unit="ex", desc=f"Importing {path.name}") as bar:
            report = import_records(path, records, on_duplicate=on_duplicate, progress=bar.update)
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


def register_cli(app: Flask) -> None:
    from app.crowd.cli import register_study_cli
    from app.research.cli import register_research_cli

    register_study_cli(app)
    register_research_cli(app)

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
        "each distinct text becomes an example (boundary = true_boundary_index + 1).",
    )
    def import_command(file: Path, on_duplicate: str, fmt: str) -> None:
        """Import examples from FILE.

        Every record is validated first; if any is wrong, nothing is imported and each problem
        is reported with its file and line. Categories and systems are created as needed; each
        example's provenance and system_label are stored with it.

        Positions: a record's boundary is the 0-based index of the first machine-written
        sentence, 1..N, and N means all human (docs/boundary.md); roft.csv's
        true_boundary_index is one less.
        """
        _run_import(file, on_duplicate, fmt)

    @app.cli.command("load-demo")
    @click.option("--if-empty", is_flag=True, help="Do nothing when examples already exist.")
    def load_demo(if_empty: bool) -> None:
        """Import the shipped demo examples (data/demo/examples.jsonl)."""
        if if_empty and db.session.scalar(select(func.count(Example.id))):
            click.echo("The database already has examples; demo not loaded.")
            return
        path = Path(current_app.config["DEMO_DATA_PATH"])
        if not path.is_absolute():
            path = PROJECT_ROOT / path
        _run_import(path, "skip")

    @app.cli.command("create-researcher")
    @click.argument("username")
    @click.option(
        "--password",
        envvar="ROFT_RESEARCHER_PASSWORD",
        help="Password (default: asked for; or set ROFT_RESEARCHER_PASSWORD).",
    )
    def create_researcher(username: str, password: str | None) -> None:
        """Create a researcher account USERNAME, or make an existing account a researcher."""
        existing = accounts.find_by_username(username)
        if existing is not None:
            existing.is_researcher = True
            db.session.commit()
            click.echo(f"{existing.username} is now a researcher.")
            return
        if password is None:
            password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
        try:
            player = accounts.sign_up(username, password, consent=False, researcher=True)
        except ServiceError as refused:
            raise click.ClickException(refused.message) from None
        click.echo(f"Created researcher {player.username}. Log in at /login, then open /research.")

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

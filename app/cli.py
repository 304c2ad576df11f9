"""Operator commands: `flask import`, `flask load-demo`, `flask create-researcher`,
`flask reset-password`, `flask daily ...`, `flask boards fold`."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import click
from flask import Flask, current_app
from flask.cli import AppGroup
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from tqdm import tqdm

from app.accounts import service as accounts
from app.catalog.importer import ImportFailed, import_records, read_records
from app.catalog.roft_csv import RoftCsvError, read_roft_csv_counted
from app.config import PROJECT_ROOT
from app.errors import ServiceError
from app.extensions import db
from app.models import Example


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
    from app.crowd.cli import register_study_cli
    from app.crowd.fraud_cli import register_flags_command
    from app.crowd.plan_cli import register_plan_commands
    from app.crowd.prolific_cli import register_prolific_commands
    from app.research.cli import register_research_cli

    register_study_cli(app)
    register_flags_command(app)
    register_prolific_commands(app)
    register_plan_commands(app)
    register_research_cli(app)
    app.cli.add_command(daily_cli)
    app.cli.add_command(boards_cli)
    from app.game.levels import difficulty_cli

    app.cli.add_command(difficulty_cli)

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

    @app.cli.command("reset-password")
    @click.argument("username")
    @click.option(
        "--generate",
        is_flag=True,
        help="Make up a strong random password and print it, instead of asking for one.",
    )
    def reset_password(username: str, generate: bool) -> None:
        """Set a new password for the account USERNAME (the site sends no e-mail).

        Every session and "remember me" cookie of the account ends, and a login lock on the
        name is lifted. Give the new password to its owner in person or over a channel you trust;
        they can change it on their account page.
        """
        if accounts.find_by_username(username) is None:
            raise click.ClickException(f"no account is called {username!r}")
        if generate:
            password = secrets.token_urlsafe(12)
        else:
            password = click.prompt("New password", hide_input=True, confirmation_prompt=True)
        try:
            player = accounts.reset_password(username, password)
        except ServiceError as refused:
            raise click.ClickException(refused.message) from None
        click.echo(f"The password of {player.username} is reset; every session of theirs ended.")
        if generate:
            click.echo(f"New password: {password}")

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


boards_cli = AppGroup("boards", help="The leaderboards' maintained counts.")


@boards_cli.command("fold")
def boards_fold() -> None:
    """Add the leaderboard counts' pending changes into the counts.

    Answers do this on their own, about one in 50; run it after a quiet spell, or from cron
    with the other daily jobs, so the changes of the last answers, sign-ups and deletions do
    not wait for the next answers. Ranks are exact before and after; a fold only keeps the
    table that ranks read short. Safe to run while the site serves players: a fold already
    running makes this one fold nothing.
    """
    from app.leaderboard import standings

    folded = standings.fold()
    if folded is None:
        raise click.ClickException("The fold failed; see the log. Nothing was changed.")
    click.echo(f"Folded {folded} pending change(s) into the leaderboard counts.")


daily_cli = AppGroup("daily", help="The daily challenge: how many days are left, hold texts back.")


@daily_cli.command("status")
def daily_status() -> None:
    """Show how many days of held-back texts are left, and warn when they run low.

    A day counts when its texts keep the composition rules (app/game/daily.py `rules_for`); days
    the pool can fill only by breaking one are counted apart, with what they would lack.

    Exits with status 1 when fewer than DAILY_WARN_DAYS days are left, so a cron job can
    alert the operator.
    """
    from app.game import daily

    status = daily.pool_status()
    click.echo(f"Held back for the daily challenge: {status.held_back} example(s).")
    click.echo(f"Not used yet: {status.fresh_examples} example(s).")
    click.echo(f"Days played: {status.days_played} (today's drawn: {status.today_drawn}).")
    click.echo(f"Days left: about {status.days_left} more challenge(s).")
    if status.thin_days:
        click.echo(
            f"After that, about {status.thin_days} more that cannot keep the composition rules "
            f"(the first would lack: {status.shortfall}); they are drawn anyway, so the site "
            "never goes without a challenge.",
            err=True,
        )
    if status.warning:
        click.echo(
            f"Warning: fewer than {status.warn_days} days left. Hold more texts back with "
            "`flask import FILE --reserve-daily SHARE` or `flask daily reserve SHARE`.",
            err=True,
        )
        raise SystemExit(1)


@daily_cli.command("reserve")
@click.argument("share", type=click.FloatRange(0, 1, min_open=True))
def daily_reserve(share: float) -> None:
    """Hold back SHARE (0-1) of the passages nobody has read yet, in each category.

    Only passages whose every variant is unplayed, in normal play and in no study's pool move;
    their examples are then served only in the daily challenge.
    """
    from app.catalog.pools import reserve_unread

    moved = reserve_unread(share)
    click.echo(
        f"Held back {moved.passages} passage(s): {moved.daily} example(s) now wait for the daily "
        "challenge."
    )
    if moved.spare:
        click.echo(f"Not served anywhere: {moved.spare} spliced example(s) that mix both pools.")

"""The game's commands, on its blueprint's command line: `flask daily status | reserve` (the
daily challenge's pool) and `flask difficulty refresh` (the texts' levels, app/game/levels.py)."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.catalog.pools import reserve_unread
from app.game import daily
from app.game.levels import refresh
from app.game.routes import bp

daily_cli = AppGroup("daily", help="The daily challenge: how many days are left, hold texts back.")


@daily_cli.command("status")
def daily_status() -> None:
    """Show how many days of held-back texts are left, and warn when they run low.

    A day counts when its texts keep the composition rules (app/game/daily.py `rules_for`); days
    the pool can fill only by breaking one are counted apart, with what they would lack.

    Exits with status 1 when fewer than DAILY_WARN_DAYS days are left, so a cron job can
    alert the operator.
    """
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
    moved = reserve_unread(share)
    click.echo(
        f"Held back {moved.passages} passage(s): {moved.daily} example(s) now wait for the daily "
        "challenge."
    )
    if moved.spare:
        click.echo(f"Not served anywhere: {moved.spare} spliced example(s) that mix both pools.")


difficulty_cli = AppGroup("difficulty", help="Difficulty levels of texts (easy, medium, hard).")


@difficulty_cli.command("refresh")
@click.option(
    "--min-answers",
    type=click.IntRange(min=1),
    default=None,
    help="Counted answers a text needs for a level (default: LEVEL_MIN_ANSWERS, 10).",
)
def refresh_command(min_answers: int | None) -> None:
    """Estimate each text's difficulty from counted answers and store easy/medium/hard."""
    done = refresh(min_answers)
    click.echo(
        f"Fitted {done.texts} text(s) on {done.answers} counted answer(s)"
        + ("" if done.converged else " (the fit did not converge; run it again later)")
        + "."
    )
    click.echo(
        f"Rated (at least {done.min_answers} answers): "
        + ", ".join(f"{count} {level}" for level, count in done.levels.items())
        + "."
    )


bp.cli.add_command(daily_cli)
bp.cli.add_command(difficulty_cli)

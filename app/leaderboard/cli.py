"""`flask boards fold`, on the leaderboard blueprint's command line."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.leaderboard import recording
from app.leaderboard.routes import bp

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
    folded = recording.fold()
    if folded is None:
        raise click.ClickException("The fold failed; see the log. Nothing was changed.")
    click.echo(f"Folded {folded} pending change(s) into the leaderboard counts.")


bp.cli.add_command(boards_cli)

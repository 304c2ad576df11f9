"""`flask create-researcher` and `flask reset-password`, on the accounts blueprint's command line
(they keep their places at the top of `flask`: the blueprint has no command group of its own)."""

from __future__ import annotations

import secrets

import click

from app.accounts import service as accounts
from app.accounts.routes import bp
from app.cli import refusals
from app.extensions import db


@bp.cli.command("create-researcher")
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
    with refusals():
        player = accounts.sign_up(username, password, consent=False, researcher=True)
    click.echo(f"Created researcher {player.username}. Log in at /login, then open /research.")


@bp.cli.command("reset-password")
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
    with refusals():
        player = accounts.reset_password(username, password)
    click.echo(f"The password of {player.username} is reset; every session of theirs ended.")
    if generate:
        click.echo(f"New password: {password}")

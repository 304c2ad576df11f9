"""Signing a browser in and out: Flask-Login plus what must change with the identity."""

from __future__ import annotations

from flask import current_app, g, session
from flask_login import login_user, logout_user

from app.accounts import service
from app.models import Player


def rotate_csrf() -> None:
    """Forget the session's CSRF secret: the next form gets a new one, so a token planted or read
    before a login (or a study join) is worthless after it."""
    field = current_app.config.get("WTF_CSRF_FIELD_NAME", "csrf_token")
    session.pop(field, None)
    g.pop(field, None)


def sign_in(player: Player, remember: bool = True) -> None:
    """Sign this browser in as `player`, with a new CSRF secret."""
    login_user(player, remember=remember)
    rotate_csrf()


def sign_out(player: Player) -> None:
    """End every session and remember token of the player (server side), then this browser's."""
    service.end_sessions(player)
    logout_user()
    rotate_csrf()

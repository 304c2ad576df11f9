"""The guards the game's views share (app/game/routes.py, daily_views.py, challenge_views.py):
the limits on guests, a signed-in player, a new guest signed in before play, a day in a URL."""

from __future__ import annotations

import functools
from datetime import date

from flask import current_app, redirect, request, url_for
from flask_login import current_user, login_user

from app.accounts import service as accounts
from app.errors import NotFound
from app.extensions import limiter
from app.game import levels, starts


def _guest_limit() -> str:
    return current_app.config["GUEST_RATE_LIMIT"]


def _has_session() -> bool:
    return current_user.is_authenticated


def guest_limits(view):
    """The per-address limit and the site-wide cap on new guests (signed-in players are exempt).

    Flask-Limiter checks limits of equal window in the order they are listed here from the
    bottom and stops at the first breach, so a request refused by its address's per-minute limit
    uses up none of the site-wide cap.
    """
    view = limiter.limit(_guest_limit, exempt_when=_has_session, methods=["POST"])(view)
    return limiter.limit(
        lambda: current_app.config["GUEST_GLOBAL_RATE_LIMIT"],
        key_func=lambda: "all-guests",
        exempt_when=_has_session,
        methods=["POST"],
    )(view)


def require_player():
    """None for a signed-in player (a guest who has played is one); anyone else, the redirect
    home. For a view that checks other things first; `player_required` guards a whole view."""
    if not current_user.is_authenticated:
        return redirect(url_for("game.home"))
    return None


def player_required(view):
    """A view for signed-in players only: anyone else is sent home before it runs."""

    @functools.wraps(view)
    def guarded(*args, **kwargs):
        if (redirect_home := require_player()) is not None:
            return redirect_home
        return view(*args, **kwargs)

    return guarded


def player_for_play(category: str | None, level: str | None = None) -> None:
    """Sign in a new guest (or record the signed-in player's consent) before play starts.

    `category` is checked first, when given, so that a refused start stores nothing.
    """
    consent = request.form.get("consent") == "yes"
    signed_in = current_user.is_authenticated
    if category is not None and (
        not signed_in or (consent and current_user.research_consent_at is None)
    ):
        starts.check_start(
            current_user if signed_in else None, category, None if level == levels.ANY else level
        )
    if not signed_in:
        # A new guest holds nothing yet, so its CSRF secret need not change (pages in other
        # tabs keep working); logins, sign-ups and study joins rotate it.
        login_user(accounts.create_guest(consent), remember=True)
    elif consent and current_user.research_consent_at is None:
        accounts.set_consent(current_user, True)


def challenge_day(value: str) -> date:
    """The day in a daily challenge's URL (NotFound for anything but an ISO date)."""
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise NotFound("There is no challenge on that day.") from None

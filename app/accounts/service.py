"""Accounts: guests, sign-up (a guest keeps their rounds), login checks, consent, researchers."""

from __future__ import annotations

import re

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.accounts import survey
from app.errors import BadRequest, Conflict
from app.extensions import db
from app.leaderboard import standings
from app.models import Player, PlayerSurvey
from app.models.base import utcnow

USERNAME_RE = re.compile(r"^[A-Za-z0-9_-]{3,32}$")
MIN_PASSWORD = 8
MAX_PASSWORD = 200


def load_player(session_id: str) -> Player | None:
    """Resolve a login session id ("<id>:<version>"); stale versions are signed out."""
    try:
        player_id, version = (int(part) for part in session_id.split(":"))
    except (ValueError, AttributeError):
        return None
    player = db.session.get(Player, player_id)
    if player is None or player.session_version != version:
        return None
    return player


def create_guest(consent: bool) -> Player:
    guest = Player(is_guest=True, research_consent_at=utcnow() if consent else None)
    db.session.add(guest)
    db.session.commit()
    return guest


def validate_credentials(username: str, password: str) -> tuple[str, str]:
    username = (username or "").strip()
    if not USERNAME_RE.match(username):
        raise BadRequest("Choose a username of 3 to 32 letters, digits, hyphens or underscores.")
    if not MIN_PASSWORD <= len(password or "") <= MAX_PASSWORD:
        raise BadRequest(f"Choose a password of at least {MIN_PASSWORD} characters.")
    return username, password


def username_taken(username: str) -> bool:
    return (
        db.session.scalar(
            select(func.count()).where(func.lower(Player.username) == username.lower())
        )
        > 0
    )


def sign_up(
    username: str,
    password: str,
    consent: bool,
    guest: Player | None = None,
    researcher: bool = False,
) -> Player:
    """Create an account, or turn the current guest into one so they keep their rounds."""
    username, password = validate_credentials(username, password)
    if username_taken(username):
        raise Conflict("That username is taken; please choose another.")
    player = guest if guest is not None and guest.is_guest else Player()
    player.username = username
    player.set_password(password)
    player.is_guest = False
    player.is_researcher = researcher or player.is_researcher
    if consent and player.research_consent_at is None:
        player.research_consent_at = utcnow()
    db.session.add(player)
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise Conflict("That username is taken; please choose another.") from None
    if guest is not None:
        # The guest's points now belong on the leaderboards.
        standings.forget_boards_of(player.id)
    return player


def find_by_username(username: str) -> Player | None:
    """The account with this username (case-insensitive), if any."""
    username = (username or "").strip()
    if not USERNAME_RE.match(username):
        return None  # no account has it; a NUL byte would not even reach PostgreSQL
    return db.session.scalars(
        select(Player).where(func.lower(Player.username) == username.lower())
    ).first()


def authenticate(username: str, password: str) -> Player | None:
    player = find_by_username(username)
    if player is None or not player.check_password(password or ""):
        return None
    return player


def set_consent(player: Player, consent: bool) -> None:
    if consent and player.research_consent_at is None:
        player.research_consent_at = utcnow()
    elif not consent:
        player.research_consent_at = None
    db.session.commit()


def set_profile_public(player: Player, public: bool) -> None:
    player.profile_public = public
    db.session.commit()


def survey_of(player: Player) -> PlayerSurvey | None:
    """The player's survey answers, if they gave any."""
    return db.session.get(PlayerSurvey, player.id)


def save_survey(player: Player, answers: dict[str, int | None]) -> PlayerSurvey:
    """Store (or replace) the player's survey answers; None means not given."""
    row = survey_of(player) or PlayerSurvey(player_id=player.id)
    for name in survey.NAMES:
        setattr(row, name, answers.get(name))
    row.answered_at = utcnow()
    db.session.add(row)
    db.session.commit()
    return row

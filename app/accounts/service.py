"""Accounts: guests, sign-up (a guest keeps their rounds), login checks and locks, passwords,
sessions, consent, researchers."""

from __future__ import annotations

import functools
import hashlib
import hmac
import math
import re
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import bindparam, case, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from werkzeug.security import check_password_hash, generate_password_hash

from app.accounts import passwords, survey
from app.errors import BadRequest, Conflict, ServiceError
from app.extensions import db, retrying
from app.leaderboard import standings
from app.models import LoginFailure, Player, PlayerSurvey
from app.models.base import UTCDateTime, utcnow
from app.models.players import hash_method

USERNAME_RE = re.compile(r"[A-Za-z0-9_-]{3,32}")
# Failed logins for one name: LOCK_AFTER within FAILURE_WINDOW lock it for LOCK_FOR.
LOCK_AFTER = 10
FAILURE_WINDOW = timedelta(minutes=15)
LOCK_FOR = timedelta(minutes=15)


class AccountLocked(ServiceError):
    """Too many failed logins for a name; the same answer whether or not an account has it."""

    status = 429

    def __init__(self, until: datetime):
        seconds = max(1, math.ceil((until - utcnow()).total_seconds()))
        minutes = -(-seconds // 60)
        super().__init__(
            "Too many failed logins for this name. Please try again after "
            f"{until:%H:%M} UTC (in {minutes} minute{'s' if minutes != 1 else ''})."
        )
        self.until = until
        self.retry_after = seconds


# Every request of a signed-in player runs it: built once (see app/game/rounds.py).
_PLAYER_BY_ID = select(Player).where(Player.id == bindparam("player_id"))


def load_player(session_id: str) -> Player | None:
    """Resolve a login session id ("<id>:<version>"); stale versions are signed out."""
    try:
        player_id, version = (int(part) for part in session_id.split(":"))
    except (ValueError, AttributeError):
        return None
    # A hot route may have loaded the player already, with its round or set in one statement
    # (`preload_round`, `preload_reveal`, `preload_answer` and `preload_set` in app/game/): no
    # second SELECT then. The version is checked against the row either way.
    player = db.session.identity_map.get(db.session.identity_key(Player, player_id))
    if player is None:
        player = db.session.scalars(_PLAYER_BY_ID, {"player_id": player_id}).first()
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
    if not USERNAME_RE.fullmatch(username):
        raise BadRequest("Choose a username of 3 to 32 letters, digits, hyphens or underscores.")
    if (problem := passwords.problem(password, username)) is not None:
        raise BadRequest(problem)
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
    return retrying(
        lambda: _sign_up_once(username, password, consent, guest, researcher),
        "sign-up" if guest is None else f"sign-up of guest {guest.id}",
    )


def _sign_up_once(
    username: str, password: str, consent: bool, guest: Player | None, researcher: bool
) -> Player:
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
    if not USERNAME_RE.fullmatch(username):
        return None  # no account has it; a NUL byte would not even reach PostgreSQL
    return db.session.scalars(
        select(Player).where(func.lower(Player.username) == username.lower())
    ).first()


@functools.cache
def _dummy_hash(method: str) -> str:
    """A hash to check a password against when no account has the name: the answer takes as long
    as for a real account."""
    return generate_password_hash("no account has this name", method=method)


def name_key(username: str) -> str:
    """A keyed hash of the name tried (any text at all): what login failures are kept under."""
    key = str(current_app.config["SECRET_KEY"]).encode()
    name = (username or "").strip().casefold()
    return hmac.new(key, f"roft-login:{name}".encode(), hashlib.sha256).hexdigest()


@functools.cache
def _failure_upsert(dialect: str):
    """One more failure for a name, the count restarting once its window is over."""
    table = LoginFailure.__table__
    module = postgresql if dialect == "postgresql" else sqlite
    cutoff = bindparam("cutoff", type_=UTCDateTime)
    stale = table.c.first_failed_at < cutoff
    stmt = module.insert(table).values(
        name_key=bindparam("name_key"),
        failures=1,
        first_failed_at=bindparam("now", type_=UTCDateTime),
        locked_until=None,
    )
    return stmt.on_conflict_do_update(
        index_elements=["name_key"],
        set_={
            "failures": case((stale, 1), else_=table.c.failures + 1),
            "first_failed_at": case(
                (stale, stmt.excluded.first_failed_at), else_=table.c.first_failed_at
            ),
            "locked_until": None,
        },
    ).returning(table.c.failures)


def _locked_until(key: str, now: datetime) -> datetime | None:
    until = db.session.scalar(select(LoginFailure.locked_until).where(LoginFailure.name_key == key))
    return until if until is not None and until > now else None


def authenticate(username: str, password: str) -> Player | None:
    """The account with this name and password, or None. Raises AccountLocked while the name is
    locked, and on the failure that locks it, whether or not an account has the name.

    Failures are kept in the database (shared by every worker and host); a success clears them.
    """
    key = name_key(username)
    now = utcnow()
    if (until := _locked_until(key, now)) is not None:
        raise AccountLocked(until)
    player = find_by_username(username)
    stored = player.password_hash if player is not None and player.password_hash else None
    # Always one password check, against a dummy hash for an unknown name (equal timing).
    matches = check_password_hash(stored or _dummy_hash(hash_method()), password or "")
    if stored and matches:
        db.session.execute(delete(LoginFailure).where(LoginFailure.name_key == key))
        db.session.commit()
        return player
    dialect = db.session.get_bind().dialect.name
    failures = db.session.scalar(
        _failure_upsert(dialect), {"name_key": key, "now": now, "cutoff": now - FAILURE_WINDOW}
    )
    locked = failures >= LOCK_AFTER
    if locked:
        db.session.execute(
            update(LoginFailure)
            .where(LoginFailure.name_key == key)
            .values(failures=0, first_failed_at=now, locked_until=now + LOCK_FOR)
        )
    db.session.commit()
    if locked:
        raise AccountLocked(now + LOCK_FOR)
    return None


def end_sessions(player: Player) -> None:
    """Sign the player out everywhere: every session cookie and remember token issued so far
    carries the old `session_version` and stops working."""
    db.session.execute(
        update(Player)
        .where(Player.id == player.id)
        .values(session_version=Player.session_version + 1)
    )
    db.session.commit()
    db.session.refresh(player)


def change_password(player: Player, current: str, new: str) -> None:
    """Set a new password after checking the current one; every session and remember token of the
    player ends (the caller signs the current browser in again)."""
    if not player.password_hash or not player.check_password(current or ""):
        raise BadRequest("Your current password is not right.")
    if (problem := passwords.problem(new, player.username)) is not None:
        raise BadRequest(problem)
    if player.check_password(new):
        raise BadRequest("Choose a new password that differs from the current one.")
    player.set_password(new)
    db.session.commit()
    end_sessions(player)


def reset_password(username: str, new: str) -> Player:
    """An operator sets a player's password (no e-mail on this site): every session ends and the
    name's login lock is lifted."""
    player = find_by_username(username)
    if player is None:
        raise BadRequest(f"No account is called {username!r}.")
    if (problem := passwords.problem(new, player.username)) is not None:
        raise BadRequest(problem)
    player.set_password(new)
    db.session.execute(delete(LoginFailure).where(LoginFailure.name_key == name_key(username)))
    db.session.commit()
    end_sessions(player)
    return player


def set_consent(player: Player, consent: bool) -> None:
    if consent and player.research_consent_at is None:
        player.research_consent_at = utcnow()
    elif not consent:
        player.research_consent_at = None
    db.session.commit()


def set_profile_public(player: Player, public: bool) -> None:
    changed = player.profile_public != public
    player.profile_public = public
    db.session.commit()
    if changed:
        standings.forget_boards_of(player.id)  # the boards link public profiles only


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

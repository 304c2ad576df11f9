"""Players: guests, registered accounts and researchers share one table."""

from __future__ import annotations

from datetime import datetime

from flask import current_app
from flask_login import UserMixin
from sqlalchemy import Boolean, ForeignKey, Integer, String, false
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

from app.extensions import db
from app.models.base import UTCDateTime, utcnow


def hash_method() -> str:
    """Werkzeug's password hash method: scrypt unless PASSWORD_HASH_METHOD says otherwise (the
    tests use a cheap one, so that hundreds of logins stay fast)."""
    return current_app.config.get("PASSWORD_HASH_METHOD", "scrypt")


class Player(UserMixin, db.Model):
    __tablename__ = "players"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Guests have no username until they sign up; only named players appear on leaderboards.
    username: Mapped[str | None] = mapped_column(String(32), unique=True, nullable=True)
    password_hash: Mapped[str | None] = mapped_column(String(255), nullable=True)
    is_guest: Mapped[bool] = mapped_column(Boolean, default=True)
    is_researcher: Mapped[bool] = mapped_column(Boolean, default=False)
    # "public" players, or "crowd" workers who arrived through a study link.
    kind: Mapped[str] = mapped_column(String(16), default="public", server_default="public")
    profile_public: Mapped[bool] = mapped_column(Boolean, default=False)
    # Consent to research use of this player's rounds; None means not given.
    research_consent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Bumped to sign out every session of this player: at logout, and at a password change (the
    # session that changed it is signed in again with the new version).
    session_version: Mapped[int] = mapped_column(default=1)
    # Unlisted from every leaderboard for an implausible record (app/leaderboard/integrity.py):
    # when and why. A researcher's restore clears `unlisted_at` and sets `restored_at`; the reason
    # is kept, and a restored player is not unlisted automatically again.
    unlisted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    unlisted_reason: Mapped[str | None] = mapped_column(String(255), nullable=True)
    restored_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Asked for a browser notification when a new daily challenge is out (shown only while a tab
    # of the site is open; app/static/daily.js).
    daily_reminder: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    def set_password(self, password: str) -> None:
        self.password_hash = generate_password_hash(password, method=hash_method())

    def check_password(self, password: str) -> bool:
        return bool(self.password_hash) and check_password_hash(self.password_hash, password)

    def get_id(self) -> str:
        return f"{self.id}:{self.session_version}"

    @property
    def on_boards(self) -> bool:
        """Listed on the leaderboards: has a username and is not unlisted."""
        return self.username is not None and self.unlisted_at is None

    @property
    def display_name(self) -> str:
        return self.username or "Guest"


class PlayerSurvey(db.Model):
    """A player's answers to the optional survey (RoFT's five questions); None = not given."""

    __tablename__ = "player_surveys"

    player_id: Mapped[int] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    recipe_familiarity: Mapped[int | None] = mapped_column(Integer, nullable=True)  # 1-5
    news_familiarity: Mapped[int | None] = mapped_column(Integer, nullable=True)  # 1-5
    stories_familiarity: Mapped[int | None] = mapped_column(Integer, nullable=True)  # 1-5
    gen_familiarity: Mapped[int | None] = mapped_column(Integer, nullable=True)  # 1-4
    native_speaker: Mapped[int | None] = mapped_column(Integer, nullable=True)  # 1/0
    answered_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LoginFailure(db.Model):
    """Failed logins for one name, kept in the database so every worker and host shares them.

    `name_key` is a keyed hash of the lowercased name that was tried, whether or not an account
    has it, so that a lock says nothing about which names exist (and a password typed into the
    name field is not stored).
    """

    __tablename__ = "login_failures"

    name_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    first_failed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

"""Players' pseudonyms in research exports and study files: a keyed HMAC of the player id."""

from __future__ import annotations

import hashlib
import hmac

from flask import current_app


def pseudonym_key() -> bytes:
    key = current_app.config.get("EXPORT_PSEUDONYM_KEY") or current_app.config["SECRET_KEY"]
    return str(key).encode("utf-8")


def pseudonym(player_id: int, key: bytes) -> str:
    """A stable, keyed pseudonym: without the key it cannot be linked back to the player id."""
    digest = hmac.new(key, f"roft-player:{player_id}".encode(), hashlib.sha256).hexdigest()
    return "p_" + digest[:20]

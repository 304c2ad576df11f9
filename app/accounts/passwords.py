"""What makes a password acceptable. Pure: no Flask, no database.

A password must have 8 to 200 characters, not only spaces, must not be the username (in any
case), and must not be one of the 10,000 most common passwords (app/accounts/common-passwords.txt,
built by scripts/build_common_passwords.py; compared ignoring case and surrounding spaces).
"""

from __future__ import annotations

import functools
from pathlib import Path

MIN_LENGTH = 8
MAX_LENGTH = 200
COMMON_FILE = Path(__file__).with_name("common-passwords.txt")


@functools.cache
def common_passwords() -> frozenset[str]:
    lines = COMMON_FILE.read_text(encoding="utf-8").splitlines()
    return frozenset(line for line in lines if line and not line.startswith("#"))


def problem(password: str, username: str | None = None) -> str | None:
    """Why the password cannot be used, in words for the player; None when it can."""
    password = password or ""
    if not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        return f"Choose a password of {MIN_LENGTH} to {MAX_LENGTH} characters."
    if not password.strip():
        return "Choose a password that is not only spaces."
    folded = password.strip().casefold()
    if username and folded == username.strip().casefold():
        return "Choose a password that is not your username."
    if folded in common_passwords():
        return (
            "That password is one of the 10,000 most common ones, the first that attackers try. "
            "Please choose another (a few unrelated words make a strong one)."
        )
    return None

"""Which code made a file: a package's version and, in a git checkout, the commit (pure apart from
asking git; no Flask, SQLAlchemy or pandas)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def code_version(name: str, version: str) -> str:
    """`name version (git COMMIT)`, with "+dirty" when tracked files have local edits."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return f"{name} {version}"
    return f"{name} {version} (git {commit}{'+dirty' if dirty else ''})"

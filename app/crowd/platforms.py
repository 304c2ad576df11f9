"""Entry links from crowd platforms: which query parameters carry the worker's ids.

Pure: no Flask, no database.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.crowd.config import PLATFORM_NAMES

ID_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
MTURK_HOSTS = {"www.mturk.com", "workersandbox.mturk.com"}
# Where a framed task's forms may go: MTurk's externalSubmit on either host.
MTURK_SUBMIT_ORIGINS = " ".join(f"https://{host}" for host in sorted(MTURK_HOSTS))

# platform -> (worker id, platform session, platform study) parameter names
PARAMETERS = {
    "prolific": ("PROLIFIC_PID", "SESSION_ID", "STUDY_ID"),
    "mturk": ("workerId", "assignmentId", "hitId"),
    "generic": ("pid", "session", "study"),
}


class EntryError(ValueError):
    """The link is missing an id or has a malformed one; the message tells the worker what to do."""


@dataclass(frozen=True)
class Entry:
    worker_id: str
    session: str | None
    study: str | None
    submit_to: str | None = None
    preview: bool = False


def _check(name: str, value: str | None, where: str, required: bool) -> str | None:
    if value is None or value == "":
        if required:
            raise EntryError(
                f"This study link is missing your {name}. Please open the study again from "
                f"{where}, so that we can credit your work."
            )
        return None
    if not ID_RE.fullmatch(value):
        raise EntryError(
            f"The {name} in this link does not look right. Please open the study again from "
            f"{where}."
        )
    return value


def _mturk_host(address: str) -> str | None:
    """The MTurk host of a turkSubmitTo address; None for any other or a malformed one."""
    try:
        parts = urlsplit(address)
    except ValueError:  # "https://[" and other addresses that cannot be split
        return None
    return parts.hostname if parts.scheme == "https" and parts.hostname in MTURK_HOSTS else None


def parse_entry(platform: str, args: Mapping[str, str], name: str | None = None) -> Entry:
    """The worker's ids from an entry link; `name` is the platform's name in messages."""
    worker_key, session_key, study_key = PARAMETERS[platform]
    where = name or PLATFORM_NAMES[platform]
    if platform == "mturk" and args.get("assignmentId") == MTURK_PREVIEW:
        return Entry(worker_id="", session=None, study=None, preview=True)
    required_session = platform in ("prolific", "mturk")
    worker = _check(worker_key, args.get(worker_key), where, required=True)
    session = _check(session_key, args.get(session_key), where, required=required_session)
    study = _check(study_key, args.get(study_key), where, required=False)
    submit_to = None
    if platform == "mturk":
        host = _mturk_host(args.get("turkSubmitTo", ""))
        if host is None:
            raise EntryError(
                "This link does not come from Mechanical Turk (turkSubmitTo is missing or "
                "unexpected). Please open the task from MTurk."
            )
        submit_to = f"https://{host}"
    return Entry(worker_id=worker, session=session, study=study, submit_to=submit_to)

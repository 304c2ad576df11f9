"""What `flask study verify` works on: a platform's submissions, read from its files (Prolific's
export or API, MTurk's batch file, a list of worker ids) once per worker, and the `Decision` made
on each, with the words for decisions and for the platforms' statuses (app.crowd.verify decides).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from app.models import ParticipantStatus

APPROVE, REJECT, REVIEW, RETURNED, PENDING = "approve", "reject", "review", "returned", "pending"
DECISIONS = (APPROVE, REJECT, REVIEW, RETURNED, PENDING)
NOCODE = "NOCODE"
LEFT_STATUSES = {"RETURNED": ParticipantStatus.returned, "TIMED-OUT": ParticipantStatus.timed_out}
ACTIVE_STATUSES = {"ACTIVE", "RESERVED", "PROCESSING"}
# Already decided on the platform: listed, but left out of the files to upload.
CLOSED_STATUSES = {"APPROVED", "REJECTED", "PARTIALLY APPROVED", "SCREENED OUT"}


@dataclass(frozen=True)
class Submission:
    """One row of a platform's results file: who, the code they entered, the platform's status."""

    worker_id: str
    code: str | None = None
    status: str | None = None
    row: dict | None = None


@dataclass
class Decision:
    worker_id: str
    decision: str
    reasons: list[str]
    platform_status: str | None = None
    participant_id: int | None = None
    player_id: int | None = None
    rejection_category: str | None = None
    message: str = ""
    bonus_minor: int = 0  # new bonus to pay now (owed by the rule minus already given)
    bonus_reason: str = ""  # the ledger key's reason for that bonus
    row: dict | None = field(default=None, repr=False)

    @property
    def actionable(self) -> bool:
        """Still to be done on the platform (not already approved / rejected there)."""
        return self.platform_status not in CLOSED_STATUSES


# -- reading the platforms' files -----------------------------------------------------------


def normal_status(value: str | None) -> str | None:
    """'Awaiting review' / 'TIMED_OUT' / 'timed out' -> 'AWAITING REVIEW' / 'TIMED-OUT'."""
    if not value or not value.strip():
        return None
    text = " ".join(value.replace("_", " ").upper().split())
    return "TIMED-OUT" if text in ("TIMED OUT", "TIMEDOUT") else text


def _column(headers: dict[str, str], *names: str) -> str | None:
    return next((headers[n] for n in names if n in headers), None)


def read_prolific_export(text: str) -> list[Submission]:
    """Prolific's submissions export: 'Participant id', 'Status' and, when present, the code
    the participant entered ('Completion code'; older exports call it 'Entered code')."""
    reader = csv.DictReader(io.StringIO(text))
    headers = {h.lower().replace("_", " ").strip(): h for h in reader.fieldnames or []}
    id_col = _column(headers, "participant id")
    if id_col is None:
        raise ValueError("the Prolific export has no 'Participant id' column")
    code_col = _column(headers, "completion code", "entered code", "study code")
    status_col = _column(headers, "status")
    return [
        Submission(
            row[id_col].strip(),
            (row.get(code_col) or "").strip() or None if code_col else None,
            normal_status(row.get(status_col)) if status_col else None,
            row,
        )
        for row in reader
        if (row.get(id_col) or "").strip()
    ]


def read_mturk_batch(text: str) -> list[Submission]:
    """MTurk's batch results CSV: 'WorkerId', 'AssignmentStatus', 'Answer.completion_code'."""
    reader = csv.DictReader(io.StringIO(text))
    if "WorkerId" not in (reader.fieldnames or []):
        raise ValueError("the MTurk batch file has no 'WorkerId' column")
    return [
        Submission(
            row["WorkerId"].strip(),
            (row.get("Answer.completion_code") or "").strip() or None,
            normal_status(row.get("AssignmentStatus")),
            row,
        )
        for row in reader
        if (row.get("WorkerId") or "").strip()
    ]


def from_prolific_api(results) -> list[Submission]:
    """Submissions as Prolific's API lists them (id, participant_id, status, study_code)."""
    return [
        Submission(
            r["participant_id"],
            r.get("study_code") or r.get("entered_code") or None,
            normal_status(r.get("status")),
            {"Submission id": r["id"], "Participant id": r["participant_id"]},
        )
        for r in results
        if r.get("participant_id")
    ]


def read_id_list(text: str) -> list[Submission]:
    """One worker id per line (blank lines and # comments ignored)."""
    ids = [line.strip() for line in text.splitlines()]
    return [Submission(i) for i in ids if i and not i.startswith("#")]


def _rank(status: str | None) -> int:
    if status in LEFT_STATUSES:
        return 0
    return 1 if status in ACTIVE_STATUSES or status is None else 2


def one_per_worker(submissions: list[Submission]) -> tuple[list[Submission], int]:
    """A worker once, in first-seen order: the row that went furthest (submitted over active over
    returned). Returns the rows kept and how many were left out."""
    kept: dict[str, Submission] = {}
    for sub in submissions:
        seen = kept.get(sub.worker_id)
        if seen is None or _rank(sub.status) > _rank(seen.status):
            kept[sub.worker_id] = sub
    return list(kept.values()), len(submissions) - len(kept)

"""The bonus ledger (study_bonuses) of crowd studies: what was owed, issued, sent and paid.

- Bonuses owed by the study's rule are paid once: the ledger records what `flask study verify
  --apply` issued, and later runs pay only the difference.
- Every bonus has one way out of the ledger. A row is `requested` while owed and not yet handed
  to a payment channel (a bonus given in review, or a score bonus of a run that pays through the
  API). The next `verify --apply` that writes files puts every such row into its bonus.csv and
  marks it `issued` in that run ("file_run" in its platform_ref), or `verify --apply --send` /
  `flask study prolific apply` pays it through the API: whichever comes first, and only once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import func, select

from app.extensions import db
from app.models import Participant, Study, StudyBonus
from app.models.base import utcnow
from app.models.studies import BONUS_LIVE, StudyRun

REVIEW_PREFIX = "review: "  # the ledger reasons of bonuses given in review
# Ledger states (see app/models/studies.py).
ISSUED, REQUESTED, SENT, PAID, FAILED = "issued", "requested", "sent", "paid", "failed"
REVERSED, REVERSAL = "reversed", "reversal"


@dataclass(frozen=True)
class Owed:
    """A ledger row owed and not yet handed to a payment channel (see owed_unsent)."""

    worker_id: str
    participant_id: int
    session: str | None  # the worker's platform session (MTurk's assignment id)
    amount_minor: int
    reason: str


def platform_ref(row: StudyBonus) -> dict:
    """A ledger row's platform_ref as a dict (it holds JSON, or an older plain text)."""
    try:
        value = json.loads(row.platform_ref) if row.platform_ref else {}
    except ValueError:
        value = {"text": row.platform_ref}
    return value if isinstance(value, dict) else {"value": value}


def file_run(row: StudyBonus) -> int:
    """The run whose bonus.csv holds an `issued` row: the run that wrote it there, else its own."""
    return int(platform_ref(row).get("file_run") or row.run)


def unsent_rows(study: Study) -> list[StudyBonus]:
    """`requested` rows with no Prolific set-up: owed, and neither in a bonus.csv nor on their
    way through the API (a row with a set-up may be paid by it, so it stays with the API)."""
    rows = db.session.scalars(
        select(StudyBonus)
        .where(StudyBonus.study_id == study.id, StudyBonus.state == REQUESTED)
        .order_by(StudyBonus.id)
    )
    return [r for r in rows if not platform_ref(r).get("bulk_bonus_payment")]


def owed_unsent(study: Study) -> list[Owed]:
    """Bonuses owed and not yet handed to a payment channel, oldest first: what the next
    bonus.csv of `verify --apply` adds to the score bonuses of that run."""
    return owed_rows(unsent_rows(study))


def owed_rows(rows: list[StudyBonus]) -> list[Owed]:
    if not rows:
        return []
    people = {
        p.id: p
        for p in db.session.scalars(
            select(Participant).where(Participant.id.in_({r.participant_id for r in rows}))
        )
    }
    return [
        Owed(
            people[r.participant_id].worker_id,
            r.participant_id,
            people[r.participant_id].platform_session,
            r.amount_minor,
            r.reason,
        )
        for r in rows
    ]


def next_run(study: Study) -> int:
    """The next run number: one past every number this study ever used, undone runs included."""
    used = db.session.scalar(select(func.max(StudyRun.run)).where(StudyRun.study_id == study.id))
    return (used or 0) + 1


def live_reasons(study: Study, participant_id: int) -> set[str]:
    """The reasons of the worker's bonus rows in this study that are live (not undone)."""
    return set(
        db.session.scalars(
            select(StudyBonus.reason).where(
                StudyBonus.study_id == study.id,
                StudyBonus.participant_id == participant_id,
                StudyBonus.state.in_(BONUS_LIVE),
            )
        )
    )


def add_bonus(study: Study, participant_id: int, run: int, amount: int, reason: str, state: str):
    """One ledger row; a reason already live for this worker (a top-up to a total paid before,
    then partly reversed) is told apart by its run, which is never reused. The caller commits."""
    if reason in live_reasons(study, participant_id):
        reason = f"{reason} (run {run})"
    row = StudyBonus(
        study_id=study.id,
        participant_id=participant_id,
        run=run,
        amount_minor=amount,
        reason=reason,
        state=state,
        issued_at=utcnow(),
    )
    db.session.add(row)
    db.session.flush()  # the database refuses a second live row for the key
    return row


def given_bonuses(study: Study, reason: str = "score") -> dict[int, int]:
    """participant id -> score bonus already given (minor units): every score row of the ledger
    but the failed ones, so an issued, requested, sent or paid row counts, and a reversal
    cancels its row. Bonuses given in review have reasons of their own and are not counted."""
    rows = db.session.execute(
        select(StudyBonus.participant_id, func.sum(StudyBonus.amount_minor))
        .where(
            StudyBonus.study_id == study.id,
            StudyBonus.state != FAILED,
            StudyBonus.reason.startswith(reason),
        )
        .group_by(StudyBonus.participant_id)
    )
    return {pid: int(total) for pid, total in rows}


def money(minor: int) -> str:
    """An amount in minor units (pence, cents) as the platforms' files write it: 1.05."""
    return f"{minor // 100}.{minor % 100:02d}"

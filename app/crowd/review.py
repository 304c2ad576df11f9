"""`flask study review`: the workers verify sent to review, and a person's decision about each.

A person's decision (approve, reject with a message, or a bonus) goes into the same store as
verify's: a StudyDecision row (source "review") in a run of its own, so `flask study undo-verify`
reverts it like any run, and a bonus row in the ledger, keyed by (study, worker, reason). The
next `flask study verify` keeps a person's decision and writes it into the platform's files.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.crowd import verify
from app.crowd.lookup import config_of
from app.crowd.reports import WorkerStats, latest_decisions, worker_stats
from app.errors import BadRequest, Conflict
from app.extensions import db
from app.models import Study, StudyBonus, StudyDecision
from app.models.base import utcnow
from app.models.studies import BONUS_LIVE, StudyRun

# Prolific's rejection categories (its API documentation).
CATEGORIES = (
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
    "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
)  # fmt: skip


@dataclass(frozen=True)
class Waiting:
    worker: WorkerStats
    reasons: list[str]


def waiting(study: Study) -> list[Waiting]:
    """Workers whose current decision is "review", with verify's reasons, in joining order."""
    current = latest_decisions(study)
    found = []
    for w in worker_stats(study):
        row = current.get(w.participant_id)
        if row is not None and row.decision == verify.REVIEW:
            found.append(Waiting(w, list(row.reasons)))
    return found


def _worker(study: Study, worker_id: str) -> WorkerStats:
    found = next((w for w in worker_stats(study) if w.worker_id == worker_id), None)
    if found is None:
        raise BadRequest(f"no worker {worker_id!r} in study {study.slug!r}")
    return found


def _new_run(study: Study, now) -> int:
    run = verify.next_run(study)
    db.session.add(StudyRun(study_id=study.id, run=run, source="review", created_at=now))
    return run


def decide(
    study: Study, worker_id: str, decision: str, message: str = "", category: str | None = None
) -> int | None:
    """Record a person's approve or reject for one worker; returns the run, or None when that
    decision (with that message) is already the one in force."""
    if decision not in (verify.APPROVE, verify.REJECT):
        raise BadRequest("a review decides approve or reject")
    message = " ".join(message.split())
    if decision == verify.REJECT:
        if len(message) < verify.MIN_MESSAGE:
            raise BadRequest(
                f"a rejection needs a message of at least {verify.MIN_MESSAGE} characters "
                f"(Prolific's rule); this one has {len(message)}"
            )
        category = category or "OTHER"
        if category not in CATEGORIES:
            raise BadRequest(f"unknown rejection category {category!r}: {', '.join(CATEGORIES)}")
    else:
        message, category = "", None
    w = _worker(study, worker_id)
    before = verify.hand_decisions(study).get(w.participant_id)
    if before is not None and (before.decision, before.message) == (decision, message):
        return None
    now = utcnow()
    try:
        run = _new_run(study, now)
        db.session.add(
            StudyDecision(
                study_id=study.id,
                participant_id=w.participant_id,
                run=run,
                decision=decision,
                reasons=["decided in review"],
                rejection_category=category,
                message=message,
                created_at=now,
                source="review",
            )
        )
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
    return run


def give_bonus(study: Study, worker_id: str, amount: float, reason: str) -> StudyBonus:
    """A bonus a person gives, once per (worker, reason): the ledger row is `issued`, for the
    bonus file the CLI writes. Giving the same reason again is refused."""
    reason = " ".join(reason.split())
    if not reason:
        raise BadRequest("a bonus needs a reason")
    minor = round(amount * 100)
    if minor <= 0 or abs(amount * 100 - minor) > 1e-6:
        raise BadRequest(f"the bonus must be a positive amount in {config_of(study).currency}")
    w = _worker(study, worker_id)
    key = f"review: {reason}"[:120]
    live = db.session.scalar(
        select(StudyBonus.id).where(
            StudyBonus.study_id == study.id,
            StudyBonus.participant_id == w.participant_id,
            StudyBonus.reason == key,
            StudyBonus.state.in_(BONUS_LIVE),
        )
    )
    if live is not None:
        raise Conflict(f"{worker_id} already has a bonus for {reason!r}: it is paid once")
    now = utcnow()
    try:
        run = _new_run(study, now)
        row = StudyBonus(
            study_id=study.id,
            participant_id=w.participant_id,
            run=run,
            amount_minor=minor,
            reason=key,
            state=verify.ISSUED,
            issued_at=now,
        )
        db.session.add(row)
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
    return row

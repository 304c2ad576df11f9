"""`flask study review`: the workers verify sent to review, and a person's decision about each.

A person's decision (approve, reject with a message, or a bonus) goes into the same store as
verify's: a StudyDecision row (source "review") in a run of its own, so `flask study undo-verify`
reverts it like any run, and a bonus row in the ledger, keyed by (study, worker, reason). The
next `flask study verify` keeps a person's decision and writes it into the platform's files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.crowd import fraud, fraud_report, ledger, schedule, verify, verify_submissions
from app.crowd.config import StudyConfig
from app.crowd.lookup import config_of
from app.crowd.prolific_api import REJECTION_CATEGORIES
from app.crowd.reports import WorkerStats, latest_decisions, worker_stats
from app.errors import BadRequest, Conflict, NotFound
from app.extensions import db
from app.models import Example, Round, Study, StudyBonus, StudyDecision
from app.models.base import utcnow
from app.models.rounds import CHECK_ROUND, PRACTICE_ROUND
from app.models.studies import BONUS_LIVE, StudyRun

# Prolific's rejection categories (its API documentation).
CATEGORIES = REJECTION_CATEGORIES


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
        if row is not None and row.decision == verify_submissions.REVIEW:
            found.append(Waiting(w, list(row.reasons)))
    return found


def bonus_limit(config: StudyConfig) -> int:
    """The largest bonus one person may give in review, in minor units: the study's reward or
    its score-bonus cap, whichever is larger. A bigger figure is most likely a slip (50 for
    0.50), and money sent cannot be taken back."""
    cap = config.bonus.cap if config.bonus else 0.0
    return round(max(config.reward, cap) * 100)


REVIEW_PREFIX = ledger.REVIEW_PREFIX  # the ledger reasons of bonuses given in review
MAX_AMOUNT = 1_000_000  # beyond any bonus: a figure this large is not money


def _plain(text: str, what: str) -> str:
    if "\x00" in text:
        raise BadRequest(f"the {what} contains a NUL character; please remove it")
    return text


def parse_amount(text: str) -> float:
    """A bonus typed into a form ("0.50", "0,50", "1") as a number; BadRequest otherwise."""
    cleaned = (text or "").strip().replace(",", ".")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise BadRequest(f"the bonus amount {text!r} is not a number, e.g. 0.50") from None
    if not value.is_finite() or abs(value) > MAX_AMOUNT:
        raise BadRequest(f"the bonus amount {text!r} is not a sensible amount, e.g. 0.50")
    return float(value)


def _worker(study: Study, worker_id: str) -> WorkerStats:
    found = next((w for w in worker_stats(study) if w.worker_id == worker_id), None)
    if found is None:
        raise NotFound(f"no worker {worker_id!r} in study {study.slug!r}")
    return found


def _new_run(study: Study, now) -> int:
    run = ledger.next_run(study)
    db.session.add(StudyRun(study_id=study.id, run=run, source="review", created_at=now))
    return run


def decide(
    study: Study, worker_id: str, decision: str, message: str = "", category: str | None = None
) -> int | None:
    """Record a person's approve or reject for one worker; returns the run, or None when that
    decision (with that message) is already the one in force."""
    if decision not in (verify_submissions.APPROVE, verify_submissions.REJECT):
        raise BadRequest("a review decides approve or reject")
    message = " ".join(_plain(message, "message").split())
    if decision == verify_submissions.REJECT:
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
    now = utcnow()
    try:
        # Claim the run number first: a decision made at the same moment either waits for this
        # one and then sees it below, or is refused by the database (one row per run number).
        run = _new_run(study, now)
        db.session.flush()
        before = latest_decisions(study, "review").get(w.participant_id)
        if before is not None and (before.decision, before.message) == (decision, message):
            db.session.rollback()
            return None
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
    except IntegrityError:
        db.session.rollback()
        raise Conflict(
            "another decision for this study was recorded at the same moment; reload and check "
            "before deciding again"
        ) from None
    except Exception:
        db.session.rollback()
        raise
    return run


def give_bonus(study: Study, worker_id: str, amount: float, reason: str) -> StudyBonus:
    """A bonus a person gives, once per (worker, reason). The ledger row is `requested`: owed,
    and paid by whichever comes first, the next `verify --apply` (its bonus.csv) or `prolific
    apply` (the API), never both. Giving the same reason again is refused."""
    reason = " ".join(_plain(reason, "reason").split())
    if not reason:
        raise BadRequest("a bonus needs a reason")
    if not math.isfinite(amount) or abs(amount) > MAX_AMOUNT:
        raise BadRequest(f"the bonus amount {amount} is not a sensible amount of money")
    config = config_of(study)
    minor = round(amount * 100)
    if minor <= 0 or abs(amount * 100 - minor) > 1e-6:
        raise BadRequest(
            f"the bonus must be a positive amount in {config.currency}, in whole cents (e.g. 0.50)"
        )
    limit = bonus_limit(config)
    if minor > limit:
        raise BadRequest(
            f"a bonus from review is at most {ledger.money(limit)} {config.currency} (the "
            f"study's reward or bonus cap, whichever is larger); {ledger.money(minor)} is more"
        )
    w = _worker(study, worker_id)
    key = f"{REVIEW_PREFIX}{reason}"[:120]
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
            state=ledger.REQUESTED,
            issued_at=now,
        )
        db.session.add(row)
        db.session.commit()
    except IntegrityError:
        # A second request at the same moment: the database keeps one row per live key.
        db.session.rollback()
        if key in ledger.live_reasons(study, w.participant_id):
            raise Conflict(
                f"{worker_id} already has a bonus for {reason!r}: it is paid once"
            ) from None
        raise Conflict(
            "another decision was recorded at the same moment; reload and check"
        ) from None
    except Exception:
        db.session.rollback()
        raise
    return row


# -- the review page ------------------------------------------------------------------------

# What the page's worker list can show: the worker's current decision (the newest of verify's
# and a person's), "undecided" when there is none.
SHOW = ("all", "review", "approved", "rejected", "undecided")
_STATE = {
    verify_submissions.REVIEW: "review",
    verify_submissions.APPROVE: "approved",
    verify_submissions.REJECT: "rejected",
}


def state_of(decision: str | None) -> str:
    """The list's word for a current decision: review, approved, rejected, undecided, or the
    decision itself (returned, pending)."""
    if decision is None:
        return "undecided"
    return _STATE.get(decision, decision)


@dataclass(frozen=True)
class RoundView:
    """One answered round as a reviewer sees it; positions are 0-based sentence indices."""

    number: int  # in the worker's play order, as in verify's reasons and the finish page
    kind: str  # "normal" or "check"
    sentences: list[str]
    revealed: int
    guess: int
    boundary: int
    points: int | None
    seconds: float | None
    explanation: str
    check: str | None = None  # "inside" or "all_human" for a check
    verdict: str | None = None  # pass / fail / void for a check

    @property
    def evidence_seen(self) -> bool | None:
        """For a check: was its instruction on screen before the answer? (None: no check.)"""
        if self.check is None:
            return None
        return self.check != "inside" or self.revealed > self.boundary

    @property
    def all_human(self) -> bool:
        return self.boundary >= len(self.sentences)


@dataclass(frozen=True)
class BonusView:
    run: int
    amount: str
    reason: str
    state: str


@dataclass(frozen=True)
class WorkerView:
    worker: WorkerStats
    state: str
    decision: StudyDecision | None
    flags: list[fraud.Flag] = field(default_factory=list)
    rounds: list[RoundView] = field(default_factory=list)
    bonuses: list[BonusView] = field(default_factory=list)

    @property
    def checks(self) -> list[RoundView]:
        return [r for r in self.rounds if r.check is not None]

    @property
    def explanations(self) -> list[RoundView]:
        return [r for r in self.rounds if r.explanation]


def _rounds(participant_id: int) -> list[RoundView]:
    """The worker's answered rounds (practice left out) in play order, numbered as
    reports.worker_stats numbers them."""
    rows = db.session.execute(
        select(Round, Example)
        .join(Example, Example.id == Round.example_id)
        .where(Round.participant_id == participant_id, Round.guess.is_not(None))
        .order_by(Round.answered_at)
    ).all()
    found = []
    for r, example in rows:
        if r.kind == PRACTICE_ROUND:
            continue
        check = (example.source or {}).get("check", "all_human") if r.kind == CHECK_ROUND else None
        found.append(
            RoundView(
                number=len(found) + 1,
                kind="check" if check else "normal",
                sentences=list(example.sentences),
                revealed=r.revealed,
                guess=r.guess,
                boundary=example.boundary,
                points=r.points,
                seconds=(r.answered_at - r.started_at).total_seconds() if r.answered_at else None,
                explanation=r.explanation or "",
                check=check,
                verdict=schedule.check_verdict(check, r.guess, example.boundary) if check else None,
            )
        )
    return found


def _bonuses(study: Study, participant_id: int) -> list[BonusView]:
    rows = db.session.scalars(
        select(StudyBonus)
        .where(StudyBonus.study_id == study.id, StudyBonus.participant_id == participant_id)
        .order_by(StudyBonus.id)
    )
    return [
        BonusView(
            b.run,
            ledger.money(b.amount_minor)
            if b.amount_minor >= 0
            else "-" + ledger.money(-b.amount_minor),
            b.reason,
            b.state,
        )
        for b in rows
    ]


def worker_list(study: Study) -> list[WorkerView]:
    """The study's workers with their current decision and fraud flags, in joining order. Rounds
    are left out: worker_view gives them."""
    current = latest_decisions(study)
    flags = fraud_report.flags_by_participant(study)
    found = []
    for w in worker_stats(study):
        row = current.get(w.participant_id)
        state = state_of(row.decision if row else None)
        flagged = flags.get(w.participant_id)
        found.append(WorkerView(w, state, row, list(flagged.flags) if flagged else []))
    return found


def worker_view(study: Study, worker_id: str) -> WorkerView:
    """Everything a reviewer needs about one worker: rounds, checks (with whether their
    evidence was seen), time, fraud flags, explanations, decision and bonuses."""
    w = _worker(study, worker_id)
    row = latest_decisions(study).get(w.participant_id)
    flagged = fraud_report.flags_by_participant(study).get(w.participant_id)
    return WorkerView(
        w,
        state_of(row.decision if row else None),
        row,
        list(flagged.flags) if flagged else [],
        _rounds(w.participant_id),
        _bonuses(study, w.participant_id),
    )

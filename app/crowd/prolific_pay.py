"""Acting on verify's decisions through Prolific's API (`send_to_prolific`: approve, reject,
pay) and paying the ledger's bonuses exactly once (`pay_requested`), with the operator's word on
a payment whose answer never came (`resolve_payment`).

As everywhere with Prolific (app/crowd/prolific.py), the intent is committed to the database
before the call that cannot be taken back, so a crash or a lost answer is never followed by a
second payment.

Paying a bonus, step by step (each step is committed before the next):

1. the ledger row is `requested` (verify --apply --send, or review, put it there);
2. Prolific sets up a bulk bonus for the requested rows (this pays nothing); its id and answer
   are written on each row, which stays `requested`;
3. the rows become `sent`, then the pay call goes out with that id;
4. Prolific's answer makes them `paid`.

A crash after 2 leaves rows `requested` with a set-up: the next run pays that set-up rather than
making a new one (unless a row of it was reversed meanwhile: then it is abandoned, never paid,
and the rows still owed get a new set-up). A crash or a lost answer after 3 leaves rows `sent`:
they are never paid again by the tool. The operator checks Prolific and says what happened
with `flask study prolific resolve-payment`. A refusal of the pay call (a 4xx: nothing paid)
puts the rows back to step 2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sqlalchemy import select, update

from app.crowd.ledger import FAILED, PAID, REQUESTED, REVIEW_PREFIX, SENT, money, platform_ref
from app.crowd.prolific_api import ProlificClient, ProlificError
from app.crowd.verify_submissions import APPROVE, REJECT, Decision
from app.errors import Conflict
from app.extensions import db
from app.models import Participant, Study, StudyBonus
from app.models.base import utcnow


@dataclass
class Paid:
    payments: list[str] = field(default_factory=list)  # bulk bonus ids paid by this call
    lines: int = 0  # worker lines in them
    minor: int = 0
    resumed: list[str] = field(default_factory=list)  # set-ups of an earlier run, paid now
    abandoned: list[str] = field(default_factory=list)  # set-ups never to be paid


def _write(row: StudyBonus, **changes) -> None:
    row.platform_ref = json.dumps({**platform_ref(row), **changes})


def _lines(rows: list[StudyBonus]) -> list[tuple[str, int]]:
    """One line per worker: Prolific's bulk bonus takes one amount per participant."""
    workers = dict(
        db.session.execute(
            select(Participant.id, Participant.worker_id).where(
                Participant.id.in_({r.participant_id for r in rows})
            )
        ).all()
    )
    per_worker: dict[str, int] = {}
    for r in rows:
        worker = workers[r.participant_id]
        per_worker[worker] = per_worker.get(worker, 0) + r.amount_minor
    return list(per_worker.items())


def _claim(payment: str, rows: list[StudyBonus]) -> None:
    """Mark the rows `sent` for this payment, all or none, and commit: from here on they are
    never paid again by the tool. The update only takes rows still `requested` for this set-up,
    so when two runs read the same rows, the second takes none and pays nothing."""
    result = db.session.execute(
        update(StudyBonus)
        .where(
            StudyBonus.id.in_([r.id for r in rows]),
            StudyBonus.state == REQUESTED,
            StudyBonus.platform_ref.contains(
                f'"bulk_bonus_payment": {json.dumps(payment)}', autoescape=True
            ),
        )
        .values(state=SENT, sent_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != len(rows):
        db.session.rollback()
        raise Conflict(
            f"the bonuses of payment {payment} were taken by another run of apply (or changed "
            "since this one read them): nothing was paid by this run"
        )
    db.session.commit()  # expires the rows: they are read again, as `sent`


def _pay(client: ProlificClient, payment: str, rows: list[StudyBonus], done: Paid) -> None:
    _claim(payment, rows)
    try:
        answer = client.pay_bulk_bonus(payment)
    except ProlificError as error:
        for r in rows:
            if error.uncertain:
                _write(r, pay_unconfirmed=str(error))
            else:  # refused, nothing paid: the same set-up is paid at the next run
                r.state, r.sent_at = REQUESTED, None
                _write(r, pay_refused=str(error))
        db.session.commit()
        raise
    for r in rows:
        r.state = PAID
        _write(r, paid=answer)
    db.session.commit()
    lines = _lines(rows)
    done.payments.append(payment)
    done.lines += len(lines)
    done.minor += sum(amount for _w, amount in lines)


def pay_requested(client: ProlificClient, study: Study, prolific_study: str) -> Paid:
    """Pay every `requested` ledger row of the study through Prolific, each at most once (see the
    module's docstring for the steps)."""
    done = Paid()
    rows = list(
        db.session.scalars(
            select(StudyBonus)
            .where(StudyBonus.study_id == study.id, StudyBonus.state == REQUESTED)
            .order_by(StudyBonus.id)
        )
    )
    fresh: list[StudyBonus] = []
    earlier: dict[str, list[StudyBonus]] = {}
    for r in rows:
        payment = platform_ref(r).get("bulk_bonus_payment")
        (earlier.setdefault(payment, []) if payment else fresh).append(r)
    for payment, members in earlier.items():
        made_for = set(platform_ref(members[0]).get("rows") or [])
        if made_for == {r.id for r in members}:
            done.resumed.append(payment)
            _pay(client, payment, members, done)
            continue
        # A row of that set-up was reversed or paid otherwise: paying it would pay that row
        # too. It is abandoned and what is still owed is set up anew.
        for r in members:
            r.platform_ref = json.dumps({"abandoned_set_up": payment, "before": platform_ref(r)})
        db.session.commit()
        done.abandoned.append(payment)
        fresh.extend(members)
    if not fresh:
        return done
    fresh.sort(key=lambda r: r.id)
    lines = _lines(fresh)
    try:
        setup = client.set_up_bonuses(
            prolific_study, [(worker, money(amount)) for worker, amount in lines]
        )
    except ProlificError as error:
        # Nothing can have been paid: a set-up pays nothing. The next verify owes a score bonus
        # again by the rule; a bonus given in review has no rule to owe it again, so it stays
        # owed (`requested`, no set-up: the next bonus.csv or apply takes it).
        for r in fresh:
            r.state = REQUESTED if r.reason.startswith(REVIEW_PREFIX) else FAILED
            r.platform_ref = json.dumps({"set_up_refused": str(error)[:2000]})
        db.session.commit()
        raise
    payment = str(setup["id"])
    for r in fresh:
        r.platform_ref = json.dumps(
            {"bulk_bonus_payment": payment, "set_up": setup, "rows": [x.id for x in fresh]}
        )
    db.session.commit()
    _pay(client, payment, fresh, done)
    return done


@dataclass(frozen=True)
class Resolved:
    rows: int
    minor: int
    paid: bool


def resolve_payment(study: Study, payment: str, paid: bool) -> Resolved:
    """Settle a payment whose answer was lost (rows `sent`), after looking on Prolific: `paid`
    marks the rows paid; otherwise the set-up is abandoned and the rows are owed again (a new
    set-up at the next apply). Refused for a payment with no unconfirmed rows."""
    rows = [
        r
        for r in db.session.scalars(
            select(StudyBonus).where(StudyBonus.study_id == study.id, StudyBonus.state == SENT)
        )
        if platform_ref(r).get("bulk_bonus_payment") == payment
    ]
    if not rows:
        raise Conflict(f"no unconfirmed payment {payment!r} in study {study.slug!r}")
    now = utcnow().isoformat()
    for r in rows:
        if paid:
            r.state = PAID
            _write(r, confirmed_by_hand=now)
        else:
            r.state, r.sent_at = REQUESTED, None
            r.platform_ref = json.dumps(
                {"abandoned_set_up": payment, "not_paid_by_hand": now, "before": platform_ref(r)}
            )
    db.session.commit()
    return Resolved(len(rows), sum(r.amount_minor for r in rows), paid)


def unconfirmed(study: Study) -> dict[str, int]:
    """Payment id -> amount (minor units) of the rows sent whose answer never came."""
    out: dict[str, int] = {}
    for r in db.session.scalars(
        select(StudyBonus).where(StudyBonus.study_id == study.id, StudyBonus.state == SENT)
    ):
        payment = platform_ref(r).get("bulk_bonus_payment") or "?"
        out[payment] = out.get(payment, 0) + r.amount_minor
    return out


@dataclass(frozen=True)
class Sent:
    approved: int
    rejected: int
    bonuses: int
    bonus_minor: int


def send_to_prolific(client, study: Study, prolific_study: str, decisions: list[Decision]) -> Sent:
    """Act on the decisions through Prolific's API: bulk approve (by submission id, as Prolific
    recommends), reject each with its category and message, then pay every bonus the ledger
    holds as `requested` (this run's and any left by a run that stopped before paying). Call it
    after apply_decisions().

    Submissions already approved or rejected on Prolific are left alone, so a second run acts on
    nothing twice (Prolific documents the transition as idempotent too). Bonuses are paid by
    `pay_requested`, which commits each step before the call that cannot be
    taken back and keeps Prolific's answers on the ledger rows: a row is paid at most once, even
    if this process dies half-way.
    """
    act = [d for d in decisions if d.actionable]
    approve = [d for d in act if d.decision == APPROVE]
    by_submission = [(d.row or {}).get("Submission id") for d in approve]
    if all(by_submission):
        client.approve_submissions(by_submission)
    else:
        client.approve(prolific_study, [d.worker_id for d in approve])
    rejected = 0
    for d in act:
        if d.decision == REJECT:
            client.reject((d.row or {})["Submission id"], d.rejection_category, d.message)
            rejected += 1
    paid = pay_requested(client, study, prolific_study)
    return Sent(len(approve), rejected, paid.lines, paid.minor)

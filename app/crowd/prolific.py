"""Prolific end to end through its API: a draft study made from the study file, publish, pause,
the study's places and submissions synced into our participants, messages to workers, and
bonuses paid exactly once from the ledger.

The client (app/crowd/prolific_api.py) speaks Prolific's documented request shapes; this module
decides what to send and records what came back. Money and messages follow one rule: the
intent is committed to the database before the call that cannot be taken back, so a crash or a
lost answer is never followed by a second payment or a second message.

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

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from app.crowd import links
from app.crowd.admission import mark_left
from app.crowd.ledger import FAILED, PAID, REQUESTED, REVIEW_PREFIX, SENT, money
from app.crowd.lookup import FINISHED, config_of
from app.crowd.prolific_api import ProlificClient, ProlificError
from app.crowd.reports import latest_decisions
from app.crowd.verify_submissions import APPROVE, LEFT_STATUSES, REJECT, Decision
from app.errors import BadRequest, Conflict
from app.extensions import db
from app.models import Participant, ParticipantStatus, Study, StudyBonus
from app.models.base import utcnow
from app.models.studies import StudyMessage

# Our outcomes -> Prolific's completion code types. Every code asks for a manual review, so
# that `flask study verify` decides: with "approve and pay" on a code, a worker who failed the
# checks would be paid before verify sees them (docs/running-a-study.md).
CODE_TYPES = {
    "completed": "COMPLETED",
    "failed_checks": "FAILED_ATTENTION_CHECK",
    "screened_out": "OTHER",
}
CODE_ACTION = "MANUALLY_REVIEW"
MESSAGE_MAX = 5000


# -- the draft study ------------------------------------------------------------------------


def study_body(study: Study, external_url: str, places: int | None = None) -> dict:
    """The body of Prolific's 'create a draft study' call, from the study file.

    Raises BadRequest when the file lacks what Prolific needs (a number of places, a
    reward, a completed code)."""
    config = config_of(study)
    places = places or config.places
    if not places:
        raise BadRequest(
            "Prolific needs a number of places: set `places` in the study file or pass --places"
        )
    if config.reward <= 0:
        raise BadRequest("Prolific needs a reward: set `reward` in the study file")
    if "completed" not in config.completion_codes:
        raise BadRequest("the study file has no completion_codes.completed")
    description = config.description or (
        f"Read short texts sentence by sentence and say where a computer took over from a "
        f"person. About {config.expected_minutes:g} minutes."
    )
    return {
        "name": config.title,
        "internal_name": f"roft:{study.slug}",
        "description": description,
        "external_study_url": external_url,
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {
                "code": code,
                "code_type": CODE_TYPES.get(outcome, "OTHER"),
                "actions": [{"action": CODE_ACTION}],
            }
            for outcome, code in config.completion_codes.items()
        ],
        "estimated_completion_time": max(1, math.ceil(config.expected_minutes)),
        "reward": round(config.reward * 100),
        "total_available_places": int(places),
        "device_compatibility": ["desktop", "tablet", "mobile"],
    }


def _prolific_id(study: Study) -> str:
    if not study.prolific_study_id:
        raise Conflict(
            f"study {study.slug!r} has no Prolific study yet: run "
            f"`flask study prolific create {study.slug}` first"
        )
    return study.prolific_study_id


def create_draft(client: ProlificClient, study: Study, places: int | None = None) -> dict:
    """Create the study's draft on Prolific and keep its id on the study. Refused when the study
    already has one: a second draft would split the workers."""
    if study.platform != "prolific":
        raise Conflict(f"study {study.slug!r} runs on {study.platform}, not Prolific")
    if study.prolific_study_id:
        raise Conflict(
            f"study {study.slug!r} already has the Prolific study {study.prolific_study_id}"
        )
    url = links.entry_link(study)
    if url is None:
        raise BadRequest(
            "the study link is not known: set PUBLIC_URL to the site's public https address"
        )
    answer = client.create_study(study_body(study, url, places))
    study.prolific_study_id = str(answer["id"])
    db.session.commit()
    return answer


def use_existing(client: ProlificClient, study: Study, prolific_id: str) -> dict:
    """Keep an existing Prolific study as the study's (a draft whose creation lost its answer,
    or one made on the website), once Prolific shows it and its link leads to this study."""
    if study.prolific_study_id:
        raise Conflict(
            f"study {study.slug!r} already has the Prolific study {study.prolific_study_id}"
        )
    answer = client.study(prolific_id) or {}
    link = links.entry_link(study)
    url = answer.get("external_study_url") or ""
    if link is None or url.split("?")[0] != link.split("?")[0]:
        raise Conflict(
            f"the Prolific study {prolific_id} does not lead to this study's link "
            f"({url or 'no link'})"
        )
    study.prolific_study_id = str(answer.get("id") or prolific_id)
    db.session.commit()
    return answer


# action -> the statuses it starts from, and the status it leads to
TRANSITIONS = {
    "PUBLISH": (("UNPUBLISHED",), "ACTIVE"),
    "PAUSE": (("ACTIVE",), "PAUSED"),
    "START": (("PAUSED",), "ACTIVE"),
}


def _transition(client: ProlificClient, study: Study, action: str) -> tuple[dict, bool]:
    """Move the study on Prolific, unless it is there already: (Prolific's study, whether it
    moved). Reading the status first makes a second run a no-op."""
    prolific_id = _prolific_id(study)
    current = client.study(prolific_id) or {}
    sources, target = TRANSITIONS[action]
    if current.get("status") == target:
        return current, False
    if current.get("status") not in sources:
        raise Conflict(
            f"the Prolific study {prolific_id} is {current.get('status')}: it cannot be "
            f"{'published' if action == 'PUBLISH' else action.lower() + 'ed'} from there"
        )
    answer = client.transition_study(prolific_id, action)
    return (answer if isinstance(answer, dict) else {"status": target}), True


def publish(client: ProlificClient, study: Study) -> tuple[dict, bool]:
    return _transition(client, study, "PUBLISH")


def pause(client: ProlificClient, study: Study) -> tuple[dict, bool]:
    return _transition(client, study, "PAUSE")


def start_again(client: ProlificClient, study: Study) -> tuple[dict, bool]:
    return _transition(client, study, "START")


# -- syncing --------------------------------------------------------------------------------


@dataclass
class Synced:
    study_status: str | None
    places: int | None
    places_taken: int | None
    by_status: Counter = field(default_factory=Counter)
    marked_left: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # on Prolific, never seen on the site
    kept: list[str] = field(default_factory=list)  # left on Prolific; our record stands
    # approved or rejected on Prolific with no such decision here (apply records them)
    decided_there: list[str] = field(default_factory=list)


def normal(status: str | None) -> str:
    """Prolific's status words, as verify reads them ('TIMED_OUT' -> 'TIMED-OUT')."""
    text = " ".join((status or "").replace("_", " ").upper().split())
    return "TIMED-OUT" if text in ("TIMED OUT", "TIMEDOUT") else text


def sync(client: ProlificClient, study: Study) -> Synced:
    """Read the study and its submissions on Prolific. A worker who returned the submission or
    ran out of time there, and is still playing here, is marked returned / timed out, which
    frees their place. A decision of ours (approve, reject, a finished outcome) is never
    overwritten: such workers are only listed."""
    prolific_id = _prolific_id(study)
    info = client.study(prolific_id) or {}
    submissions = list(client.submissions(prolific_id))
    participants = {
        p.worker_id: p
        for p in db.session.scalars(select(Participant).where(Participant.study_id == study.id))
    }
    decided = latest_decisions(study)
    result = Synced(
        info.get("status"), info.get("total_available_places"), info.get("places_taken")
    )
    now = utcnow()
    for sub in submissions:
        status = normal(sub.get("status"))
        result.by_status[status] += 1
        worker = sub.get("participant_id") or ""
        participant = participants.get(worker)
        if participant is None:
            result.unknown.append(worker)
            continue
        ours = decided.get(participant.id)
        there = {"APPROVED": APPROVE, "REJECTED": REJECT}.get(status)
        if there and (ours is None or ours.decision != there):
            result.decided_there.append(worker)
        if status not in LEFT_STATUSES:
            continue
        if participant.status == ParticipantStatus.started and (
            ours is None or ours.decision not in (APPROVE, REJECT)
        ):
            mark_left(participant, LEFT_STATUSES[status], now)
            result.marked_left.append(worker)
        elif participant.status in FINISHED or ours is not None:
            result.kept.append(worker)
    db.session.commit()
    return result


# -- messages -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Messaged:
    state: str  # sent / already sent / unconfirmed
    row_id: int


def message(client: ProlificClient, study: Study, worker_id: str, body: str) -> Messaged:
    """Send `body` to a worker of the study, once: the same text to the same worker is never
    sent twice. The row is committed as `sending` before the call; a lost answer leaves it so,
    and it is not sent again (Prolific may have delivered it)."""
    body = body.strip()
    if not body:
        raise BadRequest("the message is empty")
    if len(body) > MESSAGE_MAX:
        raise BadRequest(f"the message is longer than {MESSAGE_MAX} characters")
    prolific_id = _prolific_id(study)
    known = db.session.scalar(
        select(Participant.id).where(
            Participant.study_id == study.id, Participant.worker_id == worker_id
        )
    )
    if known is None:
        raise BadRequest(f"{worker_id!r} never joined study {study.slug!r}")
    digest = hashlib.sha256(body.encode()).hexdigest()
    row = db.session.scalar(
        select(StudyMessage).where(
            StudyMessage.study_id == study.id,
            StudyMessage.worker_id == worker_id,
            StudyMessage.body_hash == digest,
        )
    )
    if row is not None and row.state == "sent":
        return Messaged("already sent", row.id)
    if row is not None and row.state == "sending":
        return Messaged("unconfirmed", row.id)
    if row is None:
        row = StudyMessage(
            study_id=study.id, worker_id=worker_id, body_hash=digest, body=body, state="sending"
        )
        db.session.add(row)
        try:
            db.session.commit()
        except IntegrityError:  # another run is sending the same message right now
            db.session.rollback()
            return Messaged("unconfirmed", 0)
    else:  # failed before: try again, unless another run already does
        taken = db.session.execute(
            update(StudyMessage)
            .where(StudyMessage.id == row.id, StudyMessage.state == "failed")
            .values(state="sending", created_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        db.session.commit()
        if taken.rowcount != 1:
            return Messaged("unconfirmed", row.id)
    try:
        answer = client.send_message(worker_id, prolific_id, body)
    except ProlificError as error:
        if not error.uncertain:  # refused: nothing was sent, a later run may try again
            row.state = "failed"
        row.platform_ref = json.dumps({"error": str(error)})
        db.session.commit()
        raise
    row.state, row.sent_at = "sent", utcnow()
    row.platform_ref = json.dumps({"answer": answer})
    db.session.commit()
    return Messaged("sent", row.id)


# -- bonuses --------------------------------------------------------------------------------


@dataclass
class Paid:
    payments: list[str] = field(default_factory=list)  # bulk bonus ids paid by this call
    lines: int = 0  # worker lines in them
    minor: int = 0
    resumed: list[str] = field(default_factory=list)  # set-ups of an earlier run, paid now
    abandoned: list[str] = field(default_factory=list)  # set-ups never to be paid


def _ref(row: StudyBonus) -> dict:
    try:
        value = json.loads(row.platform_ref) if row.platform_ref else {}
    except ValueError:
        value = {"text": row.platform_ref}
    return value if isinstance(value, dict) else {"value": value}


def _write(row: StudyBonus, **changes) -> None:
    row.platform_ref = json.dumps({**_ref(row), **changes})


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
        payment = _ref(r).get("bulk_bonus_payment")
        (earlier.setdefault(payment, []) if payment else fresh).append(r)
    for payment, members in earlier.items():
        made_for = set(_ref(members[0]).get("rows") or [])
        if made_for == {r.id for r in members}:
            done.resumed.append(payment)
            _pay(client, payment, members, done)
            continue
        # A row of that set-up was reversed or paid otherwise: paying it would pay that row
        # too. It is abandoned and what is still owed is set up anew.
        for r in members:
            r.platform_ref = json.dumps({"abandoned_set_up": payment, "before": _ref(r)})
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
        if _ref(r).get("bulk_bonus_payment") == payment
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
                {"abandoned_set_up": payment, "not_paid_by_hand": now, "before": _ref(r)}
            )
    db.session.commit()
    return Resolved(len(rows), sum(r.amount_minor for r in rows), paid)


def unconfirmed(study: Study) -> dict[str, int]:
    """Payment id -> amount (minor units) of the rows sent whose answer never came."""
    out: dict[str, int] = {}
    for r in db.session.scalars(
        select(StudyBonus).where(StudyBonus.study_id == study.id, StudyBonus.state == SENT)
    ):
        payment = _ref(r).get("bulk_bonus_payment") or "?"
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

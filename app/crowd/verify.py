"""`flask study verify`: decide approve / reject / review for each platform submission, write the
platforms' files, and record decisions and bonuses apart from the evidence.

The evidence is what the site saw (the participant's status, checks, rounds, times) and what the
platform's file says (status, entered code). The decision follows from both and nothing else, so
a second run on the same files gives the same decisions. Safety rules:

- RETURNED / TIMED-OUT submissions are neither approved nor rejected; with --apply a worker who
  had not finished is marked returned / timed out and frees their place.
- A missing code (Prolific's NOCODE) is never alone a reason to reject: the site knows who
  finished.
- Only failed attention checks lead to "reject", each with Prolific's category and a message of
  at least 100 characters built from the evidence; everything else doubtful goes to review.
- A worker appears once, however many rows the file has for them.
- Bonuses owed by the study's rule are paid once: the ledger (study_bonuses) records what
  --apply issued, and later runs pay only the difference.
- Every bonus has one way out of the ledger. A row is `requested` while owed and not yet handed
  to a payment channel (a bonus given in review, or a score bonus of a run that pays through the
  API). The next `verify --apply` that writes files puts every such row into its bonus.csv and
  marks it `issued` in that run ("file_run" in its platform_ref), or `verify --apply --send` /
  `flask study prolific apply` pays it through the API: whichever comes first, and only once.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import delete, func, select

from app.crowd import codes, schedule
from app.crowd.admission import RAN_OUT, expire_overdue, mark_left
from app.crowd.config import StudyConfig
from app.crowd.lookup import FINISHED, LEFT, config_of
from app.crowd.reports import (
    VOID_FLAG,
    WorkerStats,
    latest_decisions,
    speed_threshold,
    worker_stats,
)
from app.errors import Conflict
from app.extensions import db
from app.models import Participant, ParticipantStatus, Study, StudyBonus, StudyDecision
from app.models.base import utcnow
from app.models.studies import BONUS_LIVE, StudyRun
from roftcore.spreadsheet import neutralise, neutralise_row

APPROVE, REJECT, REVIEW, RETURNED, PENDING = "approve", "reject", "review", "returned", "pending"
DECISIONS = (APPROVE, REJECT, REVIEW, RETURNED, PENDING)
NOCODE = "NOCODE"
LEFT_STATUSES = {"RETURNED": ParticipantStatus.returned, "TIMED-OUT": ParticipantStatus.timed_out}
ACTIVE_STATUSES = {"ACTIVE", "RESERVED", "PROCESSING"}
# Already decided on the platform: listed, but left out of the files to upload.
CLOSED_STATUSES = {"APPROVED", "REJECTED", "PARTIALLY APPROVED", "SCREENED OUT"}
MIN_MESSAGE = 100  # Prolific refuses shorter rejection messages
REVIEW_PREFIX = "review: "  # the ledger reasons of bonuses given in review


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


# -- deciding -------------------------------------------------------------------------------


def rejection_message(config: StudyConfig, w: WorkerStats) -> str:
    """The message sent with a rejection: the reason the finish page showed the worker, word for
    word (with the rounds that earned it), then what the checks were."""
    shown = schedule.failed_checks_text(w.failed_check_rounds, w.checks_passed + w.checks_failed)
    return (
        f"Thank you for taking part in “{config.title}”. We cannot approve this submission. "
        f"{shown} The study asks that at least "
        f"{w.checks_passed + w.checks_failed - config.fail_after_checks + 1} be followed. "
        "Each check was an instruction written into a text, for example a sentence asking to be "
        "marked as machine-written, and the instructions said that such checks were included. "
        "If you think this is a mistake, please message us through the platform."
    )


def _expected_codes(config: StudyConfig, w: WorkerStats) -> dict[str, str]:
    """outcome -> the code a worker with that outcome is given (theirs or the study's)."""
    known = dict(config.completion_codes)
    if w.completion_code:
        known.setdefault(w.status, w.completion_code)
    return known


def decide_one(
    config: StudyConfig, sub: Submission, w: WorkerStats | None, speed: float | None = None
) -> Decision:
    """One submission's decision; `speed` is the study's too-fast threshold (seconds a round)."""
    status = sub.status
    if w is None:
        if status in LEFT_STATUSES:
            note = f"{status.lower()} on the platform and never joined on the site: nothing to do"
            return Decision(sub.worker_id, RETURNED, [note], status)
        return Decision(sub.worker_id, REVIEW, ["never joined this study on the site"], status)
    base = {"participant_id": w.participant_id, "player_id": w.player_id}
    site = ParticipantStatus(w.status)
    outcome = w.status
    finished = site in FINISHED
    if status in LEFT_STATUSES:
        note = f"{status.lower()} on the platform: neither approve nor reject"
        if finished:
            note += f" (the site saw them finish: {outcome})"
        return Decision(sub.worker_id, RETURNED, [note], status, **base)
    if status in ACTIVE_STATUSES:
        return Decision(sub.worker_id, PENDING, ["still working on the platform"], status, **base)
    reject, review, notes = [], [], []
    if outcome == "failed_checks":
        reject.append(
            f"failed {w.checks_failed} of {w.checks_passed + w.checks_failed} checks (rounds "
            f"{', '.join(map(str, w.failed_check_rounds))})"
        )
    elif outcome == "screened_out":
        why = w.trouble or (
            "screened out by "
            + ("the comprehension questions" if w.comprehension_failures >= 2 else "screening")
        )
        if config.screened_out_pay is None:
            review.append(f"{why}: pay as for a screen-out, or ask them to return")
        else:
            note = (
                f"{why}: ask them to return the submission; the screen-out payment of "
                f"{config.screened_out_pay:.2f} {config.currency} is paid as a bonus"
            )
            return Decision(sub.worker_id, RETURNED, [note], status, **base)
    elif site == ParticipantStatus.timed_out:
        review.append(
            f"ran out of time on the site after {w.rounds_done} of {w.required_rounds} rounds"
        )
    elif site == ParticipantStatus.returned:
        review.append("marked returned by an earlier run, yet submitted")
    elif not finished:
        review.append(
            f"unfinished: {w.rounds_done} of {w.required_rounds} rounds"
            + (f"; {w.trouble}" if w.trouble else "")
        )
    if w.outcome == RAN_OUT:
        notes.append(w.trouble or "the pool ran out")
    code = sub.code
    if code is not None and code.upper() == NOCODE:
        if finished:
            notes.append("no code entered (NOCODE), but the site saw them finish")
        else:
            review.append(f"no code entered (NOCODE): {no_code_cause(w)}")
    elif code is not None:
        expected = _expected_codes(config, w)
        matched = next((o for o, c in expected.items() if codes.codes_match(code, c)), None)
        if not finished:
            review.append("entered a code without finishing on the site")
        elif matched is None:
            review.append("entered code matches no code of this study (a typo?)")
        elif matched != outcome:
            review.append(
                f"entered the code of another outcome ({matched}) than theirs ({outcome})"
            )
    if w.too_fast:
        review.append(
            f"too fast: median {w.median_round_seconds:.1f} s a round, under the study's "
            f"threshold of {speed or 0:.1f} s"
        )
    if w.straight_lining:
        review.append("straight-lining: the same answer position many times in a row")
    if w.checks_void >= VOID_FLAG and outcome != "failed_checks":
        review.append(
            f"answered {w.checks_void} attention checks before their instruction was shown "
            f"(rounds {', '.join(map(str, w.void_check_rounds))}): neither passed nor failed"
        )
    if reject:
        return Decision(
            sub.worker_id,
            REJECT,
            reject + review + notes,
            status,
            rejection_category="FAILED_CHECK",
            message=rejection_message(config, w),
            **base,
        )
    decision = REVIEW if review else APPROVE
    return Decision(sub.worker_id, decision, review + notes, status, **base)


def no_code_cause(w: WorkerStats) -> str:
    """Why the site gave an unfinished worker no code."""
    if w.trouble:
        return w.trouble
    if w.status == ParticipantStatus.timed_out.value:
        rounds = "round" if w.rounds_done == 1 else "rounds"
        return f"the site gives none: they ran out of time after {w.rounds_done} {rounds}"
    if w.status == ParticipantStatus.returned.value:
        return "the site gives none: they returned the task"
    return (
        f"the site gives none before the last round: they stopped after {w.rounds_done} of "
        f"{w.required_rounds} rounds"
    )


SCREEN_OUT_REASON = "screen-out payment"


def _screen_out_pay(config: StudyConfig, sub: Submission, w: WorkerStats, given: int) -> int:
    """The screen-out payment still owed to a screened-out worker (minor units): paid once,
    through the ledger, unless the platform settled them itself (Prolific's SCREENED OUT)."""
    if config.screened_out_pay is None or w.status != ParticipantStatus.screened_out.value:
        return 0
    if sub.status in CLOSED_STATUSES:
        return 0
    return max(round(config.screened_out_pay * 100) - given, 0)


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


def owed_minor(config: StudyConfig, w: WorkerStats) -> int:
    """The study's score bonus for a worker, in minor units: the one figure verify, review and
    the files use. It counts the required rounds only (see reports.worker_stats): the finish
    page tells workers that optional extra rounds do not change their payment."""
    if config.bonus is None:
        return 0
    return round(config.bonus.amount(w.points, w.exact) * 100)


def score_reason(owed: int) -> str:
    """The ledger key's reason for a score bonus that brings a worker's total to `owed`."""
    return f"score to {money(owed)}"


def hand_decisions(study: Study) -> dict[int, StudyDecision]:
    """participant id -> the latest decision a person made in `flask study review`."""
    newest = (
        select(func.max(StudyDecision.id))
        .where(StudyDecision.study_id == study.id, StudyDecision.source == "review")
        .group_by(StudyDecision.participant_id)
    )
    rows = db.session.scalars(select(StudyDecision).where(StudyDecision.id.in_(newest)))
    return {row.participant_id: row for row in rows}


def _by_hand(made: Decision, hand: StudyDecision | None) -> None:
    """A person's decision in review stands over the rules (not over the platform's own
    RETURNED / TIMED-OUT / still active); Prolific's own APPROVED settles a review too."""
    if made.decision in (RETURNED, PENDING):
        return
    if hand is not None:
        made.decision = hand.decision
        made.reasons = [f"decided in review (run {hand.run})", *made.reasons]
        made.rejection_category = hand.rejection_category
        made.message = hand.message
    elif made.decision == REVIEW and made.platform_status == "APPROVED":
        made.decision = APPROVE
        made.reasons = ["approved on the platform", *made.reasons]


def decide(study: Study, submissions: list[Submission]) -> list[Decision]:
    """A decision per worker (duplicates already removed), with the bonus still owed."""
    config = config_of(study)
    expire_overdue(study)
    stats = {w.worker_id: w for w in worker_stats(study)}
    speed = speed_threshold(
        config, [w.median_round_seconds for w in stats.values() if w.median_round_seconds]
    )
    given = given_bonuses(study)
    screen_outs = given_bonuses(study, SCREEN_OUT_REASON)
    hands = hand_decisions(study)
    decisions = []
    for sub in submissions:
        w = stats.get(sub.worker_id)
        made = decide_one(config, sub, w, speed)
        made.row = sub.row
        if w is not None:
            _by_hand(made, hands.get(w.participant_id))
        if w is not None and made.decision != REJECT:
            made.bonus_minor = _screen_out_pay(config, sub, w, screen_outs.get(w.participant_id, 0))
            made.bonus_reason = SCREEN_OUT_REASON if made.bonus_minor else ""
        if config.bonus and w is not None and made.decision == APPROVE:
            owed = owed_minor(config, w)
            made.bonus_minor = max(owed - given.get(w.participant_id, 0), 0)
            made.bonus_reason = score_reason(owed)
        decisions.append(made)
    return decisions


# -- recording ------------------------------------------------------------------------------

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


@dataclass(frozen=True)
class Applied:
    run: int | None  # None when nothing new was recorded
    changed: int
    unchanged: int
    marked_left: int
    bonuses: int
    bonus_minor: int
    # Bonuses owed from earlier (given in review, or left by an API run) written into this
    # run's bonus.csv and marked issued.
    written: tuple[Owed, ...] = ()


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


def _unsent_rows(study: Study) -> list[StudyBonus]:
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
    return _owed(_unsent_rows(study))


def _owed(rows: list[StudyBonus]) -> list[Owed]:
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


def apply_decisions(
    study: Study, decisions: list[Decision], via_api: bool = False, source: str = "verify"
) -> Applied:
    """Record the decisions that changed as one run; mark returned / timed-out workers who had not
    finished; add the new bonuses to the ledger, as `issued` (written to bonus.csv for the
    researcher to upload) or, `via_api`, as `requested` (send_to_prolific pays them). Without
    `via_api`, every bonus owed from earlier and not yet handed out (owed_unsent: those given in
    review above all) goes into this run's bonus.csv too and becomes `issued` here. One
    transaction; a run number is used only if something was recorded."""
    run = next_run(study)
    current = latest_decisions(study)
    changed = unchanged = marked = bonuses = total = 0
    now = utcnow()
    try:
        for d in decisions:
            if d.participant_id is None:
                continue
            participant = db.session.get(Participant, d.participant_id)
            previous = participant.status.value
            if d.decision == RETURNED and d.platform_status in LEFT_STATUSES:
                mark_left(participant, LEFT_STATUSES[d.platform_status], now)
            moved = participant.status.value != previous
            marked += moved
            before = current.get(d.participant_id)
            same = (
                before is not None
                and before.decision == d.decision
                and before.reasons == d.reasons
                and not moved
            )
            if same:
                unchanged += 1
            else:
                changed += 1
                db.session.add(
                    StudyDecision(
                        study_id=study.id,
                        participant_id=d.participant_id,
                        run=run,
                        decision=d.decision,
                        reasons=d.reasons,
                        rejection_category=d.rejection_category,
                        message=d.message,
                        platform_status=d.platform_status,
                        previous_status=previous if moved else None,
                        created_at=now,
                        source=source,
                    )
                )
            if d.bonus_minor > 0:
                bonuses += 1
                total += d.bonus_minor
                add_bonus(
                    study,
                    d.participant_id,
                    run,
                    d.bonus_minor,
                    d.bonus_reason,
                    REQUESTED if via_api else ISSUED,
                )
        written: list[Owed] = []
        if not via_api:
            unsent = _unsent_rows(study)
            written = _owed(unsent)
            for row in unsent:
                row.state = ISSUED
                row.platform_ref = json.dumps({**platform_ref(row), "file_run": run})
        recorded = changed or bonuses or written
        if recorded:
            db.session.add(StudyRun(study_id=study.id, run=run, source=source, created_at=now))
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
    return Applied(
        run if recorded else None, changed, unchanged, marked, bonuses, total, tuple(written)
    )


@dataclass(frozen=True)
class Undone:
    run: int
    decisions: int
    restored: int
    bonuses_dropped: int
    bonuses_kept: int
    bonuses_paid: int = 0  # sent or paid through the API: never dropped
    bonuses_owed_again: int = 0  # owed from earlier, taken out of the dropped bonus.csv


def _reverse(row: StudyBonus, run: int, now) -> None:
    row.state = REVERSED
    db.session.add(
        StudyBonus(
            study_id=row.study_id,
            participant_id=row.participant_id,
            run=run,
            amount_minor=-row.amount_minor,
            reason=row.reason,
            state=REVERSAL,
            reverses_id=row.id,
            issued_at=now,
        )
    )


def undo_last_run(study: Study, drop_bonuses: bool = False) -> Undone:
    """Revert the latest run not yet undone: delete its decisions, put back the statuses it
    changed, and mark it undone (its number is never given again).

    Its bonuses are never deleted. Those requested from the API but never sent are reversed (a
    new row cancels each); with `drop_bonuses`, so are those it wrote to a bonus.csv that was never
    uploaded. A bonus owed from an earlier run (given in review) that this run only wrote into its
    bonus.csv is owed again instead (`requested`: the next bonus.csv or apply pays it), with
    `drop_bonuses`; without, it stays as paid. A bonus of this run that a later run's bonus.csv
    holds stays too (that file may have been uploaded). Bonuses sent or paid through the API stay,
    whatever the flag says.
    """
    latest = db.session.scalar(
        select(StudyRun)
        .where(StudyRun.study_id == study.id, StudyRun.undone_at.is_(None))
        .order_by(StudyRun.run.desc())
        .limit(1)
    )
    if latest is None:
        raise Conflict(f"study {study.slug!r} has no recorded verify run to undo")
    run = latest.run
    rows = list(
        db.session.scalars(
            select(StudyDecision).where(
                StudyDecision.study_id == study.id, StudyDecision.run == run
            )
        )
    )
    bonus_rows = list(
        db.session.scalars(
            select(StudyBonus)
            .where(StudyBonus.study_id == study.id, StudyBonus.run == run)
            .order_by(StudyBonus.id)
        )
    )
    carried = [
        row
        for row in db.session.scalars(
            select(StudyBonus)
            .where(
                StudyBonus.study_id == study.id,
                StudyBonus.state == ISSUED,
                StudyBonus.run != run,
            )
            .order_by(StudyBonus.id)
        )
        if file_run(row) == run
    ]
    restored = dropped = kept = paid = owed_again = 0
    now = utcnow()
    try:
        for row in rows:
            participant = db.session.get(Participant, row.participant_id)
            if row.previous_status and participant.status in LEFT:
                participant.status = ParticipantStatus(row.previous_status)
                participant.left_at = None
                restored += 1
        db.session.execute(
            delete(StudyDecision).where(
                StudyDecision.study_id == study.id, StudyDecision.run == run
            )
        )
        for bonus in bonus_rows:
            own_file = bonus.state == ISSUED and file_run(bonus) == run
            if bonus.state == REQUESTED or (own_file and drop_bonuses):
                _reverse(bonus, run, now)
                dropped += 1
            elif bonus.state == ISSUED:
                kept += 1
            elif bonus.state in (SENT, PAID):
                paid += 1
        for bonus in carried:
            if drop_bonuses:
                ref = platform_ref(bonus)
                ref.pop("file_run", None)
                bonus.state = REQUESTED
                bonus.platform_ref = json.dumps({**ref, "dropped_from_file_run": run})
                owed_again += 1
            else:
                kept += 1
        latest.undone_at = now
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
    return Undone(run, len(rows), restored, dropped, kept, paid, owed_again)


# -- the files ------------------------------------------------------------------------------


def _csv(rows: list[list], header: list[str] | None) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(header)
    writer.writerows(neutralise_row(row) for row in rows)
    return out.getvalue()


def mturk_batch_with_decisions(decisions: list[Decision], fieldnames: list[str]) -> str:
    """The batch file with MTurk's Approve and Reject columns filled in (others left blank)."""
    out = io.StringIO()
    names = [*fieldnames, *(c for c in ("Approve", "Reject") if c not in fieldnames)]
    writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for d in decisions:
        row = dict(d.row or {"WorkerId": d.worker_id})
        row["Approve"] = "x" if d.decision == APPROVE and d.actionable else ""
        row["Reject"] = d.message if d.decision == REJECT and d.actionable else ""
        writer.writerow({name: neutralise(value) for name, value in row.items()})
    return out.getvalue()


def mturk_bonus_csv(study: Study, bonus: list[Decision], extra: tuple[Owed, ...] = ()) -> str:
    """MTurk's SendBonus needs the worker, the assignment, the amount and a reason the worker
    reads. The assignment is the batch file's AssignmentId, else the one the worker came with.
    A bonus given in review is a line of its own, with the reason given there."""
    sessions = dict(
        db.session.execute(
            select(Participant.id, Participant.platform_session).where(
                Participant.id.in_([d.participant_id for d in bonus if d.participant_id])
            )
        ).all()
    )
    assignments = {d.worker_id: (d.row or {}).get("AssignmentId") for d in bonus}
    reason = f"Bonus for your answers in “{study.title}”, as the study's bonus rule says."
    rows = [
        [
            d.worker_id,
            (d.row or {}).get("AssignmentId") or sessions.get(d.participant_id) or "",
            money(d.bonus_minor),
            reason,
        ]
        for d in bonus
    ]
    rows += [
        [
            o.worker_id,
            assignments.get(o.worker_id) or o.session or "",
            money(o.amount_minor),
            o.reason.removeprefix(REVIEW_PREFIX) if o.reason.startswith(REVIEW_PREFIX) else reason,
        ]
        for o in extra
    ]
    return _csv(rows, ["WorkerId", "AssignmentId", "BonusAmount", "Reason"])


def bonus_lines(bonus: list[Decision], extra: tuple[Owed, ...] = ()) -> list[tuple[str, int]]:
    """bonus.csv's lines: one per worker (Prolific's bulk bonus takes one amount a participant),
    the score bonus of this run plus every bonus owed from earlier that this run writes."""
    total: dict[str, int] = {}
    for d in bonus:
        total[d.worker_id] = total.get(d.worker_id, 0) + d.bonus_minor
    for o in extra:
        total[o.worker_id] = total.get(o.worker_id, 0) + o.amount_minor
    return list(total.items())


def money(minor: int) -> str:
    """An amount in minor units (pence, cents) as the platforms' files write it: 1.05."""
    return f"{minor // 100}.{minor % 100:02d}"


README = """# Decisions for study {slug}

Made by `flask study verify` from {source} on {when}. {applied}

These files name workers by their platform ids: keep them with the study's private records and
do not share them. Every CSV starts with its header, except bonus.csv, which is in the
platform's own format.

- decisions.csv: every submission once, with its decision, the platform's status, the reasons,
  the bonus, and `annotator` (the worker's pseudonym in research exports: join on it to leave
  rejected workers out of an export).
- approve.txt: ids to approve ({approve}). Prolific: approve by upload.
- reject.csv: id, Prolific's rejection category and the message, at least 100 characters
  ({reject}). Reject each with that category and message.
- review.csv: submissions a person must look at, with the reasons ({review}).
- bonus.csv: `id,amount` lines in {currency} ({bonus}), one per worker: the score bonus
  of this run and every bonus given in review since the last bonus.csv. {bonus_how}
{mturk}
Returned or timed-out submissions ({returned}) and those still active ({pending}) are listed in
decisions.csv only: they are neither approved nor rejected.
"""


def _applied_note(study: Study, applied: Applied | None) -> str:
    if applied is None:
        return "Not recorded: run again with --apply once you act on these files."
    if applied.run is None:
        return "Already recorded by an earlier run: nothing new."
    return f"Recorded as run {applied.run} (`flask study undo-verify {study.slug}` reverts it)."


def write_files(
    out: Path,
    study: Study,
    decisions: list[Decision],
    source: str,
    applied: Applied | None,
    mturk_fieldnames: list[str] | None,
    pseudonym=None,
    via_api: bool = False,
) -> list[str]:
    """Write the decision files into `out`; returns their names. `pseudonym(player_id)` gives
    the research exports' annotator key. bonus.csv holds this run's score bonuses plus the
    bonuses owed from earlier that the run wrote (`applied.written`), or, before --apply, those it
    would write; with `via_api` it is empty, since the bonuses are paid through the API."""
    config = config_of(study)
    out.mkdir(parents=True, exist_ok=True)
    act = [d for d in decisions if d.actionable]
    files: dict[str, str] = {}
    files["decisions.csv"] = _csv(
        [
            [
                d.worker_id,
                pseudonym(d.player_id) if pseudonym and d.player_id else "",
                d.decision,
                d.platform_status or "",
                d.rejection_category or "",
                money(d.bonus_minor) if d.bonus_minor else "",
                "; ".join(d.reasons),
            ]
            for d in decisions
        ],
        ["worker_id", "annotator", "decision", "platform_status", "rejection_category",
         "bonus", "reasons"],
    )  # fmt: skip
    approve = [d for d in act if d.decision == APPROVE]
    reject = [d for d in act if d.decision == REJECT]
    review = [d for d in decisions if d.decision == REVIEW]
    bonus = [d for d in decisions if d.bonus_minor > 0]
    if via_api:
        bonus, extra = [], ()
    elif applied is not None:
        extra = applied.written
    else:
        extra = tuple(owed_unsent(study))
    lines = bonus_lines(bonus, extra)
    files["approve.txt"] = "".join(f"{d.worker_id}\n" for d in approve)
    files["reject.csv"] = _csv(
        [[d.worker_id, d.rejection_category, d.message] for d in reject],
        ["participant_id", "rejection_category", "message"],
    )
    files["review.csv"] = _csv(
        [[d.worker_id, d.platform_status or "", "; ".join(d.reasons)] for d in review],
        ["worker_id", "platform_status", "reasons"],
    )
    files["bonus.csv"] = "".join(
        f"{neutralise(worker)},{money(amount)}\n" for worker, amount in lines
    )
    mturk_line = ""
    if study.platform == "mturk":
        files["mturk-bonus.csv"] = mturk_bonus_csv(study, bonus, extra)
        mturk_line += (
            f"- mturk-bonus.csv: WorkerId, AssignmentId, BonusAmount and Reason for MTurk's "
            f"SendBonus ({len(bonus) + len(extra)}); send each once.\n"
        )
    if mturk_fieldnames is not None:
        files["mturk-decisions.csv"] = mturk_batch_with_decisions(decisions, mturk_fieldnames)
        mturk_line = (
            "- mturk-decisions.csv: the batch file with Approve and Reject filled in; upload it "
            "to MTurk's batch review.\n"
        )
    count = {k: sum(d.decision == k for d in decisions) for k in DECISIONS}
    files["README.md"] = README.format(
        slug=study.slug,
        source=source,
        when=utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        applied=_applied_note(study, applied),
        approve=len(approve),
        reject=len(reject),
        review=len(review),
        bonus=f"{len(lines)}, {money(sum(a for _w, a in lines))} {config.currency}",
        bonus_how=(
            "Empty: this run pays the bonuses through Prolific's API; do not upload anything."
            if via_api
            else "Prolific: bulk bonus payment. Upload it once: a second upload pays again."
            if applied is not None
            else "A preview: nothing is recorded, so do not upload it; run with --apply and "
            "upload that run's bonus.csv."
        ),
        currency=config.currency,
        returned=count[RETURNED],
        pending=count[PENDING],
        mturk=mturk_line,
    )
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    return list(files)

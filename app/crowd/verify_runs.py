"""The records of `flask study verify --apply`: each run's decisions, the workers it marked
returned or timed out, and its bonuses in the ledger (app.crowd.ledger), as one run that
`flask study undo-verify` can revert.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import delete, select

from app.crowd.admission import mark_left
from app.crowd.ledger import (
    ISSUED,
    PAID,
    REQUESTED,
    REVERSAL,
    REVERSED,
    SENT,
    Owed,
    add_bonus,
    file_run,
    next_run,
    owed_rows,
    platform_ref,
    unsent_rows,
)
from app.crowd.lookup import LEFT
from app.crowd.reports import (
    latest_decisions,
)
from app.crowd.verify_submissions import LEFT_STATUSES, RETURNED, Decision
from app.errors import Conflict
from app.extensions import all_or_nothing, db
from app.models import Participant, ParticipantStatus, Study, StudyBonus, StudyDecision
from app.models.base import utcnow
from app.models.studies import StudyRun


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


def apply_decisions(study: Study, decisions: list[Decision], via_api: bool = False) -> Applied:
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
    with all_or_nothing():
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
                        source="verify",
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
            unsent = unsent_rows(study)
            written = owed_rows(unsent)
            for row in unsent:
                row.state = ISSUED
                row.platform_ref = json.dumps({**platform_ref(row), "file_run": run})
        recorded = changed or bonuses or written
        if recorded:
            db.session.add(StudyRun(study_id=study.id, run=run, source="verify", created_at=now))
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


def _latest_run(study: Study) -> StudyRun:
    """The study's latest run not yet undone; a Conflict when there is none."""
    latest = db.session.scalar(
        select(StudyRun)
        .where(StudyRun.study_id == study.id, StudyRun.undone_at.is_(None))
        .order_by(StudyRun.run.desc())
        .limit(1)
    )
    if latest is None:
        raise Conflict(f"study {study.slug!r} has no recorded verify run to undo")
    return latest


def _carried_rows(study: Study, run: int) -> list[StudyBonus]:
    """Bonuses of earlier runs, owed from then, that `run` wrote into its bonus.csv."""
    return [
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
    latest = _latest_run(study)
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
    carried = _carried_rows(study, run)
    restored = dropped = kept = paid = owed_again = 0
    now = utcnow()
    with all_or_nothing():
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
    return Undone(run, len(rows), restored, dropped, kept, paid, owed_again)

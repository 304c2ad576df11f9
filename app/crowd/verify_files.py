"""The files a `flask study verify` run writes for the researcher and the platforms: every
decision, the ids to approve, the rejections with their messages, the cases to review, the
bonuses to pay (Prolific's bulk bonus, MTurk's SendBonus) and a README saying what to do."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sqlalchemy import select

from app.crowd.ledger import REVIEW_PREFIX, Owed, money, owed_unsent
from app.crowd.lookup import config_of
from app.crowd.verify_runs import Applied
from app.crowd.verify_submissions import (
    APPROVE,
    DECISIONS,
    PENDING,
    REJECT,
    RETURNED,
    REVIEW,
    Decision,
)
from app.extensions import db
from app.models import Participant, Study
from app.models.base import utcnow
from roftcore.spreadsheet import neutralise, neutralise_row


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


def _decisions_csv(decisions: list[Decision], pseudonym) -> str:
    """decisions.csv: every submission once, with the worker's pseudonym where given."""
    return _csv(
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


def _bonuses_to_write(
    study: Study, bonus: list[Decision], applied: Applied | None, via_api: bool
) -> tuple[list[Decision], tuple[Owed, ...]]:
    """The score bonuses of this run and the bonuses owed from earlier that its bonus.csv holds:
    those the run wrote (`applied.written`), or before --apply those it would write; none when
    the bonuses are paid through the API."""
    extra: tuple[Owed, ...]
    if via_api:
        bonus, extra = [], ()
    elif applied is not None:
        extra = applied.written
    else:
        extra = tuple(owed_unsent(study))
    return bonus, extra


def _bonus_how(applied: Applied | None, via_api: bool) -> str:
    """What the README says to do with bonus.csv."""
    return (
        "Empty: this run pays the bonuses through Prolific's API; do not upload anything."
        if via_api
        else "Prolific: bulk bonus payment. Upload it once: a second upload pays again."
        if applied is not None
        else "A preview: nothing is recorded, so do not upload it; run with --apply and "
        "upload that run's bonus.csv."
    )


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
    files["decisions.csv"] = _decisions_csv(decisions, pseudonym)
    approve = [d for d in act if d.decision == APPROVE]
    reject = [d for d in act if d.decision == REJECT]
    review = [d for d in decisions if d.decision == REVIEW]
    bonus = [d for d in decisions if d.bonus_minor > 0]
    bonus, extra = _bonuses_to_write(study, bonus, applied, via_api)
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
        mturk_line += (
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
        bonus_how=_bonus_how(applied, via_api),
        currency=config.currency,
        returned=count[RETURNED],
        pending=count[PENDING],
        mturk=mturk_line,
    )
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    return list(files)

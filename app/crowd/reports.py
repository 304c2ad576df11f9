"""Study progress, time on task, pay and quality flags; decisions for the platforms' files."""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from statistics import median

from sqlalchemy import select

from app.crowd import codes, quality
from app.crowd.studies import FINISHED, completion_code, config_of
from app.extensions import db
from app.game import rounds as game
from app.models import Participant, ParticipantStatus, Round, Study
from app.spreadsheet import neutralise, neutralise_row


@dataclass
class WorkerStats:
    worker_id: str
    status: str
    rounds_done: int
    checks_passed: int
    checks_failed: int
    median_round_seconds: float | None
    median_gap_seconds: float | None
    total_seconds: float | None
    straight_lining: bool
    too_fast: bool
    completion_code: str | None

    @property
    def flags(self) -> list[str]:
        found = []
        if self.too_fast:
            found.append("too fast")
        if self.straight_lining:
            found.append("straight-lining")
        if self.checks_failed:
            found.append(f"failed {self.checks_failed} check(s)")
        return found


@dataclass
class StudyReport:
    slug: str
    title: str
    platform: str
    rounds_required: int
    participants: int
    by_status: dict[str, int]
    finished: int
    completion_rate: float | None
    median_round_seconds: float | None
    median_gap_seconds: float | None
    median_total_minutes: float | None
    reward: float
    currency: str
    configured_hourly: float | None
    effective_hourly: float | None
    pool_size: int
    target_per_example: int
    annotations_min: int
    annotations_median: float
    annotations_max: int
    examples_at_target: int
    flagged_too_fast: int
    flagged_straight_lining: int
    workers: list[WorkerStats] = field(default_factory=list)

    def to_json(self) -> dict:
        data = asdict(self)
        data["workers"] = [asdict(w) | {"flags": w.flags} for w in self.workers]
        return data


def worker_stats(study: Study) -> list[WorkerStats]:
    config = config_of(study)
    participants = list(
        db.session.scalars(
            select(Participant).where(Participant.study_id == study.id).order_by(Participant.id)
        )
    )
    rows = db.session.execute(
        select(Round.participant_id, Round.kind, Round.guess, Round.started_at, Round.answered_at)
        .join(Participant, Participant.id == Round.participant_id)
        .where(Participant.study_id == study.id, Round.guess.is_not(None))
        .order_by(Round.participant_id, Round.answered_at)
    ).all()
    by_worker: dict[int, list] = defaultdict(list)
    for row in rows:
        if row.kind != game.PRACTICE:
            by_worker[row.participant_id].append(row)
    stats = []
    for participant in participants:
        mine = by_worker.get(participant.id, [])
        durations = [(r.answered_at - r.started_at).total_seconds() for r in mine]
        gaps = quality.seconds_between([r.answered_at for r in mine])
        guesses = [r.guess for r in mine if r.kind == game.NORMAL]
        median_round = quality.median_or_none(durations)
        total = (mine[-1].answered_at - participant.started_at).total_seconds() if mine else None
        stats.append(
            WorkerStats(
                worker_id=participant.worker_id,
                status=participant.status.value,
                rounds_done=participant.rounds_done,
                checks_passed=participant.checks_passed,
                checks_failed=participant.checks_failed,
                median_round_seconds=median_round,
                median_gap_seconds=quality.median_or_none(gaps),
                total_seconds=total,
                straight_lining=quality.straight_lining(guesses, config.straight_line_threshold),
                too_fast=median_round is not None and median_round < config.min_seconds_per_round,
                completion_code=completion_code(participant),
            )
        )
    return stats


def study_report(study: Study) -> StudyReport:
    config = config_of(study)
    workers = worker_stats(study)
    statuses = Counter(w.status for w in workers)
    finished = sum(n for s, n in statuses.items() if ParticipantStatus(s) in FINISHED)
    per_example = Counter(
        db.session.scalars(
            select(Round.example_id)
            .join(Participant, Participant.id == Round.participant_id)
            .where(
                Participant.study_id == study.id,
                Round.kind == game.NORMAL,
                Round.guess.is_not(None),
            )
        )
    )
    counts = [per_example.get(example_id, 0) for example_id in study.pool["normal"]] or [0]
    done_totals = [w.total_seconds for w in workers if w.status != "started" and w.total_seconds]
    median_total = median(done_totals) if done_totals else None
    all_rounds = [w.median_round_seconds for w in workers if w.median_round_seconds is not None]
    all_gaps = [w.median_gap_seconds for w in workers if w.median_gap_seconds is not None]
    return StudyReport(
        slug=study.slug,
        title=study.title,
        platform=study.platform,
        rounds_required=config.rounds,
        participants=len(workers),
        by_status=dict(sorted(statuses.items())),
        finished=finished,
        completion_rate=finished / len(workers) if workers else None,
        median_round_seconds=quality.median_or_none(all_rounds),
        median_gap_seconds=quality.median_or_none(all_gaps),
        median_total_minutes=median_total / 60 if median_total else None,
        reward=config.reward,
        currency=config.currency,
        configured_hourly=config.hourly_reward,
        effective_hourly=quality.hourly_rate(config.reward, median_total),
        pool_size=len(study.pool["normal"]),
        target_per_example=config.target_per_example,
        annotations_min=min(counts),
        annotations_median=float(median(counts)),
        annotations_max=max(counts),
        examples_at_target=sum(c >= config.target_per_example for c in counts),
        flagged_too_fast=sum(w.too_fast for w in workers),
        flagged_straight_lining=sum(w.straight_lining for w in workers),
        workers=workers,
    )


def workers_csv(report: StudyReport) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            "worker_id", "status", "rounds_done", "checks_passed", "checks_failed",
            "median_round_seconds", "median_gap_seconds", "total_seconds", "flags",
        ]
    )  # fmt: skip
    for w in report.workers:
        writer.writerow(
            neutralise_row([
                w.worker_id, w.status, w.rounds_done, w.checks_passed, w.checks_failed,
                _fmt(w.median_round_seconds), _fmt(w.median_gap_seconds), _fmt(w.total_seconds),
                "; ".join(w.flags),
            ])
        )  # fmt: skip
    return out.getvalue()


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


# -- verification ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Submission:
    """One row of a platform's results file: who, and the code they entered (if the file has it)."""

    worker_id: str
    code: str | None = None
    row: dict | None = None


@dataclass(frozen=True)
class Decision:
    worker_id: str
    decision: str  # approve / reject / review
    reasons: list[str]
    row: dict | None = None


def decide(study: Study, submissions: list[Submission]) -> list[Decision]:
    """Approve, reject or review each submission, with the reasons."""
    config = config_of(study)
    stats = {w.worker_id: w for w in worker_stats(study)}
    decisions = []
    for sub in submissions:
        w = stats.get(sub.worker_id)
        if w is None:
            decisions.append(
                Decision(sub.worker_id, "review", ["never joined this study"], sub.row)
            )
            continue
        reject, review = [], []
        if w.status == "failed_checks":
            reject.append(f"failed {w.checks_failed} attention check(s)")
        elif w.status == "screened_out":
            review.append("screened out (pay per the platform's rules for screen-outs)")
        elif w.status == "started":
            review.append(f"unfinished: {w.rounds_done} of {config.rounds} rounds")
        if sub.code is not None and w.completion_code is not None:
            if not codes.codes_match(sub.code, w.completion_code):
                reject.append("completion code does not match")
        elif sub.code is not None and w.completion_code is None:
            review.append("entered a code before finishing")
        if w.too_fast:
            review.append(
                f"median round time {w.median_round_seconds:.0f} s is below the study's "
                f"minimum of {config.min_seconds_per_round:.0f} s"
            )
        if w.straight_lining:
            review.append("straight-lining: the same answer position many times in a row")
        decision = "reject" if reject else "review" if review else "approve"
        decisions.append(Decision(sub.worker_id, decision, reject + review, sub.row))
    return decisions


def read_prolific_export(text: str) -> list[Submission]:
    """Prolific's submissions export: 'Participant id' and, when present, 'Completion code'."""
    reader = csv.DictReader(io.StringIO(text))
    headers = {h.lower().replace("_", " ").strip(): h for h in reader.fieldnames or []}
    id_col = headers.get("participant id")
    if id_col is None:
        raise ValueError("the Prolific export has no 'Participant id' column")
    code_col = headers.get("completion code")
    return [
        Submission(row[id_col].strip(), (row.get(code_col) or None) if code_col else None, row)
        for row in reader
        if row.get(id_col, "").strip()
    ]


def read_mturk_batch(text: str) -> list[Submission]:
    """MTurk's batch results CSV: 'WorkerId' and the code in 'Answer.completion_code'."""
    reader = csv.DictReader(io.StringIO(text))
    if "WorkerId" not in (reader.fieldnames or []):
        raise ValueError("the MTurk batch file has no 'WorkerId' column")
    return [
        Submission(row["WorkerId"].strip(), row.get("Answer.completion_code") or None, row)
        for row in reader
        if row.get("WorkerId", "").strip()
    ]


def read_id_list(text: str) -> list[Submission]:
    """One worker id per line (blank lines and # comments ignored)."""
    ids = [line.strip() for line in text.splitlines()]
    return [Submission(i) for i in ids if i and not i.startswith("#")]


def mturk_batch_with_decisions(decisions: list[Decision], fieldnames: list[str]) -> str:
    """The batch file with MTurk's Approve and Reject columns filled in (review rows left blank)."""
    out = io.StringIO()
    names = [*fieldnames, *(c for c in ("Approve", "Reject") if c not in fieldnames)]
    writer = csv.DictWriter(out, fieldnames=names)
    writer.writeheader()
    for d in decisions:
        row = dict(d.row or {"WorkerId": d.worker_id})
        row["Approve"] = "x" if d.decision == "approve" else ""
        row["Reject"] = "; ".join(d.reasons) if d.decision == "reject" else ""
        writer.writerow({name: neutralise(value) for name, value in row.items()})
    return out.getvalue()


def apply_decisions(study: Study, decisions: list[Decision]) -> int:
    """Record approve/reject on the participants (review is left for a person); returns count."""
    changed = 0
    for d in decisions:
        if d.decision not in ("approve", "reject"):
            continue
        participant = db.session.scalar(
            select(Participant).where(
                Participant.study_id == study.id, Participant.worker_id == d.worker_id
            )
        )
        if participant is None or participant.status not in FINISHED:
            continue
        participant.status = (
            ParticipantStatus.approved if d.decision == "approve" else ParticipantStatus.rejected
        )
        participant.decision_note = "; ".join(d.reasons)
        changed += 1
    db.session.commit()
    return changed

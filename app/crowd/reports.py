"""Study progress, time on task, pay, quality flags and live agreement."""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from statistics import median

from sqlalchemy import func, select

from app.crowd import admission, agreement, conditions, quality, schedule, serving
from app.crowd.lookup import FINISHED, LEFT, config_of
from app.crowd.verdicts import check_rounds, completion_code
from app.extensions import db
from app.models import (
    Example,
    Participant,
    ParticipantStatus,
    Round,
    Study,
    StudyDecision,
    StudySlot,
)
from app.models.rounds import NORMAL_ROUND, PRACTICE_ROUND
from roftcore.spreadsheet import neutralise_row

# Below this many workers with answered rounds, the study's median time says too little for
# the relative speeder flag.
MIN_WORKERS_FOR_SPEED = 3
# A worker who answers this many checks before their evidence is shown goes to review.
VOID_FLAG = 2


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
    participant_id: int = 0
    player_id: int = 0
    points: int = 0  # on the required scored (normal) rounds: the bonus's basis
    exact: int = 0  # scored rounds where the guess was the boundary
    comprehension_failures: int = 0
    decision: str | None = None  # the current decision (the newest of verify's and review's)
    started_at: datetime | None = None
    left_at: datetime | None = None
    checks_void: int = 0  # answered before their evidence was shown: neither passed nor failed
    required_rounds: int = 0
    # Round numbers (in the worker's play order) of the checks failed and void.
    failed_check_rounds: list[int] = field(default_factory=list)
    void_check_rounds: list[int] = field(default_factory=list)
    outcome: str | None = None  # the finished outcome, or its cause (admission.NO_TEXTS, ...)
    trouble: str | None = None  # why the pool failed this worker, if it did (see trouble_of)

    @property
    def flags(self) -> list[str]:
        found = [self.trouble] if self.trouble else []
        if self.too_fast:
            found.append("too fast")
        if self.straight_lining:
            found.append("straight-lining")
        if self.checks_failed:
            found.append(f"failed {self.checks_failed} check(s)")
        if self.checks_void >= VOID_FLAG:
            found.append(f"{self.checks_void} check(s) answered before their evidence")
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
    is_open: bool = True
    places: int | None = None
    places_taken: int = 0
    time_limit_minutes: float | None = None
    left: int = 0  # returned or timed out
    speed_threshold_seconds: float | None = None
    agreement: agreement.Agreement | None = None
    decisions: dict[str, int] = field(default_factory=dict)
    # Per condition: {"entered": workers allocated, "holding": those holding a place now}.
    conditions: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict:
        data = asdict(self)
        data["workers"] = [asdict(w) | {"flags": w.flags} for w in self.workers]
        return data


def latest_decisions(study: Study, source: str | None = None) -> dict[int, StudyDecision]:
    """The current decision per participant: the newest row of the latest applied runs (only
    those of `source`, "review" for a person's, when given)."""
    newest = select(func.max(StudyDecision.id)).where(StudyDecision.study_id == study.id)
    if source is not None:
        newest = newest.where(StudyDecision.source == source)
    newest = newest.group_by(StudyDecision.participant_id)
    rows = db.session.scalars(select(StudyDecision).where(StudyDecision.id.in_(newest)))
    return {row.participant_id: row for row in rows}


def speed_threshold(config, medians: list[float]) -> float | None:
    """Seconds per round under which a worker is flagged: a share of the study's median (the
    median of the workers' medians) once enough workers played, and the optional floor."""
    relative = (
        config.speeder_fraction * median(medians) if len(medians) >= MIN_WORKERS_FOR_SPEED else 0
    )
    threshold = max(relative, config.min_seconds_per_round)
    return threshold or None


def _answered_rounds(study: Study) -> dict[int, list]:
    """Participant id -> their answered rounds of the study (practice left out), in the order
    they answered them."""
    rows = db.session.execute(
        select(
            Round.participant_id,
            Round.kind,
            Round.guess,
            Round.points,
            Round.started_at,
            Round.answered_at,
            Example.boundary,
            Example.source,
        )
        .join(Participant, Participant.id == Round.participant_id)
        .join(Example, Example.id == Round.example_id)
        .where(Participant.study_id == study.id, Round.guess.is_not(None))
        .order_by(Round.participant_id, Round.answered_at)
    ).all()
    by_worker: dict[int, list] = defaultdict(list)
    for row in rows:
        if row.kind != PRACTICE_ROUND:
            by_worker[row.participant_id].append(row)
    return by_worker


def worker_stats(study: Study) -> list[WorkerStats]:
    """Each worker of the study, in the order they joined, with their rounds, checks, times,
    quality signals, pay basis and decision."""
    config = config_of(study)
    participants = list(
        db.session.scalars(
            select(Participant).where(Participant.study_id == study.id).order_by(Participant.id)
        )
    )
    by_worker = _answered_rounds(study)
    decided = latest_decisions(study)
    empty = _empty_slots(study)
    medians = {}
    for participant in participants:
        durations = [
            (r.answered_at - r.started_at).total_seconds() for r in by_worker[participant.id]
        ]
        medians[participant.id] = quality.median_or_none(durations)
    threshold = speed_threshold(config, [m for m in medians.values() if m is not None])
    stats = []
    for participant in participants:
        mine = by_worker.get(participant.id, [])
        gaps = quality.seconds_between([r.answered_at for r in mine])
        # The required rounds come first; optional extra rounds do not change pay (the finish
        # page says so), so points and exact hits, the bonus's basis, count the required only.
        required = serving.required_rounds(config, participant)
        scored = [r for r in mine[:required] if r.kind == NORMAL_ROUND]
        checks = check_rounds(mine)
        median_round = medians[participant.id]
        total = (mine[-1].answered_at - participant.started_at).total_seconds() if mine else None
        decision = decided.get(participant.id)
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
                straight_lining=quality.straight_lining(
                    [r.guess for r in scored], config.straight_line_threshold
                ),
                too_fast=threshold is not None
                and median_round is not None
                and median_round < threshold,
                completion_code=completion_code(participant),
                participant_id=participant.id,
                player_id=participant.player_id,
                points=sum(r.points or 0 for r in scored),
                exact=sum(r.guess == r.boundary for r in scored),
                comprehension_failures=participant.comprehension_failures,
                decision=decision.decision if decision else None,
                started_at=participant.started_at,
                left_at=participant.left_at,
                checks_void=participant.checks_void,
                required_rounds=required,
                failed_check_rounds=checks[schedule.FAIL],
                void_check_rounds=checks[schedule.VOID],
                outcome=participant.outcome,
                trouble=trouble_of(participant, empty.get(participant.id, [])),
            )
        )
    return stats


def _empty_slots(study: Study) -> dict[int, list[int]]:
    """participant id -> positions of required rounds still ahead whose stored slot has no text
    (only in schedules stored before schedules were complete at entry)."""
    found: dict[int, list[int]] = defaultdict(list)
    for participant_id, position in db.session.execute(
        select(StudySlot.participant_id, StudySlot.position)
        .join(Participant, Participant.id == StudySlot.participant_id)
        .where(
            Participant.study_id == study.id,
            Participant.status == ParticipantStatus.started,
            StudySlot.example_id.is_(None),
            StudySlot.optional.is_(False),
            StudySlot.position >= Participant.rounds_done,
        )
        .order_by(StudySlot.position)
    ):
        found[participant_id].append(position)
    return found


def trouble_of(participant: Participant, empty: list[int]) -> str | None:
    """Why the pool failed this worker, in the study's round numbers, or None."""
    if participant.outcome == admission.NO_TEXTS:
        return (
            "not admitted: the pool had no complete schedule for them (finished at entry as "
            "screened out, with the screened-out code)"
        )
    if participant.outcome == admission.RAN_OUT:
        return (
            f"the pool ran out at round {participant.rounds_done + 1}: finished early with the "
            "completed code (the study's shortfall, not theirs)"
        )
    if empty:
        numbers = ", ".join(str(p + 1) for p in empty)
        return f"no text for round{'s' if len(empty) > 1 else ''} {numbers} of their schedule"
    return None


def study_agreement(study: Study) -> agreement.Agreement:
    """Agreement on the study's scored texts, from the answered rounds so far."""
    answers: dict[int, list[int]] = defaultdict(list)
    for example_id, guess in db.session.execute(
        select(Round.example_id, Round.guess)
        .join(Participant, Participant.id == Round.participant_id)
        .where(
            Participant.study_id == study.id,
            Round.kind == NORMAL_ROUND,
            Round.guess.is_not(None),
        )
    ):
        answers[example_id].append(guess)
    return agreement.agreement(answers.values())


def study_report(study: Study) -> StudyReport:
    config = config_of(study)
    admission.expire_overdue(study)
    workers = worker_stats(study)
    statuses = Counter(w.status for w in workers)
    finished = sum(n for s, n in statuses.items() if ParticipantStatus(s) in FINISHED)
    per_example = Counter(
        db.session.scalars(
            select(Round.example_id)
            .join(Participant, Participant.id == Round.participant_id)
            .where(
                Participant.study_id == study.id,
                Round.kind == NORMAL_ROUND,
                Round.guess.is_not(None),
            )
        )
    )
    counts = [per_example.get(example_id, 0) for example_id in study.pool["normal"]] or [0]
    done_totals = [
        w.total_seconds
        for w in workers
        if ParticipantStatus(w.status) in FINISHED and w.total_seconds
    ]
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
        is_open=study.is_open,
        places=config.places,
        places_taken=admission.places_taken(study),
        time_limit_minutes=config.time_limit_minutes,
        left=sum(n for s, n in statuses.items() if ParticipantStatus(s) in LEFT),
        speed_threshold_seconds=speed_threshold(config, all_rounds),
        agreement=study_agreement(study),
        decisions=dict(sorted(Counter(w.decision for w in workers if w.decision).items())),
        conditions=conditions.counts(study),
    )


WORKER_COLUMNS = (
    "worker_id", "status", "decision", "rounds_done", "checks_passed", "checks_failed",
    "points", "exact", "median_round_seconds", "median_gap_seconds", "total_seconds", "flags",
)  # fmt: skip


def workers_csv(report: StudyReport) -> str:
    """One row per worker; the header is the first line (no banner: see docs)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(WORKER_COLUMNS)
    for w in report.workers:
        writer.writerow(
            neutralise_row([
                w.worker_id, w.status, w.decision or "", w.rounds_done, w.checks_passed,
                w.checks_failed, w.points, w.exact, _fmt(w.median_round_seconds),
                _fmt(w.median_gap_seconds), _fmt(w.total_seconds), "; ".join(w.flags),
            ])
        )  # fmt: skip
    return out.getvalue()


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"

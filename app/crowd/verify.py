"""`flask study verify`: decide approve / reject / review for each platform submission.

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

The submissions read from the platforms' files (app.crowd.verify_submissions), the run's records
(app.crowd.verify_runs), the files it writes (app.crowd.verify_files) and the bonus ledger
(app.crowd.ledger) are modules of their own.
"""

from __future__ import annotations

from app.crowd import codes, schedule
from app.crowd.admission import RAN_OUT, expire_overdue
from app.crowd.config import StudyConfig
from app.crowd.ledger import given_bonuses, money
from app.crowd.lookup import FINISHED, config_of
from app.crowd.reports import (
    VOID_FLAG,
    WorkerStats,
    latest_decisions,
    speed_threshold,
    worker_stats,
)
from app.crowd.verify_submissions import (
    ACTIVE_STATUSES,
    APPROVE,
    CLOSED_STATUSES,
    LEFT_STATUSES,
    NOCODE,
    PENDING,
    REJECT,
    RETURNED,
    REVIEW,
    Decision,
    Submission,
)
from app.models import ParticipantStatus, Study, StudyDecision

MIN_MESSAGE = 100  # Prolific refuses shorter rejection messages


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


def _check_code(
    config: StudyConfig,
    code: str | None,
    w: WorkerStats,
    finished: bool,
    review: list[str],
    notes: list[str],
) -> None:
    """The entered code against the site's record: adds to `review` what a person must look at
    and to `notes` what is only said."""
    outcome = w.status
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


def _conduct_flags(w: WorkerStats, speed: float | None) -> list[str]:
    """How the worker answered, where it asks for a review: too fast, straight-lining, checks
    answered before their instruction was shown."""
    review: list[str] = []
    outcome = w.status
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
    return review


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
    _check_code(config, sub.code, w, finished, review, notes)
    review += _conduct_flags(w, speed)
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
    hands = latest_decisions(study, "review")  # a person's, in `flask study review`
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

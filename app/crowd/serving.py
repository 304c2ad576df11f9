"""Serving a worker's rounds from their schedule, and what the round page shows."""

from __future__ import annotations

import random

from sqlalchemy import exists, func, or_, select
from sqlalchemy.exc import IntegrityError

from app.crowd import conditions, hints, schedule, slots
from app.crowd.admission import RAN_OUT, check_time, comprehension_pending, finish
from app.crowd.config import StudyConfig
from app.crowd.lookup import FINISHED, config_of, holding_place
from app.crowd.ratings import criteria
from app.crowd.slots import SLOT_POOLS, required_rounds
from app.errors import Conflict
from app.extensions import db
from app.game import reveals, starts
from app.game.rounds import RevealView
from app.models import (
    Example,
    ExamplePassage,
    Participant,
    ParticipantStatus,
    PassageRead,
    Player,
    Round,
    Study,
    StudySlot,
    System,
)
from app.models.base import utcnow
from app.models.rounds import CHECK_ROUND, NORMAL_ROUND, PRACTICE_ROUND


class RatingsPending(Conflict):
    """The worker's last round still needs its ratings before anything else."""

    def __init__(self, round_: Round):
        super().__init__("Please give your ratings for this text before you go on.")
        self.round = round_


def _unread(participant: Participant):
    """Examples built from no passage this worker has read, in any version (checks included:
    a check shows its source's passage)."""
    return ~exists().where(
        ExamplePassage.example_id == Example.id,
        PassageRead.passage_id == ExamplePassage.passage_id,
        PassageRead.player_id == participant.player_id,
    )


# -- rounds ---------------------------------------------------------------------------------


def open_round(participant: Participant) -> RevealView | None:
    """The worker's unanswered round, as its page is drawn from. A crowd player plays nothing
    but their study's rounds (the game sends them back to it), so it is their player's."""
    return reveals.open_round(db.session.get(Player, participant.player_id))


def _played(participant: Participant) -> select:
    return select(Round.example_id).where(Round.player_id == participant.player_id)


def _pick_normal(study: Study, participant: Participant, config: StudyConfig) -> Example | None:
    """The pool example with the fewest study rounds so far, under K first.

    A round counts once answered, or while its worker still holds a place: the open rounds of
    workers who returned or ran out of time no longer keep texts from others.
    """
    counted = or_(Round.guess.is_not(None), holding_place(config, utcnow()))
    in_study = (
        select(Round.example_id, func.count(Round.id).label("n"))
        .join(Participant, Participant.id == Round.participant_id)
        .where(Participant.study_id == study.id, Round.kind == NORMAL_ROUND, counted)
        .group_by(Round.example_id)
        .subquery()
    )
    load = func.coalesce(in_study.c.n, 0)
    return db.session.scalar(
        select(Example)
        .outerjoin(in_study, in_study.c.example_id == Example.id)
        .where(
            Example.id.in_(conditions.pool_ids(study, participant, "normal")),
            Example.id.not_in(_played(participant)),
            _unread(participant),
        )
        .order_by((load >= config.target_per_example).asc(), load.asc(), func.random())
        .limit(1)
    )


def pick_from(
    ids: list[int], participant: Participant, ordered: bool, unread: bool = True
) -> Example | None:
    """One of these examples the worker has not played, built from no passage they read
    (`unread`; practice texts may come from anywhere)."""
    query = select(Example).where(Example.id.in_(ids), Example.id.not_in(_played(participant)))
    if unread:
        query = query.where(_unread(participant))
    rows = list(db.session.scalars(query))
    if not rows:
        return None
    if ordered:
        return min(rows, key=lambda e: ids.index(e.id))
    return random.choice(rows)


def practice_pending(study: Study, participant: Participant) -> bool:
    tutorial = conditions.pool_ids(study, participant, "tutorial")
    return bool(tutorial) and participant.practice_done_at is None


def extra_rounds_left(study: Study, participant: Participant) -> int:
    """Optional rounds a finished worker may still play, up to the study's max_rounds."""
    config = config_of(study)
    if participant.status not in (ParticipantStatus.completed, ParticipantStatus.approved):
        return 0
    added = participant.schedule.count(schedule.SPARE_ADDED)
    return max(config.total_rounds + added - participant.rounds_done, 0)


def pending_ratings(study: Study, participant: Participant) -> Round | None:
    """The worker's last answered round, when the study rates after the reveal and it has no
    ratings yet: nothing else (a new round, the code) comes before them."""
    config = config_of(study)
    if not config.likert or config.likert_when != "after":
        return None
    last = db.session.scalar(
        select(Round)
        .where(
            Round.participant_id == participant.id,
            Round.guess.is_not(None),
            Round.kind != PRACTICE_ROUND,
        )
        .order_by(Round.answered_at.desc(), Round.id.desc())
        .limit(1)
    )
    return last if last is not None and last.kind == NORMAL_ROUND and last.ratings is None else None


def next_round(study: Study, participant: Participant, extra: bool = False) -> RevealView | None:
    """The worker's open round, or a new one for their next slot; None when they are done.

    With `extra`, a worker who completed the study may play on up to max_rounds (optional).
    Raises RatingsPending while the last round lacks its ratings, and Conflict before the
    comprehension questions are passed.
    """
    check_time(participant)
    current = open_round(participant)
    if current is not None:
        return current
    if (waiting := pending_ratings(study, participant)) is not None:
        raise RatingsPending(waiting)
    config = config_of(study)
    if participant.status != ParticipantStatus.started and not (
        extra and extra_rounds_left(study, participant)
    ):
        return None
    if comprehension_pending(study, participant):
        raise Conflict("Please answer the questions after the instructions first.")
    player = db.session.get(Player, participant.player_id)
    if practice_pending(study, participant):
        tutorial = conditions.pool_ids(study, participant, "tutorial")
        example = pick_from(tutorial, participant, ordered=True, unread=False)
        if example is not None:
            return starts.new_round(
                player,
                study.slug,
                example=example,
                kind=PRACTICE_ROUND,
                participant_id=participant.id,
            )
        participant.practice_done_at = utcnow()
        db.session.commit()
    slot = participant.rounds_done
    required = required_rounds(config, participant)
    if slot >= len(participant.schedule) or (slot >= required and not extra):
        return None
    kind = participant.schedule[slot]
    round_kind = CHECK_ROUND if kind in SLOT_POOLS else NORMAL_ROUND
    stored = _stored_slot(study, participant, slot)
    example = None
    if stored is not None and stored.example_id is not None:
        example = db.session.get(Example, stored.example_id)
    if example is None:
        # No text was left for this slot when the schedule was made: pick one now.
        example = _pick_now(study, participant, config, kind)
        if example is not None and stored is not None:
            stored.example_id = example.id  # committed with the round
    if example is None:
        # Only a schedule stored before schedules were complete at entry: the shortfall is the
        # study's, so the worker finishes now with the completed code (an optional round just
        # ends the extra play). Never a dead end.
        if slot < required and participant.status == ParticipantStatus.started:
            finish(participant, config, ParticipantStatus.completed, RAN_OUT)
            db.session.commit()
        return None
    made = starts.new_round(
        player, study.slug, example=example, kind=round_kind, participant_id=participant.id
    )
    return made or open_round(participant)


def _stored_slot(study: Study, participant: Participant, position: int) -> StudySlot | None:
    """The worker's slot at this position, from the schedule stored when they entered; a worker
    who entered before schedules were stored gets theirs now."""
    if not slots.has_schedule(participant):
        try:
            slots.build(study, participant)
            db.session.commit()
        except IntegrityError:
            db.session.rollback()  # another tab of this worker stored it first
    return slots.slot_at(participant, position)


def _pick_now(
    study: Study, participant: Participant, config: StudyConfig, kind: str
) -> Example | None:
    if kind not in SLOT_POOLS:
        return _pick_normal(study, participant, config)
    ids = slots.pool_for(study, kind)
    # Every check left shows a passage this worker read: a repeat beats a dead end, and a
    # check's answer is its instruction, not the passage.
    return pick_from(ids, participant, ordered=False) or pick_from(
        ids, participant, ordered=False, unread=False
    )


def slot_progress(study: Study, participant: Participant) -> tuple[int, int]:
    """(the number of the worker's current or next round, rounds required)."""
    config = config_of(study)
    required = required_rounds(config, participant)
    return min(participant.rounds_done + 1, required), required


def round_context(round_: Round) -> dict:
    """What the round page shows for a study round: progress, the next step, ratings to give.

    With show_feedback = false, an answered paid round is shown on its own page that says the
    answer is recorded and shows neither the truth nor the points.
    """
    participant = db.session.get(Participant, round_.participant_id)
    study = participant.study
    config = conditions.settings_for(config_of(study), participant.condition)
    number, total = slot_progress(study, participant)
    if round_.guess is not None and round_.kind != PRACTICE_ROUND:
        number = participant.rounds_done  # this round is counted once answered
    extra = participant.finished_at is not None and round_.started_at > participant.finished_at
    context = {
        "study": study,
        "study_extra": extra,
        "study_number": number,
        "study_total": total,
        "study_finished": participant.status in FINISHED,
        "likert": criteria(config, round_),
        "likert_when": config.likert_when,
    }
    if config.detector_hint and round_.kind != PRACTICE_ROUND:
        shown = hints.for_round(round_)
        if shown is not None:
            context["detector_hints"] = [hints.WORDS[level] for level in shown]
    if config.disclose_model:
        context["study_models"] = study_models(study, participant)
    if round_.answered and round_.kind == CHECK_ROUND:
        example = round_.example
        context.update(
            check_kind=(example.source or {}).get("check", "all_human"),
            check_sentence=example.boundary + 1,
            check_passed=round_.guess == example.boundary,
        )
    if round_.answered and round_.kind != PRACTICE_ROUND and not config.show_feedback:
        # Only what the worker saw, and nothing that tells the truth.
        context.update(
            template="crowd/recorded.html",
            sentences=list(round_.example.sentences[: round_.revealed]),
        )
    return context


def study_models(study: Study, participant: Participant) -> list[str]:
    """The models that wrote the machine parts of the worker's texts (their labels where set):
    what a condition with disclose_model = true tells the worker, the same on every text."""
    ids = conditions.pool_ids(study, participant, "normal")
    rows = db.session.execute(
        select(System.name, Example.system_label)
        .join(System, System.id == Example.system_id)
        .where(Example.id.in_(ids), Example.boundary < Example.n_sentences)
        .distinct()
    )
    return sorted({label or name for name, label in rows})


def truth_hidden(player_id: int) -> bool:
    """True for a crowd worker in a study with show_feedback = false: no page or export other
    than the study's own may show them the true boundary or the points of their rounds (workers
    given the same texts could pool answers and collect per-exact bonuses)."""
    rows = db.session.execute(
        select(Study.config, Participant.condition)
        .join(Participant, Participant.study_id == Study.id)
        .where(Participant.player_id == player_id)
    )
    return any(
        not conditions.settings_for(StudyConfig.from_json(config), condition).show_feedback
        for config, condition in rows
    )

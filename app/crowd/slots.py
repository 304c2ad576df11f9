"""Each worker's schedule, fixed when they enter a study: which text they read in which round.

The schedule is computed once, when the worker enters (admission.enter), and stored as
StudySlot rows; every round is then served from it, so a reload, a second tab or a return
serves the same texts in the same order. A worker who entered before schedules were stored gets
theirs on their next round, keeping the texts they have already played.

No source passage appears twice among one worker's slots, attention checks included (a check
shows the passage it was built from), nor any passage they read in practice. Checks are placed
first, as their texts are few; then the normal rounds, balanced across the pool's systems and
boundary positions (balance.py), take the least-read texts of each kind, under the study's
target K first, counting the rounds other workers still hold in their schedules. A worker in a
condition with texts of its own reads from that condition's pool (conditions.pool_ids).
A spare check for a void one is put in the stored schedule too, on a passage the worker's
schedule does not hold, chosen the same way for the same worker and round.

The schedule is complete before the first round: admission stores it only when every required
round has a text (fill.fill finds one whenever the pool allows), and `flask study check / create /
edit` run the same function (simulate) over every place, refusing a pool that could run out.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import func, select, update

from app.crowd import balance, conditions, fill, schedule
from app.crowd.config import StudyConfig
from app.crowd.lookup import config_of, in_time
from app.crowd.pool import every_text
from app.extensions import db
from app.models import (
    ExamplePassage,
    Participant,
    PassageRead,
    Round,
    Study,
    StudySlot,
)
from app.models.base import utcnow
from app.models.rounds import NORMAL_ROUND, PRACTICE_ROUND

# The study pool each kind of check slot draws from, in order of preference.
SLOT_POOLS = {
    schedule.CHECK: ("checks",),
    schedule.INSIDE: ("inside_checks",),
    # Studies made before spare checks existed use their all-human checks.
    schedule.SPARE: ("spare_checks", "checks"),
    schedule.SPARE_ADDED: ("spare_checks", "checks"),
}

Token = fill.Token


def required_rounds(config: StudyConfig, participant: Participant) -> int:
    """Rounds this worker must play: the study's, plus any spare check added for a void one."""
    return config.rounds + participant.schedule.count(schedule.SPARE_ADDED)


def spare_ids(study: Study) -> list[int]:
    for name in SLOT_POOLS[schedule.SPARE]:
        if ids := study.pool.get(name):
            return ids
    return []


def pool_for(study: Study, kind: str) -> list[int]:
    """The example ids a slot of this kind draws from."""
    if kind in (schedule.SPARE, schedule.SPARE_ADDED):
        return spare_ids(study)
    if kind in SLOT_POOLS:
        return study.pool.get(SLOT_POOLS[kind][0], [])
    return study.pool["normal"]


def _tokens(ids: Iterable[int]) -> dict[int, frozenset[Token]]:
    """What each example shows a worker: its source passages, and itself (an example without
    a passage is still never shown twice)."""
    ids = set(ids)
    found: dict[int, set[Token]] = {i: {("example", i)} for i in ids}
    for chunk in _chunks(sorted(ids)):
        for example_id, passage_id in db.session.execute(
            select(ExamplePassage.example_id, ExamplePassage.passage_id).where(
                ExamplePassage.example_id.in_(chunk)
            )
        ):
            found[example_id].add(("passage", passage_id))
    return {i: frozenset(t) for i, t in found.items()}


def _chunks(ids: list[int], size: int = 500) -> Iterable[list[int]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _already_shown(participant: Participant) -> set[Token]:
    """Passages and texts this worker's player has been shown (practice included)."""
    played = list(
        db.session.scalars(select(Round.example_id).where(Round.player_id == participant.player_id))
    )
    shown: set[Token] = set().union(*_tokens(played).values()) if played else set()
    shown.update(
        ("passage", p)
        for p in db.session.scalars(
            select(PassageRead.passage_id).where(PassageRead.player_id == participant.player_id)
        )
    )
    return shown


def _loads(study: Study, config: StudyConfig) -> Counter:
    """Per pool example, the study's normal rounds that count towards its target: answered
    ones, and the ones still ahead in the schedules of workers playing within their time."""
    loads: Counter = Counter()
    answered = db.session.execute(
        select(Round.example_id, func.count(Round.id))
        .join(Participant, Participant.id == Round.participant_id)
        .where(
            Participant.study_id == study.id,
            Round.kind == NORMAL_ROUND,
            Round.guess.is_not(None),
        )
        .group_by(Round.example_id)
    )
    loads.update(dict(answered.all()))
    ahead = db.session.execute(
        select(StudySlot.example_id, func.count(StudySlot.id))
        .join(Participant, Participant.id == StudySlot.participant_id)
        .where(
            Participant.study_id == study.id,
            StudySlot.kind == schedule.NORMAL,
            StudySlot.example_id.is_not(None),
            StudySlot.optional.is_(False),
            StudySlot.position >= Participant.rounds_done,
            in_time(config, utcnow()),
        )
        .group_by(StudySlot.example_id)
    )
    loads.update(dict(ahead.all()))
    return loads


def _seed(study: Study, participant: Participant) -> int:
    return schedule.worker_seed(study.slug, participant.worker_id)


def has_schedule(participant: Participant) -> bool:
    return bool(
        db.session.scalar(
            select(StudySlot.id).where(StudySlot.participant_id == participant.id).limit(1)
        )
    )


def _candidates(plan: list[str], normal: list[int], study: Study, order) -> dict:
    """Per slot kind, the example ids it may take; normal texts (the worker's condition's) in
    `order`: least read first, under the study's target first."""
    found = {schedule.NORMAL: sorted(normal, key=order)}
    for kind in set(plan) - {schedule.NORMAL}:
        found[kind] = pool_for(study, kind)
    return found


def pool_tokens(study: Study) -> dict[int, frozenset[Token]]:
    """What each text of the study's pool shows (practice, every kind of check and every
    condition's own texts included)."""
    return _tokens(every_text(study.pool))


def _fill(
    study: Study,
    config: StudyConfig,
    plan: list[str],
    required: int,
    condition: str | None,
    loads: Counter,
    tokens: dict[int, frozenset[Token]],
    used: set[Token],
    rng: random.Random,
    fixed: dict[int, int | None] | None = None,
) -> fill.Filled:
    """One worker's texts: the normal rounds picked in balance.Picker's order (the pool's mix of
    systems and boundary positions), with fill's matching as the fallback when that order
    leaves a required round empty. `config` is the worker's condition's settings."""
    normal = conditions.pool_of(study, condition, "normal")
    target = config.target_per_example
    ties = {i: rng.random() for i in sorted(normal)}
    picker = balance.Picker(
        balance.texts(normal),
        loads,
        target,
        ties,
        picks=sum(
            1 for p, kind in enumerate(plan) if kind == schedule.NORMAL and p not in (fixed or {})
        ),
        rng=rng,
    )
    candidates = _candidates(plan, normal, study, lambda i: (loads[i] >= target, loads[i], ties[i]))
    return fill.fill(plan, required, candidates, tokens, used, rng, fixed, pick=picker.pick)


def plan_for(study: Study, participant: Participant) -> fill.Filled:
    """The texts of this worker's whole schedule, from the pool as it is now (nothing stored).
    Rounds already played keep the text played in them (a worker who entered before schedules
    were stored). Incomplete only when no schedule of the pool's texts could be."""
    config = conditions.settings_for(config_of(study), participant.condition)
    played = list(
        db.session.scalars(
            select(Round).where(
                Round.participant_id == participant.id, Round.kind != PRACTICE_ROUND
            )
        )
    )
    answered = sorted(
        (r for r in played if r.guess is not None), key=lambda r: (r.answered_at, r.id)
    )
    fixed = {
        position: r.example_id
        for position, r in enumerate(answered + [r for r in played if r.guess is None])
    }
    tokens = pool_tokens(study)
    tokens.update(_tokens(e for e in fixed.values() if e not in tokens))
    used = _already_shown(participant)
    if participant.practice_done_at is None:  # the practice texts are still to come
        used.update(*(tokens[i] for i in conditions.pool_ids(study, participant, "tutorial")))
    return _fill(
        study,
        config,
        participant.schedule,
        required_rounds(config, participant),
        participant.condition,
        _loads(study, config),
        tokens,
        used,
        random.Random(_seed(study, participant)),
        fixed,
    )


def store(participant: Participant, filled: fill.Filled, required: int) -> list[StudySlot]:
    """Store a worker's schedule as computed by plan_for (the caller commits)."""
    made = [
        StudySlot(
            participant_id=participant.id,
            position=position,
            kind=kind,
            example_id=filled.texts[position],
            optional=position >= required,
        )
        for position, kind in enumerate(participant.schedule)
    ]
    db.session.add_all(made)
    db.session.flush()
    return made


def build(study: Study, participant: Participant) -> list[StudySlot]:
    """Compute and store this worker's schedule (the caller commits)."""
    filled = plan_for(study, participant)
    return store(participant, filled, required_rounds(config_of(study), participant))


@dataclass(frozen=True)
class Shortfall:
    """What `simulate` found: how many of the simulated workers would lack texts, and the most
    rounds one of them would lack (each a passage the pool is short of)."""

    workers: int
    short: int
    missing: int
    # The conditions (in a study with them) whose workers would lack texts.
    conditions: tuple[str, ...] = ()


def simulate(study: Study, workers: int) -> Shortfall:
    """Build the schedules of `workers` new workers in turn, as admission would (plan_for's
    function), each counting the ones before it; store nothing. In a study with conditions,
    the workers take the places of the allocation sequence in order, each with its condition's
    pool and settings, so a condition whose own pool runs out is found too."""
    study_config = config_of(study)
    loads = _loads(study, study_config)
    tokens = pool_tokens(study)
    short = missing = 0
    lacking: list[str] = []
    for n in range(workers):
        condition = conditions.condition_at(study, study_config, n)
        config = conditions.settings_for(study_config, condition)
        tutorial = conditions.pool_of(study, condition, "tutorial")
        practice: set[Token] = set().union(*(tokens[i] for i in tutorial)) if tutorial else set()
        seed = schedule.worker_seed(study.slug, f"simulated worker {n}")
        plan = schedule.attention_schedule(
            config.rounds,
            config.attention_check_rate,
            seed,
            all_human=config.all_human_checks,
            extra=config.total_rounds - config.rounds,
        )
        rng = random.Random(seed)
        filled = _fill(study, config, plan, config.rounds, condition, loads, tokens, practice, rng)
        if not filled.complete:
            short += 1
            missing = max(missing, len(filled.missing))
            if condition is not None and condition not in lacking:
                lacking.append(condition)
        loads.update(
            e
            for p, e in filled.texts.items()
            if e is not None and p < config.rounds and plan[p] == schedule.NORMAL
        )
    return Shortfall(workers, short, missing, tuple(lacking))


def slot_at(participant: Participant, position: int) -> StudySlot | None:
    return db.session.scalar(
        select(StudySlot).where(
            StudySlot.participant_id == participant.id, StudySlot.position == position
        )
    )


def stored(participant: Participant) -> list[StudySlot]:
    """The worker's stored schedule, in play order."""
    return list(
        db.session.scalars(
            select(StudySlot)
            .where(StudySlot.participant_id == participant.id)
            .order_by(StudySlot.position)
        )
    )


def add_spare(study: Study, participant: Participant, config: StudyConfig) -> bool:
    """Put a spare check in the worker's schedule for a void one (see schedule.spare_slot):
    in their next normal round among the required ones, else as one more round now. Only when
    a spare text shows no passage of the rest of their schedule; False when none does (verify
    then sends a worker with void checks to review). Runs inside the answer's transaction."""
    plan = participant.schedule
    done = participant.rounds_done
    new = schedule.spare_slot(plan, done, required_rounds(config, participant))
    if new is None:
        return False
    if not has_schedule(participant):
        build(study, participant)
    slots = stored(participant)
    replaced = next((p for p in range(done, len(plan)) if new[p] != plan[p]), None)
    inserted = len(new) > len(plan)
    kept = [s for s in slots if inserted or s.position != replaced]
    ids = spare_ids(study)
    tokens = _tokens({*ids, *(s.example_id for s in kept if s.example_id is not None)})
    used = _already_shown(participant).union(
        *(tokens[s.example_id] for s in kept if s.example_id is not None)
    )
    candidates = sorted(ids)
    random.Random(f"{_seed(study, participant)}-spare-{done}").shuffle(candidates)
    found = fill.first_free(candidates, tokens, used)
    if found is None:
        return False
    if inserted:
        position = done
        # Move the later slots one on, in two steps so that no two rows share a position.
        later = (StudySlot.participant_id == participant.id, StudySlot.position >= position)
        db.session.execute(update(StudySlot).where(*later).values(position=-StudySlot.position - 1))
        db.session.execute(
            update(StudySlot)
            .where(StudySlot.participant_id == participant.id, StudySlot.position < 0)
            .values(position=-StudySlot.position)
        )
        db.session.add(
            StudySlot(
                participant_id=participant.id,
                position=position,
                kind=schedule.SPARE_ADDED,
                example_id=found,
                optional=False,
            )
        )
    else:
        db.session.execute(
            update(StudySlot)
            .where(StudySlot.participant_id == participant.id, StudySlot.position == replaced)
            .values(kind=schedule.SPARE, example_id=found)
        )
    participant.schedule = new
    db.session.flush()
    return True

"""Managing studies: create, edit, open or close, delete."""

from __future__ import annotations

import secrets
from dataclasses import replace

from sqlalchemy import delete, func, select, update

from app.crowd import conditions, preregistration, slots
from app.crowd.config import StudyConfig
from app.crowd.lookup import config_of, participant_count
from app.crowd.pool import build_pool, drop_checks
from app.errors import BadRequest, Conflict
from app.extensions import all_or_nothing, db
from app.leaderboard import standings
from app.models import (
    Category,
    ConditionSlot,
    Example,
    Participant,
    Player,
    Round,
    Study,
    StudyBonus,
    StudyDecision,
    StudyPlan,
    StudySlot,
)
from app.models.rounds import NORMAL_ROUND
from app.models.studies import StudyRun

# Workers simulated by the capacity check of a study without a number of places.
SIMULATED_WITHOUT_PLACES = 20


def capacity_problem(study: Study, config: StudyConfig | None = None) -> str | None:
    """Why the study's pool could leave a worker without a text, or None: every place's schedule
    is built as admission would build it (slots.simulate), none stored."""
    config = config or config_of(study)
    workers = config.places or SIMULATED_WITHOUT_PLACES
    found = slots.simulate(study, workers)
    if not found.short:
        return None
    # In a study with conditions: the ones whose workers would lack texts.
    where = f" in condition {', '.join(found.conditions)}" if found.conditions else ""
    return (
        f"the pool can run out{where}: {found.short} of {workers} workers would find no text "
        f"for up to {found.missing} of their {config.rounds} rounds, so at least "
        f"{found.missing} more "
        "source passage(s) are needed. Each round, attention checks included, needs a passage "
        "of its own (a spliced text uses two: its own and the donor's; practice texts' passages "
        "are not used again); import more texts or lower the number of rounds"
    )


def _new_study(config: StudyConfig) -> Study:
    """A study row for this file with its pool and checks built, flushed (the caller commits or
    rolls back); refused when its pool could leave a worker without a text."""
    study = Study(
        slug=config.slug,
        title=config.title,
        platform=config.platform,
        config=config.to_json(),
        pool=_study_pool(config),
    )
    db.session.add(study)
    db.session.flush()
    if problem := capacity_problem(study, config):
        raise BadRequest(problem)
    return study


def trial(config: StudyConfig) -> dict:
    """`flask study check`: build the study as create would, capacity check included, and undo
    it all; returns its pool (ids of a study that no longer exists). Raises BadRequest as
    create would."""
    taken = db.session.scalar(select(Study.id).where(Study.slug == config.slug))
    try:
        if taken:  # the file of a study that exists: try it under a name of its own
            config = replace(config, slug=f"{config.slug[:40]}-check-{secrets.token_hex(4)}")
        return dict(_new_study(config).pool)
    finally:
        db.session.rollback()


def _study_pool(config: StudyConfig) -> dict:
    """The study's pool, with each condition's own texts and the allocation's seed."""
    pool = build_pool(config)
    if config.conditions:
        pool["conditions"] = conditions.condition_pools(config, build_pool)
        pool["allocation_seed"] = conditions.new_seed()
    return pool


def create_study(config: StudyConfig) -> Study:
    """Create a study from a validated file: fix its pool and build its attention checks."""
    if db.session.scalar(select(Study.id).where(Study.slug == config.slug)):
        raise Conflict(f"a study called {config.slug!r} already exists")
    with all_or_nothing():
        study = _new_study(config)
    return study


def set_open(study: Study, is_open: bool) -> None:
    study.is_open = is_open
    db.session.commit()


LOCKED_ONCE_JOINED = (
    "platform", "rounds", "max_rounds", "attention_check_rate", "all_human_checks",
    "fail_after_checks", "categories", "systems", "examples", "tutorial", "likert_when",
    "screening", "conditions",
)  # fmt: skip


def _likert_shape(config: StudyConfig) -> list[tuple[str, str]]:
    return [(c.name, c.target) for c in config.likert]


def edit_study(study: Study, new: StudyConfig) -> list[str]:
    """Replace the study's settings with a new version of its file; returns the changed keys.

    Before anyone joined, anything may change (the pool and checks are built again). After,
    only wording, pay, codes, limits and similar may change: the settings that decide what
    workers play and how they are judged, and the names of the ratings, stay as they were.
    """
    if new.slug != study.slug:
        raise BadRequest(f"slug: the file is for {new.slug!r}, not {study.slug!r}")
    preregistration.check_edit(study, new)
    old = config_of(study)
    before, after = old.to_json(), new.to_json()
    changed = sorted(k for k in after if before.get(k) != after[k])
    if not changed:
        return []
    with all_or_nothing():
        if participant_count(study):
            locked = [k for k in LOCKED_ONCE_JOINED if before.get(k) != after[k]]
            if _likert_shape(old) != _likert_shape(new):
                locked.append("likert (names or targets)")
            if locked:
                raise BadRequest(
                    f"workers have joined, so these settings cannot change: {', '.join(locked)}"
                )
        else:
            drop_checks(study)
            study.pool = _study_pool(new)
            study.platform = new.platform
        study.title = new.title
        study.config = after
        db.session.flush()
        if problem := capacity_problem(study, new):
            raise BadRequest(problem)
    return changed


def delete_study(study: Study, force: bool = False) -> int:
    """Delete a study and everything it made: its checks, its workers' rounds and accounts,
    decisions and bonus records. Refused while it has participants unless `force` (the CLI
    exports first). Returns the number of participants deleted."""
    participants = list(
        db.session.scalars(select(Participant).where(Participant.study_id == study.id))
    )
    if participants and not force:
        raise Conflict(
            f"study {study.slug!r} has {len(participants)} participant(s); export first and "
            "pass --force to delete them with it"
        )
    with all_or_nothing():
        ids = [p.id for p in participants]
        players = [p.player_id for p in participants]
        categories = set()
        if ids:
            scored = db.session.execute(
                select(Round.example_id, func.count(Round.id))
                .where(
                    Round.participant_id.in_(ids),
                    Round.kind == NORMAL_ROUND,
                    Round.guess.is_not(None),
                )
                .group_by(Round.example_id)
            ).all()
            for example_id, n in scored:
                db.session.execute(
                    update(Example)
                    .where(Example.id == example_id)
                    .values(annotation_count=Example.annotation_count - n)
                )
            categories = set(
                db.session.scalars(
                    select(Category.slug)
                    .join(Example, Example.category_id == Category.id)
                    .join(Round, Round.example_id == Example.id)
                    .where(Round.participant_id.in_(ids))
                )
            )
        for model in (StudyDecision, StudyBonus, StudyRun, ConditionSlot, StudyPlan):
            db.session.execute(delete(model).where(model.study_id == study.id))
        if ids:
            db.session.execute(delete(Round).where(Round.participant_id.in_(ids)))
            db.session.execute(delete(StudySlot).where(StudySlot.participant_id.in_(ids)))
            db.session.execute(delete(Participant).where(Participant.id.in_(ids)))
            for player in db.session.scalars(select(Player).where(Player.id.in_(players))):
                db.session.delete(player)  # the ORM events keep the leaderboard counts right
        drop_checks(study)
        db.session.delete(study)
    for slug in categories:
        standings.invalidate(slug)
    return len(participants)

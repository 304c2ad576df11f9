"""A study's randomised conditions: what each changes, and who gets which.

A study file may have `[[conditions]]` tables, each with a `name` and the study settings it
changes (OVERRIDABLE). `settings_for(config, name)` is the one place that merges them: whatever
varies by condition reads its result, never the study's own settings.

Workers are allocated at entry by balanced block randomisation: the study's sequence of places
is made of blocks with one place per condition, each block in a seeded random order, appended
as workers arrive (ConditionSlot rows). A worker who enters takes the first place nobody holds:
a place is held by its worker until they return the task, run out of time or are screened out,
and then goes to the next worker who enters, with its condition. So among the workers holding
places, each condition's count is its share of a whole number of blocks, minus the places
freed and not yet taken again. The worker's condition is stored on their participant row and
each of their rounds, and never changes.
"""

from __future__ import annotations

import dataclasses
import random
import re
import secrets
from datetime import datetime, timedelta

from sqlalchemy import and_, false, func, or_, select, true

from app.crowd.config import StudyConfig, StudyConfigError, parse_settings
from app.errors import BadRequest
from app.extensions import db
from app.models import ConditionSlot, Participant, ParticipantStatus, Study
from app.models.base import utcnow

# The settings a condition may change.
OVERRIDABLE = (
    "show_feedback",
    "tutorial",
    "instructions",
    "detector_hint",
    "disclose_model",
    "time_limit_minutes",
    "systems",
    "categories",
    "examples",
)
# Settings that decide a condition's texts (its own pool when it changes any).
POOL_SETTINGS = ("systems", "categories", "examples", "tutorial")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# Workers whose place in the sequence is free again (besides those out of time).
RELEASED = (ParticipantStatus.returned, ParticipantStatus.timed_out, ParticipantStatus.screened_out)


def with_conditions(config: StudyConfig, data: dict, source: str) -> StudyConfig:
    """The study with its validated [[conditions]]; errors name the file and the key."""
    raw = data.get("conditions", [])
    if not isinstance(raw, list):
        raise StudyConfigError(source, "conditions", "must be a list of [[conditions]] tables")
    if len(raw) == 1:
        raise StudyConfigError(source, "conditions", "needs at least two conditions to compare")
    base = {k: v for k, v in data.items() if k not in ("conditions", "preregistration")}
    found: list[dict] = []
    for i, item in enumerate(raw):
        where = f"conditions[{i}]"
        if not isinstance(item, dict):
            raise StudyConfigError(source, where, "must be a table")
        name = item.get("name")
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise StudyConfigError(
                source,
                f"{where}.name",
                "is required: 1-32 lowercase letters, digits, - or _ (e.g. no-feedback)",
            )
        for key in item:
            if key == "name":
                continue
            if key not in OVERRIDABLE:
                raise StudyConfigError(
                    source,
                    f"{where}.{key}",
                    "is not a setting a condition can change (it can change: "
                    f"{', '.join(OVERRIDABLE)})",
                )
        overrides = {k: v for k, v in item.items() if k != "name"}
        # The merged settings are validated as a study file of their own.
        parsed = parse_settings({**base, **overrides}, f"{source}: {where}")
        found.append({"name": name, **{k: getattr(parsed, k) for k in overrides}})
    names = [c["name"] for c in found]
    if len(set(names)) != len(names):
        raise StudyConfigError(source, "conditions", "condition names must be unique")
    return dataclasses.replace(config, conditions=found)


def names(config: StudyConfig) -> list[str]:
    return [c["name"] for c in config.conditions]


def settings_for(config: StudyConfig, condition: str | None) -> StudyConfig:
    """The settings a worker in `condition` plays under: the study's, with the condition's
    changes. None (no condition) gives the study's own settings."""
    if condition is None:
        return config
    for item in config.conditions:
        if item["name"] == condition:
            changes = {k: v for k, v in item.items() if k != "name"}
            return dataclasses.replace(config, **changes)
    raise ValueError(f"the study has no condition called {condition!r}")


# -- pools ----------------------------------------------------------------------------------


def condition_pools(config: StudyConfig, build) -> dict:
    """{name: {"normal": [...], "tutorial": [...]}} for the conditions that change what texts
    are read (`build` is pool.build_pool); the others read the study's own pool."""
    pools = {}
    for item in config.conditions:
        if any(key in item for key in POOL_SETTINGS):
            try:
                made = build(settings_for(config, item["name"]), checks=False)
            except BadRequest as short:  # say which condition's own texts fall short
                raise BadRequest(f"condition {item['name']}: {short.message}") from None
            pools[item["name"]] = {"normal": made["normal"], "tutorial": made["tutorial"]}
    return pools


def pool_of(study: Study, condition: str | None, key: str) -> list[int]:
    """A condition's texts of one kind ("normal" or "tutorial"): its own pool where it has
    one, else the study's."""
    own = (study.pool.get("conditions") or {}).get(condition) if condition else None
    return (own or study.pool).get(key, [])


def pool_ids(study: Study, participant: Participant | None, key: str) -> list[int]:
    """The worker's condition's texts of one kind ("normal" or "tutorial")."""
    return pool_of(study, participant.condition if participant is not None else None, key)


# -- time -----------------------------------------------------------------------------------


def within_time(config: StudyConfig, now: datetime):
    """SQL: the participant started recently enough for their condition's time limit."""

    def limit(minutes: float | None):
        return (
            true()
            if minutes is None
            else Participant.started_at >= now - timedelta(minutes=minutes)
        )

    if not config.conditions:
        return limit(config.time_limit_minutes)
    limits = {name: settings_for(config, name).time_limit_minutes for name in names(config)}
    if all(v is None for v in limits.values()) and config.time_limit_minutes is None:
        return true()
    return or_(
        and_(Participant.condition.is_(None), limit(config.time_limit_minutes)),
        *(and_(Participant.condition == n, limit(m)) for n, m in limits.items()),
    )


def any_time_limit(config: StudyConfig) -> bool:
    return config.time_limit_minutes is not None or any(
        settings_for(config, n).time_limit_minutes is not None for n in names(config)
    )


# -- allocation -----------------------------------------------------------------------------


def new_seed() -> str:
    return secrets.token_hex(8)


def block_order(seed: str, block: int, conditions: list[str]) -> list[str]:
    """The conditions of one block, in its seeded random order."""
    order = list(conditions)
    random.Random(f"{seed}:{block}").shuffle(order)
    return order


def _allocation_seed(study: Study) -> str:
    return study.pool.get("allocation_seed") or study.slug


def condition_at(study: Study, config: StudyConfig, seq: int) -> str | None:
    """The condition of place `seq` (0, 1, …) of the study's allocation sequence, as `allocate`
    lays it out; None for a study without conditions. `flask study check` simulates workers
    taking the places in this order."""
    every = names(config)
    if not every:
        return None
    return block_order(_allocation_seed(study), seq // len(every), every)[seq % len(every)]


def _free(study: Study, config: StudyConfig, now: datetime):
    """SQL: the study's places whose worker no longer holds them (or that nobody took)."""
    gone = select(Participant.id).where(
        Participant.study_id == study.id,
        or_(
            Participant.status.in_(RELEASED),
            and_(
                Participant.status == ParticipantStatus.started,
                ~within_time(config, now) if any_time_limit(config) else false(),
            ),
        ),
    )
    return or_(ConditionSlot.participant_id.is_(None), ConditionSlot.participant_id.in_(gone))


def allocate(study: Study, participant: Participant, config: StudyConfig, now: datetime) -> str:
    """Give the entering worker the first free place of the sequence and return its condition
    (the caller holds the study's row lock where the database has one, and commits)."""
    slot = db.session.scalar(
        select(ConditionSlot)
        .where(ConditionSlot.study_id == study.id, _free(study, config, now))
        .order_by(ConditionSlot.seq)
        .limit(1)
    )
    if slot is None:
        count = db.session.scalar(
            select(func.count(ConditionSlot.id)).where(ConditionSlot.study_id == study.id)
        )
        every = names(config)
        block = count // len(every)
        made = [
            ConditionSlot(study_id=study.id, seq=block * len(every) + i, condition=name)
            for i, name in enumerate(block_order(_allocation_seed(study), block, every))
        ]
        db.session.add_all(made)
        slot = made[0]
    slot.participant_id = participant.id
    participant.condition = slot.condition
    db.session.flush()
    return slot.condition


def counts(study: Study) -> dict[str, dict[str, int]]:
    """Per condition: workers allocated ("entered"), and those holding a place now."""
    config = StudyConfig.from_json(study.config)
    if not config.conditions:
        return {}
    out = {name: {"entered": 0, "holding": 0} for name in names(config)}
    rows = db.session.execute(
        select(Participant.condition, func.count(Participant.id))
        .where(Participant.study_id == study.id, Participant.condition.is_not(None))
        .group_by(Participant.condition)
    ).all()
    for name, n in rows:
        out.setdefault(name, {"entered": 0, "holding": 0})["entered"] = n
    held = db.session.execute(
        select(ConditionSlot.condition, func.count(ConditionSlot.id))
        .where(
            ConditionSlot.study_id == study.id,
            ~_free(study, config, utcnow()),
        )
        .group_by(ConditionSlot.condition)
    ).all()
    for name, n in held:
        out[name]["holding"] = n
    return out

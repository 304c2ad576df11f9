"""A study's analysis plan ([preregistration]): validated with the study file, frozen when the
study is published, never changed in place after that.

A frozen plan is a StudyPlan row: the plan, the SHA-256 of its canonical JSON (sorted keys, no
spaces) and the time. A changed plan is a new version with its reason, allowed before anyone
entered the study, or afterwards only when asked for explicitly as a new version (the report
lists it as a deviation). `flask export` writes the versions as preregistration.json.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from sqlalchemy import select

from app.crowd.config import StudyConfig, StudyConfigError
from app.crowd.lookup import participant_count
from app.errors import BadRequest, Conflict
from app.extensions import all_or_nothing, db
from app.models import Study, StudyPlan
from app.models.base import utcnow

OUTCOMES = ("exact_hit", "points", "distance")
FACTORS = ("system", "category", "boundary")
CONTRASTS = ("condition", "condition:order", *FACTORS)
MODELS = ("mixed",)
# The decisions `flask study verify` and `review` record (app/crowd/verify_submissions.py), and
# the past tense a plan may use for the first two.
DECISIONS = ("approve", "reject", "review", "returned", "pending", "approved", "rejected")
KEYS = (
    "hypotheses", "outcome", "contrast", "control", "model", "alpha", "exclude_decisions",
    "min_rounds", "planned_workers", "planned_texts", "stopping_rule",
)  # fmt: skip


def _error(source: str, key: str, message: str) -> StudyConfigError:
    return StudyConfigError(source, f"preregistration.{key}", message)


def _positive(raw: dict, key: str, source: str) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _error(source, key, f"is required: a whole number of at least 1, got {value!r}")
    return value


def parse_plan(raw: object, config: StudyConfig, source: str) -> dict:
    """The plan with every key (defaults filled in), checked against the study it is for."""
    if not isinstance(raw, dict):
        raise StudyConfigError(source, "preregistration", "must be a table")
    if unknown := sorted(set(raw) - set(KEYS)):
        raise _error(source, unknown[0], "is not a known key of the plan (check the spelling)")
    hypotheses = raw.get("hypotheses")
    if (
        not isinstance(hypotheses, list)
        or not hypotheses
        or not all(isinstance(h, str) and h.strip() for h in hypotheses)
    ):
        raise _error(source, "hypotheses", "is required: a list of hypotheses, in words")
    outcome = raw.get("outcome")
    if outcome not in OUTCOMES:
        raise _error(source, "outcome", f"is required: one of {', '.join(OUTCOMES)}")
    names = [c["name"] for c in config.conditions]
    contrast = raw.get("contrast", "condition" if names else None)
    if contrast not in CONTRASTS:
        raise _error(source, "contrast", f"must be one of {', '.join(CONTRASTS)}")
    control = raw.get("control")
    if contrast.startswith("condition"):
        if not names:
            raise _error(source, "contrast", f"is {contrast!r} but the study has no [[conditions]]")
        control = names[0] if control is None else control
        if control not in names:
            raise _error(
                source,
                "control",
                f"names no condition of the study ({', '.join(names)}), got {control!r}",
            )
    elif control is not None:
        raise _error(source, "control", f"applies to condition contrasts, not to {contrast!r}")
    for factor, listed in (("system", config.systems), ("category", config.categories)):
        if contrast == factor and len(listed) == 1:
            raise _error(source, "contrast", f"is {factor!r} but the study reads one {factor} only")
    model = raw.get("model", "mixed")
    if model not in MODELS:
        raise _error(source, "model", f"must be one of {', '.join(MODELS)}")
    alpha = raw.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 0.5:
        raise _error(source, "alpha", f"must be a number between 0 and 0.5, got {alpha!r}")
    excluded = raw.get("exclude_decisions", [])
    if not isinstance(excluded, list) or not all(d in DECISIONS for d in excluded):
        raise _error(source, "exclude_decisions", f"must list decisions among {DECISIONS}")
    min_rounds = raw.get("min_rounds", 0)
    if isinstance(min_rounds, bool) or not isinstance(min_rounds, int) or min_rounds < 0:
        raise _error(
            source, "min_rounds", f"must be a whole number of 0 or more, got {min_rounds!r}"
        )
    if min_rounds > config.total_rounds:
        raise _error(
            source,
            "min_rounds",
            f"is {min_rounds} but a worker plays at most {config.total_rounds} rounds",
        )
    stopping = raw.get("stopping_rule")
    if not isinstance(stopping, str) or not stopping.strip():
        raise _error(source, "stopping_rule", "is required: when data collection stops, in words")
    return {
        "hypotheses": [h.strip() for h in hypotheses],
        "outcome": outcome,
        "contrast": contrast,
        "control": control,
        "model": model,
        "alpha": float(alpha),
        "exclude_decisions": list(excluded),
        "min_rounds": min_rounds,
        "planned_workers": _positive(raw, "planned_workers", source),
        "planned_texts": _positive(raw, "planned_texts", source),
        "stopping_rule": stopping.strip(),
    }


def with_plan(config: StudyConfig, data: dict, source: str) -> StudyConfig:
    if data.get("preregistration") is None:
        return config
    return dataclasses.replace(
        config, preregistration=parse_plan(data["preregistration"], config, source)
    )


def canonical(plan: dict) -> str:
    return json.dumps(plan, sort_keys=True, separators=(",", ":"))


def digest(plan: dict) -> str:
    return hashlib.sha256(canonical(plan).encode("utf-8")).hexdigest()


# -- frozen versions ------------------------------------------------------------------------


def versions(study: Study) -> list[StudyPlan]:
    return list(
        db.session.scalars(
            select(StudyPlan).where(StudyPlan.study_id == study.id).order_by(StudyPlan.version)
        )
    )


def latest(study: Study) -> StudyPlan | None:
    found = versions(study)
    return found[-1] if found else None


def freeze(
    study: Study, plan: dict | None, reason: str | None = None, new_version: bool = False
) -> StudyPlan | None:
    """Freeze the study's plan (the caller commits): the first version, or a new one when the
    plan changed. A change needs a reason; once a worker entered, it also needs `new_version`
    (an explicit deviation). Returns the version now in force (None: the study has no plan)."""
    current = latest(study)
    if plan is None:
        if current is not None:
            raise Conflict(
                f"study {study.slug!r} has a frozen analysis plan (version {current.version}); "
                "a study file without [preregistration] cannot replace it"
            )
        return None
    if current is not None and current.sha256 == digest(plan):
        return current
    entered = participant_count(study)
    if current is not None:
        if entered and not new_version:
            raise Conflict(
                f"the analysis plan of study {study.slug!r} is frozen (version "
                f"{current.version}, SHA-256 {current.sha256[:12]}…) and {entered} worker(s) "
                "have entered: it cannot be edited. To change it anyway, record a new version "
                f"with `flask study publish {study.slug} FILE --new-version --reason TEXT`; "
                "the report lists it as a deviation from the plan."
            )
        if not (reason or "").strip():
            raise BadRequest(
                f"the analysis plan of study {study.slug!r} is frozen (version "
                f"{current.version}): give the reason for the new version with --reason"
            )
    made = StudyPlan(
        study_id=study.id,
        version=(current.version + 1) if current else 1,
        plan=plan,
        sha256=digest(plan),
        frozen_at=utcnow(),
        reason=reason.strip() if current is not None and reason else None,
        participants_then=entered,
    )
    db.session.add(made)
    db.session.flush()
    return made


def check_edit(study: Study, new: StudyConfig) -> None:
    """`flask study edit` never changes a frozen plan: that takes a new version (publish)."""
    current = latest(study)
    if current is None:
        return
    if new.preregistration is None or digest(new.preregistration) != current.sha256:
        raise Conflict(
            f"the analysis plan of study {study.slug!r} is frozen (version {current.version}, "
            f"SHA-256 {current.sha256[:12]}…) and `flask study edit` cannot change it: keep the "
            "[preregistration] table as it was, or record a new version with "
            f"`flask study publish {study.slug} FILE --reason TEXT` (after workers entered, "
            "also --new-version: the report lists it as a deviation)"
        )


def export_document(study: Study) -> dict | None:
    """preregistration.json: every frozen version of the study's plan, oldest first."""
    found = versions(study)
    if not found:
        return None
    return {
        "study": study.slug,
        "versions": [
            {
                "version": v.version,
                "frozen_at": v.frozen_at.isoformat(),
                "sha256": v.sha256,
                "reason": v.reason,
                "plan": v.plan,
            }
            for v in found
        ],
    }


def publish(
    study: Study, new: StudyConfig | None = None, reason: str | None = None, new_version=False
) -> StudyPlan | None:
    """Freeze the study's plan, or with `new` (the study file again) a new version of it, and
    commit. The study's settings take the new plan; nothing else of the file changes here."""
    config = StudyConfig.from_json(study.config)
    if new is not None and new.slug != study.slug:
        raise BadRequest(f"slug: the file is for {new.slug!r}, not {study.slug!r}")
    plan = new.preregistration if new is not None else config.preregistration
    with all_or_nothing():
        made = freeze(study, plan, reason, new_version)
        if new is not None and plan != config.preregistration:
            study.config = {**study.config, "preregistration": plan}
    return made


def freeze_on_entry(study: Study, config: StudyConfig) -> None:
    """The first worker's entry freezes a plan not yet published (the caller commits)."""
    if config.preregistration is not None and latest(study) is None:
        freeze(study, config.preregistration)


def power_warnings(plan: dict, power: dict) -> list[str]:
    """Where the plan's planned workers and texts fall short of `power` (the JSON written by
    `python -m analysis power --out`), or where that result answers another question; empty
    when the planned design is at least the smallest one reaching the target."""
    ran = power.get("scenario", {})
    warnings = [
        f"the power file simulated {key} {ran.get(key)!r}, the plan says {plan.get(key)!r}"
        for key in ("outcome", "contrast")
        if ran.get(key) != plan.get(key)
    ]
    best = power.get("smallest")
    target = power.get("target")
    if best is None:
        warnings.append(
            f"no design in the power file reaches power {target}: simulate more workers or texts"
        )
    elif plan["planned_workers"] < best["workers"] or plan["planned_texts"] < best["texts"]:
        warnings.append(
            f"the plan's {plan['planned_workers']} workers × {plan['planned_texts']} texts is "
            f"below the smallest design reaching power {target}: {best['workers']} workers × "
            f"{best['texts']} texts (power {best['power']:.2f})"
        )
    return warnings

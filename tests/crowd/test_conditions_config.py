"""[[conditions]] and [preregistration] in study files: parsing, merging and clear errors.
Pure: no database."""

from __future__ import annotations

import pytest

from app.crowd import conditions, preregistration
from app.crowd.config import StudyConfig, StudyConfigError
from app.crowd.study_file import parse_study
from tests.crowd.helpers import BASE

TWO = [
    {"name": "feedback", "show_feedback": True},
    {"name": "no-feedback", "show_feedback": False, "time_limit_minutes": 30},
]
PLAN = {
    "hypotheses": ["Workers shown feedback find the exact boundary more often."],
    "outcome": "exact_hit",
    "contrast": "condition",
    "control": "no-feedback",
    "model": "mixed",
    "alpha": 0.05,
    "exclude_decisions": ["rejected"],
    "min_rounds": 0,
    "planned_workers": 120,
    "planned_texts": 60,
    "stopping_rule": "Stop when 120 workers are approved or on 2027-01-31.",
}


def study(**changes) -> StudyConfig:
    return parse_study({**BASE, **changes}, "study.toml")


def error_of(**changes) -> str:
    with pytest.raises(StudyConfigError) as caught:
        study(**changes)
    return str(caught.value)


def test_settings_for_merges_the_condition_over_the_study():
    config = study(conditions=TWO, time_limit_minutes=20)
    assert conditions.names(config) == ["feedback", "no-feedback"]
    plain = conditions.settings_for(config, "feedback")
    quiet = conditions.settings_for(config, "no-feedback")
    assert (plain.show_feedback, plain.time_limit_minutes) == (True, 20)
    assert (quiet.show_feedback, quiet.time_limit_minutes) == (False, 30)
    assert quiet.title == config.title and quiet.rounds == config.rounds
    assert conditions.settings_for(config, None) is config
    with pytest.raises(ValueError, match="no condition called 'other'"):
        conditions.settings_for(config, "other")


def test_conditions_survive_the_json_the_study_row_keeps():
    config = study(conditions=TWO, preregistration=PLAN)
    again = StudyConfig.from_json(config.to_json())
    assert again == config
    assert conditions.settings_for(again, "no-feedback").show_feedback is False


def test_every_overridable_setting_can_change():
    config = study(
        conditions=[
            {"name": "a", "detector_hint": True, "disclose_model": True, "systems": ["gpt2"]},
            {"name": "b", "tutorial": ["ex-1"], "instructions": "Other words.", "examples": ["x"]},
        ]
    )
    a, b = (conditions.settings_for(config, n) for n in ("a", "b"))
    assert (a.detector_hint, a.disclose_model, a.systems) == (True, True, ["gpt2"])
    assert (b.tutorial, b.instructions, b.examples) == (["ex-1"], "Other words.", ["x"])
    assert config.detector_hint is False


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"conditions": [{"name": "a", "rounds": 3}, {"name": "b"}]},
            "study.toml: conditions[0].rounds: is not a setting a condition can change",
        ),
        (
            {"conditions": [{"name": "a"}, {"name": "b", "show_feedbak": False}]},
            "study.toml: conditions[1].show_feedbak: is not a setting",
        ),
        (
            {"conditions": [{"name": "a"}, {"name": "b", "show_feedback": "no"}]},
            "study.toml: conditions[1]: show_feedback: must be true or false",
        ),
        ({"conditions": [{"name": "a"}]}, "conditions: needs at least two conditions"),
        ({"conditions": [{"name": "a"}, {"name": "a"}]}, "condition names must be unique"),
        ({"conditions": [{"name": "A b"}, {"name": "c"}]}, "conditions[0].name: is required"),
        ({"conditions": [{"show_feedback": True}, {"name": "c"}]}, "conditions[0].name"),
        ({"conditions": {"name": "a"}}, "conditions: must be a list"),
    ],
)
def test_bad_conditions_name_the_file_and_key(changes, message):
    assert message in error_of(**changes)


def test_plan_is_kept_with_its_defaults():
    config = study(
        conditions=TWO,
        preregistration={k: v for k, v in PLAN.items() if k not in ("control", "model", "alpha")},
    )
    plan = config.preregistration
    assert plan["control"] == "feedback"  # the first condition
    assert (plan["model"], plan["alpha"]) == ("mixed", 0.05)
    assert set(plan) == set(preregistration.KEYS)


def test_plan_hash_is_sha256_of_canonical_json():
    import hashlib
    import json

    plan = study(conditions=TWO, preregistration=PLAN).preregistration
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"))
    assert preregistration.digest(plan) == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"outcome": "accuracy"}, "preregistration.outcome: is required: one of exact_hit"),
        ({"contrast": "mood", "control": None}, "preregistration.contrast: must be one of"),
        ({"hypotheses": []}, "preregistration.hypotheses: is required"),
        ({"alpha": 0.7}, "preregistration.alpha: must be a number between 0 and 0.5"),
        ({"planned_workers": 0}, "preregistration.planned_workers: is required"),
        ({"stopping_rule": " "}, "preregistration.stopping_rule: is required"),
        ({"exclude_decisions": ["bad"]}, "preregistration.exclude_decisions"),
        ({"min_rounds": 99}, "preregistration.min_rounds: is 99 but a worker plays at most 10"),
        ({"model": "anova"}, "preregistration.model: must be one of mixed"),
        ({"sample": 3}, "preregistration.sample: is not a known key"),
        ({"contrast": "category", "control": None}, "study reads one category only"),
    ],
)
def test_a_plan_the_study_cannot_run_is_refused(changes, message):
    plan = {k: v for k, v in {**PLAN, **changes}.items() if v is not None}
    text = error_of(conditions=TWO, preregistration=plan)
    assert text.startswith("study.toml: ")
    assert message in text


def test_a_condition_contrast_needs_conditions():
    text = error_of(preregistration=PLAN)
    assert "study.toml: preregistration.contrast: is 'condition' but the study has no" in text


def test_control_must_name_a_condition():
    text = error_of(conditions=TWO, preregistration={**PLAN, "control": "placebo"})
    assert "preregistration.control: names no condition of the study" in text
    text = error_of(conditions=TWO, categories=[], preregistration={**PLAN, "contrast": "system"})
    assert "preregistration.control: applies to condition contrasts" in text


def test_a_factor_contrast_needs_no_conditions():
    plan = {k: v for k, v in PLAN.items() if k != "control"}
    config = study(categories=[], preregistration={**plan, "contrast": "system"})
    assert config.preregistration["contrast"] == "system"
    assert config.preregistration["control"] is None

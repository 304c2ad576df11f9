"""Completion codes, the attention-check schedule, study files and entry links: pure functions."""

from __future__ import annotations

import pytest

from app.crowd import codes, quality, schedule
from app.crowd.config import StudyConfigError
from app.crowd.platforms import EntryError, parse_entry
from app.crowd.study_file import parse_study
from tests.crowd.helpers import BASE


def test_codes_are_long_random_and_readable():
    made = {codes.new_code() for _ in range(2000)}
    assert len(made) == 2000
    assert all(len(c) == 12 and set(c) <= set(codes.ALPHABET) for c in made)
    assert not set("01OIL") & set(codes.ALPHABET)
    with pytest.raises(ValueError):
        codes.new_code(4)


def test_codes_match_ignores_case_and_spaces_only():
    assert codes.codes_match(" abcd efgh23 ", "ABCDEFGH23")
    assert not codes.codes_match("ABCDEFGH24", "ABCDEFGH23")
    assert not codes.codes_match("", "ABCDEFGH23")


@pytest.mark.parametrize(
    ("rounds", "rate", "expected"),
    [
        (10, 0.1, 1),
        (10, 0.15, 2),
        (10, 0.25, 3),
        (10, 0.0, 0),
        (20, 0.1, 2),
        (3, 0.1, 0),
        (5, 0.1, 1),
    ],
)
def test_check_count_is_rate_times_rounds_rounded(rounds, rate, expected):
    assert schedule.check_count(rounds, rate) == expected


def test_schedule_has_exactly_the_checks_at_random_deterministic_positions():
    seeds = [schedule.worker_seed("pilot", f"worker{i}") for i in range(200)]
    plans = [schedule.attention_schedule(10, 0.3, s, all_human=1) for s in seeds]
    for plan in plans:
        assert len(plan) == 10
        assert plan.count(schedule.CHECK) == 1 and plan.count(schedule.INSIDE) == 2
    assert plans[0] == schedule.attention_schedule(10, 0.3, seeds[0], all_human=1)  # same plan
    positions = {i for p in plans for i, kind in enumerate(p) if kind != schedule.NORMAL}
    assert positions == set(range(10))  # every position gets used by someone
    assert len({tuple(p) for p in plans}) > 20
    assert {p.index(schedule.CHECK) for p in plans} == set(range(10))  # the kinds are mixed too
    assert schedule.worker_seed("pilot", "a") != schedule.worker_seed("other", "a")


def test_optional_rounds_get_their_own_checks_and_the_required_ones_a_fixed_number():
    for i in range(100):
        plan = schedule.attention_schedule(10, 0.2, i, extra=10)
        # Exactly two checks in the 10 required rounds, whatever the extra rounds hold.
        assert sum(k != schedule.NORMAL for k in plan[:10]) == 2
        assert plan[10:].count(schedule.INSIDE) == 2
    assert schedule.check_mix(10, 0.2, 5) == (2, 0)  # never more all-human checks than checks


def test_inside_check_position_is_never_the_first_chance_to_flag():
    import random

    rng = random.Random(7)
    seen = {schedule.check_position(10, rng) for _ in range(500)}
    # Sentence 1 is always human and sentence 2 is the first that may be flagged.
    assert seen == set(range(2, 10))
    with pytest.raises(ValueError):
        schedule.check_position(2, rng)


def test_quality_helpers():
    assert quality.longest_run([3, 3, 5, 5, 5, 2]) == 3
    assert quality.straight_lining([4] * 6, 6) and not quality.straight_lining([4] * 5 + [3], 6)
    assert not quality.straight_lining([4] * 9, 0)
    assert quality.hourly_rate(2.0, 600) == 12.0
    assert quality.hourly_rate(2.0, None) is None


def test_study_file_defaults_and_pay():
    config = parse_study(BASE, "s.toml")
    assert config.rounds == 10 and config.platform == "prolific"
    assert config.completion_url.startswith("https://app.prolific.com/submissions/complete?cc=")
    assert config.hourly_reward == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"rounds": 0}, "s.toml: rounds: must be at least 1"),
        ({"rounds": "ten"}, "s.toml: rounds: must be a number"),
        ({"platform": "fiverr"}, "s.toml: platform: must be one of"),
        ({"slug": "Bad Slug"}, "s.toml: slug:"),
        ({"attention_check_rate": 0.9}, "attention_check_rate: must be at most 0.5"),
        ({"completion_codes": {}}, "completion_codes.completed: is required for Prolific"),
        ({"completion_codes": {"won": "ABCDEF"}}, "completion_codes.won"),
        ({"max_rounds": 5}, "max_rounds: must be at least 10"),
        ({"completion_url": "http://x.example/{code}"}, "completion_url: must be an https://"),
        ({"likert": [{"name": "fluency", "question": "Fluent?", "labels": ["a", "b"]}]},
         "likert[0].labels: needs one label for each of 1–5"),
        ({"colour": "blue"}, "colour: is not a known setting"),
        ({"consent": ""}, "consent: is required"),
    ],
)  # fmt: skip
def test_study_file_errors_name_the_key(change, fragment):
    with pytest.raises(StudyConfigError) as error:
        parse_study({**BASE, **change}, "s.toml")
    assert fragment in str(error.value)


def test_prolific_entry_requires_pid_and_session():
    entry = parse_entry("prolific", {"PROLIFIC_PID": "5f1a", "SESSION_ID": "abc", "STUDY_ID": "x"})
    assert (entry.worker_id, entry.session, entry.study) == ("5f1a", "abc", "x")
    with pytest.raises(EntryError, match="missing your PROLIFIC_PID"):
        parse_entry("prolific", {"SESSION_ID": "abc"})
    with pytest.raises(EntryError, match="does not look right"):
        parse_entry("prolific", {"PROLIFIC_PID": "<script>", "SESSION_ID": "abc"})


def test_mturk_entry_preview_and_submit_host():
    assert parse_entry("mturk", {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"}).preview
    args = {
        "workerId": "A1B2",
        "assignmentId": "3XYZ",
        "hitId": "H1",
        "turkSubmitTo": "https://workersandbox.mturk.com",
    }
    entry = parse_entry("mturk", args)
    assert entry.submit_to == "https://workersandbox.mturk.com" and entry.session == "3XYZ"
    with pytest.raises(EntryError, match="does not come from Mechanical Turk"):
        parse_entry("mturk", {**args, "turkSubmitTo": "https://evil.example"})


def test_generic_entry_needs_only_pid():
    assert parse_entry("generic", {"pid": "worker-7"}).worker_id == "worker-7"
    with pytest.raises(EntryError):
        parse_entry("generic", {})

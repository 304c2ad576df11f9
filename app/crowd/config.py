"""Study files (TOML): parsing and validation with errors that name the file and the key.

Pure: no Flask, no database. docs/running-a-study.md documents every field.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

SLUG_RE = re.compile(r"[a-z0-9][a-z0-9-]{1,63}")
CODE_RE = re.compile(r"[A-Za-z0-9_-]{4,64}")
PLATFORMS = ("prolific", "mturk", "generic")
OUTCOMES = ("completed", "failed_checks", "screened_out")
PROLIFIC_COMPLETE = "https://app.prolific.com/submissions/complete?cc={code}"


class StudyConfigError(ValueError):
    def __init__(self, source: str, key: str, message: str):
        super().__init__(f"{source}: {key}: {message}" if key else f"{source}: {message}")


@dataclass(frozen=True)
class LikertCriterion:
    name: str
    question: str
    definition: str
    labels: list[str]
    # What is rated: "flagged" (the sentence the worker flagged) or "continuation" (the
    # machine-written part).
    target: str = "flagged"
    examples: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Screening:
    question: str
    options: list[str]
    accept: list[str]


@dataclass(frozen=True)
class StudyConfig:
    slug: str
    title: str
    platform: str
    rounds: int
    attention_check_rate: float = 0.1
    target_per_example: int = 3
    max_rounds: int | None = None
    min_seconds_per_round: float = 10.0
    fail_after_checks: int = 2
    straight_line_threshold: int = 6
    reward: float = 0.0
    currency: str = "GBP"
    expected_minutes: float = 10.0
    consent: str = ""
    instructions: str = ""
    categories: list[str] = field(default_factory=list)
    systems: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    tutorial: list[str] = field(default_factory=list)
    completion_codes: dict[str, str] = field(default_factory=dict)
    completion_url: str | None = None
    likert: list[LikertCriterion] = field(default_factory=list)
    likert_when: str = "after"
    screening: Screening | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> StudyConfig:
        data = dict(data)
        data["likert"] = [LikertCriterion(**c) for c in data.get("likert", [])]
        if data.get("screening"):
            data["screening"] = Screening(**data["screening"])
        return cls(**data)

    @property
    def hourly_reward(self) -> float | None:
        return self.reward * 60.0 / self.expected_minutes if self.expected_minutes else None


KNOWN = {
    "slug", "title", "platform", "rounds", "attention_check_rate", "target_per_example",
    "max_rounds", "min_seconds_per_round", "fail_after_checks", "straight_line_threshold",
    "reward", "currency", "expected_minutes", "consent", "instructions", "categories", "systems",
    "examples", "tutorial", "completion_codes", "completion_url", "likert", "likert_when",
    "screening",
}  # fmt: skip


def _text(data, key, source, required=False, default=""):
    value = data.get(key, default)
    if required and (value is None or value == ""):
        raise StudyConfigError(source, key, "is required")
    if not isinstance(value, str):
        raise StudyConfigError(source, key, "must be text")
    return value.strip()


def _number(data, key, source, default, kind=float, low=None, high=None):
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StudyConfigError(source, key, f"must be a number, got {value!r}")
    if kind is int and value != int(value):
        raise StudyConfigError(source, key, f"must be a whole number, got {value!r}")
    value = kind(value)
    if low is not None and value < low:
        raise StudyConfigError(source, key, f"must be at least {low}, got {value}")
    if high is not None and value > high:
        raise StudyConfigError(source, key, f"must be at most {high}, got {value}")
    return value


def _strings(data, key, source):
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise StudyConfigError(source, key, "must be a list of non-empty strings")
    return value


def _likert(data, source) -> tuple[list[LikertCriterion], str]:
    raw = data.get("likert", [])
    if not isinstance(raw, list):
        raise StudyConfigError(source, "likert", "must be a list of [[likert]] tables")
    criteria = []
    for i, item in enumerate(raw):
        where = f"likert[{i}]"
        if not isinstance(item, dict):
            raise StudyConfigError(source, where, "must be a table")
        name = _text(item, "name", f"{source}: {where}", required=True)
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", name):
            raise StudyConfigError(source, f"{where}.name", "must be a short lowercase identifier")
        labels = _strings(item, "labels", f"{source}: {where}")
        if len(labels) != 5:
            raise StudyConfigError(source, f"{where}.labels", "needs one label for each of 1–5")
        target = item.get("target", "flagged")
        if target not in ("flagged", "continuation"):
            raise StudyConfigError(source, f"{where}.target", "must be flagged or continuation")
        criteria.append(
            LikertCriterion(
                name=name,
                question=_text(item, "question", f"{source}: {where}", required=True),
                definition=_text(item, "definition", f"{source}: {where}"),
                labels=labels,
                target=target,
                examples=_strings(item, "examples", f"{source}: {where}"),
            )
        )
    if len({c.name for c in criteria}) != len(criteria):
        raise StudyConfigError(source, "likert", "criterion names must be unique")
    when = data.get("likert_when", "after")
    if when not in ("after", "before"):
        raise StudyConfigError(source, "likert_when", "must be after or before")
    return criteria, when


def parse_study(data: dict, source: str = "study") -> StudyConfig:
    """Validate a decoded study file."""
    if not isinstance(data, dict):
        raise StudyConfigError(source, "", "expected a table of settings")
    unknown = sorted(set(data) - KNOWN)
    if unknown:
        raise StudyConfigError(source, unknown[0], "is not a known setting (check the spelling)")
    slug = _text(data, "slug", source, required=True)
    if not SLUG_RE.fullmatch(slug):
        raise StudyConfigError(source, "slug", "must be 2–64 lowercase letters, digits or hyphens")
    platform = _text(data, "platform", source, required=True)
    if platform not in PLATFORMS:
        raise StudyConfigError(source, "platform", f"must be one of {', '.join(PLATFORMS)}")
    rounds = _number(data, "rounds", source, None, int, low=1, high=500)
    max_rounds = data.get("max_rounds")
    if max_rounds is not None:
        max_rounds = _number(data, "max_rounds", source, None, int, low=rounds, high=1000)
    codes = data.get("completion_codes", {})
    if not isinstance(codes, dict):
        raise StudyConfigError(source, "completion_codes", "must be a table of outcome = code")
    for outcome, code in codes.items():
        if outcome not in OUTCOMES:
            raise StudyConfigError(
                source, f"completion_codes.{outcome}", f"outcome must be one of {OUTCOMES}"
            )
        if not isinstance(code, str) or not CODE_RE.fullmatch(code):
            raise StudyConfigError(
                source, f"completion_codes.{outcome}", "must be 4–64 letters, digits, - or _"
            )
    completion_url = data.get("completion_url")
    if completion_url is None and platform == "prolific":
        completion_url = PROLIFIC_COMPLETE
    if completion_url is not None:
        if not isinstance(completion_url, str) or not completion_url.startswith("https://"):
            raise StudyConfigError(source, "completion_url", "must be an https:// address")
        if "{code}" not in completion_url:
            raise StudyConfigError(source, "completion_url", "must contain {code}")
    screening = data.get("screening")
    if screening is not None:
        if not isinstance(screening, dict):
            raise StudyConfigError(source, "screening", "must be a table")
        options = _strings(screening, "options", f"{source}: screening")
        accept = _strings(screening, "accept", f"{source}: screening")
        if len(options) < 2 or not set(accept) <= set(options) or not accept:
            raise StudyConfigError(
                source, "screening", "needs at least two options and accepted ones among them"
            )
        screening = Screening(
            _text(screening, "question", f"{source}: screening", required=True), options, accept
        )
    likert, likert_when = _likert(data, source)
    config = StudyConfig(
        slug=slug,
        title=_text(data, "title", source, required=True),
        platform=platform,
        rounds=rounds,
        attention_check_rate=_number(data, "attention_check_rate", source, 0.1, low=0, high=0.5),
        target_per_example=_number(data, "target_per_example", source, 3, int, low=1),
        max_rounds=max_rounds,
        min_seconds_per_round=_number(data, "min_seconds_per_round", source, 10.0, low=0),
        fail_after_checks=_number(data, "fail_after_checks", source, 2, int, low=1),
        straight_line_threshold=_number(data, "straight_line_threshold", source, 6, int, low=0),
        reward=_number(data, "reward", source, 0.0, low=0),
        currency=_text(data, "currency", source, default="GBP"),
        expected_minutes=_number(data, "expected_minutes", source, 10.0, low=0.5),
        consent=_text(data, "consent", source, required=True),
        instructions=_text(data, "instructions", source, required=True),
        categories=_strings(data, "categories", source),
        systems=_strings(data, "systems", source),
        examples=_strings(data, "examples", source),
        tutorial=_strings(data, "tutorial", source),
        completion_codes=dict(codes),
        completion_url=completion_url,
        likert=likert,
        likert_when=likert_when,
        screening=screening,
    )
    if config.platform == "prolific" and "completed" not in config.completion_codes:
        raise StudyConfigError(
            source,
            "completion_codes.completed",
            "is required for Prolific: copy the code Prolific shows for completed submissions",
        )
    return config


def load_study_file(path: Path) -> StudyConfig:
    """Read and validate a TOML study file; errors name the file (and line for syntax errors)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as error:
        raise StudyConfigError(str(path), "", f"cannot read file ({error.strerror})") from None
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as error:
        raise StudyConfigError(str(path), "", f"not valid TOML: {error}") from None
    return parse_study(data, str(path))

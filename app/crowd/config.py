"""Study files (TOML): parsing and validation with errors that name the file and the key.

Pure: no Flask, no database. docs/running-a-study.md documents every field. What the
platforms' rules say about a valid file (pay, attention checks) is app/crowd/platform_rules.py.
Checked here, not by a schema library: every error names the file and the key in a sentence a
researcher can act on, and several rules relate fields (an answer among its options, a bonus and
its cap, a code per outcome); a library's generic messages would each need rewording.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace

from app.crowd import schedule

SLUG_RE = re.compile(r"[a-z0-9][a-z0-9-]{1,63}")
CODE_RE = re.compile(r"[A-Za-z0-9_-]{4,64}")
PLATFORMS = ("prolific", "mturk", "generic")
OUTCOMES = ("completed", "failed_checks", "screened_out")
PROLIFIC_COMPLETE = "https://app.prolific.com/submissions/complete?cc={code}"
# What a completion_url may name: the completion code, and the worker's id on the platform
# (SONA's survey_code takes the participant id).
COMPLETION_PLACEHOLDERS = ("code", "pid")
PLATFORM_NAMES = {"prolific": "Prolific", "mturk": "Mechanical Turk", "generic": "your platform"}


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
    # Asked instead of `question` when there is nothing to rate: the worker said the whole text
    # is human (target "flagged"), or the text has no machine part (target "continuation").
    question_all_human: str = ""

    def wording(self, nothing_to_rate: bool) -> str:
        if not nothing_to_rate:
            return self.question
        return self.question_all_human or (
            f"You said every sentence is human-written: rate the text as a whole "
            f"({self.name.replace('_', ' ')})."
        )


@dataclass(frozen=True)
class Screening:
    question: str
    options: list[str]
    accept: list[str]


@dataclass(frozen=True)
class ComprehensionQuestion:
    """A question about the instructions, answered after reading them (two tries)."""

    question: str
    options: list[str]
    answer: str


@dataclass(frozen=True)
class BonusRule:
    """A bonus per point and per exact hit on the scored rounds, capped per worker (in the
    study's currency); paid only to approved workers."""

    per_point: float = 0.0
    per_exact: float = 0.0
    cap: float = 0.0

    def amount(self, points: int, exact: int) -> float:
        return round(min(self.per_point * points + self.per_exact * exact, self.cap), 2)

    def describe(self, currency: str) -> str:
        """The rule in words, as workers read it and the dataset card states it."""
        parts = []
        if self.per_exact:
            parts.append(
                f"{self.per_exact:.2f} {currency} for each text where you flag exactly the "
                "sentence where the machine took over"
            )
        if self.per_point:
            parts.append(f"{self.per_point:.2f} {currency} for each point you score")
        return (
            f"A bonus of {', and '.join(parts)}, up to {self.cap:.2f} {currency} in all. "
            "Attention checks and practice texts do not count; the bonus is paid once your "
            "submission is approved."
        )


@dataclass(frozen=True)
class StudyConfig:
    slug: str
    title: str
    platform: str
    rounds: int
    attention_check_rate: float = 0.1
    target_per_example: int = 3
    max_rounds: int | None = None
    # Flag a worker whose median round time is below this share of the study's median.
    speeder_fraction: float = 1 / 3
    # Optional absolute floor (seconds); 0 = off.
    min_seconds_per_round: float = 0.0
    fail_after_checks: int = 2
    # How many of a worker's attention checks are all-human texts; the others are inside a text.
    all_human_checks: int = 0
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
    comprehension: list[ComprehensionQuestion] = field(default_factory=list)
    # Minutes from consent to the last answer; a worker past it frees their place.
    time_limit_minutes: float | None = None
    # The most workers who may hold or have finished a place; None = no limit.
    places: int | None = None
    # Show the truth and points after each paid round (practice rounds always show them).
    show_feedback: bool = True
    # The platform's name in messages, e.g. "SONA" for a generic link; default per platform.
    platform_name: str = ""
    bonus: BonusRule | None = None
    # What the platform shows workers before they take the study (Prolific's description).
    description: str = ""
    # Show the detector's suspicion of each revealed sentence (the machine-informed crowd).
    detector_hint: bool = False
    # Tell workers which model(s) wrote the machine parts of the study's texts.
    disclose_model: bool = False
    # [[conditions]]: {"name": ..., setting: value, ...}; read through conditions.settings_for.
    conditions: list[dict] = field(default_factory=list)
    # [preregistration], validated and with its defaults filled in (app/crowd/preregistration.py).
    preregistration: dict | None = None
    # What a screened-out worker is paid (a part of the reward), through the bonus ledger once;
    # None: verify sends screen-outs to review. See _outcome_settings.
    screened_out_pay: float | None = None
    # Stop a worker with the failed_checks code as soon as they have failed fail_after_checks
    # checks (false: they play every round first).
    stop_after_failed_checks: bool = True
    # How workers reach the researcher (a name and an e-mail address, say), on every study page.
    contact: str = ""

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> StudyConfig:
        data = dict(data)
        data["likert"] = [LikertCriterion(**c) for c in data.get("likert", [])]
        data["comprehension"] = [ComprehensionQuestion(**q) for q in data.get("comprehension", [])]
        if data.get("screening"):
            data["screening"] = Screening(**data["screening"])
        if data.get("bonus"):
            data["bonus"] = BonusRule(**data["bonus"])
        return cls(**data)

    @property
    def hourly_reward(self) -> float | None:
        return self.reward * 60.0 / self.expected_minutes if self.expected_minutes else None

    @property
    def checks(self) -> tuple[int, int]:
        """(all-human checks, inside-text checks) among a worker's required rounds."""
        return schedule.check_mix(self.rounds, self.attention_check_rate, self.all_human_checks)

    @property
    def total_rounds(self) -> int:
        return self.max_rounds or self.rounds

    @property
    def display_platform(self) -> str:
        return self.platform_name or PLATFORM_NAMES[self.platform]


KNOWN = {
    "slug", "title", "platform", "rounds", "attention_check_rate", "target_per_example",
    "max_rounds", "min_seconds_per_round", "fail_after_checks", "straight_line_threshold",
    "reward", "currency", "expected_minutes", "consent", "instructions", "categories", "systems",
    "examples", "tutorial", "completion_codes", "completion_url", "likert", "likert_when",
    "screening", "all_human_checks", "speeder_fraction", "comprehension", "time_limit_minutes",
    "places", "show_feedback", "platform_name", "bonus", "description", "detector_hint",
    "disclose_model", "conditions", "preregistration", "screened_out_pay",
    "stop_after_failed_checks", "contact",
}  # fmt: skip
LIKERT_KEYS = {"name", "question", "definition", "labels", "target", "examples",
               "question_all_human"}  # fmt: skip
SCREENING_KEYS = {"question", "options", "accept"}
COMPREHENSION_KEYS = {"question", "options", "answer"}
BONUS_KEYS = {"per_point", "per_exact", "cap"}


def _known(data: dict, keys: set[str], source: str, where: str) -> None:
    """Every nested table is checked for typos too: an unknown key is an error, never ignored."""
    unknown = sorted(set(data) - keys)
    if unknown:
        key = f"{where}.{unknown[0]}" if where else unknown[0]
        raise StudyConfigError(source, key, "is not a known setting (check the spelling)")


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


def _flag(data, key, source, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise StudyConfigError(source, key, "must be true or false")
    return value


def _strings(data, key, source):
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise StudyConfigError(source, key, "must be a list of non-empty strings")
    return value


def _tables(data, key: str, keys: set[str], source) -> Iterator[tuple[str, dict]]:
    """Each of the [[key]] tables, with where it stands (`key[i]`), its keys checked."""
    raw = data.get(key, [])
    if not isinstance(raw, list):
        raise StudyConfigError(source, key, f"must be a list of [[{key}]] tables")
    for i, item in enumerate(raw):
        where = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise StudyConfigError(source, where, "must be a table")
        _known(item, keys, source, where)
        yield where, item


def _likert(data, source) -> tuple[list[LikertCriterion], str]:
    criteria = []
    for where, item in _tables(data, "likert", LIKERT_KEYS, source):
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
                question_all_human=_text(item, "question_all_human", f"{source}: {where}"),
            )
        )
    if len({c.name for c in criteria}) != len(criteria):
        raise StudyConfigError(source, "likert", "criterion names must be unique")
    when = data.get("likert_when", "after")
    if when not in ("after", "before"):
        raise StudyConfigError(source, "likert_when", "must be after or before")
    return criteria, when


def _comprehension(data, source) -> list[ComprehensionQuestion]:
    questions = []
    for where, item in _tables(data, "comprehension", COMPREHENSION_KEYS, source):
        options = _strings(item, "options", f"{source}: {where}")
        answer = _text(item, "answer", f"{source}: {where}", required=True)
        if len(options) < 2 or len(set(options)) != len(options):
            raise StudyConfigError(
                source, f"{where}.options", "needs at least two different options"
            )
        if answer not in options:
            raise StudyConfigError(source, f"{where}.answer", "must be one of the options")
        question = _text(item, "question", f"{source}: {where}", required=True)
        questions.append(ComprehensionQuestion(question, options, answer))
    return questions


def _bonus(data, source) -> BonusRule | None:
    raw = data.get("bonus")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise StudyConfigError(source, "bonus", "must be a table")
    _known(raw, BONUS_KEYS, source, "bonus")
    where = f"{source}: bonus"
    rule = BonusRule(
        per_point=_number(raw, "per_point", where, 0.0, low=0),
        per_exact=_number(raw, "per_exact", where, 0.0, low=0),
        cap=_number(raw, "cap", where, 0.0, low=0),
    )
    if not (rule.per_point or rule.per_exact):
        raise StudyConfigError(source, "bonus", "needs per_point or per_exact")
    if rule.cap <= 0:
        raise StudyConfigError(source, "bonus.cap", "is required: the most one worker can get")
    return rule


def _optional(data, key, source, kind, low, high=None):
    return None if data.get(key) is None else _number(data, key, source, None, kind, low, high)


def _outcome_settings(data: dict, source: str, config: StudyConfig) -> dict:
    """How outcomes are settled (the screen-out payment, stopping on failed checks) and whom
    workers contact."""
    pay = _optional(data, "screened_out_pay", source, float, 0)
    if pay is not None and pay >= config.reward:
        raise StudyConfigError(
            source, "screened_out_pay", f"must be less than the reward ({config.reward:g})"
        )
    return {
        "screened_out_pay": pay,
        "stop_after_failed_checks": _flag(data, "stop_after_failed_checks", source, True),
        "contact": _text(data, "contact", source),
    }


def parse_settings(data: dict, source: str = "study") -> StudyConfig:
    """Validate a decoded study file's own settings. Its [[conditions]] and [preregistration]
    are checked on top of these by app.crowd.study_file.parse_study, the one entry point."""
    if not isinstance(data, dict):
        raise StudyConfigError(source, "", "expected a table of settings")
    _known(data, KNOWN, source, "")
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
    codes = _completion_codes(data, source)
    completion_url = _completion_url(data, source, platform)
    screening = _screening(data, source)
    likert, likert_when = _likert(data, source)
    config = StudyConfig(
        slug=slug,
        title=_text(data, "title", source, required=True),
        platform=platform,
        rounds=rounds,
        attention_check_rate=_number(data, "attention_check_rate", source, 0.1, low=0, high=0.5),
        target_per_example=_number(data, "target_per_example", source, 3, int, low=1),
        max_rounds=max_rounds,
        speeder_fraction=_number(data, "speeder_fraction", source, 1 / 3, low=0, high=1),
        min_seconds_per_round=_number(data, "min_seconds_per_round", source, 0.0, low=0),
        fail_after_checks=_number(data, "fail_after_checks", source, 2, int, low=1),
        all_human_checks=_number(data, "all_human_checks", source, 0, int, low=0),
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
        comprehension=_comprehension(data, source),
        time_limit_minutes=_optional(data, "time_limit_minutes", source, float, 1),
        places=_optional(data, "places", source, int, 1),
        show_feedback=_flag(data, "show_feedback", source, True),
        platform_name=_text(data, "platform_name", source),
        bonus=_bonus(data, source),
        description=_text(data, "description", source),
        detector_hint=_flag(data, "detector_hint", source, False),
        disclose_model=_flag(data, "disclose_model", source, False),
    )
    config = replace(config, **_outcome_settings(data, source, config))
    if config.platform == "prolific" and "completed" not in config.completion_codes:
        raise StudyConfigError(
            source,
            "completion_codes.completed",
            "is required for Prolific: copy the code Prolific shows for completed submissions",
        )
    return config


def _completion_codes(data: dict, source: str) -> dict[str, str]:
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
    return codes


def _completion_url(data: dict, source: str, platform: str) -> str | None:
    completion_url = data.get("completion_url")
    if completion_url is None and platform == "prolific":
        completion_url = PROLIFIC_COMPLETE
    if completion_url is not None:
        if not isinstance(completion_url, str) or not completion_url.startswith("https://"):
            raise StudyConfigError(source, "completion_url", "must be an https:// address")
        named = set(re.findall(r"\{([^{}]*)\}", completion_url))
        if unknown := sorted(named - set(COMPLETION_PLACEHOLDERS)):
            raise StudyConfigError(
                source,
                "completion_url",
                f"unknown placeholder {{{unknown[0]}}}: use {{code}} and / or {{pid}}",
            )
        if not named:
            raise StudyConfigError(
                source, "completion_url", "must contain {code} or {pid} (or both)"
            )
    return completion_url


def _screening(data: dict, source: str) -> Screening | None:
    screening = data.get("screening")
    if screening is None:
        return None
    if not isinstance(screening, dict):
        raise StudyConfigError(source, "screening", "must be a table")
    _known(screening, SCREENING_KEYS, source, "screening")
    options = _strings(screening, "options", f"{source}: screening")
    accept = _strings(screening, "accept", f"{source}: screening")
    if len(options) < 2 or not set(accept) <= set(options) or not accept:
        raise StudyConfigError(
            source, "screening", "needs at least two options and accepted ones among them"
        )
    return Screening(
        _text(screening, "question", f"{source}: screening", required=True), options, accept
    )

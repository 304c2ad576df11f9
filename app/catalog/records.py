"""The example file format (JSONL, one self-contained example per line): parsing and validation.

Pure: no Flask, no database. See docs/operators.md for the format.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

SLUG_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
REQUIRED = ("id", "category", "system", "sentences", "boundary")
OPTIONAL = ("decoding", "seed", "source", "meta", "system_label")
MAX_LABEL_CHARS = 100
MAX_SENTENCE_CHARS = 5000


class RecordError(ValueError):
    """A problem with one record; `line` is 1-based."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


@dataclass(frozen=True)
class ExampleRecord:
    id: str
    category: str
    system: str
    sentences: list[str]
    boundary: int
    decoding: dict | None = None
    seed: int | None = None
    source: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    # What players are told wrote the text (e.g. "GPT-2 XL"); None: a plain description instead.
    system_label: str | None = None

    @property
    def decoding_p(self) -> float | None:
        if self.decoding and isinstance(self.decoding.get("p"), int | float):
            return float(self.decoding["p"])
        return None

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "category": self.category,
            "system": self.system,
            "sentences": list(self.sentences),
            "boundary": self.boundary,
            "decoding": self.decoding,
            "seed": self.seed,
            "source": self.source,
            "meta": self.meta,
            **({"system_label": self.system_label} if self.system_label else {}),
        }


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate(obj, line: int) -> ExampleRecord:
    """Check one decoded JSON value against the contract; raise RecordError naming the problem."""
    if not isinstance(obj, dict):
        raise RecordError(line, "expected a JSON object")
    missing = [key for key in REQUIRED if key not in obj]
    if missing:
        raise RecordError(line, f"missing field(s): {', '.join(missing)}")
    unknown = sorted(set(obj) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise RecordError(line, f"unknown field(s): {', '.join(unknown)}")

    ex_id = obj["id"]
    if not isinstance(ex_id, str) or not ex_id.strip() or len(ex_id) > 255:
        raise RecordError(line, "id must be a non-empty string of at most 255 characters")
    category = obj["category"]
    if not isinstance(category, str) or not SLUG_RE.fullmatch(category):
        raise RecordError(
            line,
            "category must be a lowercase slug (letters, digits, - or _; at most 64), "
            f"got {category!r}",
        )
    system = obj["system"]
    if not isinstance(system, str) or not system.strip() or len(system) > 128:
        raise RecordError(line, "system must be a non-empty string of at most 128 characters")

    sentences = obj["sentences"]
    if not isinstance(sentences, list) or len(sentences) < 2:
        raise RecordError(line, "sentences must be a list of at least 2 strings")
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str) or not sentence.strip():
            raise RecordError(line, f"sentences[{i}] must be a non-empty string")
        if len(sentence) > MAX_SENTENCE_CHARS:
            raise RecordError(line, f"sentences[{i}] is longer than {MAX_SENTENCE_CHARS} chars")
    n = len(sentences)

    boundary = obj["boundary"]
    if not _is_int(boundary) or not 1 <= boundary <= n:
        raise RecordError(
            line,
            f"boundary must be an integer from 1 to {n} (the number of sentences; "
            f"{n} means all human), got {boundary!r}",
        )

    decoding = obj.get("decoding")
    if decoding is not None:
        if not isinstance(decoding, dict):
            raise RecordError(line, "decoding must be an object or null")
        p = decoding.get("p")
        if p is not None and (
            not isinstance(p, int | float)
            or isinstance(p, bool)
            or math.isnan(p)
            or not 0 <= p <= 1
        ):
            raise RecordError(line, f"decoding.p must be a number in [0, 1], got {p!r}")
    seed = obj.get("seed")
    if seed is not None and not _is_int(seed):
        raise RecordError(line, f"seed must be an integer or null, got {seed!r}")
    for key in ("source", "meta"):
        value = obj.get(key)
        if value is not None and not isinstance(value, dict):
            raise RecordError(line, f"{key} must be an object")

    label = obj.get("system_label")
    if label is not None and (
        not isinstance(label, str) or not label.strip() or len(label) > MAX_LABEL_CHARS
    ):
        raise RecordError(
            line,
            f"system_label must be a non-empty string of at most {MAX_LABEL_CHARS} characters "
            "or null",
        )

    return ExampleRecord(
        id=ex_id,
        category=category,
        system=system.strip(),
        sentences=[s.strip() for s in sentences],
        boundary=boundary,
        decoding=decoding,
        seed=seed,
        source=obj.get("source") or {},
        meta=obj.get("meta") or {},
        system_label=label.strip() if label else None,
    )


def parse_lines(lines: Iterable[str]) -> Iterator[ExampleRecord | RecordError]:
    """Yield a record or the error for every non-blank line; duplicate ids are errors."""
    seen: dict[str, int] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as error:
            yield RecordError(number, f"not valid JSON ({error.msg} at column {error.colno})")
            continue
        try:
            record = validate(obj, number)
        except RecordError as error:
            yield error
            continue
        if record.id in seen:
            yield RecordError(number, f"id {record.id!r} already appears on line {seen[record.id]}")
            continue
        seen[record.id] = number
        yield record

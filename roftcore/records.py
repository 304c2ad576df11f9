"""The example record: one JSON object per line of an example file (pure).

Generation writes these lines and validates each one here before writing it; `flask import`
validates every line here before anything touches the database. Fields:

- required: `id`, `category` (a lowercase slug), `system`, `sentences` (N >= 2 strings),
  `boundary` (see roftcore.boundary: 1..N, N = all human);
- optional: `decoding` (null when nothing was decoded), `seed`, `source` (dataset, doc_id,
  splitter, …), `meta`, `system_label` (a display name for players, at most 100 characters) and
  `provenance` (how the text was made: model, weights_sha256, hub_commit, code_version,
  generation settings; see PROVENANCE_FIELDS).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

SLUG_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # use with fullmatch
SHA256_RE = re.compile(r"[0-9a-f]{64}")
REQUIRED = ("id", "category", "system", "sentences", "boundary")
OPTIONAL = ("decoding", "seed", "source", "meta", "system_label", "provenance")
MAX_SENTENCE_CHARS = 5000
MAX_SYSTEM_LABEL = 100
# provenance key -> (what it holds, check); other keys are kept as they are.
PROVENANCE_FIELDS = {
    "model": "the model's hub id or local path (at most 255 characters)",
    "weights_sha256": "SHA-256 of the weight files (64 lowercase hex digits) or null",
    "hub_commit": "the hub commit the files came from, or null",
    "code_version": "the generation code's version and git commit (at most 128 characters)",
    "generation": "the effective generation settings (an object; `method` says how the text "
    "was made: model, human or splice)",
}


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
    system_label: str | None = None
    provenance: dict | None = None

    @property
    def decoding_p(self) -> float | None:
        if self.decoding and isinstance(self.decoding.get("p"), int | float):
            return float(self.decoding["p"])
        return None

    @property
    def all_human(self) -> bool:
        return self.boundary == len(self.sentences)

    def to_json(self) -> dict:
        out = {
            "id": self.id,
            "category": self.category,
            "system": self.system,
            "sentences": list(self.sentences),
            "boundary": self.boundary,
            "decoding": self.decoding,
            "seed": self.seed,
            "source": self.source,
            "meta": self.meta,
        }
        if self.system_label is not None:
            out["system_label"] = self.system_label
        if self.provenance is not None:
            out["provenance"] = self.provenance
        return out


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_decoding(decoding, line: int) -> None:
    if not isinstance(decoding, dict):
        raise RecordError(line, "decoding must be an object or null")
    p = decoding.get("p")
    if p is not None and (not _is_number(p) or not 0 <= p <= 1):
        raise RecordError(line, f"decoding.p must be a number in [0, 1], got {p!r}")
    min_p = decoding.get("min_p")
    if min_p is not None and (not _is_number(min_p) or not 0 <= min_p <= 1):
        raise RecordError(line, f"decoding.min_p must be a number in [0, 1], got {min_p!r}")
    for key in ("temperature", "repetition_penalty"):
        value = decoding.get(key)
        if value is not None and (not _is_number(value) or value < 0):
            raise RecordError(line, f"decoding.{key} must be a number >= 0, got {value!r}")
    top_k = decoding.get("top_k")
    if top_k is not None and (not _is_int(top_k) or top_k < 0):
        raise RecordError(line, f"decoding.top_k must be an integer >= 0 or null, got {top_k!r}")


def _check_provenance(provenance, line: int) -> None:
    if not isinstance(provenance, dict):
        raise RecordError(line, "provenance must be an object")
    model = provenance.get("model")
    if model is not None and (not isinstance(model, str) or not model or len(model) > 255):
        raise RecordError(line, "provenance.model must be a non-empty string of at most 255")
    digest = provenance.get("weights_sha256")
    if digest is not None and (not isinstance(digest, str) or not SHA256_RE.fullmatch(digest)):
        raise RecordError(line, f"provenance.weights_sha256 must be 64 hex digits, got {digest!r}")
    for key, limit in (("code_version", 128), ("hub_commit", 64)):
        value = provenance.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            raise RecordError(line, f"provenance.{key} must be a string of at most {limit}")
    generation = provenance.get("generation")
    if generation is not None and not isinstance(generation, dict):
        raise RecordError(line, "provenance.generation must be an object")


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
            f"boundary must be an integer from 1 to {n} (the index of the first machine-written "
            f"sentence; {n} = the number of sentences means all human), got {boundary!r}",
        )

    decoding = obj.get("decoding")
    if decoding is not None:
        _check_decoding(decoding, line)
    seed = obj.get("seed")
    if seed is not None and not _is_int(seed):
        raise RecordError(line, f"seed must be an integer or null, got {seed!r}")
    for key in ("source", "meta"):
        value = obj.get(key)
        if value is not None and not isinstance(value, dict):
            raise RecordError(line, f"{key} must be an object")
    label = obj.get("system_label")
    if label is not None and (
        not isinstance(label, str) or not label.strip() or len(label) > MAX_SYSTEM_LABEL
    ):
        raise RecordError(
            line, f"system_label must be a non-empty string of at most {MAX_SYSTEM_LABEL} chars"
        )
    provenance = obj.get("provenance")
    if provenance is not None:
        _check_provenance(provenance, line)

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
        system_label=label.strip() if label is not None else None,
        provenance=provenance,
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

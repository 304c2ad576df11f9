"""The example file format: re-exported from `roftcore.records`, its one definition."""

from __future__ import annotations

from roftcore.records import (
    MAX_SENTENCE_CHARS,
    SLUG_RE,
    ExampleRecord,
    RecordError,
    parse_lines,
    validate,
)

__all__ = [
    "MAX_SENTENCE_CHARS",
    "SLUG_RE",
    "ExampleRecord",
    "RecordError",
    "parse_lines",
    "validate",
]

"""Cells that spreadsheets would run as formulas, made inert: every CSV the project writes passes
its cells through `neutralise` (or a whole table through `neutralise_frame`). Pure: no Flask, no
database.

A text cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage return is read by Excel,
LibreOffice and Google Sheets as a formula (`=HYPERLINK(...)`, a worker id `-A277576`). Such a
cell gets a leading apostrophe, which spreadsheets show as text. So that the change can be undone
exactly (`restore`), a cell that already begins with an apostrophe gets one more. Numbers, and
text that is a plain number such as `-1.5`, are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
MARK = "'"
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def neutralise(value: Any) -> Any:
    """The cell as a spreadsheet must see it: text that would start a formula gets a leading
    apostrophe; anything else is returned unchanged."""
    if not isinstance(value, str) or not value:
        return value
    if value[0] == MARK or (value[0] in TRIGGERS and not _PLAIN_NUMBER.fullmatch(value)):
        return MARK + value
    return value


def restore(value: Any) -> Any:
    """Undo `neutralise` (for programs reading a CSV the project wrote)."""
    if isinstance(value, str) and value.startswith(MARK):
        return value[1:]
    return value


def neutralise_row(values: Iterable[Any]) -> list[Any]:
    return [neutralise(value) for value in values]


def neutralise_frame(frame):
    """A copy of a pandas DataFrame with every text cell neutralised (numbers untouched)."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or str(out[column].dtype) in ("string", "str"):
            out[column] = out[column].map(neutralise)
    out.columns = [neutralise(name) for name in out.columns]
    return out


def restore_frame(frame, columns: Iterable[str] | None = None):
    """Undo `neutralise_frame` on the given text columns (all text columns by default)."""
    out = frame.copy()
    for column in columns if columns is not None else out.columns:
        if column in out and (
            out[column].dtype == object or str(out[column].dtype) in ("string", "str")
        ):
            out[column] = out[column].map(restore)
    return out

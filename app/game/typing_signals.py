"""How an explanation was entered: whether text was pasted into the box, and how fast it was typed.

The page's script (app/static/typing.js) sends three optional form fields with an answer:
`typing_pasted` ("1" when text was pasted or dropped into the box, else "0"), `typing_ms`
(milliseconds from the first keystroke in the box to the answer) and `typing_chars` (characters
typed in that time, not counting pasted ones). A client can send anything, so these are signals
for a person to look into (app/crowd/fraud.py), never decisions: `parse` never refuses an
answer over them. A value that is not a plain whole number is dropped (stored as null), and a
number out of range is clamped; with no explanation nothing is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Six hours: longer than any round stays open; more is clamped to it.
MAX_TYPING_MS = 6 * 60 * 60 * 1000
# Ten times the longest explanation: typing, deleting and typing again counts every keystroke.
MAX_TYPED_CHARS = 20_000
_MAX_DIGITS = 12


@dataclass(frozen=True)
class Typing:
    """What the script reported, cleaned; None for a value not reported."""

    pasted: bool | None = None
    ms: int | None = None
    chars: int | None = None


NOT_REPORTED = Typing()


def _whole(value: object, most: int) -> int | None:
    """A plain whole number (ASCII digits, an optional minus) clamped to 0..most, or None."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if not (digits.isascii() and digits.isdigit()):
        return None
    if negative:
        return 0
    if len(digits) > _MAX_DIGITS:
        return most
    return min(int(digits), most)


def parse(form: Mapping[str, object], explanation: str) -> Typing:
    """The typing signals of an answer's form (pure). Never raises: bad values become None."""
    if not explanation:
        return Typing()
    pasted_raw = form.get("typing_pasted")
    pasted = {"1": True, "0": False}.get(pasted_raw) if isinstance(pasted_raw, str) else None
    return Typing(
        pasted=pasted,
        ms=_whole(form.get("typing_ms"), MAX_TYPING_MS),
        chars=_whole(form.get("typing_chars"), MAX_TYPED_CHARS),
    )

"""Checks on continuations (pure): quality rules that trigger a retry, and the content filter."""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

TOO_FEW = "too_few_sentences"
REPEATS_PROMPT = "repeats_prompt"
REPEATED_SENTENCE = "repeated_sentence"
COPIES_SOURCE = "copies_source"
PROMPT_TOO_LONG = "prompt_too_long"
BAD_CHARACTERS = "bad_characters"
LOOP_IN_SENTENCE = "loop_in_sentence"
NO_WORDS = "no_words"
REPLACEMENT_CHARACTER = "\ufffd"
ALLOWED_CONTROLS = frozenset("\t\n\r")
# A loop: words repeated back to back in one sentence, at least this many copies (the last copy may
# be cut short): a single word four times ("no, no, no" is still speech), 2..LOOP_MAX_N words
# two and a half times ("of the city of the city of the").
LOOP_COPIES = {1: 4.0}
LOOP_COPIES_DEFAULT = 2.5
LOOP_MAX_N = 12
_WORD = re.compile(r"\w+(?:['’]\w+)*")


def bad_character(text: str) -> str | None:
    """The first character a decoded text should not hold: U+FFFD (bytes that did not decode), a
    control character other than tab and line breaks, an unpaired surrogate or a non-character.
    None when there is none."""
    for char in text:
        if char == REPLACEMENT_CHARACTER:
            return char
        kind = unicodedata.category(char)
        if (kind == "Cc" and char not in ALLOWED_CONTROLS) or kind in ("Cs", "Cn"):
            return char
    return None


def sentence_loop(sentence: str) -> tuple[str, float] | None:
    """(the repeated words, copies) when one sentence repeats an n-gram back to back (see
    LOOP_COPIES), the way a degenerate decoder loops; None otherwise. Case and punctuation
    between the words are ignored."""
    words = [w.lower() for w in _WORD.findall(sentence)]
    for n in range(1, LOOP_MAX_N + 1):
        needed = LOOP_COPIES.get(n, LOOP_COPIES_DEFAULT)
        if len(words) < needed * n:
            break
        start = 0
        while start + n < len(words):
            end = start  # words[start:end + n] repeats with period n
            while end + n < len(words) and words[end] == words[end + n]:
                end += 1
            span = end - start + n
            if span >= needed * n:
                return " ".join(words[start : start + n]), round(span / n, 2)
            start = max(start + 1, end)
    return None


def _norm(sentence: str) -> str:
    return " ".join(sentence.lower().split())


def quality_problem(
    prompt: list[str], continuation: list[str], needed: int, source: list[str] | None = None
) -> str | None:
    """Why a continuation cannot be used (None when it can).

    - fewer than `needed` sentences;
    - a sentence that repeats a prompt sentence verbatim (or the prompt as a whole);
    - the same sentence twice in a row (the last prompt sentence included);
    - a sentence copied from the rest of the source document (a memorised human text would look
      human-written and carry a wrong boundary);
    - a sentence without a word (".", "…", a lone quote mark): a small or degenerate model ends
      sentences that way, and a player would spot it at once;
    - a character that is no text: U+FFFD or a control character (`bad_character`);
    - a loop inside one sentence: words repeated back to back (`sentence_loop`).
    """
    if len(continuation) < needed:
        return TOO_FEW
    kept = continuation[:needed]
    prompt_norm = {_norm(s) for s in prompt}
    whole_prompt = _norm(" ".join(prompt))
    for sentence in kept:
        norm = _norm(sentence)
        if norm in prompt_norm or (len(prompt) > 1 and whole_prompt in norm):
            return REPEATS_PROMPT
    joined = [_norm(s) for s in [*prompt[-1:], *kept]]
    if any(a == b for a, b in itertools.pairwise(joined)):
        return REPEATED_SENTENCE
    if source:
        rest = {_norm(s) for s in source[len(prompt) :]}
        if any(_norm(s) in rest for s in kept):
            return COPIES_SOURCE
    if any(_WORD.search(s) is None for s in kept):
        return NO_WORDS
    if any(bad_character(s) is not None for s in kept):
        return BAD_CHARACTERS
    if any(sentence_loop(s) is not None for s in kept):
        return LOOP_IN_SENTENCE
    return None


class FilterError(ValueError):
    """A word list that cannot be read."""


@dataclass(frozen=True)
class ContentFilter:
    """Whole-word, case-insensitive matching against a list of words or phrases.

    The list file has one entry per line; blank lines and lines starting with `#` are ignored.
    """

    words: tuple[str, ...]
    source: str = ""

    @classmethod
    def from_file(cls, path: Path) -> ContentFilter:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise FilterError(f"{path}: cannot read the word list ({error})") from None
        words = tuple(
            w.strip().lower() for w in lines if w.strip() and not w.strip().startswith("#")
        )
        if not words:
            raise FilterError(f"{path}: the word list is empty")
        return cls(words=words, source=str(path))

    @property
    def pattern(self) -> re.Pattern:
        alternatives = "|".join(re.escape(w) for w in sorted(self.words, key=len, reverse=True))
        return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)

    def matches(self, sentences: list[str]) -> list[str]:
        """The listed words found in `sentences`, lowercased, in order of first appearance."""
        found: list[str] = []
        pattern = self.pattern
        for sentence in sentences:
            for match in pattern.findall(sentence):
                word = match.lower()
                if word not in found:
                    found.append(word)
        return found

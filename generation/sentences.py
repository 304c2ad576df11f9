"""Sentence splitting (pure): pysbd, a rule-based splitter that needs no downloads."""

from __future__ import annotations

import re
from functools import lru_cache

import pysbd

SPLITTER = f"pysbd {pysbd.__version__}"
_SPACE = re.compile(r"\s+")


@lru_cache(maxsize=4)
def _segmenter(language: str) -> pysbd.Segmenter:
    return pysbd.Segmenter(language=language, clean=False)


def split_sentences(text: str, language: str = "en") -> list[str]:
    """Split `text` into sentences, each with its whitespace runs collapsed to one space."""
    if not text or not text.strip():
        return []
    out = []
    for piece in _segmenter(language).segment(text):
        sentence = _SPACE.sub(" ", piece).strip()
        if sentence:
            out.append(sentence)
    return out


def complete_sentences(text: str, finished: bool) -> list[str]:
    """The complete sentences of a continuation. The last piece counts only when generation ended
    by itself (end-of-text) and the piece ends like a sentence."""
    pieces = split_sentences(text)
    if not pieces:
        return []
    last = pieces[-1]
    if finished and re.search(r"""[.!?…]["'”’)\]]*$""", last):
        return pieces
    return pieces[:-1]


_TERMINATOR = re.compile(r"""[.!?…]["'”’)\]]*\s+\S""")


def enough_sentences(text: str, needed: int) -> bool:
    """True once `text` holds `needed` complete sentences (and another one has begun)."""
    if len(_TERMINATOR.findall(text)) < needed:
        return False
    return len(split_sentences(text)) > needed


def first_sentences(text: str, needed: int) -> str:
    """`text` cut where a generator that stops once `needed` sentences are complete (and another
    has begun) would have stopped: what `--engine hf` keeps, for engines that write on."""
    for found in _TERMINATOR.finditer(text):
        if enough_sentences(text[: found.end()], needed):
            return text[: found.end()]
    return text

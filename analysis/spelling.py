"""Spelling for the comment taxonomy: players' misspellings mended with pyspellchecker's English
word list (word frequencies from a large corpus, shipped with the library), so that "repitition",
"suddnely" or "irrelavent" read as the words they meant, and a comment none of whose words is
English ("hjkfd", "asdfgh jkl") can be told apart from one the taxonomy merely does not know.

Only words of four letters or more that the word list does not hold are corrected: one edit away
for words up to seven letters, two for longer ones (short words have too many neighbours two edits
away: a five-letter mash would find some rare word). Words the taxonomy itself uses are added to
the list first, so that its own vocabulary (cue words, "nytimes", "idk") is never "corrected"
away.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Words players use that the general word list lacks, kept as they are.
EXTRA_WORDS = (
    "idk",
    "idek",
    "dunno",
    "lol",
    "nytimes",
    "gpt",
    "ai",
    "bot",
    "qq",
    "symbols",
    "coreference",
    "doesnt",
    "dont",
    "didnt",
    "isnt",
    "wasnt",
    "arent",
    "werent",
    "cant",
    "wouldnt",
    "shouldnt",
    "couldnt",
    "thats",
    "whats",
    "hes",
    "shes",
    "theyre",
    "youre",
    "ive",
    "im",
    "its",
    "whos",
    "misclick",
    "misclicked",
    "segue",
    "repetitive",
    "ungrammatical",
)


@lru_cache(maxsize=1)
def _checkers():
    from spellchecker import SpellChecker

    near = SpellChecker(distance=1)
    near.word_frequency.load_words(EXTRA_WORDS)
    far = SpellChecker(distance=2)
    far.word_frequency.load_words(EXTRA_WORDS)
    return near, far


def add_words(words) -> None:
    """Words that must never be corrected (the taxonomy's own cue vocabulary)."""
    for checker in _checkers():
        checker.word_frequency.load_words(list(words))
    correct.cache_clear()


def known(word: str) -> bool:
    """Is the word in the word list (or one the taxonomy uses)?"""
    return word in _checkers()[0]


@lru_cache(maxsize=65536)
def correct(word: str) -> str | None:
    """The word, its most likely correction, or None when it is no English word and none is
    near (one edit for up to seven letters, two for longer words). Words under four letters and
    words with digits are returned unchanged."""
    if len(word) < 4 or not word.isalpha() or known(word):
        return word
    near, far = _checkers()
    checker = far if len(word) >= 8 else near
    found = checker.correction(word)
    if found is None:
        return None
    return re.sub(r"[^a-z ]", "", found.lower())

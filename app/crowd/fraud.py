"""Fraud signals in a crowd study, for the study runner to look into; never a decision.

Five signals, each with its evidence (which worker ids, which rounds, which texts):

- **Shared browser.** The game records, for every answered round, a keyed hash of the browser's
  long-lived device cookie (app/leaderboard/integrity.py, `truth_views`). Two participant ids
  whose rounds were answered in one browser are probably one person with two accounts. The same
  browser under another worker id in *another* study is reported too.
- **Copied explanations.** Explanations of different workers that are identical or nearly so
  once case, punctuation and spacing are set aside (difflib's similarity ratio): one at
  STRONG_RATIO, or MIN_ALIKE different ones at SIMILAR_RATIO (`copying_pairs`). Only
  informative explanations count (at least MIN_WORDS words, MIN_DISTINCT distinct words and
  MIN_CHARS characters), so that short common answers ("repetition", "it repeats itself")
  written by many honest readers are never flagged.
- **Faster than reading.** A round answered sooner after one of its sentences appeared than that
  sentence and the ones after it take to read at MAX_WORDS_PER_MINUTE (see `shortfall`). A
  worker is flagged when at least MIN_FAST_ROUNDS rounds and at least half of their answered
  rounds are that fast; one quick round is not enough.

- **Pasted explanations.** The page's script reports when text is pasted or dropped into the
  explanation box (app/game/typing_signals.py); each such round is listed. Pasting one's own notes
  is honest, so this asks a person to look, nothing more.
- **Implausible typing.** An explanation typed faster than MAX_CHARS_PER_SECOND over at least
  MIN_TYPED_CHARS typed characters (from the first keystroke to the answer, so a pause only
  lowers the speed).

What the script reports is the client's word: the server clamps it, and a worker without the
script (or with it blocked) simply has no typing signals.

The functions here are pure and take plain rows; app/crowd/fraud_report.py loads a study's
rows, runs them and keeps the result until the study's rows change.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from difflib import SequenceMatcher
from itertools import combinations

SHARED_DEVICE = "shared_browser"
COPIED_EXPLANATION = "copied_explanation"
FASTER_THAN_READING = "faster_than_reading"
PASTED_EXPLANATION = "pasted_explanation"
IMPLAUSIBLE_TYPING = "implausible_typing"
SIGNALS = {
    SHARED_DEVICE: "same browser as another participant id",
    COPIED_EXPLANATION: "explanation identical or nearly identical to another worker's",
    FASTER_THAN_READING: "answers faster than the text can be read",
    PASTED_EXPLANATION: "text pasted into the explanation box",
    IMPLAUSIBLE_TYPING: "explanation typed faster than a person types",
}

MIN_WORDS = 8
MIN_DISTINCT = 6
MIN_CHARS = 40
SIMILAR_RATIO = 0.85
STRONG_RATIO = 0.95
MIN_ALIKE = 2
SHINGLE = 5
# Only pairs sharing at least this share of their 5-character pieces (Jaccard index) are compared
# character by character; a changed word or two in a pasted text keeps well above it.
CANDIDATE_JACCARD = 0.35
# Brysbaert (2019): adults read English silently at about 238 words a minute; skimming reaches
# 400-700. Reading faster than this is not reading.
MAX_WORDS_PER_MINUTE = 600.0
MIN_FAST_ROUNDS = 3
FAST_SHARE = 0.5
# Fast typists reach 120 words (about 10 characters) a second in bursts; sustained over
# MIN_TYPED_CHARS, more than this is not typing by hand.
MAX_CHARS_PER_SECOND = 15.0
MIN_TYPED_CHARS = 40


@dataclass(frozen=True)
class ExplanationRow:
    participant_id: int
    worker_id: str
    round_id: int
    text: str


@dataclass(frozen=True)
class TimingRow:
    """One answered round: when each revealed sentence appeared and its words, and the answer."""

    participant_id: int
    worker_id: str
    round_id: int
    order_index: int
    shown: tuple[tuple[datetime, int], ...]  # (appeared at, words), in reading order
    answered_at: datetime

    @property
    def words(self) -> int:
        return sum(words for _, words in self.shown)


@dataclass(frozen=True)
class Shortfall:
    """The part of a round read too fast: from sentence `first` (1-based) to the answer."""

    row: TimingRow
    first: int
    words: int
    seconds: float
    floor: float


@dataclass(frozen=True)
class TypingRow:
    """One answered round's explanation and how the page's script saw it entered."""

    participant_id: int
    worker_id: str
    round_id: int
    length: int  # characters of the stored explanation
    pasted: bool | None
    typing_ms: int | None
    typed_chars: int | None


@dataclass(frozen=True)
class DeviceRow:
    """One answered round's browser: `study` and `worker_id` name the participant."""

    participant_id: int
    worker_id: str
    study: str
    round_id: int | None
    device: str


@dataclass(frozen=True)
class Flag:
    signal: str
    summary: str
    other_workers: tuple[str, ...] = ()
    rounds: tuple[int, ...] = ()
    texts: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return SIGNALS[self.signal]


@dataclass
class WorkerFlags:
    participant_id: int
    worker_id: str
    flags: list[Flag] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "participant_id": self.participant_id,
            "worker_id": self.worker_id,
            "flags": [
                {
                    "signal": f.signal,
                    "title": f.title,
                    "summary": f.summary,
                    "other_workers": list(f.other_workers),
                    "rounds": list(f.rounds),
                    "texts": list(f.texts),
                }
                for f in self.flags
            ],
        }


# -- explanations ------------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Lower case, compatibility forms, punctuation and symbols out, single spaces."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("'", "").replace("\u2019", "")
    kept = "".join(
        ch if not unicodedata.category(ch).startswith(("P", "S")) else " " for ch in text
    )
    return re.sub(r"\s+", " ", kept).strip()


def informative(normalised: str) -> bool:
    """Long and varied enough that two workers writing it independently would be a coincidence."""
    words = normalised.split()
    return (
        len(words) >= MIN_WORDS and len(set(words)) >= MIN_DISTINCT and len(normalised) >= MIN_CHARS
    )


def shingles(normalised: str, size: int = SHINGLE) -> frozenset[str]:
    if len(normalised) <= size:
        return frozenset({normalised})
    return frozenset(normalised[i : i + size] for i in range(len(normalised) - size + 1))


def similarity(a: str, b: str) -> float:
    """difflib's ratio between two normalised texts: 1.0 for identical ones."""
    if a == b:
        return 1.0
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


@dataclass(frozen=True)
class CopiedPair:
    first: ExplanationRow
    second: ExplanationRow
    ratio: float


def _candidates(grams: Sequence[frozenset[str]], threshold: float) -> set[tuple[int, int]]:
    """The pairs of sets whose Jaccard index reaches `threshold`, found by prefix filtering:
    with every set's pieces in one order (rarest first), two such sets share a piece among the
    first len - ceil(threshold * len) + 1 of either, so only those pieces are indexed."""
    frequency: dict[str, int] = defaultdict(int)
    for pieces in grams:
        for gram in pieces:
            frequency[gram] += 1
    index: dict[str, list[int]] = defaultdict(list)
    proposed: set[tuple[int, int]] = set()
    for j, pieces in enumerate(grams):
        ordered = sorted(pieces, key=lambda gram: (frequency[gram], gram))
        prefix = ordered[: len(ordered) - math.ceil(threshold * len(ordered)) + 1]
        for gram in prefix:
            for i in index[gram]:
                proposed.add((i, j))
            index[gram].append(j)
    found = set()
    for i, j in proposed:
        size_i, size_j = len(grams[i]), len(grams[j])
        if min(size_i, size_j) < threshold * max(size_i, size_j):
            continue  # too different in length to reach the threshold
        common = len(grams[i] & grams[j])
        if common >= threshold * (size_i + size_j - common):
            found.add((i, j))
    return found


def copied_pairs(rows: Iterable[ExplanationRow]) -> list[CopiedPair]:
    """Informative explanations of *different* workers at SIMILAR_RATIO or above."""
    groups: dict[str, list[ExplanationRow]] = defaultdict(list)
    for row in rows:
        norm = normalise(row.text)
        if informative(norm):
            groups[norm].append(row)
    texts = list(groups)
    grams = [shingles(t) for t in texts]
    candidates = _candidates(grams, CANDIDATE_JACCARD)
    alike = [(i, i, 1.0) for i in range(len(texts))]
    for i, j in candidates:
        ratio = similarity(texts[i], texts[j])
        if ratio >= SIMILAR_RATIO:
            alike.append((i, j, ratio))
    found = []
    for i, j, ratio in alike:
        first, second = groups[texts[i]], groups[texts[j]]
        pairs = combinations(first, 2) if i == j else ((a, b) for a in first for b in second)
        for a, b in pairs:
            if a.participant_id != b.participant_id:
                a, b = (a, b) if a.round_id < b.round_id else (b, a)
                found.append(CopiedPair(a, b, ratio))
    found.sort(key=lambda p: (p.first.round_id, p.second.round_id))
    return found


def copying_pairs(pairs: Iterable[CopiedPair]) -> list[CopiedPair]:
    """The alike pairs of the workers who copied one another: those two workers share one
    explanation at STRONG_RATIO or above (the same text, or one with a word changed), or at least
    MIN_ALIKE different explanations of each at SIMILAR_RATIO or above. Two honest readers can
    put a common complaint in nearly the same words once; not again and again."""
    by_workers: dict[tuple[int, int], list[CopiedPair]] = defaultdict(list)
    for pair in pairs:
        key = tuple(sorted((pair.first.participant_id, pair.second.participant_id)))
        by_workers[key].append(pair)
    kept = []
    for found in by_workers.values():
        strong = any(p.ratio >= STRONG_RATIO for p in found)
        texts = [
            {normalise(r.text) for p in found for r in (p.first, p.second) if r.participant_id == w}
            for w in {found[0].first.participant_id, found[0].second.participant_id}
        ]
        if strong or min(len(t) for t in texts) >= MIN_ALIKE:
            kept.extend(found)
    kept.sort(key=lambda p: (p.first.round_id, p.second.round_id))
    return kept


def explanation_flags(rows: Iterable[ExplanationRow]) -> dict[int, Flag]:
    """Per participant, the copied-explanation flag with the matching workers, rounds and texts."""
    matches: dict[int, list[tuple[ExplanationRow, ExplanationRow, float]]] = defaultdict(list)
    for pair in copying_pairs(copied_pairs(rows)):
        matches[pair.first.participant_id].append((pair.first, pair.second, pair.ratio))
        matches[pair.second.participant_id].append((pair.second, pair.first, pair.ratio))
    flags = {}
    for participant_id, found in matches.items():
        found.sort(key=lambda m: (m[0].round_id, m[1].round_id))
        own = sorted({mine.round_id for mine, _, _ in found})
        others = sorted({theirs.worker_id for _, theirs, _ in found})
        texts = []
        for mine, theirs, ratio in found:
            texts.append(
                f"round {mine.round_id}: {mine.text!r} ~ {theirs.worker_id} round "
                f"{theirs.round_id}: {theirs.text!r} ({ratio:.0%} alike)"
            )
        flags[participant_id] = Flag(
            COPIED_EXPLANATION,
            f"{len(own)} explanation(s) match those of {', '.join(others)}",
            tuple(others),
            tuple(own),
            tuple(texts),
        )
    return flags


# -- reading speed -----------------------------------------------------------------------------


def reading_floor(words: int, words_per_minute: float = MAX_WORDS_PER_MINUTE) -> float:
    """The fewest seconds that reading `words` words takes."""
    return 60.0 * words / words_per_minute


def shortfall(row: TimingRow) -> Shortfall | None:
    """Where the round was answered faster than reading, or None.

    A sentence can only be read after it appears, so every stretch from a sentence's appearance
    to the answer must last at least as long as reading that sentence and all those after it.
    The stretch furthest below that is returned: from the first sentence, the whole round is too
    quick; from a later one, the worker waited and then clicked through without reading.
    """
    worst = None
    words_after = 0
    for index in range(len(row.shown) - 1, -1, -1):
        appeared, words = row.shown[index]
        words_after += words
        seconds = (row.answered_at - appeared).total_seconds()
        floor = reading_floor(words_after)
        if seconds < floor and (worst is None or floor - seconds > worst.floor - worst.seconds):
            worst = Shortfall(row, index + 1, words_after, seconds, floor)
    return worst


def fast_rounds(rows: Iterable[TimingRow]) -> list[Shortfall]:
    """The rounds answered faster than their revealed words can be read."""
    return [found for row in rows if (found := shortfall(row)) is not None]


def speed_flags(rows: Iterable[TimingRow]) -> dict[int, Flag]:
    """Workers with at least MIN_FAST_ROUNDS rounds, and at least FAST_SHARE of their rounds,
    answered faster than reading."""
    by_worker: dict[int, list[TimingRow]] = defaultdict(list)
    for row in rows:
        by_worker[row.participant_id].append(row)
    flags = {}
    for participant_id, own in by_worker.items():
        fast = fast_rounds(sorted(own, key=lambda r: r.order_index))
        if len(fast) < MIN_FAST_ROUNDS or len(fast) < FAST_SHARE * len(own):
            continue
        flags[participant_id] = Flag(
            FASTER_THAN_READING,
            f"{len(fast)} of {len(own)} rounds answered faster than reading at "
            f"{MAX_WORDS_PER_MINUTE:g} words a minute",
            (),
            tuple(f.row.round_id for f in fast),
            tuple(
                f"round {f.row.round_id}: {f.words} words"
                + (f" (sentence {f.first} on)" if f.first > 1 else "")
                + f" in {f.seconds:.1f} s (reading takes at least {f.floor:.1f} s)"
                for f in fast
            ),
        )
    return flags


# -- typing ------------------------------------------------------------------------------------


def typing_problem(row: TypingRow) -> str | None:
    """Why this explanation does not look typed by hand, or None (pure)."""
    typed, ms = row.typed_chars, row.typing_ms
    if typed is not None and typed >= MIN_TYPED_CHARS and ms is not None:
        seconds = ms / 1000
        if seconds <= 0 or typed / seconds > MAX_CHARS_PER_SECOND:
            speed = "instantly" if seconds <= 0 else f"in {seconds:.1f} s ({typed / seconds:.0f}/s)"
            return f"round {row.round_id}: {typed} characters typed {speed}"
    return None


def typing_flags(rows: Iterable[TypingRow]) -> tuple[dict[int, Flag], dict[int, Flag]]:
    """Workers who pasted into the explanation box, and workers whose explanations were typed
    faster than a person types: one flag per worker for each, every round listed (pure)."""
    pasted: dict[int, list[TypingRow]] = defaultdict(list)
    implausible: dict[int, list[tuple[TypingRow, str]]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r.round_id):
        if row.length == 0:
            continue
        if row.pasted:
            pasted[row.participant_id].append(row)
        if (problem := typing_problem(row)) is not None:
            implausible[row.participant_id].append((row, problem))
    paste_flags = {
        pid: Flag(
            PASTED_EXPLANATION,
            f"pasted into {len(own)} explanation{'' if len(own) == 1 else 's'}",
            (),
            tuple(r.round_id for r in own),
        )
        for pid, own in pasted.items()
    }
    typing = {
        pid: Flag(
            IMPLAUSIBLE_TYPING,
            f"{len(own)} explanation{'' if len(own) == 1 else 's'} typed at more than "
            f"{MAX_CHARS_PER_SECOND:g} characters a second over at least {MIN_TYPED_CHARS}",
            (),
            tuple(r.round_id for r, _ in own),
            tuple(problem for _, problem in own),
        )
        for pid, own in implausible.items()
    }
    return paste_flags, typing


# -- browsers ----------------------------------------------------------------------------------


def device_flags(rows: Iterable[DeviceRow], study: str) -> dict[int, Flag]:
    """Participants of `study` whose browser also answered under another worker id: in this
    study (another participant id) or in another study (a different worker id there)."""
    # Per browser, its participants: (worker id, study) and the rounds answered in it.
    by_device: dict[str, dict[int, tuple[str, str]]] = defaultdict(dict)
    answered_in: dict[tuple[str, int], set[int]] = defaultdict(set)
    for row in rows:
        by_device[row.device][row.participant_id] = (row.worker_id, row.study)
        if row.round_id is not None:
            answered_in[(row.device, row.participant_id)].add(row.round_id)
    others: dict[int, set[str]] = defaultdict(set)
    rounds: dict[int, set[int]] = defaultdict(set)
    for device, members in by_device.items():
        for mine, (my_worker, my_study) in members.items():
            if my_study != study:
                continue
            for theirs, (their_worker, their_study) in members.items():
                if theirs == mine:
                    continue
                if their_study != study and their_worker == my_worker:
                    continue  # the same worker in another study: allowed
                others[mine].add(
                    their_worker
                    if their_study == study
                    else f"{their_worker} (study {their_study})"
                )
                rounds[mine] |= answered_in[(device, mine)]
    return {
        participant_id: Flag(
            SHARED_DEVICE,
            f"rounds answered in a browser also used by {', '.join(sorted(labels))}",
            tuple(sorted(labels)),
            tuple(sorted(rounds[participant_id])),
        )
        for participant_id, labels in others.items()
    }


def combine(workers: Sequence[tuple[int, str]], *flag_sets: dict[int, Flag]) -> list[WorkerFlags]:
    """The flagged workers, in the order given, each with their flags in signal order."""
    result = []
    for participant_id, worker_id in workers:
        flags = [found[participant_id] for found in flag_sets if participant_id in found]
        if flags:
            result.append(WorkerFlags(participant_id, worker_id, flags))
    return result

"""Where attention checks go in a worker's rounds, and of which kind. Pure: no Flask, no database.

Two kinds of check:
- INSIDE ("inside a text"): one sentence at a random position (never the first) tells the worker
  to mark it as machine-written; the right answer is exactly that sentence. Pressing "human" to the
  end fails it, and so does flagging the first sentence at once.
- CHECK ("all human"): the first sentence tells the worker to answer that the whole text is
  human-written. Only a worker who flags sentences without reading fails it.
"""

from __future__ import annotations

import hashlib
import random

NORMAL = "normal"
CHECK = "check"  # an all-human instructed text (the name older schedules use)
INSIDE = "inside_check"
# A check put in for one the worker answered before its evidence was shown: an all-human
# instructed text, whose instruction is the first sentence, so no answer comes before it.
# SPARE takes the place of a normal round; SPARE_ADDED is one more round, when none was left.
SPARE = "spare_check"
SPARE_ADDED = "spare_check_added"
CHECK_KINDS = (CHECK, INSIDE, SPARE, SPARE_ADDED)
PASS, FAIL, VOID = "pass", "fail", "void"


def check_verdict(check: str, guess: int, boundary: int) -> str:
    """Whether an answered attention check counts, and how.

    `check` is the check's kind ("inside" or "all_human"); `guess` the sentence the worker
    flagged (0-based; the text's length for "all human"), `boundary` the check's right answer.
    An inside check's evidence is its check sentence, at `boundary`: a worker who flagged an
    earlier sentence answered before it was shown, so the check is void (neither passed nor
    failed). An all-human check's instruction is the first sentence, always shown.
    """
    if guess == boundary:
        return PASS
    if check == "inside" and guess < boundary:
        return VOID
    return FAIL


def spare_slot(plan: list[str], done: int, required: int) -> list[str] | None:
    """The plan with one spare check put in for a void one: in the worker's next normal round
    among the required ones (the soonest place they reach), else as one more round right
    away (also when the void check was the last required round). None when `done` is past
    the required rounds (the void check was an optional extra round)."""
    if done > required:
        return None
    new = list(plan)
    for slot in range(done, required):
        if new[slot] == NORMAL:
            new[slot] = SPARE
            return new
    new.insert(done, SPARE_ADDED)
    return new


def checks_left(plan: list[str], done: int, required: int) -> int:
    """Check slots the worker has still to play among the required rounds."""
    return sum(kind in CHECK_KINDS for kind in plan[done:required])


def check_count(rounds: int, rate: float) -> int:
    """round(rate × rounds), with halves rounded up (Python's round() would round 0.5 to even)."""
    if rounds < 0:
        raise ValueError("the number of rounds cannot be negative")
    if not 0 <= rate < 1:
        raise ValueError("the attention-check rate must be in [0, 1)")
    return min(int(rate * rounds + 0.5), rounds)


def check_mix(rounds: int, rate: float, all_human: int) -> tuple[int, int]:
    """(all-human checks, inside-text checks) among a worker's required rounds."""
    checks = check_count(rounds, rate)
    human = min(all_human, checks)
    return human, checks - human


def worker_seed(study_slug: str, worker_id: str) -> int:
    digest = hashlib.sha256(f"{study_slug}\x00{worker_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _block(rounds: int, human: int, inside: int, rng: random.Random) -> list[str]:
    kinds = [CHECK] * human + [INSIDE] * inside
    rng.shuffle(kinds)
    positions = sorted(rng.sample(range(rounds), len(kinds)))
    plan = [NORMAL] * rounds
    for position, kind in zip(positions, kinds, strict=True):
        plan[position] = kind
    return plan


def attention_schedule(
    rounds: int, rate: float, seed: int, all_human: int = 0, extra: int = 0
) -> list[str]:
    """Slot kinds in play order for `rounds` required rounds and `extra` optional ones.

    The required rounds hold exactly check_mix() checks at random positions, so every worker sees
    the same number of each kind; the optional rounds get their own inside-text checks at the same
    rate. The same seed gives the same schedule, so a returning worker sees the same plan.
    """
    if rounds < 1:
        raise ValueError("a study needs at least one round")
    rng = random.Random(seed)
    human, inside = check_mix(rounds, rate, all_human)
    plan = _block(rounds, human, inside, rng)
    if extra:
        plan += _block(extra, 0, check_count(extra, rate), rng)
    return plan


def check_position(n_sentences: int, rng: random.Random) -> int:
    """Where an inside-text check sentence goes: from the third sentence on. The first is always
    human, and the second is the first a worker may flag, so a worker who flags at the first
    chance never lands on the check by luck."""
    if n_sentences < 3:
        raise ValueError("an inside-text check needs a text of at least three sentences")
    return rng.randrange(2, n_sentences)


def check_rounds(answers: list[tuple[str | None, int, int]]) -> dict[str, list[int]]:
    """Round numbers (1-based, in play order) of the checks passed, failed and void, from the
    worker's answered rounds as (check kind, or None for a round that is no check; guess;
    boundary)."""
    found: dict[str, list[int]] = {PASS: [], FAIL: [], VOID: []}
    for number, (check, guess, boundary) in enumerate(answers, start=1):
        if check is not None:
            found[check_verdict(check, guess, boundary)].append(number)
    return found


def _numbers(rounds: list[int]) -> str:
    text = [str(n) for n in rounds]
    if len(text) < 2:
        return "".join(text)
    return ", ".join(text[:-1]) + " and " + text[-1]


def failed_checks_text(failed: list[int], counted: int) -> str:
    """What a worker who failed checks is told on the finish page, and the reason their
    rejection carries: the same words, from here."""
    rounds = "round" if len(failed) == 1 else "rounds"
    return (
        f"You did not follow the instruction of {len(failed)} of the {counted} attention checks "
        f"that counted (in {rounds} {_numbers(failed)} of the study). Checks you answered before "
        "their instruction was shown did not count against you."
    )

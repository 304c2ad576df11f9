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
CHECK_KINDS = (CHECK, INSIDE)


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

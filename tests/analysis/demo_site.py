"""A fresh export of the demo site, built as a researcher would: `flask load-demo`, players who
play through the game service (honest, lazy, random) on a simulated clock, then `flask export`.

Nothing here knows how many texts the demo set has: players pick texts the way the site does
("random" category), and the expectations of the tests come from the export itself.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

from app.extensions import db
from app.game import answers, reveals, starts
from app.models.base import utcnow
from tests import factories
from tests.factories import Clock

# What players write, in their own words (colloquial, misspelt, non-reasons).
EXPLANATIONS = (
    "doesnt make sense",
    "repeats the same thing twice",
    "idk",
    "just a guess",
    "that's not how taxes work",
    "sounds robotic",
    "weird change of topic",
    "the name changed from anna to maria",
    "",
)
REASONS = ("grammar", "repetition", "irrelevant", "generic", "common_sense", "hunch")


def use_clock(monkeypatch) -> Clock:
    """The site's clock, moved on by the simulated players (each reads for a while)."""
    return factories.use_clock(monkeypatch, start=datetime(2026, 10, 5, 9, 0, tzinfo=UTC))


def _choice(style: str, boundary: int, n: int, rng: random.Random) -> int:
    """The sentence (1-based position in the boundary convention) a player of `style` flags;
    n means all human."""
    if style == "lazy":
        return n  # reads to the end and says "all human"
    if style == "random":
        return rng.randint(1, n)
    # honest: usually near the boundary, sometimes a little late, sometimes fooled
    if boundary >= n:
        return n if rng.random() < 0.6 else rng.randint(2, n)
    roll = rng.random()
    if roll < 0.4:
        return boundary
    if roll < 0.8:
        return min(n, boundary + rng.randint(1, 2))
    return rng.randint(1, n)


def play(player, style: str, count: int, clock: Clock, rng: random.Random, rare: int = 0) -> int:
    """`player` plays up to `count` rounds; returns how many were answered. The first `rare`
    machine answers cite a reason few rounds cite (coreference), so the data always holds one."""
    played = 0
    for _ in range(count):
        try:
            round_ = factories.started(player, "random")
        except starts.NoExamplesLeft:  # the player has read every text: stop, as a player does
            break
        example = round_.example
        n = example.n_sentences
        guess = max(1, _choice(style, example.boundary, n, rng))
        target = n if guess >= n else guess + 1
        seconds = 1.5 if style == "random" else 6.0
        while round_.revealed < target:
            clock.advance(seconds + rng.random() * 3)
            round_ = reveals.reveal_next(player, round_.id, round_.revealed)
        clock.advance(2 + rng.random() * 3)
        if guess >= n:
            answer = answers.parse_answer("human", round_.revealed, [], "")
        else:
            reasons = [rng.choice(REASONS)] if style != "random" else ["hunch"]
            explanation = rng.choice(EXPLANATIONS)
            if rare > 0:
                reasons, explanation, rare = ["coreference"], "who is maria??", rare - 1
            answer = answers.parse_answer("machine", round_.revealed, reasons, explanation)
        answers.submit_answer(player, round_.id, answer)
        played += 1
        clock.advance(5 + rng.random() * 20)
    return played


def build(app, clock: Clock, out: Path, seed: int = 0, rounds_each: int = 12) -> Path:
    """Load the demo set, let 6 honest, 3 lazy and 3 random players play, and export (CSV)."""
    rng = random.Random(seed)
    runner = app.test_cli_runner()
    loaded = runner.invoke(args=["load-demo", "--reserve-daily", "0"])
    assert loaded.exit_code == 0, loaded.output
    styles = ["honest"] * 6 + ["lazy"] * 3 + ["random"] * 3
    for number, style in enumerate(styles):
        player = factories.player()
        player.research_consent_at = utcnow()
        db.session.commit()
        play(player, style, rounds_each, clock, rng, rare=3 if number == 0 else 0)
        clock.advance(3600)
    exported = runner.invoke(args=["export", str(out)])
    assert exported.exit_code == 0, exported.output
    return out

"""The guided first round: one obvious text with a note at every step. Pure.

The text is public and fixed, so the tutorial is stateless pages (`/tutorial?step=K`) and needs
no round in the database; it scores with the same rule as the game.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.game.scoring import verdict

SENTENCES: tuple[str, ...] = (
    "Homemade lemonade takes about ten minutes and needs only lemons, sugar, water and ice.",
    "Start by rolling four lemons firmly on the counter, which loosens the juice inside.",
    "Cut them in half and squeeze them into a jug, catching the seeds with a small sieve.",
    "Stir in 100 grams of sugar and a cup of warm water until the sugar has dissolved.",
    "The lemons should then be baked at 220 degrees for forty minutes until the water is crispy.",
    "Lemonade was first invented by lemonade makers who wanted to make lemonade.",
    "Serve the lemonade with lemonade and enjoy the lemonade with your lemonade.",
    "Many people enjoy it and it is very popular and it is enjoyed by many people.",
    "Add the ice cubes to the oven so that they melt into a fine white powder.",
    "This recipe serves four people or one very large dog.",
)
# Sentence 5 (index 4) is where the language model takes over.
BOUNDARY = 4
N = len(SENTENCES)

NOTES: tuple[str, ...] = (
    "The first sentence is always written by a person. Read it, then ask for the next one.",
    "This one follows naturally from the first: a clear, specific step. Still human.",
    "Each sentence builds on the one before it, with concrete details. Nothing odd yet.",
    "Still sensible: sugar dissolved in warm water is how lemonade gets sweet.",
    "Baking lemons until the water is crispy? That makes no sense. This is where a machine "
    "took over: say so now.",
)
LATE_NOTE = (
    "You have read past the change. Every sentence late costs a point, so flag the first odd "
    "sentence as soon as you see it."
)


@dataclass(frozen=True)
class Step:
    number: int
    sentences: tuple[str, ...]
    note: str

    @property
    def last(self) -> bool:
        return self.number == N - 1


def step(number: int) -> Step:
    """The page after `number + 1` sentences are shown (clamped to the text)."""
    number = min(max(number, 0), N - 1)
    note = NOTES[number] if number < len(NOTES) else LATE_NOTE
    return Step(number, SENTENCES[: number + 1], note)


@dataclass(frozen=True)
class Outcome:
    """What the tutorial says after a "machine" (or "all human") answer."""

    guess: int
    points: int
    finished: bool
    message: str


def answer(guess: int) -> Outcome:
    """The tutorial's answer to flagging sentence `guess` (N: "all human")."""
    guess = min(max(guess, 1), N)
    result = verdict(guess, BOUNDARY, N)
    if result.too_early:
        message = (
            f"Not yet: sentence {guess + 1} was still written by a person. In the game, a call "
            "that comes too early scores 0 points and ends the round, so here you may read on."
        )
        return Outcome(guess, 0, False, message)
    if result.exact:
        message = (
            "Exactly right: 5 points. The machine took over at sentence 5, and you flagged it "
            "straight away."
        )
    else:
        late = guess - BOUNDARY
        message = (
            f"{late} sentence{'s' if late != 1 else ''} late: {result.points} point"
            f"{'s' if result.points != 1 else ''}. The machine took over at sentence "
            f"{BOUNDARY + 1}; flagging it right away earns 5."
        )
    return Outcome(guess, result.points, True, message)

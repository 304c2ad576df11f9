"""The reasons a player can give for calling a sentence machine-written (pure).

RoFT's eight (`REASON_NAMES`, the labels the analysis taxonomy uses), plus our "hunch": a one-tap
way to say "no particular reason", so that a player need not pick a reason they do not hold.
"""

from __future__ import annotations

REASONS: dict[str, tuple[str, str]] = {
    "grammar": ("Grammar", "Ungrammatical or badly punctuated."),
    "repetition": ("Repetition", "Repeats words, phrases or ideas."),
    "irrelevant": ("Irrelevant", "Off topic or unrelated to what came before."),
    "contradicts_sentence": (
        "Contradicts an earlier sentence",
        "Says something that clashes with an earlier sentence.",
    ),
    "contradicts_knowledge": (
        "Contradicts known facts",
        "Gets the world wrong: facts, dates, places, how things work.",
    ),
    "common_sense": ("Common-sense error", "Describes something that could not plausibly happen."),
    "coreference": ("Mixes up people or things", "Confuses who or what is being talked about."),
    "generic": ("Generic or bland", "Vague filler that could appear in any text."),
}
REASON_NAMES: tuple[str, ...] = tuple(REASONS)
HUNCH = "hunch"
REASONS[HUNCH] = ("Just a hunch", "No single reason: it just reads as machine-written.")

MAX_EXPLANATION_CHARS = 2000


def clean_reasons(values: list[str]) -> list[str]:
    """Known reason keys in the canonical order, duplicates removed; unknown keys raise."""
    unknown = sorted(set(values) - REASONS.keys())
    if unknown:
        raise ValueError(f"unknown reason: {', '.join(unknown)}")
    chosen = set(values)
    return [key for key in REASONS if key in chosen]

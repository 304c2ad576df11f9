"""The optional player survey: RoFT's five questions, and the validation of a submitted form.

Every question may be left unanswered ("Prefer not to say"); an answer is stored as its number
and exported as is, with -1 for a question not answered (see app/research/export_schema.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.errors import BadRequest

FAMILIARITY = (
    "Not at all familiar",
    "Slightly familiar",
    "Somewhat familiar",
    "Quite familiar",
    "Very familiar",
)


@dataclass(frozen=True)
class Question:
    name: str  # the form field and the column of `player_surveys` and of the export
    text: str
    options: tuple[tuple[int, str], ...]  # (stored value, label)


QUESTIONS: tuple[Question, ...] = (
    Question(
        "news_familiarity",
        "How familiar are you with news articles?",
        tuple(enumerate(FAMILIARITY, start=1)),
    ),
    Question(
        "stories_familiarity",
        "How familiar are you with short stories and fiction?",
        tuple(enumerate(FAMILIARITY, start=1)),
    ),
    Question(
        "recipe_familiarity",
        "How familiar are you with cooking recipes?",
        tuple(enumerate(FAMILIARITY, start=1)),
    ),
    Question(
        "gen_familiarity",
        "How familiar are you with AI text generators (such as GPT-2 or ChatGPT)?",
        (
            (1, "I had never heard of them"),
            (2, "I have heard of them but not used them"),
            (3, "I have used them"),
            (4, "I work with them or study them"),
        ),
    ),
    Question(
        "native_speaker",
        "Is English your native language?",
        ((1, "Yes"), (0, "No")),
    ),
)
NAMES = tuple(question.name for question in QUESTIONS)


def parse_answers(form: Mapping[str, str]) -> dict[str, int | None]:
    """The answers in a submitted form, None where not given; BadRequest for any other value."""
    answers: dict[str, int | None] = {}
    for question in QUESTIONS:
        raw = form.get(question.name) or ""
        if raw == "":
            answers[question.name] = None
            continue
        allowed = {str(value): value for value, _ in question.options}
        if raw not in allowed:
            raise BadRequest(
                f'Please choose one of the answers offered to "{question.text}" '
                "(or \u201cPrefer not to say\u201d)."
            )
        answers[question.name] = allowed[raw]
    return answers

"""Players' comments for the coder-validation tests, written by the team: each with the main
class a researcher gives it."""

from __future__ import annotations

from datetime import UTC, datetime

from app.extensions import db
from app.models import Round
from tests import factories

TEMPLATES: tuple[tuple[str, str], ...] = (
    ("it repeats the {} line twice", "repetition"),
    ("talks about {} out of nowhere", "irrelevant"),
    ("{} is spelled wrong and the grammar is off", "grammar"),
    ("first the {} was red, now it is blue", "contradicts_sentence"),
    ("a {} cannot fly, that makes no sense", "common_sense"),
    ("who is he? the {} was a she", "coreference"),
    ("the {} bit is vague filler", "generic"),
    ("idk, the {} part felt like a guess", "not_a_reason"),
    # The coder reads this as tone ("other"); the researchers call it generic filler.
    ("reads like a press release about the {}", "generic"),
)
SUBJECTS = ("mayor", "recipe", "dog", "river", "teacher", "storm", "market", "garden", "train")


def comment_labels() -> dict[str, str]:
    """81 unique comments and the class a careful reader gives each."""
    return {t.format(s): label for t, label in TEMPLATES for s in SUBJECTS}


def seed_rounds(players: int = 12) -> dict[str, str]:
    """Answered rounds carrying the comments (news and stories texts), with reason chips."""
    labels = comment_labels()
    texts = sorted(labels)
    examples = [factories.example(category_slug="news" if i % 3 else "stories") for i in range(8)]
    now = datetime.now(UTC)
    k = 0
    for p in range(players):
        who = factories.player(f"v{p}")
        for order, example in enumerate(examples[:7], start=1):
            text = texts[k % len(texts)]
            k += 1
            chip = labels[text] if labels[text] in ("repetition", "irrelevant", "grammar") else None
            db.session.add(
                Round(
                    player_id=who.id,
                    example_id=example.id,
                    order_index=order,
                    chosen_category="random",
                    revealed=5,
                    guess=5,
                    points=4,
                    reasons=[chip] if chip else [],
                    explanation=text,
                    started_at=now,
                    answered_at=now,
                )
            )
    db.session.commit()
    return labels

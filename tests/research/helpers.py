"""Play rounds through the game service, as the site does."""

from __future__ import annotations

from app.extensions import db
from app.game import answers, reveals
from app.models import Player
from app.models.base import utcnow
from tests import factories


def consent(player: Player) -> Player:
    player.research_consent_at = utcnow()
    db.session.commit()
    return player


def play(player: Player, guess: int, reasons=("irrelevant",), explanation: str = "") -> int:
    """Start a round, reveal up to the guess and answer; returns the stored points."""
    round_ = factories.started(player, "random")
    n = round_.example.n_sentences
    target = n if guess >= n else guess + 1
    while round_.revealed < target:
        round_ = reveals.reveal_next(player, round_.id, round_.revealed)
    if guess >= n:
        answer = answers.parse_answer("human", round_.revealed, [], explanation)
    else:
        answer = answers.parse_answer("machine", round_.revealed, list(reasons), explanation)
    return answers.submit_answer(player, round_.id, answer).points

"""The crowd studies' part in the game's rounds, connected to the game's hooks (app/game/hooks.py)
when the app is made: the game itself knows nothing of studies."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlalchemy import select

from app.crowd import admission, lookup
from app.crowd.ratings import ratings_from, store_ratings
from app.crowd.serving import round_context
from app.crowd.verdicts import record_answer
from app.extensions import db
from app.game import hooks
from app.models import Participant, Player, Round


def _answer_stored(round_: Round, passed: bool) -> None:
    if round_.participant_id is not None:
        record_answer(round_.participant_id, round_.kind, passed)


def _answer_form(round_: Round, form: Mapping, flagged: bool) -> Callable[[], None] | None:
    """A study may ask for ratings of the flagged sentence before the truth is shown."""
    if not flagged:
        return None
    ratings = ratings_from(round_, "before", form)
    if ratings is None:
        return None
    return lambda: store_ratings(round_.id, ratings)


def _round_page(round_: Round) -> dict:
    return round_context(round_) if round_.participant_id is not None else {}


def _reveal_asked(player: Player) -> dict | None:
    """A worker out of time, or marked returned, reveals no more sentences (their answer would
    be refused too: verdicts.record_answer); they see the page that says why, instead."""
    if getattr(player, "kind", None) != "crowd":
        return None
    participant = db.session.scalar(select(Participant).where(Participant.player_id == player.id))
    if participant is None:
        return None
    admission.check_time(participant)
    if participant.status not in lookup.LEFT:
        return None
    study = participant.study
    return {
        "template": "crowd/left.html",
        "study": study,
        "config": lookup.config_of(study),
        "participant": participant,
    }


def connect() -> None:
    """Join the game's hooks (called by create_app; calling it again changes nothing)."""
    hooks.answer_stored.connect(_answer_stored)
    hooks.answer_form.connect(_answer_form)
    hooks.round_page.connect(_round_page)
    hooks.reveal_asked.connect(_reveal_asked)

"""Likert ratings of study rounds: which to ask, parsing and storing them."""

from __future__ import annotations

import dataclasses

from sqlalchemy import update

from app.crowd.config import StudyConfig
from app.crowd.lookup import config_of
from app.errors import BadRequest, Conflict
from app.extensions import db
from app.models import (
    Participant,
    Round,
)
from app.models.rounds import NORMAL_ROUND


def parse_ratings(config: StudyConfig, values) -> dict[str, int]:
    """1–5 for every configured criterion, or BadRequest naming the missing one."""
    ratings = {}
    for criterion in config.likert:
        raw = values.get(f"rating_{criterion.name}", "")
        if raw not in {"1", "2", "3", "4", "5"}:
            raise BadRequest(f"Please rate “{criterion.question}” from 1 to 5.")
        ratings[criterion.name] = int(raw)
    return ratings


def store_ratings(round_id: int, ratings: dict[str, int]) -> None:
    """Keep the first ratings given for a round; a replay changes nothing."""
    db.session.execute(
        update(Round).where(Round.id == round_id, Round.ratings.is_(None)).values(ratings=ratings)
    )
    db.session.commit()


def ratings_from(round_: Round, moment: str, values) -> dict[str, int] | None:
    """The ratings in `values` if this study round asks for them at `moment` ("before"/"after"
    the reveal) and has none yet; None when it does not ask. BadRequest if one is missing."""
    if round_.participant_id is None or round_.kind != NORMAL_ROUND or round_.ratings is not None:
        return None
    config = config_of(round_.participant.study)
    if not config.likert or config.likert_when != moment:
        return None
    return parse_ratings(config, values)


def save_ratings(participant: Participant, round_: Round, values) -> None:
    """Ratings given after the reveal, sent with the worker's "Next"."""
    if round_.participant_id != participant.id or round_.guess is None:
        raise Conflict("Ratings can be given only after answering this round.")
    ratings = ratings_from(round_, "after", values)
    if ratings is not None:
        store_ratings(round_.id, ratings)


def criteria(config: StudyConfig, round_: Round) -> list:
    """The criteria to ask now, each worded for what there is to rate: after an "all human"
    answer no sentence was flagged, and an all-human text has no machine-written part."""
    if round_.kind != NORMAL_ROUND or round_.ratings is not None:
        return []
    if not round_.answered:
        return config.likert
    example = round_.example
    said_human = round_.guess == example.n_sentences
    no_machine = example.boundary == example.n_sentences
    return [
        dataclasses.replace(
            c, question=c.wording(said_human if c.target == "flagged" else no_machine)
        )
        for c in config.likert
    ]

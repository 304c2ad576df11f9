"""The crowd-study service, as one name: re-exports of the modules it is made of.

New code imports the module it needs:
- lookup: studies and workers, FINISHED and LEFT;
- pool: a study's texts and attention checks;
- admin: create, edit, open or close, delete a study;
- admission: entry, places, time limits, returns, instructions and comprehension;
- slots: each worker's schedule, texts included, computed at entry and stored;
- serving: each worker's rounds from their stored schedule, and the round page;
- verdicts: answers, attention-check verdicts, spare checks, outcomes and completion codes;
- ratings: Likert ratings of rounds.
The game reaches the studies only through its hooks (app/crowd/hooks.py).
"""

from __future__ import annotations

from app.crowd.admin import LOCKED_ONCE_JOINED, create_study, delete_study, edit_study, set_open
from app.crowd.admission import (
    COMPREHENSION_TRIES,
    answer_comprehension,
    check_time,
    comprehension_pending,
    deadline,
    enter,
    expire_overdue,
    finish_instructions,
    mark_left,
    places_taken,
)
from app.crowd.lookup import (
    FINISHED,
    LEFT,
    config_of,
    find_participant,
    get_study,
    participant_count,
)
from app.crowd.pool import CHECK_INSTRUCTION, CHECK_SYSTEM, INSIDE_INSTRUCTION
from app.crowd.ratings import parse_ratings, ratings_from, save_ratings, store_ratings
from app.crowd.serving import (
    SLOT_POOLS,
    RatingsPending,
    extra_rounds_left,
    next_round,
    open_round,
    pending_ratings,
    practice_pending,
    required_rounds,
    round_context,
    slot_progress,
    truth_hidden,
)
from app.crowd.verdicts import (
    completion_code,
    completion_url,
    failed_checks_message,
    record_answer,
)

__all__ = [
    "CHECK_INSTRUCTION", "CHECK_SYSTEM", "COMPREHENSION_TRIES", "FINISHED", "INSIDE_INSTRUCTION",
    "LEFT", "LOCKED_ONCE_JOINED", "SLOT_POOLS", "RatingsPending", "answer_comprehension",
    "check_time", "completion_code", "completion_url", "comprehension_pending", "config_of",
    "create_study", "deadline", "delete_study", "edit_study", "enter", "expire_overdue",
    "extra_rounds_left", "failed_checks_message", "find_participant", "finish_instructions",
    "get_study", "mark_left", "next_round", "open_round", "parse_ratings", "participant_count",
    "pending_ratings", "places_taken", "practice_pending", "ratings_from", "record_answer",
    "required_rounds", "round_context", "save_ratings", "set_open", "slot_progress",
    "store_ratings", "truth_hidden",
]  # fmt: skip

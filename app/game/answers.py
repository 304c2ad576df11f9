"""The game service: check an answer and store it, once, with its points.

Every function owns its transaction. Points come from the stored boundary and the sentences the
server revealed, never from the client. The answer is counted on its text (the annotation count)
and in its set's running figures in the same transaction.

Part of the round core, which app/game/rounds.py describes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Boolean, Integer, bindparam, case, text, update

from app.errors import BadRequest, Conflict, NotFound
from app.extensions import commit_keeping, db, retrying
from app.game import hooks
from app.game import reasons as reason_catalogue
from app.game.reveals import REVEAL_VIEW, RevealView, reveal_fields
from app.game.rounds import MAX_ID, in_one_statement
from app.game.scoring import Verdict, verdict
from app.game.tables import CATEGORIES, EXAMPLES, ROUNDS, SETS
from app.game.typing_signals import NOT_REPORTED, Typing
from app.leaderboard import integrity, recording, standings
from app.models import Example, GameSet, Player, Round
from app.models.base import UTCDateTime, utcnow
from app.models.rounds import NORMAL_ROUND

# How sure a player may say they are of a guess, in percent (optional).
CONFIDENCE_LEVELS = (50, 70, 90)

# The statements of an answer, built once (see app/game/rounds.py); parameters are bound by name.
# They write to the tables: the service puts the new values onto the loaded objects itself.
_ANSWER_FIELDS = (
    "guess",
    "points",
    "reasons",
    "explanation",
    "answered_at",
    "uncounted",
    "explanation_pasted",
    "typing_ms",
    "typed_chars",
    "confidence",
)
_STORE_ANSWER = (
    update(Round.__table__)
    .where(
        ROUNDS.id == bindparam("round_id"),
        ROUNDS.guess.is_(None),
        ROUNDS.revealed == bindparam("seen"),
    )
    .values({name: bindparam(f"new_{name}") for name in _ANSWER_FIELDS})
)
_ANNOTATED = (
    update(Example.__table__)
    .where(EXAMPLES.id == bindparam("example_id"))
    .values(annotation_count=EXAMPLES.annotation_count + 1)
)


@dataclass(frozen=True)
class AnswerView(RevealView):
    """A round as an answer reads, stores and shows it, from one row (`preload_answer`): the
    reveal's columns, the round's answer and the text's truth. No ORM objects but the player."""

    points: int | None
    reasons: list
    explanation: str
    uncounted: str | None
    started_at: datetime
    chosen_category: str
    example_id: int
    boundary: int
    decoding: dict | None
    system_label: str | None
    category_id: int
    category_slug: str


# The round for an answer with its player, the reveal's row and a few columns more.
_ANSWER_VIEW = REVEAL_VIEW.add_columns(
    ROUNDS.points,
    ROUNDS.reasons,
    ROUNDS.explanation,
    ROUNDS.uncounted,
    ROUNDS.started_at,
    ROUNDS.chosen_category,
    ROUNDS.example_id,
    EXAMPLES.boundary,
    EXAMPLES.decoding,
    EXAMPLES.system_label,
    EXAMPLES.category_id,
    CATEGORIES.slug.label("category_slug"),
)


def view_of(round_: Round) -> AnswerView:
    """The state of a round loaded as ORM objects (`rounds.get_round`: with its text, category
    and set), as `preload_answer` reads it from one row."""
    example = round_.example
    game_set = round_.game_set if round_.set_id is not None else None
    return AnswerView(
        id=round_.id,
        player_id=round_.player_id,
        kind=round_.kind,
        participant_id=round_.participant_id,
        revealed=round_.revealed,
        guess=round_.guess,
        sentences=example.sentences,
        n_sentences=example.n_sentences,
        category_name=example.category.name,
        set_id=game_set.id if game_set is not None else None,
        set_kind=game_set.kind if game_set is not None else None,
        set_number=round_.set_number if game_set is not None else None,
        set_size=game_set.size if game_set is not None else None,
        set_points=game_set.points if game_set is not None else None,
        set_answered=game_set.answered if game_set is not None else None,
        set_finished=game_set is not None and game_set.finished_at is not None,
        set_day=game_set.day if game_set is not None else None,
        set_level=game_set.level if game_set is not None else None,
        order_index=round_.order_index,
        points=round_.points,
        reasons=round_.reasons,
        explanation=round_.explanation,
        uncounted=round_.uncounted,
        started_at=round_.started_at,
        chosen_category=round_.chosen_category,
        example_id=example.id,
        boundary=example.boundary,
        decoding=example.decoding,
        system_label=example.system_label,
        category_id=example.category_id,
        category_slug=example.category.slug,
    )


def preload_answer(round_id: int) -> tuple[Player, AnswerView] | None:
    """`preload_reveal` for an answer: the round as one row of columns and its player as an ORM
    object (the session's version is still checked, another player's round still refused)."""
    if not 0 < round_id <= MAX_ID:
        return None
    row = db.session.execute(_ANSWER_VIEW, {"round_id": round_id}).first()
    if row is None:
        return None
    return row.Player, AnswerView(
        **reveal_fields(row),
        points=row.points,
        reasons=row.reasons,
        explanation=row.explanation,
        uncounted=row.uncounted,
        started_at=row.started_at,
        chosen_category=row.chosen_category,
        example_id=row.example_id,
        boundary=row.boundary,
        decoding=row.decoding,
        system_label=row.system_label,
        category_id=row.category_id,
        category_slug=row.category_slug,
    )


@dataclass(frozen=True)
class Answer:
    """What the client may say: "machine" for the latest sentence, or "human" for the whole text."""

    choice: str
    seen: int
    reasons: list[str]
    explanation: str
    # How sure the player said they were, in percent; None when they did not say.
    confidence: int | None = None
    # How the explanation was entered, as the page's script reported it (signals only).
    typing: Typing = NOT_REPORTED


def parse_answer(
    choice: str,
    seen: str | int,
    reasons: list[str],
    explanation: str,
    confidence: str | None = None,
) -> Answer:
    """Validate raw form values; raise BadRequest with a message a player can act on."""
    if choice not in ("machine", "human"):
        raise BadRequest("Say either “a machine wrote this sentence” or “all human”.")
    try:
        seen_n = int(seen)
    except (TypeError, ValueError):
        raise BadRequest("The answer did not say which sentence it is about.") from None
    try:
        clean = reason_catalogue.clean_reasons(reasons)
    except ValueError as error:
        raise BadRequest(str(error).capitalize() + ".") from None
    text = (explanation or "").strip()
    if "\x00" in text:
        raise BadRequest("The explanation contains a NUL character; please remove it.")
    if len(text) > reason_catalogue.MAX_EXPLANATION_CHARS:
        raise BadRequest(
            f"Please keep the explanation under {reason_catalogue.MAX_EXPLANATION_CHARS} "
            "characters."
        )
    if choice == "machine" and not clean and not text:
        raise BadRequest("Choose at least one reason or write a short explanation.")
    sure = None
    if confidence:
        levels = {str(level): level for level in CONFIDENCE_LEVELS}
        if confidence not in levels:
            raise BadRequest("Say how sure you are as 50%, 70% or 90%, or leave it out.")
        sure = levels[confidence]
    return Answer(choice=choice, seen=seen_n, reasons=clean, explanation=text, confidence=sure)


class AlreadyAnswered(Conflict):
    """A repeated answer: the stored result stands and nothing changed."""

    def __init__(self, view: AnswerView):
        super().__init__("You already answered this round; here is your result.")
        self.round = view


def own_round(player: Player, round_id: int, view: AnswerView | None = None) -> AnswerView:
    """The player's round as an answer reads it: `view` when it is that round (read by
    `preload_answer` for this request), else read here; someone else's round is not found."""
    if view is None or view.id != round_id:
        loaded = preload_answer(round_id)
        view = loaded[1] if loaded is not None else None
    if view is None or view.player_id != player.id:
        raise NotFound("That round does not exist.")
    return view


def submit_answer(
    player: Player, round_id: int, answer: Answer, view: AnswerView | None = None
) -> AnswerView:
    """Store the guess and its points once; returns the round as it now stands. Points come
    from the stored boundary only. `view`: the round as read for this request (`own_round`).

    A transaction PostgreSQL aborts as a deadlock's victim or a serialization failure is rolled
    back and run again (`retrying`) instead of failing the request. Everything the answer does
    before its commit is in the transaction or safe to repeat (forgetting cached boards, the
    cached site rate, the browser's device token kept in `g`).
    """
    view = own_round(player, round_id, view)
    return retrying(lambda: _submit_once(player, view, answer), f"answer to round {round_id}")


def _submit_once(player: Player, view: AnswerView, answer: Answer) -> AnswerView:
    if view.answered:
        raise AlreadyAnswered(view)
    stored = _store_answer(player, view, answer)
    if stored is None:
        # Someone (a double click, another tab) got there first: keep their answer.
        db.session.rollback()
        current = own_round(player, view.id)
        if current.answered:
            raise AlreadyAnswered(current)
        raise Conflict("This page was out of date; here is the round as it stands.")
    # A study counts the answer in the same transaction (app/crowd/hooks.py).
    hooks.answer_stored.send(view, stored.guess == view.boundary)
    # Only the player stays loaded: a `Round` of this round loaded earlier reads afresh.
    commit_keeping(player)
    _after_counted(stored, view.category_slug)
    changed: dict = {name: stored.values[name] for name in _SHOWN_ANSWER}
    if stored.set_figures is not None and view.set_id is not None:
        answered, points, _exact, finished_at = stored.set_figures
        changed |= {
            "set_answered": answered,
            "set_points": points,
            "set_finished": finished_at is not None,
        }
    return dataclasses.replace(view, **changed)


# What an answered round's page shows of the answer just stored.
_SHOWN_ANSWER = ("guess", "points", "reasons", "explanation", "uncounted")


@dataclass(frozen=True)
class _Stored:
    """An answer stored (not yet committed): the guess, its verdict, the round's new values and
    the set's new figures (None: no set)."""

    guess: int
    result: Verdict
    values: dict
    set_figures: tuple | None
    counted: bool
    now: datetime


def _store_answer(player: Player, current: AnswerView, answer: Answer) -> _Stored | None:
    """Check the answer against the open round and store it, with the text's count, the set's
    figures, the truth shown and the boards (no commit); None when another request answered or
    moved the round first (nothing is rolled back here)."""
    example_id = current.example_id
    n = current.n_sentences
    if answer.seen != current.revealed:
        raise Conflict("This page was out of date; here is the round as it stands.")
    if answer.choice == "human":
        if current.revealed < n:
            raise BadRequest("You can call the whole text human-written only at its last sentence.")
        guess = n
    elif current.revealed < 2:
        raise BadRequest("The first sentence is always written by a person: read on.")
    else:
        guess = current.revealed - 1
    result: Verdict = verdict(guess, current.boundary, n)
    scored = current.kind == NORMAL_ROUND
    now = utcnow()
    # The answer page shows the truth: record it, and do not count an answer whose truth another
    # player was shown in this browser or from this address (app/leaderboard/integrity.py).
    uncounted = integrity.answer_seen(player.id, example_id, scored, now)
    # A reason known when the round started (a passage read before) stands.
    uncounted = current.uncounted or uncounted
    stored_values = {
        "guess": guess,
        # Attention checks and practice rounds earn no points.
        "points": result.points if scored else 0,
        "reasons": answer.reasons,
        "explanation": answer.explanation,
        "answered_at": now,
        "uncounted": uncounted,
        "confidence": answer.confidence,
        "explanation_pasted": answer.typing.pasted,
        "typing_ms": answer.typing.ms,
        "typed_chars": answer.typing.chars,
    }
    answer_values = {"round_id": current.id, "seen": answer.seen} | {
        f"new_{name}": value for name, value in stored_values.items()
    }
    # A round that does not count (its truth was seen by another identity) still moves the set
    # on, but adds nothing to its score.
    in_set = result if scored and uncounted is None else None
    figures = None
    if in_one_statement():
        # The round, the text's count and the set's figures in one round trip.
        row = db.session.execute(
            _ANSWER_AND_COUNT,
            answer_values
            | {
                "example_id": example_id,
                "scored": scored,
                "set_id": current.set_id,
                "add_points": in_set.points if in_set else 0,
                "add_exact": 1 if in_set and in_set.exact else 0,
                "now": utcnow(),
            },
        ).one()
        taken = row.stored == 1
        if taken and row.answered is not None:
            figures = tuple(getattr(row, name) for name in _SET_FIGURES)
    else:
        taken = db.session.execute(_STORE_ANSWER, answer_values).rowcount == 1
        if taken:
            if scored:
                db.session.execute(_ANNOTATED, {"example_id": example_id})
            if current.set_id is not None:
                figures = _count_in_set(current.set_id, in_set)
    if not taken:
        return None
    counted = scored and uncounted is None
    if counted:
        integrity.count(player, current, guess, result, current.started_at, current.revealed, now)
    return _Stored(guess, result, stored_values, figures, counted, now)


def _after_counted(stored: _Stored, category_slug: str) -> None:
    """After the commit of a counted answer: the boards it moved are read afresh."""
    if stored.counted:
        standings.invalidate(category_slug, stored.now)
        # About one answer in 50 then adds up the boards' pending count changes (never fails).
        recording.fold_if_due()


_SET_FIGURES = ("answered", "points", "exact", "finished_at")
_COUNT_IN_SET = (
    update(GameSet.__table__)
    .where(SETS.id == bindparam("set_id"))
    .values(
        answered=SETS.answered + 1,
        points=SETS.points + bindparam("add_points"),
        exact=SETS.exact + bindparam("add_exact"),
        finished_at=case(
            (SETS.answered + 1 >= SETS.size, bindparam("now", type_=UTCDateTime())),
            else_=SETS.finished_at,
        ),
    )
    .returning(*(SETS[name] for name in _SET_FIGURES))
)


# On PostgreSQL the answer's three updates as one statement (one round trip instead of three):
# the round takes the answer if it is still open at the sentence the player saw, and only then
# does the text count one annotation more (for a round that scores) and the set count the round.
# `stored` says whether the answer was taken; the set's new figures follow (NULL without a set).
_ANSWER_AND_COUNT = text(
    "WITH answered AS ("
    " UPDATE rounds SET "
    + ", ".join(f"{name} = :new_{name}" for name in _ANSWER_FIELDS)
    + " WHERE id = :round_id AND guess IS NULL AND revealed = :seen"
    " RETURNING id),"
    " annotated AS ("
    " UPDATE examples SET annotation_count = annotation_count + 1"
    " WHERE id = :example_id AND :scored AND EXISTS (SELECT 1 FROM answered)),"
    " in_set AS ("
    " UPDATE game_sets SET answered = answered + 1, points = points + :add_points,"
    " exact = exact + :add_exact,"
    " finished_at = CASE WHEN answered + 1 >= size THEN :now ELSE finished_at END"
    " WHERE id = :set_id AND EXISTS (SELECT 1 FROM answered)"
    " RETURNING " + ", ".join(_SET_FIGURES) + ")"
    " SELECT (SELECT count(*) FROM answered) AS stored, "
    + ", ".join(f"in_set.{name}" for name in _SET_FIGURES)
    + " FROM (SELECT 1) AS one LEFT JOIN in_set ON true"
).bindparams(
    *(bindparam(f"new_{name}", type_=ROUNDS[name].type) for name in _ANSWER_FIELDS),
    bindparam("round_id", type_=Integer()),
    bindparam("seen", type_=Integer()),
    bindparam("example_id", type_=Integer()),
    bindparam("scored", type_=Boolean()),
    bindparam("set_id", type_=Integer()),
    bindparam("add_points", type_=Integer()),
    bindparam("add_exact", type_=Integer()),
    bindparam("now", type_=UTCDateTime()),
)


def _count_in_set(set_id: int, result: Verdict | None) -> tuple | None:
    """Add an answered round to its set's running figures, finishing a full set (no commit);
    the set's new figures (`_SET_FIGURES`), None when the set is gone."""
    figures = db.session.execute(
        _COUNT_IN_SET,
        {
            "set_id": set_id,
            "add_points": result.points if result else 0,
            "add_exact": 1 if result and result.exact else 0,
            "now": utcnow(),
        },
    ).one_or_none()
    return tuple(figures) if figures is not None else None

"""The game service: reveal a round's sentences one at a time.

Every function owns its transaction. A stale or repeated request is refused, so a double click
cannot skip a sentence. A reveal reads its round as one row of columns (`RevealView`, which
app/game/answers.py extends for an answer), often before the request's player is known.

Part of the round core, which app/game/rounds.py describes.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import bindparam, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from app.database import ALONE
from app.errors import Conflict, NotFound
from app.extensions import commit_keeping, db
from app.game.rounds import MAX_ID, RevealView, in_one_statement
from app.game.tables import CATEGORIES, EXAMPLES, ROUNDS, SETS
from app.models import Category, Example, GameSet, Player, Reveal, Round
from app.models.base import UTCDateTime, utcnow

# The statements of a reveal, built once (see app/game/rounds.py); parameters are bound by name.
# They write to the tables: the service puts the new values onto the loaded objects itself.
_REVEAL = (
    update(Round.__table__)
    .where(
        ROUNDS.id == bindparam("round_id"),
        ROUNDS.revealed == bindparam("seen"),
        ROUNDS.guess.is_(None),
    )
    .values(revealed=ROUNDS.revealed + 1)
)
_ADD_REVEAL = insert(Reveal.__table__)
# On PostgreSQL the two as one statement, a whole transaction by itself (app/database.py: ALONE):
# the reveal is recorded only when the round moved on, in one round trip with no BEGIN or COMMIT.
# SQLite has RETURNING but no data-modifying WITH, and runs the two above.
_REVEAL_AND_RECORD = (
    text(
        "WITH moved AS ("
        " UPDATE rounds SET revealed = revealed + 1"
        " WHERE id = :round_id AND revealed = :seen AND guess IS NULL"
        " RETURNING id)"
        " INSERT INTO reveals (round_id, sentence_index, revealed_at)"
        " SELECT id, :seen, :revealed_at FROM moved"
    )
    .bindparams(bindparam("revealed_at", type_=UTCDateTime()))
    .execution_options(**ALONE)
)


_players = Player.__table__.c
# A round as a `RevealView` reads it, as plain columns.
_VIEW = (
    select(
        ROUNDS.id,
        ROUNDS.player_id,
        ROUNDS.kind,
        ROUNDS.participant_id,
        ROUNDS.revealed,
        ROUNDS.guess,
        EXAMPLES.sentences,
        EXAMPLES.n_sentences,
        CATEGORIES.name.label("category_name"),
        ROUNDS.set_id,
        SETS.kind.label("set_kind"),
        Round.set_number.expression.label("set_number"),
        SETS.size.label("set_size"),
        SETS.points.label("set_points"),
        SETS.answered.label("set_answered"),
        SETS.finished_at.label("set_finished_at"),
        SETS.day.label("set_day"),
        SETS.level.label("set_level"),
        ROUNDS.order_index,
    )
    .select_from(Round.__table__)
    .join(Example.__table__, EXAMPLES.id == ROUNDS.example_id)
    .join(Category.__table__, CATEGORIES.id == EXAMPLES.category_id)
    .outerjoin(GameSet.__table__, SETS.id == ROUNDS.set_id)
)
# The round for a reveal with its player (an ORM object: Flask-Login's user loader finds it in
# the session, as with `_ROUND_WITH_OWNER`).
REVEAL_VIEW = (
    _VIEW.add_columns(Player)
    .join(Player.__table__, _players.id == ROUNDS.player_id)
    .where(ROUNDS.id == bindparam("round_id"))
)
# The player's unanswered round, the player being known (a unique index keeps it to one at most).
_OPEN_VIEW = _VIEW.where(ROUNDS.player_id == bindparam("player_id"), ROUNDS.guess.is_(None))


def reveal_fields(row) -> dict:
    """A `RevealView`'s fields from a row of `REVEAL_VIEW` (or of a query that extends it)."""
    in_set = row.set_id is not None and row.set_kind is not None
    return {
        "id": row.id,
        "player_id": row.player_id,
        "kind": row.kind,
        "participant_id": row.participant_id,
        "revealed": row.revealed,
        "guess": row.guess,
        "sentences": row.sentences,
        "n_sentences": row.n_sentences,
        "category_name": row.category_name,
        "set_id": row.set_id if in_set else None,
        "set_kind": row.set_kind,
        "set_number": row.set_number if in_set else None,
        "set_size": row.set_size,
        "set_points": row.set_points,
        "set_answered": row.set_answered,
        "set_finished": row.set_finished_at is not None,
        "set_day": row.set_day,
        "set_level": row.set_level,
        "order_index": row.order_index,
    }


def preload_reveal(round_id: int) -> tuple[Player, RevealView] | None:
    """Load a round for a reveal together with its player, before the request's player is known
    (see `preload_round`: the session's version is still checked, and another player's round is
    still refused). The caller keeps the player for the request."""
    if not 0 < round_id <= MAX_ID:
        return None
    row = db.session.execute(REVEAL_VIEW, {"round_id": round_id}).first()
    if row is None:
        return None
    return row.Player, RevealView(**reveal_fields(row))


def open_round(player: Player) -> RevealView | None:
    """The player's unanswered round, if any, as its page is drawn from (one statement)."""
    row = db.session.execute(_OPEN_VIEW, {"player_id": player.id}).first()
    return RevealView(**reveal_fields(row)) if row is not None else None


def reveal_next(
    player: Player, round_id: int, seen: int, view: RevealView | None = None
) -> RevealView:
    """Reveal the next sentence of the player's round. `seen` is how many sentences the client
    was showing; `view`: the round as `preload_reveal` read it for this request (None: read here).
    Returns the round as it now stands.

    A stale or repeated request (seen != revealed) is refused, so a double click cannot skip a
    sentence; someone else's round is reported as not found.
    """
    if view is None or view.id != round_id:
        loaded = preload_reveal(round_id)
        view = loaded[1] if loaded is not None else None
    if view is None or view.player_id != player.id:
        raise NotFound("That round does not exist.")
    if view.answered:
        raise Conflict("This round is already answered.")
    if seen != view.revealed:
        raise Conflict("This page was out of date; here is the round as it stands.")
    if view.revealed >= view.n_sentences:
        raise Conflict("Every sentence is already shown: decide whether it is all human.")
    _move_on(view.id, seen)
    try:
        # Only the player stays loaded: a `Round` of this round loaded earlier reads afresh.
        commit_keeping(player)
    except IntegrityError:
        db.session.rollback()
        raise Conflict("This page was out of date; here is the round as it stands.") from None
    return dataclasses.replace(view, revealed=seen + 1)


def _move_on(round_id: int, seen: int) -> None:
    """Show the sentence after the `seen` first ones and record when (no commit); a Conflict,
    with everything rolled back, when the round is no longer at `seen` (a double click, a second
    tab) or was answered meanwhile."""
    stale = Conflict("This page was out of date; here is the round as it stands.")
    now = utcnow()
    try:
        if in_one_statement():
            # The round moves on and the reveal is recorded, both or neither, in one statement.
            result = db.session.execute(
                _REVEAL_AND_RECORD, {"round_id": round_id, "seen": seen, "revealed_at": now}
            )
        else:
            result = db.session.execute(_REVEAL, {"round_id": round_id, "seen": seen})
            if result.rowcount == 1:
                db.session.execute(
                    _ADD_REVEAL,
                    {"round_id": round_id, "sentence_index": seen, "revealed_at": now},
                )
    except IntegrityError:
        db.session.rollback()
        raise stale from None
    if result.rowcount != 1:
        # Another request (a double click, a second tab) revealed this sentence first.
        db.session.rollback()
        raise stale

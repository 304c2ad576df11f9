"""The game service's start of a round: resume the player's open round, or start a new one, on a
text picked for them or given by the caller (a study's slot, a daily's next text, a friend's
challenge), as the `RevealView` its page is drawn from.

Every new round of every kind is stored by `new_round`, the one path: on PostgreSQL in one
statement (the pick, a new set, the round, its first reveal and the passages read); on SQLite,
which has no data-modifying WITH, the same parts one by one in one transaction. Every function
owns its transaction.

Part of the round core, which app/game/rounds.py describes.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import NamedTuple

from flask import current_app
from sqlalchemy import Integer, Select, bindparam, func, insert, literal, select, true, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value

from app.database import ALONE
from app.errors import Conflict, NotFound
from app.extensions import commit_keeping, db
from app.game import rounds
from app.game.reveals import open_round
from app.game.rounds import RevealView, category_by_slug, in_one_statement
from app.game.tables import CATEGORIES, EXAMPLES, ROUNDS, SETS
from app.models import (
    Category,
    Example,
    ExamplePassage,
    GameSet,
    Participant,
    PassageRead,
    Player,
    Reveal,
    Round,
)
from app.models.base import UTCDateTime, utcnow
from app.models.rounds import NORMAL_ROUND
from app.models.sets import NORMAL_SET

RANDOM = "random"
_START_ATTEMPTS = 5


class NoExamplesLeft(Conflict):
    """The player has already played every text they could be given."""


def _chosen_category(category_slug: str) -> Category | None:
    """The category a player chose, None for "random"; NotFound for an unknown one."""
    if category_slug == RANDOM:
        return None
    category = category_by_slug(category_slug)
    if category is None:
        raise NotFound(f"There is no category called “{category_slug}”.")
    return category


def _nothing_left(category: Category | None, level: str | None = None) -> NoExamplesLeft:
    if level is not None:
        where = f" in {category.name}" if category else ""
        return NoExamplesLeft(
            f"You have read every {level} text{where} we have rated so far. Thank you! "
            "Try another level or category."
        )
    return NoExamplesLeft(
        f"You have read every text in {category.name}. Thank you! Try another category."
        if category
        else "You have read every text we have. Thank you! New texts arrive regularly."
    )


def check_start(player: Player | None, category_slug: str, level: str | None = None) -> None:
    """Raise what `start_round` would refuse with (NotFound, NoExamplesLeft), storing nothing.

    Callers check first when they store something before the round (a new guest, a consent), so
    a refused start leaves no trace. `player` None stands for a guest not created yet.
    """
    category = _chosen_category(category_slug)
    if player is not None and open_round(player) is not None:
        return
    if not db.session.scalar(select(rounds.unplayed(player, category, level).exists())):
        raise _nothing_left(category, level)


def start_round(
    player: Player,
    category_slug: str,
    game_set: GameSet | None = None,
    *,
    normal_set: Callable[[], GameSet | None] | None = None,
    level: str | None = None,
    looked_up: bool = False,
) -> RevealView:
    """Resume the player's open round, or start a new one in the chosen category ("random": any)
    and difficulty level (None: any), as part of `game_set`. For a normal set's round,
    `normal_set()` is the player's unfinished normal set, None when a new one (of `level`) is to
    be made with the round; `game_set` is then what the caller found already. `looked_up`: the
    caller has just found no open round (and the set), so the first look is skipped.

    Raises NotFound for an unknown category and NoExamplesLeft when the player has read every
    text there; either way nothing is stored.
    """
    for attempt in range(_START_ATTEMPTS):
        if attempt > 0 or not looked_up:
            if (current := open_round(player)) is not None:
                return current
            if normal_set is not None:
                game_set = normal_set()
        new_set = normal_set is not None and game_set is None
        view = new_round(player, category_slug, game_set=game_set, new_set=new_set, level=level)
        if view is not None:
            return view
        # No text was picked, or another request of the player started a round (or a set) at
        # the same moment: refuse as the page words it, or look again.
        check_start(player, category_slug, level)
    raise Conflict("Could not start a round right now; please try again.")


def new_round(
    player: Player,
    chosen_category: str,
    *,
    example: Example | None = None,
    game_set: GameSet | None = None,
    new_set: bool = False,
    level: str | None = None,
    kind: str = NORMAL_ROUND,
    participant_id: int | None = None,
    uncounted: str | None = None,
) -> RevealView | None:
    """Store the player's next round, with s[0] revealed, and return it as its page's view.

    The round is on `example`, or (None) on a text picked for the player: one of the
    least-annotated they may read, at random among them, in the category `chosen_category`
    names (unless "random") and of difficulty `level` (unless None). It joins `game_set`, or
    with `new_set` a new normal set of `level` made with it; a normal set whose level is not
    `level` takes it. `uncounted` is why its answer will not count, when known already (a
    challenge's text whose passage the player read before). The text's passages count as read
    from this moment.

    None, with nothing stored, when no text is left to pick (or the slug names no category), or
    when another request of the player started a round or a set at the same moment (a unique
    index says so).
    """
    pick = "given" if example is not None else "any" if chosen_category == RANDOM else "category"
    params = {
        "player_id": player.id,
        "now": utcnow(),
        "chosen_category": chosen_category,
        "kind": kind,
        "participant_id": participant_id,
        "uncounted": uncounted,
        "reasons": [],
    }
    if example is not None:
        params["example_id"] = example.id
    else:
        params["fraction"] = random.random()
        if pick == "category":
            params["category_slug"] = chosen_category
        if level is not None:
            params["level"] = level
    if new_set:
        params.update(set_size=current_app.config["SET_SIZE"], set_level=level)
    else:
        params["set_id"] = game_set.id if game_set is not None else None
    avoid_repeats = current_app.config["AVOID_REPEATED_PASSAGES"]
    by_level = example is None and level is not None
    try:
        if game_set is not None and game_set.kind == NORMAL_SET and game_set.level != level:
            db.session.execute(_SET_LEVEL, {"set_id": game_set.id, "level": level})
        if in_one_statement():
            statement = _start_in_one_statement(pick, avoid_repeats, by_level, new_set)
            row = db.session.execute(statement, params).first()
        else:
            row = _start_step_by_step(pick, avoid_repeats, by_level, new_set, params)
    except IntegrityError:
        # Another request of the same player started a round (or a set) at the same moment.
        db.session.rollback()
        return None
    if row is None:
        db.session.rollback()
        return None
    if game_set is not None and game_set.kind == NORMAL_SET:
        set_committed_value(game_set, "level", level)
    # On PostgreSQL the statement committed on its own; the player (and set) stay loaded.
    commit_keeping(player, *([game_set] if game_set is not None else []))
    return _view_of(row, player, kind, participant_id, game_set, level)


def _view_of(row, player: Player, kind: str, participant_id, game_set, level) -> RevealView:
    """The new round's view, from the row the start returned and its set as it stood (None: a
    new normal set, or none)."""
    if game_set is not None:
        size, points, answered = game_set.size, game_set.points, game_set.answered
        set_kind, day, level = game_set.kind, game_set.day, game_set.level
    else:  # a new normal set (none when the row has no set)
        size, points, answered = current_app.config["SET_SIZE"], 0, 0
        set_kind, day = NORMAL_SET, None
    in_set = row.set_id is not None
    return RevealView(
        id=row.id,
        player_id=player.id,
        kind=kind,
        participant_id=participant_id,
        revealed=1,
        guess=None,
        sentences=row.sentences,
        n_sentences=row.n_sentences,
        category_name=row.category_name,
        set_id=row.set_id,
        set_kind=set_kind if in_set else None,
        set_number=row.in_set + 1 if in_set else None,
        set_size=size if in_set else None,
        set_points=points if in_set else None,
        set_answered=answered if in_set else None,
        set_finished=False,
        set_day=day if in_set else None,
        set_level=level if in_set else None,
        order_index=row.order_index,
    )


def pick(player: Player, chosen_category: str = RANDOM, level: str | None = None) -> int | None:
    """The id of the text `new_round` would start the player on now, at a random point (None:
    none is left); the same statement as its pick, storing nothing."""
    pick_kind = "any" if chosen_category == RANDOM else "category"
    params = {"player_id": player.id, "fraction": random.random(), "category_slug": chosen_category}
    if level is not None:
        params["level"] = level
    statement = _picked(pick_kind, current_app.config["AVOID_REPEATED_PASSAGES"], level is not None)
    return db.session.scalar(statement.with_only_columns(EXAMPLES.id), params)


# The parameters of a start, bound by name.
_PLAYER_ID = bindparam("player_id", type_=Integer)
_NOW = bindparam("now", type_=UTCDateTime())
_SET_ID = bindparam("set_id", type_=Integer)
_PARTICIPANT_ID = bindparam("participant_id", type_=Integer)
_passages = ExamplePassage.__table__.c

# A normal set's new level, set with its next round.
_SET_LEVEL = update(GameSet.__table__).where(SETS.id == _SET_ID).values(level=bindparam("level"))
# The player's last order index, and how many rounds the set already holds.
_PLACES = select(
    select(func.max(ROUNDS.order_index))
    .where(ROUNDS.player_id == _PLAYER_ID)
    .scalar_subquery()
    .label("last"),
    select(func.count(ROUNDS.id)).where(ROUNDS.set_id == _SET_ID).scalar_subquery().label("in_set"),
)


@functools.cache
def _picked(pick: str, avoid_repeats: bool, by_level: bool) -> Select:
    """The text the round is on, with what its page shows of it: the one given by id
    (`pick` "given"), or picked (`rounds.picked_id`) in the category named by its slug
    ("category") or in any ("any")."""
    if pick == "given":
        chosen = bindparam("example_id", type_=Integer)
    else:
        category_id = None
        if pick == "category":
            category_id = (
                select(CATEGORIES.id)
                .where(CATEGORIES.slug == bindparam("category_slug"))
                .scalar_subquery()
            )
        level = bindparam("level") if by_level else None
        chosen = rounds.picked_id(_PLAYER_ID, category_id, avoid_repeats, level)
    return (
        select(
            EXAMPLES.id,
            EXAMPLES.sentences,
            EXAMPLES.n_sentences,
            CATEGORIES.name.label("category_name"),
        )
        .join_from(Example.__table__, Category.__table__, CATEGORIES.id == EXAMPLES.category_id)
        .where(EXAMPLES.id == chosen)
    )


def _set_row() -> dict:
    """A new normal set's columns."""
    return {
        "player_id": _PLAYER_ID,
        "kind": literal(NORMAL_SET, SETS.kind.type),
        "size": bindparam("set_size", type_=Integer),
        "level": bindparam("set_level", type_=SETS.level.type),
        "answered": literal(0, Integer),
        "points": literal(0, Integer),
        "exact": literal(0, Integer),
        "started_at": _NOW,
    }


def _round_row(example_id, order_index, set_id) -> dict:
    """The new round's columns, with s[0] revealed."""
    return {
        "player_id": _PLAYER_ID,
        "example_id": example_id,
        "order_index": order_index,
        "chosen_category": bindparam("chosen_category", type_=ROUNDS.chosen_category.type),
        "kind": bindparam("kind", type_=ROUNDS.kind.type),
        "participant_id": _PARTICIPANT_ID,
        "set_id": set_id,
        "revealed": literal(1, Integer),
        "started_at": _NOW,
        "reasons": bindparam("reasons", type_=ROUNDS.reasons.type),
        "explanation": literal("", ROUNDS.explanation.type),
        "upvotes": literal(0, Integer),
        "uncounted": bindparam("uncounted", type_=ROUNDS.uncounted.type),
        # A study's round carries its worker's condition (None outside studies with conditions).
        "condition": select(Participant.condition)
        .where(Participant.id == _PARTICIPANT_ID)
        .scalar_subquery(),
    }


def _reveal_row(round_id) -> dict:
    """The new round's reveal of s[0]."""
    return {"round_id": round_id, "sentence_index": literal(0, Integer), "revealed_at": _NOW}


def _insert(table, row: dict, *source):
    """INSERT INTO `table` the `row` of columns, SELECTed from `source` (none: one row)."""
    values = select(*row.values())
    if source:
        values = values.select_from(*source)
    return insert(table).from_select(list(row), values, include_defaults=False)


def _passages_read(dialect, example_id, *source):
    """The text's passages, as read by the player from now (kept as they were if read before)."""
    row = {"player_id": _PLAYER_ID, "passage_id": _passages.passage_id, "read_at": _NOW}
    values = select(*row.values())
    if source:
        values = values.join_from(
            ExamplePassage.__table__, *source, _passages.example_id == example_id
        )
    else:
        values = values.where(_passages.example_id == example_id)
    read = dialect.insert(PassageRead.__table__).from_select(
        list(row), values, include_defaults=False
    )
    return read.on_conflict_do_nothing()


@functools.cache
def _start_in_one_statement(pick: str, avoid_repeats: bool, by_level: bool, new_set: bool):
    """`new_round` as one PostgreSQL statement: the text (`_picked`), the player's next places
    (with `new_set` the new normal set, made once a text is picked), the round, its first reveal
    and the text's passages as read.

    It returns the new round's id, set and order index, what its page shows of the text and how
    many rounds the set held before; no row, and nothing stored, when no text is left (or the
    slug names no category). A round (or set) opened meanwhile by another request breaks a
    unique index: IntegrityError, and nothing is stored."""
    picked = _picked(pick, avoid_repeats, by_level).cte("picked")
    if new_set:
        made = _insert(GameSet.__table__, _set_row(), picked).returning(SETS.id).cte("made")
        places = select(
            _PLACES.selected_columns.last, made.c.id.label("set_id"), literal(0).label("in_set")
        ).select_from(made)
    else:
        places = _PLACES.add_columns(_SET_ID.label("set_id"))
    places = places.cte("places")
    order_index = func.coalesce(places.c.last, 0) + 1
    row = _round_row(picked.c.id, order_index, places.c.set_id)
    new = (
        _insert(Round.__table__, row, picked.join(places, true()))
        .returning(ROUNDS.id, ROUNDS.example_id, ROUNDS.set_id, ROUNDS.order_index)
        .cte("new")
    )
    return (
        select(
            new.c.id,
            new.c.set_id,
            new.c.order_index,
            picked.c.sentences,
            picked.c.n_sentences,
            picked.c.category_name,
            places.c.in_set,
        )
        .select_from(new.join(picked, true()).join(places, true()))
        .add_cte(
            _insert(Reveal.__table__, _reveal_row(new.c.id), new).cte("first_reveal"),
            _passages_read(postgresql, new.c.example_id, new).cte("read"),
        )
        .execution_options(**ALONE)
    )


@functools.cache
def _step_statements(pick: str, avoid_repeats: bool, by_level: bool) -> tuple:
    """`new_round`'s parts as statements of their own, for SQLite (no data-modifying WITH): the
    text, a new normal set, the places, the round, its first reveal, the passages read."""
    round_row = _round_row(
        bindparam("example_id", type_=Integer), bindparam("order_index", type_=Integer), _SET_ID
    )
    return (
        _picked(pick, avoid_repeats, by_level),
        _insert(GameSet.__table__, _set_row()).returning(SETS.id),
        _PLACES,
        _insert(Round.__table__, round_row).returning(ROUNDS.id),
        _insert(Reveal.__table__, _reveal_row(bindparam("round_id", type_=Integer))),
        _passages_read(sqlite, bindparam("example_id", type_=Integer)),
    )


def _start_step_by_step(pick: str, avoid_repeats: bool, by_level: bool, new_set: bool, params):
    """`new_round` on SQLite: `_start_in_one_statement`'s parts one by one, in the request's
    transaction (the caller commits); its row, or None when no text is left."""
    text_of, make_set, places_of, add_round, add_reveal, read = _step_statements(
        pick, avoid_repeats, by_level
    )
    text = db.session.execute(text_of, params).first()
    if text is None:
        return None
    params = {**params, "example_id": text.id}
    if new_set:
        params["set_id"] = db.session.execute(make_set, params).scalar_one()
    last, in_set = db.session.execute(places_of, params).one()
    params["order_index"] = (last or 0) + 1
    params["round_id"] = db.session.execute(add_round, params).scalar_one()
    db.session.execute(add_reveal, params)
    db.session.execute(read, params)
    return _Started(
        params["round_id"],
        params["set_id"],
        params["order_index"],
        text.sentences,
        text.n_sentences,
        text.category_name,
        in_set,
    )


class _Started(NamedTuple):
    """The row `_start_in_one_statement` returns."""

    id: int
    set_id: int | None
    order_index: int
    sentences: list[str]
    n_sentences: int
    category_name: str
    in_set: int

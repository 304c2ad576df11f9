"""The game service's start of a round: resume the player's open round or start a new one on a
text picked for them (`rounds.pick_example`), in one statement on PostgreSQL.

Every function owns its transaction.

Part of the round core (`ROUND_CORE` in tests/test_layering.py: app/game/rounds.py, starts.py,
reveals.py, answers.py and sets.py), the only modules of app/game that write textual SQL or
change the round's own tables (rounds, reveals, game_sets); the other modules call the core for
that.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable

from flask import current_app
from sqlalchemy import CTE, Integer, bindparam, func, insert, literal, select, true
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value

from app.database import ALONE
from app.errors import Conflict, NotFound
from app.extensions import commit_keeping, db
from app.game import rounds
from app.game.rounds import RevealView, category_by_slug, in_one_statement, open_round
from app.game.tables import CATEGORIES, EXAMPLES, ROUNDS, SETS
from app.models import (
    Category,
    Example,
    ExamplePassage,
    GameSet,
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

# The player's last order index, and how many rounds the set already holds.
_NEXT_PLACES = select(
    select(func.max(Round.order_index))
    .where(Round.player_id == bindparam("player_id"))
    .scalar_subquery(),
    select(func.count(Round.id)).where(Round.set_id == bindparam("set_id")).scalar_subquery(),
)


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
    open_set: Callable[[], GameSet] | None = None,
    level: str | None = None,
    looked_up: bool = False,
) -> Round:
    """Resume the player's open round, or start a new one in the chosen category ("random": any)
    and difficulty level (None: any), as part of `game_set`, or of the set `open_set()` returns
    once a text is found. `looked_up`: the caller has just found no open round, so the first
    look is skipped (a retry after a lost race looks again).

    Raises NotFound for an unknown category and NoExamplesLeft when the player has read every
    text there; either way nothing is stored.
    """
    category = _chosen_category(category_slug)
    for attempt in range(_START_ATTEMPTS):
        current = None if looked_up and attempt == 0 else open_round(player)
        if current is not None:
            return current
        example = rounds.pick_example(player, category, level)
        if example is None:
            raise _nothing_left(category, level)
        if open_set is not None:
            game_set = open_set()
        new = create_round(player, example, category_slug, game_set=game_set)
        if new is not None:
            return new
    raise Conflict("Could not start a round right now; please try again.")


@functools.cache
def _remember_passages_statement(dialect: str):
    module = postgresql if dialect == "postgresql" else sqlite
    passages = ExamplePassage.__table__.c
    rows = select(
        bindparam("player_id", type_=Integer),
        passages.passage_id,
        bindparam("read_at", type_=UTCDateTime()),
    ).where(passages.example_id == bindparam("example_id"))
    return (
        module.insert(PassageRead.__table__)
        .from_select(["player_id", "passage_id", "read_at"], rows)
        .on_conflict_do_nothing()
    )


def _remember_passages(player_id: int, example_id: int, now) -> None:
    """Record the example's passages as read by the player (no commit)."""
    db.session.execute(
        _remember_passages_statement("postgresql" if in_one_statement() else "sqlite"),
        {"player_id": player_id, "example_id": example_id, "read_at": now},
    )


def create_round(
    player: Player,
    example: Example,
    chosen_category: str,
    kind: str = NORMAL_ROUND,
    participant_id: int | None = None,
    game_set: GameSet | None = None,
    uncounted: str | None = None,
) -> Round | None:
    """Insert the player's next round with s[0] revealed, in `game_set` if given; None if another
    request won the race. `uncounted` is why its answer will not count, when known already (a
    challenge's text whose passage the player read before).

    The example's passages count as read from this moment.
    """
    set_id = game_set.id if game_set is not None else None
    last, in_set = db.session.execute(
        _NEXT_PLACES, {"player_id": player.id, "set_id": set_id}
    ).one()
    now = utcnow()
    new = Round(
        player_id=player.id,
        example=example,
        order_index=(last or 0) + 1,
        chosen_category=chosen_category,
        kind=kind,
        participant_id=participant_id,
        game_set=game_set,
        revealed=1,
        started_at=now,
        reasons=[],
        explanation="",
        uncounted=uncounted,
    )
    new.reveals.append(Reveal(sentence_index=0, revealed_at=now))
    db.session.add(new)
    try:
        db.session.flush()
        # Every earlier round of the set is answered: this one is the next in it.
        set_committed_value(new, "set_number", in_set + 1 if set_id is not None else None)
        _remember_passages(player.id, example.id, now)
        # The round's page comes next: keep the player, the round and its text loaded.
        _commit_keeping_round(player, new)
    except IntegrityError:
        # Another request of the same player started a round at the same moment.
        db.session.rollback()
        return None
    return new


_passages = ExamplePassage.__table__.c
# The parameters of the one-statement start, bound by name.
_PLAYER_ID = bindparam("player_id", type_=Integer)
_NOW = bindparam("now", type_=UTCDateTime())


@functools.cache
def _start_in_one_statement(by_category: bool, avoid_repeats: bool, by_level: bool, new_set: bool):
    """`start_round`'s work after its look for an open round, as one PostgreSQL statement: the
    pick (`_picked`), the player's next places (`_places`), with `new_set` the player's new
    normal set, the round with s[0] revealed (`_new_round`), its first reveal and the text's
    passages as read (`_first_reveal`, `_passages_read`).

    It returns the new round's id and set, what its fragment shows of the text and how many
    rounds the set held before; no row, and nothing stored, when no text is left (or the slug
    names no category). A round (or set) opened meanwhile by another request breaks a unique
    index: IntegrityError, and nothing is stored."""
    picked = _picked(by_category, avoid_repeats, by_level)
    places = _places(picked, new_set)
    new = _new_round(picked, places)
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
        .add_cte(_first_reveal(new), _passages_read(new))
        .execution_options(**ALONE)
    )


def _picked(by_category: bool, avoid_repeats: bool, by_level: bool) -> CTE:
    """The text `rounds.pick_example` would pick, with what the round's fragment shows of it; in
    the category named by its slug when `by_category`."""
    category_id = None
    if by_category:
        category_id = (
            select(CATEGORIES.id)
            .where(CATEGORIES.slug == bindparam("category_slug"))
            .scalar_subquery()
        )
    level = bindparam("level") if by_level else None
    return (
        select(
            EXAMPLES.id,
            EXAMPLES.sentences,
            EXAMPLES.n_sentences,
            CATEGORIES.name.label("category_name"),
        )
        .join_from(Example.__table__, Category.__table__, CATEGORIES.id == EXAMPLES.category_id)
        .where(EXAMPLES.id == rounds.picked_id(_PLAYER_ID, category_id, avoid_repeats, level))
        .cte("picked")
    )


def _places(picked: CTE, new_set: bool) -> CTE:
    """The player's last order index, the round's set and how many rounds it held (as
    `_NEXT_PLACES`); with `new_set`, the set is made here, as `sets._normal_set` makes it, once
    a text is picked."""
    last = (
        select(func.max(ROUNDS.order_index))
        .where(ROUNDS.player_id == _PLAYER_ID)
        .scalar_subquery()
        .label("last")
    )
    if not new_set:
        in_set = (
            select(func.count(ROUNDS.id))
            .where(ROUNDS.set_id == bindparam("set_id"))
            .scalar_subquery()
            .label("in_set")
        )
        return select(last, bindparam("set_id", type_=Integer).label("set_id"), in_set).cte(
            "places"
        )
    made = (
        insert(GameSet.__table__)
        .from_select(
            ["player_id", "kind", "size", "level", "answered", "points", "exact", "started_at"],
            select(
                _PLAYER_ID,
                literal(NORMAL_SET, SETS.kind.type),
                bindparam("set_size", type_=Integer),
                bindparam("set_level", type_=SETS.level.type),
                literal(0, Integer),
                literal(0, Integer),
                literal(0, Integer),
                _NOW,
            ).select_from(picked),
            include_defaults=False,
        )
        .returning(SETS.id)
        .cte("made")
    )
    places = select(last, made.c.id.label("set_id"), literal(0, Integer).label("in_set"))
    return places.select_from(made).cte("places")


def _new_round(picked: CTE, places: CTE) -> CTE:
    """The new round on the picked text, at the player's next places, with s[0] revealed (the
    row `create_round` inserts)."""
    return (
        insert(Round.__table__)
        .from_select(
            [
                "player_id",
                "example_id",
                "order_index",
                "chosen_category",
                "kind",
                "set_id",
                "revealed",
                "started_at",
                "reasons",
                "explanation",
                "upvotes",
            ],
            select(
                _PLAYER_ID,
                picked.c.id,
                func.coalesce(places.c.last, 0) + 1,
                bindparam("chosen_category", type_=ROUNDS.chosen_category.type),
                literal(NORMAL_ROUND, ROUNDS.kind.type),
                places.c.set_id,
                literal(1, Integer),
                _NOW,
                bindparam("reasons", type_=ROUNDS.reasons.type),
                literal("", ROUNDS.explanation.type),
                literal(0, Integer),
            ).select_from(picked.join(places, true())),
            include_defaults=False,
        )
        .returning(ROUNDS.id, ROUNDS.example_id, ROUNDS.set_id, ROUNDS.order_index)
        .cte("new")
    )


def _first_reveal(new: CTE) -> CTE:
    """The new round's reveal of s[0]."""
    return (
        insert(Reveal.__table__)
        .from_select(
            ["round_id", "sentence_index", "revealed_at"],
            select(new.c.id, literal(0, Integer), _NOW),
            include_defaults=False,
        )
        .cte("first_reveal")
    )


def _passages_read(new: CTE) -> CTE:
    """The new round's passages, as read by the player from now (`_remember_passages`)."""
    return (
        postgresql.insert(PassageRead.__table__)
        .from_select(
            ["player_id", "passage_id", "read_at"],
            select(_PLAYER_ID, _passages.passage_id, _NOW).join_from(
                ExamplePassage.__table__, new, _passages.example_id == new.c.example_id
            ),
            include_defaults=False,
        )
        .on_conflict_do_nothing()
        .cte("read")
    )


def start_at_once(
    player: Player, chosen_category: str, game_set: GameSet | None, level: str | None = None
) -> RevealView | None:
    """Start the player's next round, of `game_set` (a normal set, unfinished, loaded, whose
    level is `level`) or of a new normal set of difficulty `level` (`game_set` None), on
    PostgreSQL in one statement, when the caller has just found no open round: the same rows as
    `start_round` (and `sets._normal_set`), returned as the view the round's fragment is drawn
    from (no ORM objects).

    None when this cannot serve: not PostgreSQL, no text found (or no such category), or another
    request opened a round or a set meanwhile; nothing is stored then, and the caller takes the
    full path, which looks for the open round again and refuses as it always does.
    """
    if not in_one_statement():
        return None
    by_category = chosen_category != RANDOM
    statement = _start_in_one_statement(
        by_category,
        current_app.config["AVOID_REPEATED_PASSAGES"],
        level is not None,
        game_set is None,
    )
    params = {
        "player_id": player.id,
        "fraction": random.random(),
        "chosen_category": chosen_category,
        "now": utcnow(),
        "reasons": [],
    }
    if game_set is None:
        params["set_size"] = size = current_app.config["SET_SIZE"]
        params["set_level"] = level
    else:
        params["set_id"] = game_set.id
        size = game_set.size
    if by_category:
        params["category_slug"] = chosen_category
    if level is not None:
        params["level"] = level
    try:
        row = db.session.execute(statement, params).first()
    except IntegrityError:
        # Another request of the same player started a round (or a set) at the same moment.
        db.session.rollback()
        return None
    if row is None:
        return None
    fresh = game_set is None
    view = RevealView(
        id=row.id,
        player_id=player.id,
        kind=NORMAL_ROUND,
        participant_id=None,
        revealed=1,
        guess=None,
        sentences=row.sentences,
        n_sentences=row.n_sentences,
        category_name=row.category_name,
        set_id=row.set_id,
        set_kind=NORMAL_SET,
        set_number=row.in_set + 1,
        set_size=size,
        set_points=0 if fresh else game_set.points,
        set_answered=0 if fresh else game_set.answered,
        set_finished=False,
        set_day=None if fresh else game_set.day,
        set_level=level,
        order_index=row.order_index,
    )
    # Everything is stored (the statement committed on its own); the player stays loaded.
    commit_keeping(player)
    return view


def _commit_keeping_round(player: Player, current: Round) -> None:
    """Commit, keeping what the round's page shows: the player, the round, its text and set."""
    example = current.example
    db.session.expire(current, ["reveals"])
    # The set was loaded with the round, or given with a new one.
    game_set = current.game_set if current.set_id is not None else None
    commit_keeping(player, current, example, example.category, example.system, game_set)

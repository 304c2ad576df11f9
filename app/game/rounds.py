"""The game service: pick an example and start a round, or load one for its page.

Revealing a round's sentences is app/game/reveals.py; storing the answer, app/game/answers.py.
A round as they read and show it is a `RevealView` (defined here: a round started in one
statement comes back as one).
Every function owns its transaction. The state that decides points (what was revealed, the guess)
lives on the server; the client only sends intents.

Part of the round core (`ROUND_CORE` in tests/test_layering.py: app/game/rounds.py, reveals.py,
answers.py and sets.py), the only modules of app/game that write textual SQL or change the
round's own tables (rounds, reveals, game_sets); the other modules call the core for that.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from flask import current_app
from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    Select,
    bindparam,
    cast,
    exists,
    func,
    insert,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import joinedload, load_only, undefer
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.sql.elements import BindParameter

from app.catalog.records import SLUG_RE
from app.database import ALONE
from app.errors import Conflict, NotFound
from app.extensions import commit_keeping, db
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
# Ids are 32-bit integers in PostgreSQL: a larger one exists nowhere and cannot be looked up.
MAX_ID = 2**31 - 1


@dataclass(frozen=True)
class RevealView:
    """A round as a reveal reads and shows it, from one row: no ORM objects but the player.

    Loading the round with its text, category, system, set and player as ORM objects cost a
    reveal more CPU than anything else it does (docs/performance.md, "CPU per round in
    process"); a reveal reads a few of their columns. The round's page (`rounds.get_round`) and
    a study's round still load the objects.
    """

    id: int
    player_id: int
    kind: str
    participant_id: int | None
    revealed: int
    guess: int | None
    sentences: list[str]
    n_sentences: int
    category_name: str
    # The round's set (None: not in a set) and the round's place in it.
    set_id: int | None
    set_kind: str | None
    set_number: int | None
    set_size: int | None
    set_points: int | None
    set_answered: int | None
    set_finished: bool
    set_day: date | None
    set_level: str | None
    # The round's place among the player's rounds.
    order_index: int

    @property
    def answered(self) -> bool:
        return self.guess is not None


# A text with its category and system, loaded in the same query: every round page needs them.
_EXAMPLE_DETAILS = (
    joinedload(Example.category, innerjoin=True),
    joinedload(Example.system, innerjoin=True),
)
# The columns of a text its pages read (a study's check round reads `source`); the rest (meta,
# provenance, ids from the import) load on first use.
_PAGE_COLUMNS = load_only(
    Example.category_id,
    Example.system_id,
    Example.sentences,
    Example.n_sentences,
    Example.boundary,
    Example.decoding,
    Example.system_label,
    Example.source,
    Example.kind,
)
_WITH_EXAMPLE = tuple(
    joinedload(Round.example, innerjoin=True).options(detail)
    for detail in (_PAGE_COLUMNS, *_EXAMPLE_DETAILS)
)

# The statements every request of a round runs, built once: building a statement and its cache
# key costs as much as running it (docs/performance.md, "What a round asks of the database").
# Their parameters are bound by name.
# Loads the round for its page: its text, category and system, its set and its place there.
_ROUND_FOR_PAGE = (
    select(Round)
    .options(*_WITH_EXAMPLE, joinedload(Round.game_set), undefer(Round.set_number))
    .where(Round.id == bindparam("round_id"))
)
# The same with the round's player, for a request whose session names a player: Flask-Login's
# user loader then finds them loaded (app/accounts/service.py: load_player) instead of running a
# SELECT of its own.
_ROUND_WITH_OWNER = _ROUND_FOR_PAGE.options(joinedload(Round.player, innerjoin=True))
_OPEN_ROUND = (
    select(Round)
    .where(Round.player_id == bindparam("player_id"), Round.guess.is_(None))
    .order_by(Round.id.desc())
    .limit(1)
)
# The player's last order index, and how many rounds the set already holds.
_NEXT_PLACES = select(
    select(func.max(Round.order_index))
    .where(Round.player_id == bindparam("player_id"))
    .scalar_subquery(),
    select(func.count(Round.id)).where(Round.set_id == bindparam("set_id")).scalar_subquery(),
)


def in_one_statement() -> bool:
    """Whether each write of a round's life runs as one statement (PostgreSQL, whose WITH may
    modify data: the start in `start_at_once`, the reveal and the answer); SQLite runs their parts
    one by one. The one place the game asks which database it runs on."""
    return db.session.get_bind().dialect.name == "postgresql"


class NoExamplesLeft(Conflict):
    """The player has already played every text they could be given."""


def categories_with_examples() -> list[Category]:
    """Categories that have at least one example in normal play, by name."""
    return list(
        db.session.scalars(
            select(Category)
            .where(exists().where(Example.category_id == Category.id, Example.kind == NORMAL_ROUND))
            .order_by(Category.name)
        )
    )


def categories_left_for(player: Player) -> list[Category]:
    """Categories that still have a text this player may be served, by name."""
    return [
        category
        for category in categories_with_examples()
        if db.session.scalar(select(unplayed(player, category).exists()))
    ]


def open_round(player: Player) -> Round | None:
    """The player's unanswered round, if any (a player has at most one)."""
    return db.session.scalars(_OPEN_ROUND, {"player_id": player.id}).first()


def category_by_slug(slug: str) -> Category | None:
    """The category with this slug; None for a slug no category can have (no query is made)."""
    if not SLUG_RE.fullmatch(slug):
        return None
    return db.session.scalar(select(Category).where(Category.slug == slug))


def unplayed(player: Player | None, category: Category | None, level: str | None = None) -> Select:
    """The examples of normal play the player (None: a new guest) may be served, in the category
    and of the difficulty level if given: never played, and (unless the operator allows repeats)
    built from no passage the player has already read in any variant."""
    return _unplayed_by_ids(
        player.id if player is not None else None,
        category.id if category is not None else None,
        current_app.config["AVOID_REPEATED_PASSAGES"],
        level,
    )


def _unplayed_by_ids(
    player_id: int | BindParameter | None,
    category_id: int | BindParameter | None,
    avoid_repeats: bool,
    level: str | BindParameter | None = None,
) -> Select:
    query = select(Example).where(Example.kind == NORMAL_ROUND)
    if level is not None:
        query = query.where(Example.level == level)
    if player_id is not None:
        already = select(Round.example_id).where(Round.player_id == player_id)
        query = query.where(Example.id.not_in(already))
        if avoid_repeats:
            read = exists().where(
                ExamplePassage.example_id == Example.id,
                PassageRead.passage_id == ExamplePassage.passage_id,
                PassageRead.player_id == player_id,
            )
            query = query.where(~read)
    if category_id is not None:
        query = query.where(Example.category_id == category_id)
    return query


@functools.cache
def _pick_statement(by_category: bool, avoid_repeats: bool, by_level: bool = False) -> Select:
    """The statement of `_pick_example`, built once per kind of pick."""
    return (
        select(Example)
        .where(
            Example.id
            == _picked_id(
                bindparam("player_id"),
                bindparam("category_id") if by_category else None,
                avoid_repeats,
                bindparam("level") if by_level else None,
            )
        )
        .options(_PAGE_COLUMNS, *_EXAMPLE_DETAILS)
    )


def _picked_id(player_id, category_id, avoid_repeats: bool, level) -> ColumnElement:
    """The id of the text `_pick_example` serves (NULL: none is left), as an expression."""
    eligible = _unplayed_by_ids(player_id, category_id, avoid_repeats, level)
    lowest = (
        eligible.with_only_columns(Example.annotation_count)
        .order_by(Example.annotation_count)
        .limit(1)
        .scalar_subquery()
    )
    first_id = select(func.min(Example.id)).scalar_subquery()
    last_id = select(func.max(Example.id)).scalar_subquery()
    fraction = bindparam("fraction", type_=Float)
    pivot = first_id + cast(fraction * (last_id - first_id + 1), Integer)
    candidates = eligible.with_only_columns(Example.id).where(Example.annotation_count == lowest)
    # Each walk keeps its own `examples` (not the outer query's).
    after = (
        candidates.where(Example.id >= pivot)
        .order_by(Example.id)
        .limit(1)
        .correlate(None)
        .scalar_subquery()
    )
    before = (
        candidates.where(Example.id < pivot)
        .order_by(Example.id.desc())
        .limit(1)
        .correlate(None)
        .scalar_subquery()
    )
    # COALESCE evaluates its second argument only when the first is NULL: the walk back from the
    # point runs only when no text lies after it, in the same statement.
    return func.coalesce(after, before)


def _pick_example(
    player: Player, category: Category | None, level: str | None = None
) -> Example | None:
    """A text the player may be served: one of the least-annotated, at random among them.

    One statement, whose cost does not grow with the pool: walks of `ix_examples_pick` in index
    order, each stopping at the first text the player may read. The first finds the lowest
    annotation count among those texts; the second takes the first such text at or after a
    random point of the id range, and only when there is none, a third the last one before it.
    """
    statement = _pick_statement(
        category is not None, current_app.config["AVOID_REPEATED_PASSAGES"], level is not None
    )
    params = {"player_id": player.id, "fraction": random.random()}
    if category is not None:
        params["category_id"] = category.id
    if level is not None:
        params["level"] = level
    return db.session.scalars(statement, params).first()


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
    if not db.session.scalar(select(unplayed(player, category, level).exists())):
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
        example = _pick_example(player, category, level)
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


@functools.cache
def _start_in_one_statement(by_category: bool, avoid_repeats: bool, by_level: bool, new_set: bool):
    """`start_round`'s work after its look for an open round, as one PostgreSQL statement: the
    pick (`_pick_example`, the category by its slug), the player's next places (`_NEXT_PLACES`),
    with `new_set` the player's new normal set (as `sets._normal_set` makes it), the round with
    s[0] revealed, its first reveal and the text's passages as read (`_remember_passages`).

    It returns the new round's id and set, what its fragment shows of the text and how many
    rounds the set held before; no row, and nothing stored, when no text is left (or the slug
    names no category). A round (or set) opened meanwhile by another request breaks a unique
    index: IntegrityError, and nothing is stored."""
    player_id = bindparam("player_id", type_=Integer)
    now = bindparam("now", type_=UTCDateTime())
    category_id = None
    if by_category:
        category_id = (
            select(CATEGORIES.id)
            .where(CATEGORIES.slug == bindparam("category_slug"))
            .scalar_subquery()
        )
    picked = (
        select(
            EXAMPLES.id,
            EXAMPLES.sentences,
            EXAMPLES.n_sentences,
            CATEGORIES.name.label("category_name"),
        )
        .join_from(Example.__table__, Category.__table__, CATEGORIES.id == EXAMPLES.category_id)
        .where(
            EXAMPLES.id
            == _picked_id(
                player_id, category_id, avoid_repeats, bindparam("level") if by_level else None
            )
        )
        .cte("picked")
    )
    last = (
        select(func.max(ROUNDS.order_index))
        .where(ROUNDS.player_id == player_id)
        .scalar_subquery()
        .label("last")
    )
    if new_set:
        made = (
            insert(GameSet.__table__)
            .from_select(
                ["player_id", "kind", "size", "level", "answered", "points", "exact", "started_at"],
                select(
                    player_id,
                    literal(NORMAL_SET, SETS.kind.type),
                    bindparam("set_size", type_=Integer),
                    bindparam("set_level", type_=SETS.level.type),
                    literal(0, Integer),
                    literal(0, Integer),
                    literal(0, Integer),
                    now,
                ).select_from(picked),
                include_defaults=False,
            )
            .returning(SETS.id)
            .cte("made")
        )
        places = select(last, made.c.id.label("set_id"), literal(0, Integer).label("in_set"))
        places = places.select_from(made).cte("places")
    else:
        in_set = (
            select(func.count(ROUNDS.id))
            .where(ROUNDS.set_id == bindparam("set_id"))
            .scalar_subquery()
            .label("in_set")
        )
        places = select(last, bindparam("set_id", type_=Integer).label("set_id"), in_set)
        places = places.cte("places")
    new = (
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
                player_id,
                picked.c.id,
                func.coalesce(places.c.last, 0) + 1,
                bindparam("chosen_category", type_=ROUNDS.chosen_category.type),
                literal(NORMAL_ROUND, ROUNDS.kind.type),
                places.c.set_id,
                literal(1, Integer),
                now,
                bindparam("reasons", type_=ROUNDS.reasons.type),
                literal("", ROUNDS.explanation.type),
                literal(0, Integer),
            ).select_from(picked.join(places, true())),
            include_defaults=False,
        )
        .returning(ROUNDS.id, ROUNDS.example_id, ROUNDS.set_id, ROUNDS.order_index)
        .cte("new")
    )
    first_reveal = (
        insert(Reveal.__table__)
        .from_select(
            ["round_id", "sentence_index", "revealed_at"],
            select(new.c.id, literal(0, Integer), now),
            include_defaults=False,
        )
        .cte("first_reveal")
    )
    read = (
        postgresql.insert(PassageRead.__table__)
        .from_select(
            ["player_id", "passage_id", "read_at"],
            select(player_id, _passages.passage_id, now).join_from(
                ExamplePassage.__table__, new, _passages.example_id == new.c.example_id
            ),
            include_defaults=False,
        )
        .on_conflict_do_nothing()
        .cte("read")
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
        .add_cte(first_reveal, read)
        .execution_options(**ALONE)
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


def preload_round(round_id: int) -> Round | None:
    """Load a round for its page together with its player, before the request's player is known.

    When the session's player owns the round, loading them (Flask-Login's user loader) then
    takes no statement; otherwise it runs its own as usual, and `get_round` refuses the round.
    Nothing is decided here: the session's version is still checked against the player's row.
    The caller keeps the round for the request: the session's identity map holds it weakly.
    """
    if 0 < round_id <= MAX_ID:
        return db.session.scalars(_ROUND_WITH_OWNER, {"round_id": round_id}).first()
    return None


def get_round(player: Player, round_id: int) -> Round:
    """The player's own round; someone else's round is reported as not found."""
    # One query for the round, its text, category, system and set: every page and answer needs
    # them.
    found = None
    if 0 < round_id <= MAX_ID:
        found = db.session.identity_map.get(db.session.identity_key(Round, round_id))
        if found is None:
            found = db.session.scalars(_ROUND_FOR_PAGE, {"round_id": round_id}).first()
    if found is None or found.player_id != player.id:
        raise NotFound("That round does not exist.")
    return found


def _commit_keeping_round(player: Player, current: Round) -> None:
    """Commit, keeping what the round's page shows: the player, the round, its text and set."""
    example = current.example
    db.session.expire(current, ["reveals"])
    # The set was loaded with the round, or given with a new one.
    game_set = current.game_set if current.set_id is not None else None
    commit_keeping(player, current, example, example.category, example.system, game_set)


def add_upvote(round_id: int) -> None:
    """Count one up-vote more on the round's explanation (no commit; app/game/insights.py
    checks the vote and keeps who cast it)."""
    db.session.execute(update(Round).where(Round.id == round_id).values(upvotes=Round.upvotes + 1))

"""The game service: pick an example, reveal sentences one at a time, store the answer.

Every function owns its transaction. The state that decides points (what was revealed, the guess)
lives on the server; the client only sends intents.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime

from flask import current_app
from sqlalchemy import (
    Boolean,
    ColumnElement,
    Float,
    Integer,
    Select,
    bindparam,
    case,
    cast,
    exists,
    func,
    insert,
    literal,
    select,
    text,
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
from app.errors import BadRequest, Conflict, NotFound
from app.extensions import commit_keeping, db, retrying
from app.game import hooks
from app.game import reasons as reason_catalogue
from app.game.scoring import Verdict, verdict
from app.game.typing_signals import NOT_REPORTED, Typing
from app.leaderboard import integrity, standings
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
from app.models.sets import NORMAL_SET

RANDOM = "random"
NORMAL = "normal"
CHECK = "attention_check"
PRACTICE = "practice"
_START_ATTEMPTS = 5
# How sure a player may say they are of a guess, in percent (optional).
CONFIDENCE_LEVELS = (50, 70, 90)
# Ids are 32-bit integers in PostgreSQL: a larger one exists nowhere and cannot be looked up.
MAX_ID = 2**31 - 1


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
# key costs as much as running it (docs/BENCHMARKS.md). Their parameters are bound by name.
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
# Writes go to the tables (no ORM bookkeeping); the service puts the new values onto the loaded
# objects itself.
_rounds, _examples, _sets = Round.__table__.c, Example.__table__.c, GameSet.__table__.c
_REVEAL = (
    update(Round.__table__)
    .where(
        _rounds.id == bindparam("round_id"),
        _rounds.revealed == bindparam("seen"),
        _rounds.guess.is_(None),
    )
    .values(revealed=_rounds.revealed + 1)
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
        _rounds.id == bindparam("round_id"),
        _rounds.guess.is_(None),
        _rounds.revealed == bindparam("seen"),
    )
    .values({name: bindparam(f"new_{name}") for name in _ANSWER_FIELDS})
)
_ANNOTATED = (
    update(Example.__table__)
    .where(_examples.id == bindparam("example_id"))
    .values(annotation_count=_examples.annotation_count + 1)
)


class NoExamplesLeft(Conflict):
    """The player has already played every text they could be given."""


def categories_with_examples() -> list[Category]:
    """Categories that have at least one example in normal play, by name."""
    return list(
        db.session.scalars(
            select(Category)
            .where(exists().where(Example.category_id == Category.id, Example.kind == NORMAL))
            .order_by(Category.name)
        )
    )


def categories_left_for(player: Player) -> list[Category]:
    """Categories that still have a text this player may be served, by name."""
    return [
        category
        for category in categories_with_examples()
        if db.session.scalar(select(_unplayed(player, category).exists()))
    ]


def open_round(player: Player) -> Round | None:
    """The player's unanswered round, if any (a player has at most one)."""
    return db.session.scalars(_OPEN_ROUND, {"player_id": player.id}).first()


def category_by_slug(slug: str) -> Category | None:
    """The category with this slug; None for a slug no category can have (no query is made)."""
    if not SLUG_RE.fullmatch(slug):
        return None
    return db.session.scalar(select(Category).where(Category.slug == slug))


def _unplayed(player: Player | None, category: Category | None, level: str | None = None) -> Select:
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
    query = select(Example).where(Example.kind == NORMAL)
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
    if not db.session.scalar(select(_unplayed(player, category, level).exists())):
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
        _remember_passages_statement(db.session.get_bind().dialect.name),
        {"player_id": player_id, "example_id": example_id, "read_at": now},
    )


def create_round(
    player: Player,
    example: Example,
    chosen_category: str,
    kind: str = NORMAL,
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
            select(_categories.id)
            .where(_categories.slug == bindparam("category_slug"))
            .scalar_subquery()
        )
    picked = (
        select(
            _examples.id,
            _examples.sentences,
            _examples.n_sentences,
            _categories.name.label("category_name"),
        )
        .join_from(Example.__table__, Category.__table__, _categories.id == _examples.category_id)
        .where(
            _examples.id
            == _picked_id(
                player_id, category_id, avoid_repeats, bindparam("level") if by_level else None
            )
        )
        .cte("picked")
    )
    last = (
        select(func.max(_rounds.order_index))
        .where(_rounds.player_id == player_id)
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
                    literal(NORMAL_SET, _sets.kind.type),
                    bindparam("set_size", type_=Integer),
                    bindparam("set_level", type_=_sets.level.type),
                    literal(0, Integer),
                    literal(0, Integer),
                    literal(0, Integer),
                    now,
                ).select_from(picked),
                include_defaults=False,
            )
            .returning(_sets.id)
            .cte("made")
        )
        places = select(last, made.c.id.label("set_id"), literal(0, Integer).label("in_set"))
        places = places.select_from(made).cte("places")
    else:
        in_set = (
            select(func.count(_rounds.id))
            .where(_rounds.set_id == bindparam("set_id"))
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
                bindparam("chosen_category", type_=_rounds.chosen_category.type),
                literal(NORMAL, _rounds.kind.type),
                places.c.set_id,
                literal(1, Integer),
                now,
                bindparam("reasons", type_=_rounds.reasons.type),
                literal("", _rounds.explanation.type),
                literal(0, Integer),
            ).select_from(picked.join(places, true())),
            include_defaults=False,
        )
        .returning(_rounds.id, _rounds.example_id, _rounds.set_id)
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
    if db.session.get_bind().dialect.name != "postgresql":
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
        kind=NORMAL,
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


@dataclass(frozen=True)
class RevealView:
    """A round as a reveal reads and shows it, from one row: no ORM objects but the player.

    Loading the round with its text, category, system, set and player as ORM objects cost a
    reveal more CPU than anything else it does (docs/BENCHMARKS.md); a reveal reads a few of
    their columns. The round's page, the answer and anything unusual still load the objects.
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

    @property
    def answered(self) -> bool:
        return self.guess is not None


_categories, _players = Category.__table__.c, Player.__table__.c
# The round for a reveal with its player (an ORM object: Flask-Login's user loader finds it in
# the session, as with `_ROUND_WITH_OWNER`), the rest as plain columns.
_REVEAL_VIEW = (
    select(
        _rounds.id,
        _rounds.player_id,
        _rounds.kind,
        _rounds.participant_id,
        _rounds.revealed,
        _rounds.guess,
        _examples.sentences,
        _examples.n_sentences,
        _categories.name.label("category_name"),
        _rounds.set_id,
        _sets.kind.label("set_kind"),
        Round.set_number.expression.label("set_number"),
        _sets.size.label("set_size"),
        _sets.points.label("set_points"),
        _sets.answered.label("set_answered"),
        _sets.finished_at.label("set_finished_at"),
        _sets.day.label("set_day"),
        _sets.level.label("set_level"),
        Player,
    )
    .select_from(Round.__table__)
    .join(Example.__table__, _examples.id == _rounds.example_id)
    .join(Category.__table__, _categories.id == _examples.category_id)
    .join(Player.__table__, _players.id == _rounds.player_id)
    .outerjoin(GameSet.__table__, _sets.id == _rounds.set_id)
    .where(_rounds.id == bindparam("round_id"))
)


def _reveal_fields(row) -> dict:
    """A `RevealView`'s fields from a row of `_REVEAL_VIEW` (or of a query that extends it)."""
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
    }


def preload_reveal(round_id: int) -> tuple[Player, RevealView] | None:
    """Load a round for a reveal together with its player, before the request's player is known
    (see `preload_round`: the session's version is still checked, and another player's round is
    still refused). The caller keeps the player for the request."""
    if not 0 < round_id <= MAX_ID:
        return None
    row = db.session.execute(_REVEAL_VIEW, {"round_id": round_id}).first()
    if row is None:
        return None
    return row.Player, RevealView(**_reveal_fields(row))


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
_ANSWER_VIEW = _REVEAL_VIEW.add_columns(
    _rounds.points,
    _rounds.reasons,
    _rounds.explanation,
    _rounds.uncounted,
    _rounds.started_at,
    _rounds.chosen_category,
    _rounds.example_id,
    _examples.boundary,
    _examples.decoding,
    _examples.system_label,
    _examples.category_id,
    _categories.slug.label("category_slug"),
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
        **_reveal_fields(row),
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


def reveal_next(player: Player, round_id: int, seen: int) -> Round:
    """Reveal the next sentence. `seen` is how many sentences the client was showing.

    A stale or repeated request (seen != revealed) is refused, so a double click cannot skip a
    sentence.
    """
    current = get_round(player, round_id)
    if current.answered:
        raise Conflict("This round is already answered.")
    if seen != current.revealed:
        raise Conflict("This page was out of date; here is the round as it stands.")
    if current.revealed >= current.example.n_sentences:
        raise Conflict("Every sentence is already shown: decide whether it is all human.")
    _move_on(current.id, seen)
    set_committed_value(current, "revealed", seen + 1)
    try:
        # The page drawn next shows this round: keep it, its text and the player loaded.
        _commit_keeping_round(player, current)
    except IntegrityError:
        db.session.rollback()
        raise Conflict("This page was out of date; here is the round as it stands.") from None
    return current


def reveal_preloaded(player: Player, view: RevealView, seen: int) -> RevealView:
    """`reveal_next` for a round loaded by `preload_reveal`: the same checks and statements, no
    ORM objects. Returns the round as it now stands."""
    if view.player_id != player.id:
        raise NotFound("That round does not exist.")
    if view.answered:
        raise Conflict("This round is already answered.")
    if seen != view.revealed:
        raise Conflict("This page was out of date; here is the round as it stands.")
    if view.revealed >= view.n_sentences:
        raise Conflict("Every sentence is already shown: decide whether it is all human.")
    _move_on(view.id, seen)
    try:
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
        if db.session.get_bind().dialect.name == "postgresql":
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


def _commit_keeping_round(player: Player, current: Round) -> None:
    """Commit, keeping what the round's page shows: the player, the round, its text and set."""
    example = current.example
    db.session.expire(current, ["reveals"])
    # The set was loaded with the round, or given with a new one.
    game_set = current.game_set if current.set_id is not None else None
    commit_keeping(player, current, example, example.category, example.system, game_set)


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

    def __init__(self, round_: Round):
        super().__init__("You already answered this round; here is your result.")
        self.round = round_


def submit_answer(player: Player, round_id: int, answer: Answer) -> Round:
    """Store the guess and its points once. Points come from the stored boundary only.

    A transaction PostgreSQL aborts as a deadlock's victim or a serialization failure is rolled
    back and run again (`retrying`) instead of failing the request. Everything the answer does
    before its commit is in the transaction or safe to repeat (forgetting cached boards, the
    cached site rate, the browser's device token kept in `g`).
    """
    return retrying(
        lambda: _submit_answer_once(player, round_id, answer), f"answer to round {round_id}"
    )


def _submit_answer_once(player: Player, round_id: int, answer: Answer) -> Round:
    current = get_round(player, round_id)
    if current.answered:
        raise AlreadyAnswered(current)
    example = current.example
    stored = _store_answer(player, current, example.id, example, answer)
    if stored is None:
        # Someone (a double click, another tab) got there first: keep their answer.
        db.session.rollback()
        db.session.refresh(current)
        if current.answered:
            raise AlreadyAnswered(current)
        raise Conflict("This page was out of date; here is the round as it stands.")
    if stored.set_figures is not None and current.game_set is not None:
        for name, value in zip(_SET_FIGURES, stored.set_figures, strict=True):
            set_committed_value(current.game_set, name, value)
    # A study counts the answer in the same transaction (app/crowd/hooks.py).
    hooks.answer_stored.send(current, stored.guess == example.boundary)
    category_slug = example.category.slug
    for column, value in stored.values.items():
        set_committed_value(current, column, value)
    db.session.expire(example, ["annotation_count"])
    _commit_keeping_round(player, current)
    _after_counted(stored, category_slug)
    return current


def submit_preloaded(player: Player, view: AnswerView, answer: Answer) -> AnswerView:
    """`submit_answer` for a round loaded by `preload_answer`: the same checks, statements,
    hooks and retries, no ORM objects but the player. Returns the round as it now stands."""
    return retrying(
        lambda: _submit_preloaded_once(player, view, answer), f"answer to round {view.id}"
    )


def _submit_preloaded_once(player: Player, view: AnswerView, answer: Answer) -> AnswerView:
    if view.player_id != player.id:
        raise NotFound("That round does not exist.")
    if view.answered:
        raise AlreadyAnswered(get_round(player, view.id))
    stored = _store_answer(player, view, view.example_id, view, answer)
    if stored is None:
        # Someone (a double click, another tab) got there first: keep their answer.
        db.session.rollback()
        current = get_round(player, view.id)
        if current.answered:
            raise AlreadyAnswered(current)
        raise Conflict("This page was out of date; here is the round as it stands.")
    hooks.answer_stored.send(view, stored.guess == view.boundary)
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


def _store_answer(player: Player, current, example_id: int, text, answer: Answer) -> _Stored | None:
    """Check the answer against the open round and store it, with the text's count, the set's
    figures, the truth shown and the boards (no commit); None when another request answered or
    moved the round first (nothing is rolled back here). `current`: the round (`Round` or
    `AnswerView`: id, revealed, kind, uncounted, set_id, started_at); `text`: its text
    (`Example` or the view: n_sentences, boundary, category_id)."""
    n = text.n_sentences
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
    result: Verdict = verdict(guess, text.boundary, n)
    scored = current.kind == NORMAL
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
    if db.session.get_bind().dialect.name == "postgresql":
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
        integrity.count(player, text, guess, result, current.started_at, current.revealed, now)
    return _Stored(guess, result, stored_values, figures, counted, now)


def _after_counted(stored: _Stored, category_slug: str) -> None:
    """After the commit of a counted answer: the boards it moved are read afresh."""
    if stored.counted:
        standings.invalidate(category_slug, stored.now)
        # About one answer in 50 then adds up the boards' pending count changes (never fails).
        standings.fold_if_due()


_SET_FIGURES = ("answered", "points", "exact", "finished_at")
_COUNT_IN_SET = (
    update(GameSet.__table__)
    .where(_sets.id == bindparam("set_id"))
    .values(
        answered=_sets.answered + 1,
        points=_sets.points + bindparam("add_points"),
        exact=_sets.exact + bindparam("add_exact"),
        finished_at=case(
            (_sets.answered + 1 >= _sets.size, bindparam("now", type_=UTCDateTime())),
            else_=_sets.finished_at,
        ),
    )
    .returning(*(_sets[name] for name in _SET_FIGURES))
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
    *(bindparam(f"new_{name}", type_=_rounds[name].type) for name in _ANSWER_FIELDS),
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


def visible_sentences(round_: Round) -> list[str]:
    """Only what the player has been shown; the whole text once the round is answered."""
    sentences = round_.example.sentences
    return list(sentences if round_.answered else sentences[: round_.revealed])


def result_of(round_: Round) -> Verdict:
    """The stored round's verdict (raises if the round is not answered)."""
    if not round_.answered:
        raise ValueError("round is not answered yet")
    return verdict(round_.guess, round_.example.boundary, round_.example.n_sentences)

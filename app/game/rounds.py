"""The game service's reads of a round: which texts a player may still be served (and the pick
of one), and loading a round for its page.

Starting a round is app/game/starts.py; revealing its sentences, app/game/reveals.py; storing
the answer, app/game/answers.py. A round as they read and show it is a `RevealView` (defined
here): a round started (in one statement) or resumed (`reveals.open_round`) comes back as one.
Every function owns its transaction. The state that decides points (what was revealed, the guess)
lives on the server; the client only sends intents.

Part of the round core (`ROUND_CORE` in tests/test_layering.py: app/game/rounds.py, starts.py,
reveals.py, answers.py and sets.py), the only modules of app/game that write textual SQL or
change the round's own tables (rounds, reveals, game_sets); the other modules call the core for
that.
"""

from __future__ import annotations

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
    select,
    update,
)
from sqlalchemy.orm import joinedload, load_only, undefer
from sqlalchemy.sql.elements import BindParameter

from app.catalog.records import SLUG_RE
from app.errors import NotFound
from app.extensions import db
from app.models import (
    Category,
    Example,
    ExamplePassage,
    PassageRead,
    Player,
    Round,
)
from app.models.rounds import NORMAL_ROUND

# Ids are 32-bit integers in PostgreSQL: a larger one exists nowhere and cannot be looked up.
MAX_ID = 2**31 - 1


@dataclass(frozen=True)
class RevealView:
    """A round as a reveal reads and shows it, from one row: no ORM objects but the player.

    Loading the round with its text, category, system, set and player as ORM objects cost a
    reveal more CPU than anything else it does (docs/performance.md, "CPU per round in
    process"); a reveal reads a few of their columns, and a round started or resumed
    (`starts.new_round`, `reveals.open_round`) comes back as one. The round's page
    (`rounds.get_round`) still loads the objects; a study's round loads its `Round` too when it
    is drawn, for the study's `round_page` hook (app/game/round_views.py: `render_state`).
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


def in_one_statement() -> bool:
    """Whether each write of a round's life runs as one statement (PostgreSQL, whose WITH may
    modify data: the start in `starts.new_round`, the reveal and the answer); SQLite runs
    their parts one by one. The one place the game asks which database it runs on."""
    return db.session.get_bind().dialect.name == "postgresql"


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


def picked_id(
    player_id: BindParameter,
    category_id: BindParameter | ColumnElement | None,
    avoid_repeats: bool,
    level: BindParameter | None,
) -> ColumnElement:
    """The id of the text a new round is on (NULL: none is left), as an expression of the
    player's id, the category's (None: any) and the level (None: any): one of the
    least-annotated texts the player may read, at random among them (app/game/starts.py).

    Its cost does not grow with the pool: walks of `ix_examples_pick` in index order, each
    stopping at the first text the player may read. The first finds the lowest annotation count
    among those texts; the second takes the first such text at or after a random point of the
    id range, and only when there is none, a third the last one before it."""
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


def add_upvote(round_id: int) -> None:
    """Count one up-vote more on the round's explanation (no commit; app/game/insights.py
    checks the vote and keeps who cast it)."""
    db.session.execute(update(Round).where(Round.id == round_id).values(upvotes=Round.upvotes + 1))

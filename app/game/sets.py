"""Sets: play comes in runs of a few texts with a running score and a summary at the end.

A player has at most one unfinished normal set; choosing a category continues it (its next text
comes from the chosen category). The daily challenge, a past day's practice and a friend's
challenge are sets too (app/game/daily.py, practice.py, challenge.py), started by `start_set`. The
rounds service adds each answer to its set's figures in the answer's transaction and finishes a
full set.

Part of the round core, which app/game/rounds.py describes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from sqlalchemy import and_, bindparam, func, select

from app.errors import Conflict, NotFound
from app.extensions import add_or_theirs, db
from app.game import reveals, rounds, starts, tally
from app.game.scoring import verdict
from app.models import Category, Example, GameSet, Player, Round
from app.models.base import utcnow
from app.models.sets import NORMAL_SET

_OPEN_NORMAL_SET = select(GameSet).where(
    GameSet.player_id == bindparam("player_id"),
    GameSet.kind == NORMAL_SET,
    GameSet.finished_at.is_(None),
)


def open_normal_set(player: Player) -> GameSet | None:
    return db.session.scalars(_OPEN_NORMAL_SET, {"player_id": player.id}).first()


def start_set(
    player: Player,
    kind: str,
    size: int,
    theirs: Callable[[], GameSet | None],
    day: date | None = None,
    challenge_of: GameSet | None = None,
) -> GameSet | None:
    """A new set of `kind` with `size` texts for the player, committed: a daily or practice set
    plays `day`'s challenge, a friend's challenge run the texts of `challenge_of`. When another
    request of the player made the same set at the same moment, theirs, as `theirs()` finds it."""
    new = GameSet(
        player_id=player.id,
        kind=kind,
        size=size,
        day=day,
        challenge_of_id=challenge_of.id if challenge_of is not None else None,
    )
    return add_or_theirs(new, theirs)


def finish_early(game_set: GameSet) -> None:
    """End the set at the texts answered so far (its other texts were all played elsewhere),
    and commit."""
    game_set.size = game_set.answered
    game_set.finished_at = game_set.finished_at or utcnow()
    db.session.commit()


def play(player: Player, category_slug: str, level: str | None = None) -> reveals.RevealView:
    """The round to show after a category is chosen: the open round, or the next text of the
    player's set (a new set if none is open) from that category.

    `level` ("easy", "medium", "hard") draws the set's texts from that difficulty level from now
    on, "any" from every level; None keeps the open set's level (a new set has none).
    The round comes as the `reveals.RevealView` its page is drawn from; a new one is started
    with its new set, if any (`starts.new_round`).
    """
    # The open set and whether a round is open, in one statement: a round open already is what
    # `start_round` looks for first (it looks again only when there is one).
    current, open_id = db.session.execute(_OPEN_SET_AND_ROUND, {"player_id": player.id}).one()
    chosen = (current.level if current is not None else None) if level is None else level
    chosen = None if chosen == "any" else chosen
    return starts.start_round(
        player,
        category_slug,
        current,
        normal_set=lambda: open_normal_set(player),
        level=chosen,
        looked_up=open_id is None,
    )


# The id of the player's open round (None: none is open), by the index of open rounds.
OPEN_ROUND_ID = (
    select(Round.id)
    .where(Round.player_id == bindparam("player_id"), Round.guess.is_(None))
    .order_by(Round.id.desc())
    .limit(1)
    .scalar_subquery()
)
# The player's open normal set (None: none) and `OPEN_ROUND_ID`: one row, from the player's.
_OPEN_SET_AND_ROUND = (
    select(GameSet, OPEN_ROUND_ID)
    .select_from(Player)
    .outerjoin(
        GameSet,
        and_(
            GameSet.player_id == Player.id,
            GameSet.kind == NORMAL_SET,
            GameSet.finished_at.is_(None),
        ),
    )
    .where(Player.id == bindparam("player_id"))
)
# A set with its player, for a request whose session names a player (see `preload_set`).
_SET_WITH_OWNER = (
    select(GameSet, Player)
    .join(Player, Player.id == GameSet.player_id)
    .where(GameSet.id == bindparam("set_id"))
)


def preload_set(set_id: int) -> tuple | None:
    """Load a set together with its player in one statement, before the request's player is
    known: Flask-Login's user loader then finds the session's player loaded when they own the
    set (their version is still checked), and `get_own` finds the set. The caller keeps what
    this returns for the request: the session's identity map holds objects weakly."""
    if 0 < set_id <= rounds.MAX_ID:
        return db.session.execute(_SET_WITH_OWNER, {"set_id": set_id}).first()
    return None


def get_own(player: Player, set_id: int) -> GameSet:
    found = db.session.get(GameSet, set_id) if 0 < set_id <= rounds.MAX_ID else None
    if found is None or found.player_id != player.id:
        raise NotFound("That set does not exist.")
    return found


def last_category(game_set: GameSet, known: str | None = None) -> str:
    """What the player last chose in this set ("random" for a new set). `known`: the last
    round's choice, already read (`Summary.last_chosen`), so no query is needed."""
    if known:
        return known
    chosen = db.session.scalar(
        select(Round.chosen_category)
        .where(Round.set_id == game_set.id)
        .order_by(Round.id.desc())
        .limit(1)
    )
    return chosen or starts.RANDOM


def last_choice(player: Player) -> str:
    """The category the player last chose for a normal set ("random" if none): a new set, "Play
    another set" and "Continue your set" keep it."""
    chosen = db.session.scalar(
        select(Round.chosen_category)
        .join(GameSet, GameSet.id == Round.set_id)
        .where(Round.player_id == player.id, GameSet.kind == NORMAL_SET)
        .order_by(Round.id.desc())
        .limit(1)
    )
    return chosen or starts.RANDOM


@dataclass(frozen=True)
class Position:
    """Where a round stands in its set, for the header: text `number` of `size`."""

    set_id: int
    kind: str
    number: int
    size: int
    points: int
    answered: int
    finished: bool
    # The challenge's day, for daily sets.
    day: date | None
    # The difficulty level the set's texts come from (None: any).
    level: str | None = None


@dataclass(frozen=True)
class Call:
    """One text of a finished set, as the summary shows it."""

    round_id: int
    number: int
    category: str
    # What the text earned (0 when it did not count).
    points: int
    distance: int
    exact: bool
    all_human: bool
    counted: bool
    # Mean points of the other players who answered the same text; None when nobody else has.
    others_mean: float | None
    others: int
    example_id: int = 0


@dataclass(frozen=True)
class Summary:
    game_set: GameSet
    calls: list[Call]
    # The category last chosen in a finished set, when known without a query (None: ask
    # `last_category`).
    last_chosen: str | None = None

    @property
    def points(self) -> int:
        return sum(call.points for call in self.calls)

    @property
    def exact(self) -> int:
        return sum(call.exact for call in self.calls)

    @property
    def max_points(self) -> int:
        return 5 * len(self.calls)

    @property
    def others_expected(self) -> float | None:
        """What the other players scored on average on the same texts, summed over the set."""
        known = [call.others_mean for call in self.calls if call.others_mean is not None]
        if len(known) != len(self.calls) or not known:
            return None
        return sum(known)

    @property
    def counted(self) -> bool:
        """Whether every text of the set counted (else the set earns nothing for them)."""
        return all(call.counted for call in self.calls)

    @property
    def best(self) -> Call | None:
        """The counted call that earned most (closest to the boundary among equals); None when
        no call scored."""
        scored = [call for call in self.calls if call.counted and call.points > 0]
        if not scored:
            return None
        return max(scored, key=lambda c: (c.points, -abs(c.distance), -c.number))

    @property
    def worst(self) -> Call | None:
        """The counted call that earned least (furthest from the boundary among equals)."""
        counted = [call for call in self.calls if call.counted]
        if not counted:
            return None
        worst = min(counted, key=lambda c: (c.points, -abs(c.distance), c.number))
        return None if worst == self.best else worst


def summary(player: Player, set_id: int) -> Summary:
    """The answered texts of one of the player's sets, with the other players' results."""
    return summary_of(get_own(player, set_id))


def summary_of(game_set: GameSet) -> Summary:
    """The answered texts of a set, with the results of players other than its owner: what its
    summary shows, and what a challenge compares (app/game/challenge.py)."""
    # The category's name comes with each text: read through `example.category`, each category
    # of a mixed set was a statement of its own.
    rows = db.session.execute(
        select(Round, Example, Category.name)
        .join(Example, Example.id == Round.example_id)
        .join(Category, Category.id == Example.category_id)
        .where(Round.set_id == game_set.id, Round.guess.is_not(None))
        .order_by(Round.id)
    ).all()
    example_ids = [example.id for _, example, _ in rows]
    others = {
        example_id: (count, total)
        for example_id, count, total in db.session.execute(
            select(Round.example_id, func.count(Round.id), func.sum(Round.points))
            .where(
                Round.example_id.in_(example_ids),
                Round.player_id != game_set.player_id,
                Round.guess.is_not(None),
                tally.COUNTED,
            )
            .group_by(Round.example_id)
        )
    }
    calls = []
    for number, (round_, example, category_name) in enumerate(rows, start=1):
        result = verdict(round_.guess, example.boundary, example.n_sentences)
        count, total = others.get(example.id, (0, 0))
        calls.append(
            Call(
                round_id=round_.id,
                number=number,
                category=category_name,
                points=tally.earned(round_),
                distance=result.distance,
                exact=result.exact,
                all_human=example.all_human,
                counted=tally.counts(round_),
                others_mean=(total / count) if count else None,
                others=count,
                example_id=example.id,
            )
        )
    # A finished set's last answered round is its last round (a round of a set starts only once
    # the one before it is answered, and none after its last text): its category is the set's
    # last choice, with no query for it (`last_category`).
    last = rows[-1][0].chosen_category if rows and game_set.finished else None
    return Summary(game_set, calls, last)


class FinishCurrentFirst(Conflict):
    """A daily, practice or challenge set cannot start while a text of other play is open."""

    def __init__(self, round_: reveals.RevealView):
        super().__init__("Finish the text you are reading first, then start the challenge.")
        self.round = round_


class SetFinished(Conflict):
    def __init__(self, game_set: GameSet):
        super().__init__("This set is finished.")
        self.game_set = game_set


class DayOver(SetFinished):
    """A daily challenge started on an earlier day: its remaining texts are no longer served."""

    def __init__(self, game_set: GameSet):
        super().__init__(game_set)
        self.message = "That day's challenge is over; past days can be played for practice."

"""Challenge a friend: a link that plays the texts of a finished set, and both results side by side.

The player who finished a normal set asks for a link (`link`); its token is unguessable and
stored on the set. Whoever opens it (a guest or a signed-in player) plays the same texts, in the
same order, as a set of kind "challenge" (one per friend and link). Their rounds are ordinary
rounds: they count for them as any other answer does, with the same exceptions:

- a text whose passage they had already read in another text is played but does not count
  (`integrity.READ_BEFORE`); a text they already played is left out of their run;
- a text whose truth another identity of the same browser (or public address) was shown first
  does not count (`integrity.answer_seen`): the challenger's second identity earns nothing.

The challenger cannot play their own link. The comparison reads both sets' points through
`sets.summary_of`, the function the set summary reads, so the figures agree. The challenger's
points on a text are shown to the friend only once the friend has answered that text.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace

from flask import current_app
from sqlalchemy import exists, func, select

from app.errors import BadRequest, Conflict, NotFound
from app.extensions import db
from app.game import reveals, sets, starts
from app.game.rounds import RevealView
from app.leaderboard import integrity
from app.models import Example, ExamplePassage, GameSet, PassageRead, Player, Round
from app.models.sets import CHALLENGE_SET, NORMAL_SET

TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{16,32}")
# What a challenge round records as the chosen category.
LABEL = "challenge"
# How many friends' results the challenger sees side by side (the latest ones).
MAX_FRIENDS_SHOWN = 5


class OwnChallenge(Conflict):
    def __init__(self) -> None:
        super().__init__(
            "This is your own challenge: send the link to a friend. Your result is below."
        )


class AlreadyPlayed(Conflict):
    def __init__(self, run: GameSet):
        super().__init__("You have already played this challenge: here are both results.")
        self.run = run


# --- The challenger's link -------------------------------------------------------------------


def link(player: Player, set_id: int) -> GameSet:
    """The player's finished normal set with its challenge token (made on first request).

    Raises NotFound for a set that is not theirs, BadRequest for a daily or challenge set and
    Conflict for a set that is not finished yet.
    """
    game_set = sets.get_own(player, set_id)
    if game_set.kind != NORMAL_SET:
        raise BadRequest(
            "Only a set you chose yourself can be sent as a challenge; the daily challenge "
            "has its own share card."
        )
    if not game_set.finished:
        raise Conflict(
            "Finish the set first: a challenge sends a friend the texts you have read, "
            "once you have read them all."
        )
    if game_set.challenge_token is None:
        game_set.challenge_token = secrets.token_urlsafe(16)
        db.session.commit()
    return game_set


def by_token(token: str) -> GameSet:
    """The challenger's set behind a link; NotFound for a token no link has."""
    found = (
        db.session.scalars(select(GameSet).where(GameSet.challenge_token == token)).first()
        if TOKEN_RE.fullmatch(token)
        else None
    )
    if found is None:
        raise NotFound("There is no such challenge. Check that the whole link was copied.")
    if not found.finished:
        raise Conflict("This set is not finished yet, so it cannot be played as a challenge.")
    return found


def source_of(run: GameSet) -> GameSet:
    """The challenger's set a friend's challenge set plays."""
    found = db.session.get(GameSet, run.challenge_of_id) if run.challenge_of_id else None
    if found is None:
        raise NotFound("That challenge does not exist any more.")
    return found


def texts(source: GameSet) -> list[int]:
    """The example ids of the challenger's set, in the order they were played."""
    return list(
        db.session.scalars(
            select(Round.example_id)
            .where(Round.set_id == source.id, Round.guess.is_not(None))
            .order_by(Round.id)
        )
    )


def own_run(player: Player, source: GameSet) -> GameSet | None:
    """The player's run of this challenge, if they started one."""
    return db.session.scalars(
        select(GameSet).where(
            GameSet.player_id == player.id,
            GameSet.kind == CHALLENGE_SET,
            GameSet.challenge_of_id == source.id,
        )
    ).first()


# --- Playing a challenge ---------------------------------------------------------------------


def _played(player: Player, example_ids: list[int]) -> set[int]:
    if not example_ids:
        return set()
    return set(
        db.session.scalars(
            select(Round.example_id).where(
                Round.player_id == player.id, Round.example_id.in_(example_ids)
            )
        )
    )


def _read_before(player: Player, example_id: int) -> bool:
    """Whether the player already read a passage this text is built from (in another text)."""
    if not current_app.config["AVOID_REPEATED_PASSAGES"]:
        return False
    return bool(
        db.session.scalar(
            select(
                exists().where(
                    ExamplePassage.example_id == example_id,
                    PassageRead.passage_id == ExamplePassage.passage_id,
                    PassageRead.player_id == player.id,
                )
            )
        )
    )


def check_start(player: Player | None, token: str) -> None:
    """Raise what `start` would refuse with (NotFound, OwnChallenge, Conflict), storing nothing:
    the caller checks first when it stores something before (a new guest, a consent). `player`
    None stands for a guest not created yet."""
    source = by_token(token)
    if player is not None and source.player_id == player.id:
        raise OwnChallenge()
    if player is not None and own_run(player, source) is not None:
        return
    example_ids = texts(source)
    played = _played(player, example_ids) if player is not None else set()
    if len(example_ids) - len(played) <= 0:
        raise Conflict(
            "You have already played every text of this challenge, so there is nothing "
            "new to compare."
            if played
            else "This challenge has no texts to play."
        )


def start(player: Player, token: str) -> RevealView:
    """Start (or resume) the player's run of the challenge behind `token`; the round to show.

    Raises NotFound (no such link), OwnChallenge, AlreadyPlayed (their run is finished),
    FinishCurrentFirst (another text is open) and Conflict when they have already played every
    text of it.
    """
    source = by_token(token)
    if source.player_id == player.id:
        raise OwnChallenge()
    run = own_run(player, source)
    if run is None:
        current = reveals.open_round(player)
        if current is not None:
            raise sets.FinishCurrentFirst(current)
        example_ids = texts(source)
        playable = len(example_ids) - len(_played(player, example_ids))
        if playable <= 0:
            raise Conflict(
                "You have already played every text of this challenge, so there is nothing "
                "new to compare."
            )
        run = sets.start_set(
            player, CHALLENGE_SET, playable, lambda: own_run(player, source), challenge_of=source
        )
    if run.finished:
        raise AlreadyPlayed(run)
    return next_round(player, run)


def next_round(player: Player, run: GameSet) -> RevealView:
    """The challenge's next text for this player (or their open round)."""
    current = reveals.open_round(player)
    if current is not None:
        if current.set_id != run.id:
            raise sets.FinishCurrentFirst(current)
        return current
    example_ids = texts(source_of(run))
    played = _played(player, example_ids)
    for example_id in example_ids:
        if example_id in played:
            continue
        example = db.session.get(Example, example_id)
        reason = integrity.READ_BEFORE if _read_before(player, example_id) else None
        new = starts.new_round(player, LABEL, example=example, game_set=run, uncounted=reason)
        if new is not None:
            return new
        current = reveals.open_round(player)
        if current is not None and current.set_id == run.id:
            return current
        raise Conflict("Could not start the next text right now; please try again.")
    # Every text is played (some elsewhere, after the run began): the run ends here.
    sets.finish_early(run)
    raise sets.SetFinished(run)


# --- Results side by side --------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One player's result in a comparison."""

    name: str
    is_viewer: bool
    summary: sets.Summary
    finished: bool
    # The texts the viewer may not see this player's points on yet (the challenger's, for a
    # friend who has not answered them); their points are left out of the total too.
    hidden: frozenset[int] = frozenset()

    def call_for(self, example_id: int) -> sets.Call | None:
        if example_id in self.hidden:
            return None
        for call in self.summary.calls:
            if call.example_id == example_id:
                return call
        return None

    @property
    def points(self) -> int:
        """The set summary's total (`sets.Summary.points`); while texts are hidden, the points
        of the texts shown."""
        if not self.hidden:
            return self.summary.points
        return sum(call.points for call in self.summary.calls if call.example_id not in self.hidden)

    @property
    def complete(self) -> bool:
        """Whether the total is the player's final one, all of it shown."""
        return self.finished and not self.hidden


@dataclass(frozen=True)
class Row:
    number: int
    category: str
    # One entry per column: the call, or None where that player has not answered the text or
    # the viewer may not see it yet.
    calls: list[sets.Call | None]


@dataclass(frozen=True)
class Comparison:
    columns: list[Column]
    rows: list[Row]

    @property
    def max_points(self) -> int:
        return 5 * len(self.rows)


def challenger_name(source: GameSet) -> str:
    """How the challenge names the player who sent it (no name for a guest)."""
    player = db.session.get(Player, source.player_id)
    return player.username if player is not None and player.username else "A guest"


def _name(player: Player, viewer: Player | None) -> str:
    if viewer is not None and player.id == viewer.id:
        return "You"
    return player.username or "A guest"


def compare(source: GameSet, runs: list[GameSet], viewer: Player | None) -> Comparison:
    """The challenger's set and friends' runs side by side, as `viewer` may see them.

    A viewer other than the challenger sees the challenger's points on a text only once they
    have answered it themselves.
    """
    owners = {
        player.id: player
        for player in db.session.scalars(
            select(Player).where(Player.id.in_([source.player_id, *(r.player_id for r in runs)]))
        )
    }
    names = [_name(owners[game_set.player_id], viewer) for game_set in (source, *runs)]
    if names.count("A guest") > 1:
        # Several guests: numbered, in the order of the columns.
        numbered = iter(range(1, len(names) + 1))
        names = [f"Guest {next(numbered)}" if n == "A guest" else n for n in names]
    columns = [
        Column(
            name,
            viewer is not None and game_set.player_id == viewer.id,
            sets.summary_of(game_set),
            game_set.finished,
        )
        for name, game_set in zip(names, (source, *runs), strict=True)
    ]
    if viewer is None or viewer.id != source.player_id:
        answered_by_viewer = set()
        if viewer is not None:
            answered_by_viewer = set(
                db.session.scalars(
                    select(Round.example_id).where(
                        Round.player_id == viewer.id,
                        Round.example_id.in_([c.example_id for c in columns[0].summary.calls]),
                        Round.guess.is_not(None),
                    )
                )
            )
        hidden = frozenset(
            call.example_id
            for call in columns[0].summary.calls
            if call.example_id not in answered_by_viewer
        )
        columns[0] = replace(columns[0], hidden=hidden)
    rows = [
        Row(call.number, call.category, [column.call_for(call.example_id) for column in columns])
        for call in columns[0].summary.calls
    ]
    return Comparison(columns, rows)


def friends_runs(source: GameSet, limit: int = MAX_FRIENDS_SHOWN) -> list[GameSet]:
    """The latest finished runs of the challenge by friends (the challenger's page shows them)."""
    return list(
        db.session.scalars(
            select(GameSet)
            .where(
                GameSet.kind == CHALLENGE_SET,
                GameSet.challenge_of_id == source.id,
                GameSet.finished_at.is_not(None),
            )
            .order_by(GameSet.finished_at.desc(), GameSet.id.desc())
            .limit(limit)
        )
    )


def friends_count(source: GameSet) -> int:
    return (
        db.session.scalar(
            select(func.count(GameSet.id)).where(
                GameSet.kind == CHALLENGE_SET,
                GameSet.challenge_of_id == source.id,
                GameSet.finished_at.is_not(None),
            )
        )
        or 0
    )

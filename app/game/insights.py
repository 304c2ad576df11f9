"""What a reveal teaches: where other players flagged the text, what kind of text it was in plain
words, and the best explanations other players wrote for it (with up-votes).

Only answered rounds reach these functions: nothing here may run before the player's own answer
is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app
from sqlalchemy import (
    Integer,
    bindparam,
    func,
    literal,
    null,
    select,
    union_all,
)
from sqlalchemy.exc import IntegrityError

from app.errors import BadRequest, Conflict, Forbidden, NotFound
from app.extensions import db
from app.game import rounds, tally
from app.game.reasons import REASONS
from app.game.scoring import points as points_for
from app.leaderboard import integrity
from app.models import Example, ExplanationVote, Player, Round
from app.models.base import utcnow
from app.models.rounds import NORMAL_ROUND

MAX_SHOWN = 3


# --- The kind of text, in plain words (pure) -------------------------------------------------


def _number(value: float) -> str:
    return f"{value:g}"


def describe_decoding(decoding: dict | None) -> str | None:
    """Decoding settings as a reader would say them, e.g. "nucleus sampling, p = 0.4"."""
    if not decoding:
        return None
    p = decoding.get("p")
    if _greedy(decoding):
        parts = ["greedy decoding"]
    elif isinstance(p, int | float) and not isinstance(p, bool) and p < 1:
        parts = [f"nucleus sampling, p = {_number(p)}"]
    else:
        parts = ["sampling"]
    for key, name in (
        ("temperature", "temperature"),
        ("top_k", "top-k"),
        ("min_p", "min-p"),
        ("repetition_penalty", "repetition penalty"),
    ):
        value = decoding.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            parts.append(f"{name} {_number(value)}")
    return ", ".join(parts)


@dataclass(frozen=True)
class TextKind:
    """How the reveal names the text: a headline in plain words, the tag of the sentences after
    the boundary ("Machine", or "Other text" for a spliced human baseline; None when all human),
    and the generation settings for the curious (shown one click away)."""

    headline: str
    after_tag: str | None
    settings: str | None = None


def _greedy(decoding: dict) -> bool:
    strategy = str(decoding.get("strategy") or "").lower()
    return strategy == "greedy" or (strategy == "nucleus" and decoding.get("p") == 0)


def describe(boundary: int, n_sentences: int, decoding: dict | None, label: str | None) -> TextKind:
    """The honest description of an answered text; never an internal system name, only the
    display label an operator set for the system."""
    if boundary >= n_sentences:
        return TextKind("All human: every sentence was written by a person.", None)
    if not decoding:
        return TextKind(
            "No machine wrote this one: from the change on, it is a different human-written "
            "text, spliced in to see whether a change of topic alone gives it away.",
            "Other text",
        )
    writer = f"{label}, a language model," if label else "A language model"
    how = (
        "always choosing its most likely next word"
        if _greedy(decoding)
        else "choosing among its likelier words"
    )
    return TextKind(
        f"{writer} continued the text, {how}.",
        "Machine",
        describe_decoding(decoding),
    )


@dataclass(frozen=True)
class Outcome:
    """What happened in an answered round, in a player's words: the headline beside the points
    and a sentence or two on where the text changed and what the player said."""

    headline: str
    detail: str


def _sentences(count: int) -> str:
    return f"{count} sentence{'' if count == 1 else 's'}"


def outcome(kind: TextKind, n: int, boundary: int, guess: int) -> Outcome:
    """The reveal's words for every kind of text: all human, a model's continuation, a splice
    of two human texts (flagging the change is right there too), and a text that changed only
    at its last sentence (where "all human" scores like a flag one sentence late)."""
    if boundary >= n:
        if guess >= n:
            return Outcome(
                "Right: the whole text was human-written!",
                "A person wrote every sentence, and you said so.",
            )
        return Outcome(
            "Too early: the whole text was human-written.",
            f"You flagged sentence {guess + 1}, but a person wrote every sentence.",
        )
    splice = kind.after_tag == "Other text"
    at = boundary + 1
    took = (
        f"A different human-written text begins at sentence {at} of {n}"
        if splice
        else f"The machine took over at sentence {at} of {n}"
    )
    if guess == boundary:
        right = ": flagging it was right" if splice else ""
        return Outcome("Exact!", f"{took}, and you flagged that very sentence{right}.")
    if guess < boundary:
        before = "still part of the first text" if splice else "still written by a person"
        return Outcome(
            f"Too early, by {_sentences(boundary - guess)}.",
            f"{took}; you flagged sentence {guess + 1}, which was {before}.",
        )
    if guess < n:
        right = " Flagging there was right, only late" if splice else " Right, only late"
        return Outcome(
            f"{_sentences(guess - boundary)} late.",
            f"{took}; you flagged sentence {guess + 1}.{right}: one point less for each "
            "sentence after the change.",
        )
    changed = n - boundary
    last = "the last sentence" if changed == 1 else f"the last {changed} sentences"
    headline = (
        f"Not one text: {last} came from a different text."
        if splice
        else f"Not all human: a machine wrote {last}."
    )
    return Outcome(
        headline,
        f"{took}; you said the whole text was human-written. Flagging sentence {at} would have "
        "been right; “all human” scores as a flag just after the last sentence.",
    )


def kind_of(example: Example) -> TextKind:
    return describe(example.boundary, example.n_sentences, example.decoding, example.system_label)


# --- Where other players flagged it ----------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    """Other players' answers on one text: counts[g] answers flagged sentence index g (N: all
    human), and how the player's own points compare."""

    n_sentences: int
    boundary: int
    guess: int
    counts: list[int]
    better_than: int

    @property
    def others(self) -> int:
        return sum(self.counts)

    @property
    def better_share(self) -> float:
        return self.better_than / self.others if self.others else 0.0

    @property
    def worse_than(self) -> int:
        """How many other answers scored more than the player's."""
        mine = points_for(self.guess, self.boundary)
        return sum(c for g, c in enumerate(self.counts) if points_for(g, self.boundary) > mine)

    @property
    def only_flag(self) -> int | None:
        """With exactly one other answer: the sentence number they flagged (N + 1: all human)."""
        if self.others != 1:
            return None
        return next(g for g, c in enumerate(self.counts) if c) + 1


_OTHER_GUESSES = (
    select(Round.guess, func.count(Round.id))
    .where(
        Round.example_id == bindparam("example_id"),
        Round.player_id != bindparam("player_id"),
        Round.guess.is_not(None),
        Round.kind == NORMAL_ROUND,
    )
    .group_by(Round.guess)
)


def _spread_of(rows, n: int, boundary: int, guess: int) -> Spread | None:
    """The spread of others' (guess, count) rows, once at least SPREAD_MIN_OTHERS exist."""
    if sum(count for _, count in rows) < current_app.config["SPREAD_MIN_OTHERS"]:
        return None
    counts = [0] * (n + 1)
    mine = points_for(guess, boundary)
    better = 0
    for other, count in rows:
        counts[min(other, n)] += count
        if points_for(other, boundary) < mine:
            better += count
    return Spread(n, boundary, guess, counts, better)


# --- Explanations and votes ------------------------------------------------------------------


@dataclass(frozen=True)
class Explanation:
    round_id: int
    text: str
    reasons: list[str]
    upvotes: int
    # 1-based number of the sentence the writer flagged.
    flagged: int
    points: int
    voted: bool


def _shown():
    """Rounds whose explanation other players may see: public players' explanations, not
    hidden by a researcher."""
    return select(Round).where(
        Round.guess.is_not(None),
        Round.kind == NORMAL_ROUND,
        Round.participant_id.is_(None),
        Round.explanation != "",
        Round.explanation_hidden_at.is_(None),
    )


# The best explanations of a text by other players, with whether the reader up-voted each: the
# columns the reveal shows, not whole rounds.
_BEST_EXPLANATIONS = (
    _shown()
    .with_only_columns(
        Round.id,
        Round.explanation,
        Round.reasons,
        Round.upvotes,
        Round.guess,
        tally.EARNED.label("points"),
        Round.id.in_(
            select(ExplanationVote.round_id).where(
                ExplanationVote.voter_id == bindparam("player_id")
            )
        ).label("voted"),
    )
    .where(Round.example_id == bindparam("example_id"), Round.player_id != bindparam("player_id"))
    .order_by(Round.upvotes.desc(), tally.EARNED.desc(), Round.id.asc())
    .limit(bindparam("limit"))
)


def _explanation_of(row) -> Explanation:
    return Explanation(
        round_id=row.id,
        text=row.explanation,
        reasons=[REASONS[key][0] for key in row.reasons if key in REASONS],
        upvotes=row.upvotes,
        flagged=row.guess + 1,
        points=row.points,
        voted=bool(row.voted),
    )


# What an answered round teaches, in one statement: the best explanations of other players
# (part 0, most up-voted first), then the other answers' counts by guess (part 1, in `guess`
# and `upvotes`).
_best = _BEST_EXPLANATIONS.subquery()
_PARTS = union_all(
    select(
        literal(0, Integer).label("part"),
        _best.c.id,
        _best.c.explanation,
        _best.c.reasons,
        _best.c.upvotes,
        _best.c.guess,
        _best.c.points,
        _best.c.voted,
    ),
    _OTHER_GUESSES.with_only_columns(
        literal(1, Integer).label("part"),
        null().label("id"),
        null().label("explanation"),
        null().label("reasons"),
        func.count(Round.id).label("upvotes"),
        Round.guess,
        null().label("points"),
        null().label("voted"),
    ),
)
_IN_PARTS = _PARTS.selected_columns
_TEACHING = _PARTS.order_by(
    _IN_PARTS.part, _IN_PARTS.upvotes.desc(), _IN_PARTS.points.desc(), _IN_PARTS.id
)


def teaching(
    example_id: int, player_id: int, n_sentences: int, boundary: int, guess: int
) -> tuple[Spread | None, list[Explanation]]:
    """How other players answered the round's text (its `Spread`, once at least
    SPREAD_MIN_OTHERS did) and the MAX_SHOWN best explanations they wrote, most up-voted first."""
    rows = db.session.execute(
        _TEACHING, {"example_id": example_id, "player_id": player_id, "limit": MAX_SHOWN}
    ).all()
    explanations = [_explanation_of(row) for row in rows if row.part == 0]
    others = [(row.guess, row.upvotes) for row in rows if row.part == 1]
    return _spread_of(others, n_sentences, boundary, guess), explanations


def vote(voter: Player, round_id: int) -> Round:
    """Up-vote another player's explanation, once, after answering the same text oneself."""
    target = (
        db.session.scalars(_shown().where(Round.id == round_id)).first()
        if 0 < round_id <= rounds.MAX_ID
        else None
    )
    if target is None:
        raise NotFound("There is no explanation to vote for here.")
    if target.player_id == voter.id:
        raise BadRequest("You cannot up-vote your own explanation.")
    answered_it = db.session.scalar(
        select(func.count(Round.id)).where(
            Round.player_id == voter.id,
            Round.example_id == target.example_id,
            Round.guess.is_not(None),
        )
    )
    if not answered_it:
        raise BadRequest("Answer this text yourself before voting on explanations of it.")
    if integrity.same_client(target.player_id):
        # Another identity of the same browser (or address today) would vote for itself.
        raise Forbidden(
            "This explanation was written in this browser or from this address, so it cannot "
            "be up-voted from here."
        )
    db.session.add(ExplanationVote(round_id=target.id, voter_id=voter.id, voted_at=utcnow()))
    try:
        db.session.flush()
    except IntegrityError:
        db.session.rollback()
        raise Conflict("You have already up-voted this explanation.") from None
    rounds.add_upvote(target.id)
    db.session.commit()
    db.session.refresh(target)
    return target


def upvotes_received(player: Player) -> int:
    return (
        db.session.scalar(
            select(func.coalesce(func.sum(Round.upvotes), 0)).where(Round.player_id == player.id)
        )
        or 0
    )


def set_hidden(round_id: int, hidden: bool) -> Round:
    """A researcher hides an explanation from players (or shows it again); exports mark it."""
    target = db.session.get(Round, round_id) if 0 < round_id <= rounds.MAX_ID else None
    if target is None or not target.explanation:
        raise NotFound("There is no explanation with that id.")
    target.explanation_hidden_at = utcnow() if hidden else None
    db.session.commit()
    return target


def recent_explanations(
    hidden: bool | None = None, limit: int = 50, before: int | None = None
) -> list[tuple[Round, Example]]:
    """Explanations for the research page, newest first; `hidden` filters by state."""
    query = (
        select(Round, Example)
        .join(Example, Example.id == Round.example_id)
        .where(Round.guess.is_not(None), Round.explanation != "")
        .order_by(Round.id.desc())
        .limit(limit)
    )
    if hidden is True:
        query = query.where(Round.explanation_hidden_at.is_not(None))
    elif hidden is False:
        query = query.where(Round.explanation_hidden_at.is_(None))
    if before is not None:
        query = query.where(Round.id < before)
    return list(db.session.execute(query).all())

"""The end of an account, and a copy of everything it holds.

- `delete_account` erases the player: their account, their explanations' text and their survey
  answers. Their rounds stay only as anonymous research rows if they had consented to research
  use (moved to a new anonymous player with no name, no password and no session, explanations
  emptied), and are deleted otherwise. Totals, leaderboard counts and the texts' annotation counts
  stay consistent either way, and so do the up-vote counts of the explanations they voted for.
  Truth views stay, without the player, so that deleting an account does not clear the way for
  another one (app/leaderboard/integrity.py).
- `my_data` is everything the site holds about a player, for "download my data".
"""

from __future__ import annotations

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import selectinload

from app.accounts import survey
from app.accounts.service import name_key
from app.errors import BadRequest, Forbidden
from app.extensions import db
from app.game import reason_accuracy, tally
from app.game.scoring import verdict
from app.leaderboard import standings
from app.models import (
    BoardTotal,
    Category,
    CategoryTotal,
    Example,
    ExplanationVote,
    GameSet,
    LoginFailure,
    Player,
    PlayerSurvey,
    PlayerTotal,
    Round,
)
from app.models.base import utcnow
from app.models.standings import relist

# Rounds that counted on an example's annotation_count (see app/game/answers.py).
_ANNOTATION = (Round.kind == "normal", Round.guess.is_not(None))


def check_deletion(player: Player, password: str, confirmed: bool) -> None:
    """Raise unless the player may delete their account with what they typed."""
    if player.kind == "crowd":
        raise Forbidden(
            "Your answers in a study are handled by the researcher who ran it: please contact "
            "them through the platform."
        )
    if player.password_hash:
        if not player.check_password(password or ""):
            raise BadRequest("That password is not right; nothing was deleted.")
    elif not confirmed:
        raise BadRequest("Tick the box to confirm; nothing was deleted.")


def delete_account(player: Player, password: str = "", confirmed: bool = False) -> bool:
    """Delete the player (see the module docstring); True if rounds were kept anonymously."""
    check_deletion(player, password, confirmed)
    player_id = player.id
    standings.forget_boards_of(player_id)
    # The player's up-votes go with them (ON DELETE CASCADE): take them off the counts first.
    voted = select(ExplanationVote.round_id).where(ExplanationVote.voter_id == player_id)
    db.session.execute(update(Round).where(Round.id.in_(voted)).values(upvotes=Round.upvotes - 1))
    connection = db.session.connection()
    keep = (
        player.research_consent_at is not None
        and db.session.scalar(select(func.count()).where(Round.player_id == player_id)) > 0
    )
    if keep:
        anonymous = Player(
            is_guest=True,
            kind=player.kind,
            research_consent_at=player.research_consent_at,
            created_at=player.created_at,
            unlisted_at=player.unlisted_at,
            unlisted_reason=player.unlisted_reason,
            restored_at=player.restored_at,
        )
        db.session.add(anonymous)
        db.session.flush()
        relist(connection, player_id, False)
        db.session.execute(
            update(Round)
            .where(Round.player_id == player_id)
            .values(player_id=anonymous.id, explanation="")
        )
        for model in (PlayerTotal, CategoryTotal, BoardTotal):
            db.session.execute(
                update(model).where(model.player_id == player_id).values(player_id=anonymous.id)
            )
        # Sets stay with their rounds (exports say which were daily), without a share card.
        db.session.execute(
            update(GameSet)
            .where(GameSet.player_id == player_id)
            .values(player_id=anonymous.id, share_token=None)
        )
    else:
        played = (
            select(Round.example_id, func.count().label("n"))
            .where(Round.player_id == player_id, *_ANNOTATION)
            .group_by(Round.example_id)
        )
        for example_id, n in db.session.execute(played).all():
            db.session.execute(
                update(Example)
                .where(Example.id == example_id)
                .values(annotation_count=Example.annotation_count - n)
            )
    if player.username:
        db.session.execute(
            delete(LoginFailure).where(LoginFailure.name_key == name_key(player.username))
        )
    db.session.delete(player)  # rounds, totals, board rows and survey go with it (CASCADE)
    db.session.commit()
    return keep


# What the download's fields mean; the file carries it as "about".
ABOUT = {
    "sentences": (
        "Sentence numbers count from 1, as on the page. 'flagged_sentence' is the sentence you "
        "said a machine wrote (null: you said all human); 'first_machine_sentence' is where the "
        "machine (or another text) took over (null: all human). 'guess' and 'boundary' are the "
        "same two places counted from 0, where n_sentences means all human."
    ),
    "points": (
        "'points' is what the round earned: 0 when it did not count ('counted' false, with the "
        "reason), in which case 'points_if_counted' is what the call would have earned."
    ),
    "reveals": "When each sentence was shown to you (server time, UTC), from sentence 1.",
    "confidence": "How sure you said you were of the guess, in percent (null: you did not say).",
    "typing": (
        "How the page saw your explanation entered: 'pasted' (text was pasted or dropped into "
        "the box), 'typing_ms' (milliseconds from your first keystroke in the box to the "
        "answer) and 'typed_chars' (characters typed); null when not recorded. Crowd studies "
        "use them to spot copied work; they never change your points."
    ),
    "reason_accuracy": (
        "Per reason you gave with a 'machine' call, over your counted rounds: 'calls', and "
        "'right', the calls whose flagged sentence came at or after the point where the text "
        "changed (where a machine took over, or where a different text was spliced in); "
        "'right_percent' only from "
        f"{reason_accuracy.MIN_FOR_SHARE} calls on (null below). As on your profile."
    ),
    "sets": (
        "Your sets of texts, daily challenges and past challenges played for practice (kind "
        "'practice', never counted), with their 'day'; each round names its set by 'set_id'. A "
        "set counts when it is finished and every one of its texts counted."
    ),
}


def _play_details(round_: Round, example: Example) -> dict:
    """What a round adds for the download: its set, reveal times and 1-based sentence numbers."""
    details: dict = {
        "set_id": round_.set_id,
        "reveals": [
            {"sentence": reveal.sentence_index + 1, "shown_at": reveal.revealed_at.isoformat()}
            for reveal in round_.reveals
        ],
    }
    if round_.answered:
        n = example.n_sentences
        details["flagged_sentence"] = round_.guess + 1 if round_.guess < n else None
        details["first_machine_sentence"] = example.boundary + 1 if example.boundary < n else None
        details["confidence"] = round_.confidence
        details["typing"] = {
            "pasted": round_.explanation_pasted,
            "typing_ms": round_.typing_ms,
            "typed_chars": round_.typed_chars,
        }
        if not tally.counts(round_):
            # A practice round stores 0 points: what its call would have earned is worked out.
            details["points_if_counted"] = (
                verdict(round_.guess, example.boundary, n).points
                if round_.kind == "practice"
                else round_.points
            )
    return details


def _sets_of(player: Player) -> list[dict]:
    rows = db.session.execute(
        select(GameSet, tally.SET_COUNTED)
        .where(GameSet.player_id == player.id)
        .order_by(GameSet.id)
    ).all()
    return [
        {
            "set_id": game_set.id,
            "kind": game_set.kind,
            "day": game_set.day.isoformat() if game_set.day else None,
            "size": game_set.size,
            "answered": game_set.answered,
            "points": game_set.points,
            "exact": game_set.exact,
            "started_at": game_set.started_at.isoformat(),
            "finished_at": game_set.finished_at.isoformat() if game_set.finished_at else None,
            "counted": bool(counted),
        }
        for game_set, counted in rows
    ]


def _my_round(round_: Round, example: Example, category: str, hidden: bool) -> dict:
    """One round in `my_data`: what the player was shown, and the truth and points once
    answered (not for a worker of a study that hides them)."""
    item = {
        "order": round_.order_index,
        "kind": round_.kind,
        "category": category,
        "started_at": round_.started_at.isoformat(),
        "sentences_revealed": round_.revealed,
    }
    if round_.answered and hidden and round_.participant_id is not None:
        item |= {  # what the worker was shown: no text id, boundary or points
            "answered_at": round_.answered_at.isoformat(),
            "guess": round_.guess,
            "reasons": list(round_.reasons or []),
            "explanation": round_.explanation,
            "ratings": round_.ratings,
        }
    elif round_.answered:
        item |= {
            "text_id": example.external_id,
            "answered_at": round_.answered_at.isoformat(),
            "guess": round_.guess,
            "boundary": example.boundary,
            "n_sentences": example.n_sentences,
            "points": tally.earned(round_),
            "counted": tally.counts(round_),
            # Why it did not count: an integrity reason, or its kind ("practice").
            "uncounted_reason": None if tally.counts(round_) else (round_.uncounted or round_.kind),
            "reasons": list(round_.reasons or []),
            "explanation": round_.explanation,
            "ratings": round_.ratings,
        }
    if round_.explanation:
        item["explanation_upvotes"] = round_.upvotes
    item |= _play_details(round_, example)
    return item


def my_data(player: Player) -> dict:
    """Everything the site holds about the player, as JSON-ready values.

    Rounds still in play show only what the player has been shown (no text id, no boundary).
    """
    rows = db.session.execute(
        select(Round, Example, Category.slug)
        .join(Example, Example.id == Round.example_id)
        .join(Category, Category.id == Example.category_id)
        .where(Round.player_id == player.id)
        .options(selectinload(Round.reveals))
        .order_by(Round.order_index)
    ).all()
    from app.crowd.serving import truth_hidden  # issue 21: crowd workers in a blind study

    hidden = truth_hidden(player.id)
    rounds = [_my_round(round_, example, category, hidden) for round_, example, category in rows]
    answers = db.session.get(PlayerSurvey, player.id)
    votes = db.session.execute(
        select(ExplanationVote.round_id, ExplanationVote.voted_at, Round.explanation)
        .join(Round, Round.id == ExplanationVote.round_id)
        .where(ExplanationVote.voter_id == player.id)
        .order_by(ExplanationVote.voted_at)
    ).all()
    return {
        "about": ABOUT,
        "exported_at": utcnow().isoformat(),
        "sets": _sets_of(player),
        "reason_accuracy": [
            r.as_dict() for r in reason_accuracy.for_player(player.id, with_study_rounds=not hidden)
        ],
        "account": {
            "username": player.username,
            "guest": player.is_guest,
            "created_at": player.created_at.isoformat(),
            "profile_public": player.profile_public,
            "research_consent_at": (
                player.research_consent_at.isoformat() if player.research_consent_at else None
            ),
            "unlisted_reason": player.unlisted_reason if player.unlisted_at else None,
        },
        "rounds": rounds,
        "explanations": [
            {
                "order": r["order"],
                "text_id": r.get("text_id"),
                "explanation": r["explanation"],
                "upvotes": r["explanation_upvotes"],
            }
            for r in rounds
            if r.get("explanation")
        ],
        # The explanations of other players this player up-voted.
        "votes": [
            {"explanation": explanation, "voted_at": voted_at.isoformat()}
            for _, voted_at, explanation in votes
        ],
        "survey": (
            {name: getattr(answers, name) for name in survey.NAMES}
            | {"answered_at": answers.answered_at.isoformat()}
            if answers
            else None
        ),
    }

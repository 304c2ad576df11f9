"""An answer over HTTP: the page's script gets the answered round as its page then draws it (the
state the answer returns is the stored one), the answer is stored once, and every refusal is
refused with the round as it stands."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.game.reasons import MAX_EXPLANATION_CHARS
from app.leaderboard.integrity import DEVICE_COOKIE
from app.models import (
    BoardTotal,
    Example,
    ExplanationVote,
    GameSet,
    Player,
    PlayerTotal,
    Round,
    TruthView,
)
from app.models.base import utcnow
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import (
    FETCH,
    as_its_page_draws_it,
    others_answer,
    reveal_http,
    round_id_of,
    same_but_token,
    start_http,
    teaching,
)


def _read_to(client, token: str, round_id: int, shown: int) -> None:
    """Reveal sentences until `shown` are shown."""
    for seen in range(1, shown):
        moved = reveal_http(client, token, round_id, seen, fetch=True)
        assert moved.status_code == 200


def _answer(client, token: str, round_id: int, shown: int, choice: str, headers=FETCH, **more):
    data = {"csrf_token": token, "seen": str(shown), "choice": choice}
    if choice == "machine":
        data |= {"reasons": ["grammar", "generic"], "explanation": "It drifts off."}
    data |= more
    return client.post(f"/play/round/{round_id}/answer", data=data, headers=headers)


def _start(client, token: str) -> int:
    return round_id_of(start_http(client, token))


# (boundary, sentences shown when answering, choice): exact, late, early, all human (right and
# wrong), a text whose machine part starts at its last sentence.
CASES = [
    (3, 4, "machine"),
    (2, 4, "machine"),
    (4, 3, "machine"),
    (4, 4, "human"),
    (2, 4, "human"),
    (3, 2, "machine"),
]


@pytest.mark.parametrize(("boundary", "shown", "choice"), CASES)
@pytest.mark.parametrize("others", [True, False], ids=["with-others", "first-reader"])
def test_an_answer_shows_the_roundas_its_page_draws_it(
    app, client, boundary, shown, choice, others
):
    with app.app_context():
        example = factories.example(boundary=boundary, n=4, passage="one", system_label="Model X")
        if others:
            # Others' answers (one all human) and explanations, some up-voted.
            done = others_answer(example, [1, 2, 3, None, 2], "It changes topic")
            done[1].upvotes, done[2].upvotes = 2, 1
            db.session.commit()
    token = csrf_token(client)
    round_id = _start(client, token)
    _read_to(client, token, round_id, shown)
    answered = _answer(client, token, round_id, shown, choice)
    assert answered.status_code == 200
    body = answered.get_data(as_text=True)
    assert 'data-state="answered"' in body and "text 1 of" in body
    if others:
        assert "Where other players flagged it" in body and "What other players noticed" in body
    else:
        assert "you are the first" in body
    assert same_but_token(body) == as_its_page_draws_it(client, round_id)


def test_an_answer_outside_a_set_and_one_that_does_not_count(app, client):
    """A round with no set has no set bar; a round whose truth another player saw in this
    browser does not count."""
    with app.app_context():
        factories.example(boundary=2, n=4, passage="one", p=None)  # a spliced baseline
    token = csrf_token(client)
    first = _start(client, token)
    _read_to(client, token, first, 3)
    assert _answer(client, token, first, 3, "machine").status_code == 200
    other = app.test_client()
    other.set_cookie(DEVICE_COOKIE, client.get_cookie(DEVICE_COOKIE).value)
    other_token = csrf_token(other)
    round_id = _start(other, other_token)
    with app.app_context():
        open_round = db.session.get(Round, round_id)
        open_round.set_id = None
        db.session.commit()
    _read_to(other, other_token, round_id, 3)
    answered = _answer(other, other_token, round_id, 3, "machine")
    assert answered.status_code == 200
    body = answered.get_data(as_text=True)
    assert "set-bar" not in body and "This round does not count" in body
    assert same_but_token(body) == as_its_page_draws_it(other, round_id)
    with app.app_context():
        stored = db.session.get(Round, round_id)
        assert stored.uncounted is not None and stored.points == 5


def test_the_last_text_of_a_set_leads_to_its_summary(app, client):
    app.config["SET_SIZE"] = 1
    with app.app_context():
        factories.example(boundary=3, n=4, passage="one")
    token = csrf_token(client)
    round_id = _start(client, token)
    _read_to(client, token, round_id, 4)
    answered = _answer(client, token, round_id, 4, "machine")
    body = answered.get_data(as_text=True)
    assert "See your set summary" in body
    assert same_but_token(body) == as_its_page_draws_it(client, round_id)
    with app.app_context():
        game_set = db.session.scalar(select(GameSet))
        assert (game_set.answered, game_set.points, game_set.exact) == (1, 5, 1)
        assert game_set.finished_at is not None


def _stored(round_id: int) -> tuple:
    round_ = db.session.get(Round, round_id)
    game_set = db.session.get(GameSet, round_.set_id)
    return (
        round_.guess,
        round_.points,
        round_.reasons,
        round_.explanation,
        db.session.get(Example, round_.example_id).annotation_count,
        (game_set.answered, game_set.points, game_set.exact),
        db.session.scalar(select(func.count()).select_from(TruthView)),
    )


def test_the_answer_is_stored_once_and_refusals_are_still_refused(app, client):
    with app.app_context():
        factories.example(boundary=2, n=4, passage="one")
        factories.example(boundary=2, n=4, passage="two")
        factories.player("ada", "ada-password")
    token = csrf_token(client)
    login = {"csrf_token": token, "username": "ada", "password": "ada-password"}
    assert client.post("/login", data=login).status_code == 302
    token = csrf_token(client)
    round_id = _start(client, token)
    _read_to(client, token, round_id, 3)
    with app.app_context():
        before = _stored(round_id)
    # Bad input: 400, the round drawn as it stands, nothing stored.
    for refused, status, says in (
        (_answer(client, token, round_id, 3, "maybe"), 400, "Say either"),
        (_answer(client, token, round_id, 3, "machine", reasons=[], explanation=""), 400, "reason"),
        (_answer(client, token, round_id, 3, "human"), 400, "last sentence"),
        (_answer(client, token, round_id, "x", "machine"), 400, "which sentence"),
        (_answer(client, token, round_id, 2, "machine"), 409, "out of date"),  # stale `seen`
        (_answer(client, token, round_id, 3, "machine", csrf_token=""), 400, "CSRF"),
    ):
        assert refused.status_code == status, (status, says)
        if says != "CSRF":
            assert says in refused.get_data(as_text=True)
            assert 'data-state="reading"' in refused.get_data(as_text=True)
    # Another player's round: not found; an ended session: sent home. Nothing stored.
    other = app.test_client()
    other_token = csrf_token(other)
    _start(other, other_token)
    assert _answer(other, other_token, round_id, 3, "machine").status_code == 404
    with app.app_context():
        assert _stored(round_id) == before
        assert before[0] is None
        player = db.session.scalar(select(Player).where(Player.username == "ada"))
        player.session_version += 1
        db.session.commit()
    signed_out = _answer(client, token, round_id, 3, "machine")
    assert signed_out.status_code == 302 and signed_out.headers["Location"] == "/"
    with app.app_context():
        assert _stored(round_id) == before
    # Signed in again: the answer is stored, once, with its points, totals and boards.
    token = csrf_token(client)
    login["csrf_token"] = token
    assert client.post("/login", data=login).status_code == 302
    token = csrf_token(client)
    answered = _answer(client, token, round_id, 3, "machine", headers={})  # without the script
    assert answered.status_code == 302
    assert answered.headers["Location"] == f"/play/round/{round_id}#result"
    again = _answer(client, token, round_id, 3, "machine", reasons=["hunch"])
    assert again.status_code == 409
    assert "already answered" in again.get_data(as_text=True)
    assert 'data-state="answered"' in again.get_data(as_text=True)
    with app.app_context():
        stored = _stored(round_id)
        assert stored[:6] == (2, 5, ["grammar", "generic"], "It drifts off.", 1, (1, 5, 1))
        assert stored[6] == before[6] + 1  # the truth was shown once
        player = db.session.scalar(select(Player).where(Player.username == "ada"))
        total = db.session.get(PlayerTotal, player.id)
        assert (total.rounds, total.points, total.exact) == (1, 5, 1)
        boards = db.session.scalars(select(BoardTotal).where(BoardTotal.player_id == player.id))
        assert sorted((row.rounds, row.points) for row in boards) == [(1, 5)] * 6
        assert db.session.get(Round, round_id).answered_at is not None


def test_the_teaching_statement_reads_the_spread_and_the_best_explanations(app):
    """`insights.teaching`: other answers counted by guess, and the best shown explanations
    (not hidden ones, not one's own), most up-voted first, with whether the reader voted."""
    with app.app_context():
        example = factories.example(boundary=3, n=6, passage="one")
        done = others_answer(example, [1, 3, 3, None, 5, 2], "It changes topic")
        done[2].upvotes = 4
        done[4].upvotes = 4
        done[0].explanation_hidden_at = utcnow()
        mine = others_answer(example, [4])[0]
        db.session.add(
            ExplanationVote(round_id=done[4].id, voter_id=mine.player_id, voted_at=utcnow())
        )
        db.session.commit()
        spread, explanations = teaching(mine)
        assert spread.counts == [0, 1, 1, 2, 0, 1, 1]
        assert spread.better_than == 4  # four scored less than this late flag
        assert [e.round_id for e in explanations] == [done[2].id, done[4].id, done[1].id]
        assert [e.upvotes for e in explanations] == [4, 4, 0]
        assert [e.voted for e in explanations] == [False, True, False]


def test_a_refused_answer_keeps_its_ticks_and_no_other_page_gets_them(app, client):
    """The reason and confidence chips are rendered once and kept while none is ticked
    (app/game/round_views.py, `_fixed`): a refused answer is shown again with what it had ticked,
    and the pages before and after it with nothing ticked."""
    with app.app_context():
        factories.example(boundary=2, n=4)
    token = csrf_token(client)
    round_id = _start(client, token)
    _read_to(client, token, round_id, 3)

    def why_page() -> str:
        return as_its_page_draws_it(client, round_id, "?flag=1")

    before = why_page()
    assert 'name="reasons" value="grammar"' in before and 'name="confidence" value="70"' in before
    assert " checked" not in before
    too_long = "x" * (MAX_EXPLANATION_CHARS + 1)
    refused = _answer(client, token, round_id, 3, "machine", explanation=too_long, confidence="70")
    assert refused.status_code == 400
    page = refused.get_data(as_text=True)
    assert page.count(" checked") == 3
    assert 'value="grammar" data-key="1" checked' in page
    assert 'value="generic" data-key="8" checked' in page
    assert 'value="70" checked' in page
    assert why_page() == before

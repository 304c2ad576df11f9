"""Challenge a friend: the link, the friend's run of the same texts, both results side by side,
and the hostile paths (own link, a second identity in the same browser, unfinished sets, guessed
tokens). Services on a real database (SQLite, and PostgreSQL in its pass), over HTTP."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.game import challenge, sets, tally
from app.models import Example, GameSet, Player, Round
from app.models.sets import CHALLENGE_SET
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import (
    answer,
    answer_http,
    finish,
    flag_http,
    play_over_http,
    play_through_set,
    reveal_http,
)

ROUND_RE = re.compile(r"/play/round/(\d+)")
LINK_RE = re.compile(r'<code id="challenge-url">https?://[^/]+(/challenge/[A-Za-z0-9_-]+)</code>')
TOTALS_RE = re.compile(r"<td><strong>(\d+)</strong> of (\d+)")


@pytest.fixture
def game(app_with):
    """Sets of 3 texts; 8 news texts of separate passages (boundaries vary)."""
    app = app_with(SET_SIZE=3)
    with app.app_context():
        for boundary in (2, 3, 4, 5, 10, 3, 6, 7):
            factories.example(boundary=boundary)
    return app


def played_set(player: Player, examples: list[Example], flag_at: int | None = 2) -> GameSet:
    """A normal set of `examples` the player has answered, each flagged at sentence index
    `flag_at` (None: at its boundary, for 5 points)."""
    source = GameSet(player_id=player.id, kind="normal", size=len(examples))
    db.session.add(source)
    db.session.commit()
    for example in examples:
        round_ = factories.round_of(player, example, example.category.slug, game_set=source)
        finish(player, round_, example.boundary if flag_at is None else flag_at)
    return source


def first_texts() -> list[Example]:
    return db.session.scalars(select(Example).order_by(Example.id).limit(3)).all()


def play_set(client, token: str, flag_at: int = 2) -> int:
    """Play a whole normal set of 3 texts over HTTP; the set's id."""
    first = play_over_http(client, token, flag_at)
    page = client.get(f"/play/round/{first}").get_data(as_text=True)
    next_path = re.search(r'action="(/sets/\d+/next)"', page).group(1)
    play_over_http(client, token, flag_at, start=next_path)
    play_over_http(client, token, flag_at, start=next_path)
    return int(re.search(r"/sets/(\d+)", next_path).group(1))


def play_challenge(client, token: str, path: str, flag_at: int = 3) -> list[int]:
    """Accept the challenge at `path` and answer every text; the rounds' ids."""
    started = client.post(f"{path}/play", data={"csrf_token": token, "consent": "yes"})
    assert started.status_code == 302, started.get_data(as_text=True)[-800:]

    def play(round_id: int) -> None:
        assert flag_http(client, token, round_id, flag_at).status_code == 302

    played, last = play_through_set(client, token, started, play, consent="yes")
    assert not played or "See both results" in last
    return played


def make_link(client, token: str, set_id: int) -> str:
    made = client.post(f"/sets/{set_id}/challenge", data={"csrf_token": token})
    assert made.status_code == 302
    summary = client.get(f"/sets/{set_id}").get_data(as_text=True)
    return LINK_RE.search(summary).group(1)


def table(page: str) -> list[list[str]]:
    """The side-by-side table's point cells (a number or a dash), row by row."""
    body = re.search(r"<tbody>(.*?)</tbody>", page, re.S)
    if body is None:
        return []
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S):
        cells = re.findall(r"<td>(.*?)</td>", row, re.S)[2:]
        rows.append([re.sub(r"<[^>]+>|\(not counted\)", "", cell).strip() for cell in cells])
    return rows


def test_a_friend_plays_the_same_texts_and_both_see_the_same_numbers(game):
    challenger = game.test_client()
    token = csrf_token(challenger)
    set_id = play_set(challenger, token, flag_at=2)
    summary = challenger.get(f"/sets/{set_id}").get_data(as_text=True)
    assert "Challenge a friend" in summary and "challenge-url" not in summary
    path = make_link(challenger, token, set_id)

    friend = game.test_client()
    friend_token = csrf_token(friend)
    invite = friend.get(path).get_data(as_text=True)
    assert "challenged you" in invite and "Accept the challenge" in invite
    # Nothing about the texts' truth, nor the challenger's points per text, before playing.
    assert "<tbody>" not in invite
    with game.app_context():
        source = db.session.get(GameSet, set_id)
        source_examples = challenge.texts(source)
        for example in db.session.scalars(select(Example).where(Example.id.in_(source_examples))):
            assert example.sentences[1] not in invite
    played = play_challenge(friend, friend_token, path, flag_at=3)
    assert len(played) == 3

    with game.app_context():
        friend_rounds = [db.session.get(Round, r) for r in played]
        assert [r.example_id for r in friend_rounds] == source_examples
        assert all(tally.counts(r) for r in friend_rounds)
        run = db.session.get(GameSet, friend_rounds[0].set_id)
        assert run.kind == CHALLENGE_SET and run.finished and run.challenge_of_id == set_id
        mine = sets.summary_of(source)
        theirs = sets.summary_of(run)
        expected = [
            [str(a.points), str(b.points)] for a, b in zip(mine.calls, theirs.calls, strict=True)
        ]
        totals = [str(mine.points), str(theirs.points)]

    # The friend's last "next" leads to the comparison.
    result = friend.get(path).get_data(as_text=True)
    assert "Here are both results" in result
    assert table(result) == expected
    assert [t for t, _ in TOTALS_RE.findall(result)] == totals
    # The challenger's set page shows the friend's result with the same numbers.
    summary = challenger.get(f"/sets/{set_id}").get_data(as_text=True)
    assert table(summary.split('id="challenge"')[1]) == expected
    assert [t for t, _ in TOTALS_RE.findall(summary.split('id="challenge"')[1])] == totals
    # ... and the set summary's own total is that same figure.
    assert f"<strong>{totals[0]}</strong> of 15 points" in summary
    page = challenger.get(path).get_data(as_text=True)
    assert table(page) == expected

    # Playing again is no second run: the link shows the results.
    again = friend.post(f"{path}/play", data={"csrf_token": friend_token})
    assert again.status_code == 302 and again.headers["Location"].endswith(path)


def test_the_challengers_points_show_only_on_texts_the_friend_has_answered(game):
    challenger = game.test_client()
    token = csrf_token(challenger)
    set_id = play_set(challenger, token)
    path = make_link(challenger, token, set_id)
    friend = game.test_client()
    friend_token = csrf_token(friend)
    started = friend.post(f"{path}/play", data={"csrf_token": friend_token})
    round_id = int(ROUND_RE.search(started.headers["Location"]).group(1))
    in_progress = friend.get(path).get_data(as_text=True)
    assert "Continue the challenge" in in_progress
    assert table(in_progress) == [["—", "—"]] * 3
    # Nor a total that would give them away.
    assert [t for t, _ in TOTALS_RE.findall(in_progress)] == ["0", "0"]
    reveal_http(friend, friend_token, round_id, 1)
    answer_http(friend, friend_token, round_id, 2, reasons="hunch")
    page = friend.get(path).get_data(as_text=True)
    after_one = table(page)
    assert after_one[0] != ["—", "—"] and "—" not in after_one[0]
    assert after_one[1:] == [["—", "—"]] * 2
    assert [t for t, _ in TOTALS_RE.findall(page)] == after_one[0]
    assert page.count("(so far)") == 2


def test_own_link_shows_your_result_and_gives_no_replay(game):
    challenger = game.test_client()
    token = csrf_token(challenger)
    set_id = play_set(challenger, token)
    path = make_link(challenger, token, set_id)
    own = challenger.get(path).get_data(as_text=True)
    assert "Your challenge" in own and "Accept the challenge" not in own
    refused = challenger.post(f"{path}/play", data={"csrf_token": token})
    assert refused.status_code == 409
    assert "your own challenge" in refused.get_data(as_text=True)
    with game.app_context():
        assert db.session.scalar(select(GameSet).where(GameSet.kind == CHALLENGE_SET)) is None


def test_a_second_identity_in_the_same_browser_plays_but_earns_nothing(game):
    browser = game.test_client()
    token = csrf_token(browser)
    set_id = play_set(browser, token)
    path = make_link(browser, token, set_id)
    browser.post("/logout", data={"csrf_token": csrf_token(browser, "/")})
    token = csrf_token(browser, "/")
    page = browser.get(path).get_data(as_text=True)
    assert "This browser was used by the player who sent the challenge" in page
    played = play_challenge(browser, token, path)
    assert len(played) == 3
    with game.app_context():
        friend_rounds = [db.session.get(Round, r) for r in played]
        assert all(not tally.counts(r) and tally.earned(r) == 0 for r in friend_rounds)
        second = db.session.get(Player, friend_rounds[0].player_id)
        assert second.id != db.session.get(GameSet, set_id).player_id
    result = browser.get(path).get_data(as_text=True)
    assert [row[1] for row in table(result)] == ["0"] * 3
    assert "(not counted)" in result


def test_a_text_whose_passage_the_friend_read_does_not_count(game):
    with game.app_context():
        # A variant of a passage; the friend reads the other variant first.
        first = factories.example(boundary=3, passage="shared-1", category_slug="stories")
        second = factories.example(boundary=4, passage="shared-1", category_slug="stories")
        first_id, second_id = first.id, second.id
        challenger = factories.player()
        friend = factories.player()
        source = played_set(challenger, [db.session.get(Example, second_id)])
        answer(friend, db.session.get(Example, first_id), 2)
        source = challenge.link(challenger, source.id)
        played = db.session.get(Round, challenge.start(friend, source.challenge_token).id)
        assert played.uncounted == "passage_read_before"
        finish(friend, played, 4)
        db.session.expire_all()
        played = db.session.get(Round, played.id)
        assert played.points == 5 and not tally.counts(played) and tally.earned(played) == 0
        assert played.game_set.finished and played.game_set.points == 0


def test_a_text_the_friend_already_played_is_left_out(game):
    with game.app_context():
        challenger, friend = factories.player(), factories.player()
        examples = first_texts()
        source = played_set(challenger, examples)
        answer(friend, examples[1], 2)
        token = challenge.link(challenger, source.id).challenge_token
        first = db.session.get(Round, challenge.start(friend, token).id)
        assert first.example_id == examples[0].id and first.game_set.size == 2
        finish(friend, first, 2)
        second = db.session.get(Round, challenge.start(friend, token).id)
        assert second.example_id == examples[2].id
        finish(friend, second, 2)
        assert second.game_set.finished
        with pytest.raises(challenge.AlreadyPlayed):
            challenge.start(friend, token)
        # Someone who has played every text has nothing to compare.
        everything = factories.player()
        for example in examples:
            answer(everything, example, 2)
        with pytest.raises(challenge.Conflict, match="every text"):
            challenge.start(everything, token)


def test_unfinished_daily_and_foreign_sets_get_no_link(game):
    client = game.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token)
    with game.app_context():
        set_id = db.session.get(Round, first).set_id
    unfinished = client.post(f"/sets/{set_id}/challenge", data={"csrf_token": token})
    assert unfinished.status_code == 409
    assert "Finish the set first" in unfinished.get_data(as_text=True)
    stranger = game.test_client()
    stranger_token = csrf_token(stranger)
    play_over_http(stranger, stranger_token)
    assert (
        stranger.post(f"/sets/{set_id}/challenge", data={"csrf_token": stranger_token}).status_code
        == 404
    )
    with game.app_context():
        owner = db.session.get(Round, first).player
        daily_set = GameSet(player_id=owner.id, kind="daily", size=5)
        db.session.add(daily_set)
        db.session.commit()
        with pytest.raises(challenge.BadRequest):
            challenge.link(owner, daily_set.id)
        # A set whose token exists but that is not finished (forged in the database) is refused.
        open_set = db.session.get(GameSet, set_id)
        open_set.challenge_token = "x" * 22
        db.session.commit()
    response = client.get("/challenge/" + "x" * 22)
    assert response.status_code == 409 and "not finished" in response.get_data(as_text=True)


@pytest.mark.parametrize(
    "token", ["nope", "A" * 22, "a" * 200, "%00" * 20, "../../etc/passwd", "x" * 15]
)
def test_guessed_tokens_are_not_found(game, token):
    client = game.test_client()
    assert client.get(f"/challenge/{token}").status_code == 404
    csrf = csrf_token(client)
    assert client.post(f"/challenge/{token}/play", data={"csrf_token": csrf}).status_code == 404
    with game.app_context():
        assert db.session.scalar(select(Player)) is None  # no guest made for a dead link


def test_a_refused_start_stores_no_guest_and_no_consent(game):
    with game.app_context():
        challenger = factories.player()
        examples = first_texts()
        source = played_set(challenger, examples)
        token = challenge.link(challenger, source.id).challenge_token
        reader = factories.player("reader", "a good password")
        for example in examples:
            answer(reader, example, 2)
        players = db.session.scalar(select(func.count(Player.id)))
    client = game.test_client()
    csrf = csrf_token(client)
    client.post(
        "/login", data={"csrf_token": csrf, "username": "reader", "password": "a good password"}
    )
    csrf = csrf_token(client, "/")
    refused = client.post(f"/challenge/{token}/play", data={"csrf_token": csrf, "consent": "yes"})
    assert refused.status_code == 409
    assert "already played every text" in refused.get_data(as_text=True)
    with game.app_context():
        assert db.session.scalar(select(func.count(Player.id))) == players
        assert (
            db.session.scalar(select(Player).where(Player.username == "reader")).research_consent_at
            is None
        )
        assert (
            db.session.scalar(select(func.count(GameSet.id)).where(GameSet.kind == CHALLENGE_SET))
            == 0
        )


def test_the_challenger_sees_every_friend_and_the_set_summary_agrees(game):
    with game.app_context():
        challenger = factories.player("ann")
        source = played_set(challenger, first_texts(), flag_at=None)  # exact: 5 points each
        token = challenge.link(challenger, source.id).challenge_token
        friends = [factories.player(), factories.player(), factories.player("bob")]
        for late, friend in enumerate(friends):
            while True:
                try:
                    round_ = db.session.get(Round, challenge.start(friend, token).id)
                except challenge.AlreadyPlayed:
                    break
                finish(friend, round_, round_.example.boundary + late)
        db.session.expire_all()
        source = db.session.get(GameSet, source.id)
        runs = challenge.friends_runs(source)
        seen = challenge.compare(source, runs, challenger)
        assert [c.name for c in seen.columns] == ["You", "bob", "Guest 1", "Guest 2"]
        assert [c.points for c in seen.columns] == [15, 9, 12, 15]
        assert seen.columns[0].points == sets.summary(challenger, source.id).points
        assert [[call.points for call in row.calls] for row in seen.rows] == [[5, 3, 4, 5]] * 3
        assert challenge.friends_count(source) == 3
        # A friend sees the challenger (by name) and themselves.
        theirs = challenge.compare(source, [challenge.own_run(friends[2], source)], friends[2])
        assert [c.name for c in theirs.columns] == ["ann", "You"]


def test_a_run_starts_once_per_friend_and_ends_early_at_the_texts_it_answered(game):
    with game.app_context():
        challenger, friend = factories.player(), factories.player()
        source = GameSet(player_id=challenger.id, kind="normal", size=3)
        db.session.add(source)
        db.session.commit()

        def theirs():
            return db.session.scalars(
                select(GameSet).where(GameSet.challenge_of_id == source.id)
            ).one()

        run = sets.start_set(friend, CHALLENGE_SET, 3, theirs, challenge_of=source)
        run_id, friend_id = run.id, friend.id
        # A second start of the same run (a double click) gets the first one back.
        again = sets.start_set(friend, CHALLENGE_SET, 3, theirs, challenge_of=source)
        assert again.id == run_id
        assert (
            db.session.scalar(select(func.count(GameSet.id)).where(GameSet.kind == CHALLENGE_SET))
            == 1
        )
        again.answered = 1
        db.session.commit()
        sets.finish_early(again)
        db.session.remove()
        ended = db.session.get(GameSet, run_id)
        assert (ended.size, ended.answered, ended.finished) == (1, 1, True)
        assert ended.player_id == friend_id and ended.day is None

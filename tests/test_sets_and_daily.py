"""Sets of texts and the daily challenge: pure rules, services on a real database, HTTP."""

from __future__ import annotations

import random
import re
import struct
from datetime import date, timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.game import daily, daily_texts
from app.models import DailyChallenge, Example, GameSet, Player, Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import (
    answer_http,
    flag_http,
    others_answer,
    play_over_http,
    play_through_set,
    reveal_http,
    round_id_of,
    start_http,
)

DAY = date(2026, 11, 20)
ROUND_RE = re.compile(r"/play/round/(\d+)")
SHARE_RE = re.compile(r'<pre class="share" id="share-text">([^<]*)</pre>')

# -- pure rules -------------------------------------------------------------------------------


def candidate(example_id, category=1, kind=daily_texts.MACHINE, boundary=None, passages=None):
    boundary = boundary or (10 if kind == daily_texts.HUMAN else 2 + example_id % 7)
    passages = tuple(passages or (example_id,))
    return daily_texts.Candidate(example_id, category, kind, boundary, 10, passages)


def test_pick_texts_takes_unused_distinct_passages_and_keeps_the_composition():
    pool = [
        candidate(i, category=i % 3, kind=daily_texts.HUMAN if i < 4 else daily_texts.MACHINE)
        for i in range(15)
    ]
    pool.append(candidate(99, passages=(1, 100), kind=daily_texts.SPLICE))  # shares passage 1
    for seed in range(20):
        picked = daily_texts.pick_texts(pool, used={0}, count=5, rng=random.Random(seed))
        assert picked is not None and picked.complete and len(picked.texts) == 5
        passages = [p for c in picked.texts for p in c.passages]
        assert len(passages) == len(set(passages)) and 0 not in passages
        kinds = [c.kind for c in picked.texts]
        assert 1 <= kinds.count(daily_texts.HUMAN) <= 2 and kinds.count(daily_texts.MACHINE) >= 3
        assert {c.category_id for c in picked.texts} == {0, 1, 2}
    assert daily_texts.pick_texts(pool[:4], used=set(), count=5, rng=random.Random(0)) is None


def test_streaks():
    days = [DAY, DAY - timedelta(days=1), DAY - timedelta(days=2), DAY - timedelta(days=5)]
    assert daily.current_streak(days, DAY) == 3
    # Today not played yet: the streak up to yesterday still counts.
    assert daily.current_streak(days, DAY + timedelta(days=1)) == 3
    assert daily.current_streak(days, DAY + timedelta(days=2)) == 0
    assert daily.longest_streak([*days, DAY - timedelta(days=6)]) == 3
    assert daily.longest_streak([]) == 0


def test_share_text_shows_only_points_per_text():
    text = daily.share_text(DAY, [5, 0, 3, 4, 1], "https://roft.example/daily/x")
    assert text == (
        "Real or Fake Text · daily challenge 2026-11-20\n🟩⬛🟨🟨🟧 13/25\nhttps://roft.example/daily/x"
    )


# -- sets -------------------------------------------------------------------------------------


@pytest.fixture
def small_sets(app_with):
    """An app whose sets have 3 texts, with 5 news texts of separate passages."""
    app = app_with(SET_SIZE=3)
    with app.app_context():
        for boundary in (2, 3, 4, 5, 10):
            factories.example(boundary=boundary)
    return app


def test_a_set_runs_to_its_summary(small_sets):
    client = small_sets.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token)
    page = client.get(f"/play/round/{first}").get_data(as_text=True)
    assert "text 1 of 3" in page
    next_path = re.search(r'action="(/sets/\d+/next)"', page).group(1)
    assert "Next text (2 of 3)" in page
    second = play_over_http(client, token, start=next_path)
    page = client.get(f"/play/round/{second}").get_data(as_text=True)
    assert "text 2 of 3" in page
    third = play_over_http(client, token, start=next_path)
    page = client.get(f"/play/round/{third}").get_data(as_text=True)
    summary_path = re.search(r'href="(/sets/\d+)"', page).group(1)
    assert "See your set summary" in page
    summary = client.get(summary_path).get_data(as_text=True)
    assert "Set complete" in summary and "Play another set" in summary
    with small_sets.app_context():
        game_set = db.session.scalar(select(GameSet))
        stored = db.session.scalars(select(Round).where(Round.set_id == game_set.id)).all()
        assert game_set.finished and game_set.answered == 3
        assert game_set.points == sum(r.points for r in stored)
        assert f"<strong>{game_set.points}</strong> of 15 points" in summary
    # Asking for more after the end leads to the summary, not a fourth text.
    after = client.post(next_path, data={"csrf_token": token})
    assert after.status_code == 302 and after.headers["Location"].endswith(summary_path)
    # Someone else's set does not exist for them.
    stranger = small_sets.test_client()
    stranger_token = csrf_token(stranger)
    play_over_http(stranger, stranger_token)
    assert stranger.get(summary_path).status_code == 404
    assert stranger.post(next_path, data={"csrf_token": stranger_token}).status_code == 404


def test_an_unfinished_set_resumes_and_compares_with_other_players(small_sets):
    with small_sets.app_context():
        for example in db.session.scalars(select(Example)).all():
            others_answer(example, [example.boundary] * 2)  # two others, exact on every text
    client = small_sets.test_client()
    token = csrf_token(client)
    play_over_http(client, token, 1)
    # Leave for the home page and choose again: the same set continues.
    assert "Continue your set · text 2 of 3" in client.get("/").get_data(as_text=True)
    second = play_over_http(client, token, 1)
    with small_sets.app_context():
        sets_of_player = db.session.scalars(
            select(GameSet).join(Player).where(Player.id == Round.player_id, Round.id == second)
        ).all()
        assert len(sets_of_player) == 1 and sets_of_player[0].answered == 2
        summary = client.get(f"/sets/{sets_of_player[0].id}").get_data(as_text=True)
    assert "Your set so far" in summary
    assert "Other players scored <strong>10.0</strong> on these texts" in summary


def test_the_script_gets_one_round_per_request(small_sets):
    client = small_sets.test_client()
    token = csrf_token(client)
    started = start_http(client, token, fetch=True)
    assert started.status_code == 200
    round_id = round_id_of(started)
    body = started.get_data(as_text=True)
    assert body.lstrip().startswith("<article") and "<html" not in body
    with small_sets.app_context():
        sentences = list(db.session.get(Round, round_id).example.sentences)
    assert sentences[0] in body and sentences[1] not in body
    revealed = reveal_http(client, token, round_id, 1, fetch=True)
    body = revealed.get_data(as_text=True)
    assert revealed.status_code == 200 and sentences[1] in body and sentences[2] not in body
    stale = reveal_http(client, token, round_id, 1, fetch=True)
    assert stale.status_code == 409 and "out of date" in stale.get_data(as_text=True)
    answered = answer_http(client, token, round_id, 2, reasons="hunch", fetch=True)
    body = answered.get_data(as_text=True)
    assert answered.status_code == 200 and 'class="result"' in body and sentences[-1] in body


def test_no_machine_call_on_the_first_sentence(app, client):
    with app.app_context():
        factories.example(boundary=1)
    token = csrf_token(client)
    round_id = round_id_of(start_http(client, token))
    page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    assert "A machine wrote this one" not in page and "always written by a person" in page
    refused = answer_http(client, token, round_id, 1, reasons="hunch")
    assert refused.status_code == 400
    with app.app_context():
        assert db.session.get(Round, round_id).guess is None


# -- the daily challenge ----------------------------------------------------------------------


@pytest.fixture
def daily_app(app_with):
    """Ten held-back texts (two days' worth: each day one all-human text and two machine texts
    turning early and two late) and a clock set to DAY."""
    app = app_with(TODAY_OVERRIDE=DAY, DAILY_WARN_DAYS=3)
    with app.app_context():
        for i in range(10):
            factories.example(
                boundary=10 if i % 5 == 0 else (3, 8)[i % 5 > 2],
                category_slug=("news", "stories")[i % 2],
                passage=f"held-{i}",
                kind="daily",
            )
        factories.example(boundary=4, passage="normal-play")
    return app


def play_daily(client, token: str) -> list[int]:
    """Start today's challenge and flag sentence 3 of every text; the rounds played."""
    started = client.post("/daily/start", data={"csrf_token": token})
    played, last = play_through_set(
        client, token, started, lambda r: flag_http(client, token, r, 2)
    )
    assert not played or "See today&#39;s results" in last or "See today's results" in last
    return played


def examples_of(app, round_ids: list[int]) -> list[int]:
    with app.app_context():
        return [db.session.get(Round, r).example_id for r in round_ids]


def test_everyone_gets_the_same_texts_once_a_day_and_streaks_count(daily_app):
    ann, bob = daily_app.test_client(), daily_app.test_client()
    ann_token, bob_token = csrf_token(ann), csrf_token(bob)
    assert "The same 5 texts for everyone today" in ann.get("/daily").get_data(as_text=True)
    ann_rounds = play_daily(ann, ann_token)
    bob_rounds = play_daily(bob, bob_token)
    assert len(ann_rounds) == 5
    assert examples_of(daily_app, ann_rounds) == examples_of(daily_app, bob_rounds)

    # One attempt a day: a second start leads to the results and plays nothing.
    again = ann.post("/daily/start", data={"csrf_token": ann_token})
    assert again.status_code == 302 and again.headers["Location"].endswith(f"/daily/{DAY}")
    assert ann.get("/daily").headers["Location"].endswith(f"/daily/{DAY}")
    with daily_app.app_context():
        assert db.session.scalar(select(func.count()).select_from(GameSet)) == 2

    results = ann.get(f"/daily/{DAY}").get_data(as_text=True)
    assert "2 players finished" in results
    share = SHARE_RE.search(results).group(1)
    lines = share.split("\n")
    assert lines[0] == f"Real or Fake Text · daily challenge {DAY}"
    assert re.fullmatch(r"[🟩🟨🟧⬛]{5} \d+/25", lines[1])
    assert re.fullmatch(r"http://localhost/daily/2026-11-20/card/[\w-]+", lines[2])
    assert len(lines) == 3

    # The next day: new texts from passages never used before, and a streak of 2.
    daily_app.config["TODAY_OVERRIDE"] = DAY + timedelta(days=1)
    second_day = play_daily(ann, ann_token)
    assert not set(examples_of(daily_app, second_day)) & set(examples_of(daily_app, ann_rounds))
    results = ann.get(f"/daily/{DAY + timedelta(days=1)}").get_data(as_text=True)
    assert "<strong>2</strong> day streak" in results
    assert "<strong>2</strong> day streak" in ann.get("/").get_data(as_text=True)
    # A third day has no texts left: it says so, and starting stores nothing.
    daily_app.config["TODAY_OVERRIDE"] = DAY + timedelta(days=2)
    assert "There is no challenge today" in bob.get("/daily").get_data(as_text=True)
    assert bob.post("/daily/start", data={"csrf_token": bob_token}).status_code == 404
    with daily_app.app_context():
        assert db.session.scalar(select(func.count()).select_from(DailyChallenge)) == 2


def test_share_card_has_open_graph_tags_and_a_png(daily_app):
    client = daily_app.test_client()
    play_daily(client, csrf_token(client))
    results = client.get(f"/daily/{DAY}").get_data(as_text=True)
    card_url = SHARE_RE.search(results).group(1).split("\n")[-1]
    card_path = card_url.removeprefix("http://localhost")
    visitor = daily_app.test_client()
    card = visitor.get(card_path).get_data(as_text=True)
    image = re.search(r'<meta property="og:image" content="([^"]+)">', card).group(1)
    assert image.startswith("http://localhost/daily/") and image.endswith(".png")
    assert '<meta name="twitter:card" content="summary_large_image">' in card
    assert re.search(r'<meta property="og:title" content="\d+/25 in the', card)
    png = visitor.get(image.removeprefix("http://localhost"))
    assert png.mimetype == "image/png"
    width, height = struct.unpack(">II", png.data[16:24])
    assert png.data[:8] == b"\x89PNG\r\n\x1a\n" and (width, height) == (1200, 630)
    assert visitor.get(card_path.replace("/card/", "/card/x")).status_code == 404


def test_share_card_reveals_nothing_about_boundaries(daily_app):
    """Two players with the same points per text but different guesses share the same card."""
    cards = []
    for flag_after in (0, 1):
        client = daily_app.test_client()
        token = csrf_token(client)

        def too_early(round_id: int, client=client, token=token, flag_after=flag_after) -> None:
            with daily_app.app_context():
                boundary = db.session.get(Round, round_id).example.boundary
            # Both are too early (0 points), flagging different sentences.
            flag_http(client, token, round_id, max(1, boundary - 1 - flag_after))

        started = client.post("/daily/start", data={"csrf_token": token})
        play_through_set(client, token, started, too_early)
        share = SHARE_RE.search(client.get(f"/daily/{DAY}").get_data(as_text=True)).group(1)
        cards.append(share.rsplit("\n", 1)[0])
    assert cards[0] == cards[1] == f"Real or Fake Text · daily challenge {DAY}\n⬛⬛⬛⬛⬛ 0/25"


def test_finish_the_open_text_before_the_challenge(daily_app):
    client = daily_app.test_client()
    token = csrf_token(client)
    started = start_http(client, token)
    open_round = started.headers["Location"]
    refused = client.post("/daily/start", data={"csrf_token": token})
    assert refused.status_code == 302 and refused.headers["Location"] == open_round
    with daily_app.app_context():
        assert db.session.scalar(select(func.count()).select_from(GameSet)) == 1


def test_daily_status_and_reserve_commands(daily_app):
    runner = daily_app.test_cli_runner()
    status = runner.invoke(args=["daily", "status"])
    assert "Days left: about 2 more challenge(s)." in status.output
    assert status.exit_code == 1 and "Warning: fewer than 3 days left" in status.output
    with daily_app.app_context():
        for i in range(30):  # each passage shown all human, and by a machine turning early or late
            for boundary in (10, (3, 8)[i % 2]):
                factories.example(
                    boundary=boundary,
                    category_slug=("news", "stories")[i % 2],
                    passage=f"spare-{i}",
                )
    reserved = runner.invoke(args=["daily", "reserve", "0.5"])
    assert reserved.exit_code == 0, reserved.output
    assert "Held back 16 passage(s)" in reserved.output
    status = runner.invoke(args=["daily", "status"])
    days_left = int(re.search(r"Days left: about (\d+) more", status.output).group(1))
    assert status.exit_code == 0 and 3 <= days_left <= 5  # 26 passages, 5 a day
    assert runner.invoke(args=["daily", "reserve", "0"]).exit_code == 2


def test_a_challenge_with_an_uncounted_text_stays_out_of_the_distribution(daily_app):
    for _ in range(2):
        client = daily_app.test_client()
        play_daily(client, csrf_token(client))
    with daily_app.app_context():
        assert daily.results(DAY).players == 2
        # As if the second player's first text had been revealed to another identity of theirs.
        tainted = db.session.scalars(
            select(Round).join(GameSet, GameSet.id == Round.set_id).order_by(Round.id.desc())
        ).first()
        tainted.uncounted = "truth_seen_device"
        db.session.commit()
        assert daily.results(DAY).players == 1


def test_a_tie_and_a_day_to_come_are_said_plainly(daily_app):
    ann, bob = daily_app.test_client(), daily_app.test_client()
    play_daily(ann, csrf_token(ann))
    play_daily(bob, csrf_token(bob))  # the same answers: the same score
    results = " ".join(ann.get(f"/daily/{DAY}").get_data(as_text=True).split())
    assert "The other player scored the same as you." in results
    assert "more than 0" not in results
    # Tomorrow's page is not "no challenge that day": the day has not come.
    tomorrow = ann.get(f"/daily/{DAY + timedelta(days=1)}")
    assert tomorrow.status_code == 404
    page = tomorrow.get_data(as_text=True)
    assert f"{DAY + timedelta(days=1)} has not come yet" in page
    assert "There was no daily challenge that day" not in page


def test_past_days_are_linked_only_once_there_are_some_and_rounds_name_their_day(daily_app):
    from tests.test_accounts import signup

    ann = daily_app.test_client()
    assert signup(ann, "ann_daily").status_code == 302
    # A fresh install: today's challenge is the first, so there is no archive to link to.
    before = ann.get("/daily")
    assert before.status_code == 200 and "Today" in before.get_data(as_text=True)
    assert "Past challenges, for practice" not in before.get_data(as_text=True)
    play_daily(ann, csrf_token(ann))
    assert "Past challenges, for practice" not in ann.get(f"/daily/{DAY}").get_data(as_text=True)
    daily_app.config["TODAY_OVERRIDE"] = DAY + timedelta(days=1)
    page = ann.get("/daily").get_data(as_text=True)
    assert "Past challenges, for practice" in page
    # "My rounds" stays in the menu once signed up, and lists the date and the daily challenge.
    assert '<a href="/profile/rounds">My rounds</a>' in page
    rounds = " ".join(ann.get("/profile/rounds").get_data(as_text=True).split())
    assert '<th scope="col">Date</th>' in rounds
    assert len(re.findall(r'<time datetime="\d{4}-\d\d-\d\d">', rounds)) == 5  # answered on
    assert rounds.count(f"daily challenge {DAY}") == 5

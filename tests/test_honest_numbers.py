"""One source for every number a player sees: a player's results, share text, card page, PNG card,
profile, rounds, badges and set summary agree, and a replay (a second identity in the same
browser) earns nothing anywhere. Played over HTTP, as a browser without JavaScript does."""

from __future__ import annotations

import json
import re

from sqlalchemy import select

from app.extensions import db
from app.game import cards, daily
from app.models import GameSet, Round
from tests import factories
from tests import test_sets_and_daily as shared
from tests.conftest import csrf_token
from tests.game_helpers import (
    answer,
    answer_http,
    flag_http,
    play_over_http,
    play_through_set,
    reveal_http,
    teaching,
)
from tests.test_accounts import login, signup
from tests.test_sets_and_daily import DAY, SHARE_RE

# The fixtures of tests/test_sets_and_daily.py: held-back daily texts, and sets of three.
daily_app = shared.daily_app
small_sets = shared.small_sets

SCORE_RE = re.compile(r"<strong>(\d+)</strong> of (\d+) points")
STAT_RE = r"<div><strong>([-\d.—+]+)</strong><span>{}</span></div>"
EARNED_BADGE_RE = re.compile(r'<li class="earned"><strong>★ ([^<]+)</strong>')


def play_daily_exactly(app, client, token: str, start: str = "/daily/start") -> list[int]:
    """Play today's challenge (or the set `start` begins) flagging the true boundary of every
    text (25 of 25 if it counts); the rounds played."""

    def exactly(round_id: int) -> None:
        with app.app_context():
            example = db.session.get(Round, round_id).example
            boundary, n = example.boundary, example.n_sentences
        if boundary >= n:
            for seen in range(1, n):
                reveal_http(client, token, round_id, seen)
            answered = answer_http(client, token, round_id, n, "human", reasons="hunch")
        else:
            answered = flag_http(client, token, round_id, boundary)
        assert answered.status_code == 302

    started = client.post(start, data={"csrf_token": token})
    return play_through_set(client, token, started, exactly)[0]


def stat(page: str, label: str) -> str:
    return re.search(STAT_RE.format(re.escape(label)), page).group(1)


def everything_shown(app, client) -> dict:
    """Every figure of today's result the player's pages show, read from the pages."""
    results = client.get(f"/daily/{DAY}").get_data(as_text=True)
    share = SHARE_RE.search(results).group(1)
    squares_line = share.split("\n")[1]
    share_total = int(re.search(r" (\d+)/25", squares_line).group(1))
    card_path = share.split("\n")[-1].removeprefix("http://localhost")
    visitor = app.test_client()
    card = visitor.get(card_path).get_data(as_text=True)
    png = visitor.get(card_path + ".png").data
    profile = client.get("/profile").get_data(as_text=True)
    rounds_page = client.get("/profile/rounds").get_data(as_text=True)
    row_points = [
        int(p) for p in re.findall(r"</td><td>[^<]*</td><td>(\d+)(?: <small>|</td>)", rounds_page)
    ]
    download = json.loads(client.get("/account/data.json").text)
    return {
        "download": download,
        "download_points": sum(r["points"] for r in download["rounds"]),
        "results": int(SCORE_RE.search(results).group(1)),
        "share": share_total,
        "squares": squares_line.split(" ")[0],
        "card": int(SCORE_RE.search(card).group(1)),
        "card_title": re.search(r'og:title" content="(\d+)/25', card).group(1),
        "png": png,
        "profile_points": int(stat(profile, "points")),
        "profile_rounds": int(stat(profile, "rounds")),
        "listed_points": sum(row_points),
        "listed_rows": len(row_points),
        "badges": set(EARNED_BADGE_RE.findall(profile)),
        "streak": int(stat(profile, "day streak in the daily challenge")),
        "results_page": results,
        "card_page": card,
        "rounds_page": rounds_page,
    }


def test_a_daily_replayed_by_a_new_guest_earns_nothing_on_any_page(daily_app):
    client = daily_app.test_client()
    assert signup(client, username="ann").status_code == 302
    token = csrf_token(client, "/daily")
    play_daily_exactly(daily_app, client, token)
    ann = everything_shown(daily_app, client)
    assert ann["results"] == ann["share"] == ann["card"] == int(ann["card_title"]) == 25
    assert ann["squares"] == "🟩" * 5
    assert ann["png"] == cards.render_png(DAY, [5] * 5)
    assert ann["profile_points"] == ann["listed_points"] == 25
    assert ann["profile_rounds"] == ann["listed_rows"] == 5
    assert {"Bullseye", "Set complete", "On a roll"} <= ann["badges"]
    assert ann["streak"] == 1
    assert ann["download_points"] == 25
    assert [(x["kind"], x["day"], x["points"], x["counted"]) for x in ann["download"]["sets"]] == [
        ("daily", DAY.isoformat(), 25, True)
    ]
    for row in ann["download"]["rounds"]:
        # 1-based, as on the page; one reveal time per sentence shown.
        assert row["flagged_sentence"] == row["first_machine_sentence"]
        assert row["first_machine_sentence"] in (row["boundary"] + 1, None)
        assert [r["sentence"] for r in row["reveals"]] == list(
            range(1, row["sentences_revealed"] + 1)
        )
        assert row["set_id"] == ann["download"]["sets"][0]["set_id"]
    assert "counted from 0" in ann["download"]["about"]["sentences"]

    # Signed out, the same browser replays the challenge as a new guest with the answers known.
    client.post("/logout", data={"csrf_token": csrf_token(client, "/")})
    token = csrf_token(client, "/daily")
    play_daily_exactly(daily_app, client, token)
    replay = everything_shown(daily_app, client)
    assert replay["results"] == replay["share"] == replay["card"] == int(replay["card_title"]) == 0
    assert replay["squares"] == "⬜" * 5
    assert "(replay, not counted)" in SHARE_RE.search(replay["results_page"]).group(1)
    assert "This result does not count" in replay["results_page"]
    assert "A replay" in replay["card_page"]
    assert replay["png"] == cards.render_png(DAY, [None] * 5) != ann["png"]
    assert replay["profile_points"] == replay["listed_points"] == 0
    assert replay["profile_rounds"] == 0 and replay["listed_rows"] == 5
    assert replay["rounds_page"].count("(not counted") == 5
    assert replay["badges"] == set()
    assert replay["streak"] == 0
    assert replay["download_points"] == 0
    assert {(r["counted"], r["points_if_counted"]) for r in replay["download"]["rounds"]} == {
        (False, 5)
    }
    assert [(x["points"], x["counted"]) for x in replay["download"]["sets"]] == [(0, False)]
    # Everyone's scores hold Ann's result only.
    with daily_app.app_context():
        assert daily.results(DAY).players == 1
        guest_set = db.session.scalars(select(GameSet).order_by(GameSet.id.desc())).first()
        assert guest_set.points == 0 and guest_set.finished
    # Each round page of the replay shows 0 points and why.
    with daily_app.app_context():
        replayed = db.session.scalars(select(Round.id).where(Round.set_id == guest_set.id)).all()
    page = client.get(f"/play/round/{replayed[0]}").get_data(as_text=True)
    assert '<span class="points-badge">0</span>' in page and "This round does not count" in page

    # Ann, back in, still sees her own figures everywhere.
    login(client, "ann")
    again = everything_shown(daily_app, client)
    assert again["results"] == again["share"] == again["card"] == again["profile_points"] == 25


def test_a_public_profile_names_its_player_not_you(daily_app):
    client = daily_app.test_client()
    signup(client, username="ann")
    play_daily_exactly(daily_app, client, csrf_token(client, "/daily"))
    own = client.get("/profile").get_data(as_text=True)
    assert ">you</text>" in own or "you" in re.findall(r"<text[^>]*>([^<]+)</text>", own)
    client.post(
        "/profile/settings",
        data={"csrf_token": csrf_token(client, "/profile"), "profile_public": "yes"},
    )
    stranger = daily_app.test_client()
    public = stranger.get("/players/ann").get_data(as_text=True)
    labels = re.findall(r"<text[^>]*>([^<]+)</text>", public)
    assert "ann" in labels and "you" not in labels
    assert "your 5 rounds" not in public and "ann’s 5 rounds" in public


def test_a_set_that_scored_nothing_names_no_best_call(small_sets):
    client = small_sets.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token, flag_at=1)  # every boundary is later: 0 points
    page = client.get(f"/play/round/{first}").get_data(as_text=True)
    next_path = re.search(r'action="(/sets/\d+/next)"', page).group(1)
    play_over_http(client, token, flag_at=1, start=next_path)
    play_over_http(client, token, flag_at=1, start=next_path)
    summary = client.get(next_path.removesuffix("/next")).get_data(as_text=True)
    assert "<strong>0</strong> of 15 points" in summary
    assert "Best call" not in summary


def test_an_uncounted_round_shows_no_points_beside_its_explanation(ctx):
    example = factories.example(boundary=3)
    writer = answer(factories.player(), example, 3, explanation="The style shifts.")
    writer.uncounted = "truth_seen_device"  # as if another identity had seen the truth first
    db.session.commit()
    reader_round = answer(factories.player(), example, 3)
    _, shown = teaching(reader_round)
    assert [(e.text, e.points) for e in shown] == [("The style shifts.", 0)]

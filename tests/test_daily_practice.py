"""Around the daily challenge: the countdown (pure and on the pages), past challenges played for
practice (never counted anywhere), and the opt-in reminder. Played over HTTP as a browser
without JavaScript does, on a real database."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.game import countdown, daily
from app.models import BoardTotal, GameSet, Player, Round
from tests import test_sets_and_daily as shared
from tests.conftest import csrf_token
from tests.game_helpers import answer_http, reveal_http
from tests.test_accounts import signup
from tests.test_honest_numbers import EARNED_BADGE_RE, SCORE_RE, play_daily_exactly, stat
from tests.test_sets_and_daily import DAY, ROUND_RE, SHARE_RE

daily_app = shared.daily_app
NEXT_DAY = DAY + timedelta(days=1)
CSRF_RE = re.compile(r'name="csrf_token" value="[^"]*"')

# -- the countdown (pure) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "minutes", "words", "iso"),
    [
        (datetime(2026, 11, 25, 18, 48, tzinfo=UTC), 312, "5 h 12 min", "PT5H12M"),
        (datetime(2026, 11, 25, 18, 47, 30, tzinfo=UTC), 313, "5 h 13 min", "PT5H13M"),
        (datetime(2026, 11, 25, 23, 0, tzinfo=UTC), 60, "1 h", "PT1H0M"),
        (datetime(2026, 11, 25, 23, 48, tzinfo=UTC), 12, "12 min", "PT0H12M"),
        (datetime(2026, 11, 25, 23, 59, 30, tzinfo=UTC), 1, "less than a minute", "PT0H1M"),
        (datetime(2026, 11, 26, 0, 0, tzinfo=UTC), 1440, "24 h", "PT24H0M"),
    ],
)
def test_countdown_to_the_next_utc_midnight(now, minutes, words, iso):
    left = countdown.countdown(now)
    assert (left.minutes, left.words, left.iso_duration) == (minutes, words, iso)
    assert left.next_iso == (now.date() + timedelta(days=1)).isoformat() + "T00:00:00Z"


def test_countdown_counts_in_utc_whatever_the_clock_zone():
    # 20:00 in New York on the 25th is 01:00 UTC on the 26th: the next challenge is the 27th's.
    evening = datetime(2026, 11, 25, 20, 0, tzinfo=timezone(timedelta(hours=-5)))
    left = countdown.countdown(evening)
    assert left.next_iso == "2026-11-27T00:00:00Z" and left.words == "23 h"


def test_the_daily_and_results_pages_show_the_countdown_without_script(daily_app):
    client = daily_app.test_client()
    token = csrf_token(client, "/daily")
    shared.play_daily(client, token)
    for path in ("/daily", f"/daily/{DAY}", "/daily/archive"):
        page = client.get(path, follow_redirects=True).get_data(as_text=True)
        box = re.search(r'<p class="countdown"[^>]*>(.*?)</p>', page, re.S)
        assert box, path
        time = re.search(r'<time datetime="PT(\d+)H(\d+)M">([^<]+)</time>', box.group(1))
        hours, minutes = int(time.group(1)), int(time.group(2))
        assert 1 <= 60 * hours + minutes <= 1440
        assert time.group(3) == countdown.describe(60 * hours + minutes)
        # Updated once a minute by the script, never a live region that chatters.
        assert "aria-live" not in box.group(0) and 'role="timer"' not in box.group(0)


# -- practice ------------------------------------------------------------------------------------


def board_rows(app, username: str) -> list[tuple]:
    with app.app_context():
        player = db.session.scalar(select(Player).where(Player.username == username))
        rows = db.session.scalars(
            select(BoardTotal)
            .where(BoardTotal.player_id == player.id)
            .order_by(BoardTotal.period, BoardTotal.scope)
        ).all()
        return [
            tuple(
                getattr(row, c.key) for c in BoardTotal.__table__.columns if c.key != "updated_at"
            )
            for row in rows
        ]


def numbers(app, client) -> dict:
    """Every number of the player's that a page shows: profile, boards, results, share card."""
    profile = client.get("/profile").get_data(as_text=True)
    results = client.get(f"/daily/{NEXT_DAY}").get_data(as_text=True)
    share = SHARE_RE.search(results).group(1)
    card_path = share.split("\n")[-1].removeprefix("http://localhost")
    visitor = app.test_client()
    download = json.loads(client.get("/account/data.json").text)
    shown = {
        "profile_points": stat(profile, "points"),
        "profile_rounds": stat(profile, "rounds"),
        "streak": stat(profile, "day streak in the daily challenge"),
        "badges": set(EARNED_BADGE_RE.findall(profile)),
        "charts": re.findall(r"<svg.*?</svg>", profile, re.S),
        "results": SCORE_RE.search(results).group(1),
        "share": share,
        "card": CSRF_RE.sub("", visitor.get(card_path).get_data(as_text=True)),
        "png": visitor.get(card_path + ".png").data,
        "boards": [
            CSRF_RE.sub("", client.get(path).get_data(as_text=True))
            for path in ("/leaderboard", "/leaderboard?by=points", "/leaderboard?period=week")
        ],
        "board_rows": board_rows(app, "bob"),
        "download_points": sum(r["points"] for r in download["rounds"]),
        "download_counted_sets": [s for s in download["sets"] if s["counted"]],
    }
    with app.app_context():
        shown["everyone"] = [daily.results(day).counts for day in (DAY, NEXT_DAY)]
    return shown


def practise(app, client, token: str, day) -> list[int]:
    """Practise a past day, flagging every text's true boundary; the rounds played."""
    played = play_daily_exactly(app, client, token, start=f"/daily/{day}/practice")
    for round_id in played:
        page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
        assert "Practice · daily challenge" in page and "practice, not counted" in page
        # No "0" badge beside "Exact!": the line under it says what the call would have earned.
        assert "points-badge" not in page
        assert "Practice round: not counted (your call would have earned 5)" in page
    assert "See your practice results" in page
    return played


def test_practising_a_past_day_changes_no_number_on_any_page(daily_app):
    # Ann plays DAY on its day; the next day Bob plays the new challenge, then practises DAY.
    ann = daily_app.test_client()
    play_daily_exactly(daily_app, ann, csrf_token(ann, "/daily"))
    daily_app.config["TODAY_OVERRIDE"] = NEXT_DAY
    bob = daily_app.test_client()
    signup(bob, username="bob")
    token = csrf_token(bob, "/daily")
    shared.play_daily(bob, token)
    before = numbers(daily_app, bob)

    # The past day's results page offers practice too; today's does not.
    assert "Play this day for practice" in bob.get(f"/daily/{DAY}").get_data(as_text=True)
    assert "Play this day for practice" not in bob.get(f"/daily/{NEXT_DAY}").get_data(as_text=True)
    archive = bob.get("/daily/archive").get_data(as_text=True)
    assert f"<strong>{DAY}</strong>" in archive
    # Today's challenge is never in the archive.
    assert f"<strong>{NEXT_DAY}</strong>" not in archive
    assert f"/daily/{NEXT_DAY}/practice" not in archive

    played = practise(daily_app, bob, token, DAY)
    assert len(played) == 5
    after = numbers(daily_app, bob)
    for key in before:
        if key not in ("download_counted_sets",):
            assert after[key] == before[key], key
    assert after["download_counted_sets"] == before["download_counted_sets"]

    # The practice shows what the calls would have earned, marked as practice.
    page = bob.get(f"/daily/{DAY}/practice").get_data(as_text=True)
    assert "Practice: not counted" in page
    assert "Your calls would have earned <strong>25</strong> of 25 points" in page
    assert "On the day, 1 player finished this challenge" in page
    # The history lists the practice rounds as such, at 0 points.
    rounds_page = bob.get("/profile/rounds").get_data(as_text=True)
    assert rounds_page.count("(practice, not counted)") == 5
    download = json.loads(bob.get("/account/data.json").text)
    practice_rows = [r for r in download["rounds"] if r["kind"] == "practice"]
    assert len(practice_rows) == 5
    assert {
        (r["points"], r["counted"], r["uncounted_reason"], r["points_if_counted"])
        for r in practice_rows
    } == {(0, False, "practice", 5)}
    practice_sets = [s for s in download["sets"] if s["kind"] == "practice"]
    assert [(s["day"], s["counted"], s["points"]) for s in practice_sets] == [
        (DAY.isoformat(), False, 0)
    ]
    # The archive now links to the practice; the day's scores still hold Ann alone.
    assert f'href="/daily/{DAY}/practice"' in bob.get("/daily/archive").get_data(as_text=True)
    with daily_app.app_context():
        assert daily.results(DAY).players == 1


def test_practice_cannot_reach_todays_challenge_or_a_day_without_one(daily_app):
    client = daily_app.test_client()
    token = csrf_token(client, "/daily")
    today = client.post(f"/daily/{DAY}/practice", data={"csrf_token": token})
    assert today.status_code == 302 and today.headers["Location"].endswith("/daily")
    assert client.get(f"/daily/{DAY}/practice").headers["Location"].endswith("/daily")
    for day in (DAY + timedelta(days=1), DAY - timedelta(days=3), "2026-13-01", "x" * 40):
        refused = client.post(f"/daily/{day}/practice", data={"csrf_token": token})
        assert refused.status_code == 404, day
    with daily_app.app_context():
        assert db.session.scalar(select(func.count()).select_from(GameSet)) == 0
        assert db.session.scalar(select(func.count()).select_from(Player)) == 0


def test_a_day_is_practised_once_and_not_over_ones_own_result(daily_app):
    ann = daily_app.test_client()
    ann_token = csrf_token(ann, "/daily")
    shared.play_daily(ann, ann_token)
    daily_app.config["TODAY_OVERRIDE"] = NEXT_DAY
    # Ann played DAY on its day: asking to practise it shows her own results instead.
    again = ann.post(f"/daily/{DAY}/practice", data={"csrf_token": ann_token})
    assert again.headers["Location"].endswith(f"/daily/{DAY}")
    assert "Your results" in ann.get("/daily/archive").get_data(as_text=True)

    bob = daily_app.test_client()
    token = csrf_token(bob, "/daily")
    # Halfway through, asking again resumes the open text rather than starting over.
    first = bob.post(f"/daily/{DAY}/practice", data={"csrf_token": token}).headers["Location"]
    assert (
        bob.post(f"/daily/{DAY}/practice", data={"csrf_token": token})
        .headers["Location"]
        .endswith(first)
    )
    assert "Continue practice" in bob.get("/daily/archive").get_data(as_text=True)
    bob.post(first.removeprefix("http://localhost") + "/next", data={"csrf_token": token})
    played = practise(daily_app, bob, token, DAY)
    assert len(played) == 5 and played[0] == int(ROUND_RE.search(first).group(1))
    with daily_app.app_context():
        practice_set = db.session.scalars(select(GameSet).where(GameSet.kind == "practice")).one()
        rounds_before = db.session.scalar(select(func.count()).select_from(Round))
    # Finished: a second go shows the first one's results and plays nothing; so does the set.
    second = bob.post(f"/daily/{DAY}/practice", data={"csrf_token": token})
    assert second.headers["Location"].endswith(f"/daily/{DAY}/practice")
    onward = bob.post(f"/sets/{practice_set.id}/next", data={"csrf_token": token})
    assert onward.headers["Location"].endswith(f"/daily/{DAY}/practice")
    with daily_app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Round)) == rounds_before
    # Ann's own result of the day stands in for a practice page.
    assert ann.get(f"/daily/{DAY}/practice").headers["Location"].endswith(f"/daily/{DAY}")
    stranger = daily_app.test_client()
    stranger.post(
        "/play", data={"csrf_token": csrf_token(stranger, "/"), "category": "news"}
    )  # a guest with an open text of normal play
    busy = stranger.post(f"/daily/{DAY}/practice", data={"csrf_token": csrf_token(stranger, "/")})
    assert "/play/round/" in busy.headers["Location"]
    assert stranger.get(f"/daily/{DAY}/practice").status_code == 404


def test_a_player_who_only_practised_has_nothing_to_show_for_it(daily_app):
    ann = daily_app.test_client()
    shared.play_daily(ann, csrf_token(ann, "/daily"))
    daily_app.config["TODAY_OVERRIDE"] = NEXT_DAY
    dee = daily_app.test_client()
    assert signup(dee, username="dee").status_code == 302
    assert len(practise(daily_app, dee, csrf_token(dee, "/daily"), DAY)) == 5
    profile = dee.get("/profile").get_data(as_text=True)
    # A finished practice set is no "Set complete", and no day of a streak.
    assert EARNED_BADGE_RE.findall(profile) == []
    assert stat(profile, "points") == "0" and stat(profile, "rounds") == "0"
    assert stat(profile, "day streak in the daily challenge") == "0"
    assert board_rows(daily_app, "dee") == []


def test_a_challenge_left_unfinished_is_not_finished_on_a_later_day(daily_app):
    client = daily_app.test_client()
    token = csrf_token(client, "/daily")
    first = client.post("/daily/start", data={"csrf_token": token}).headers["Location"]
    round_id = int(ROUND_RE.search(first).group(1))
    reveal_http(client, token, round_id, 1)
    answer_http(client, token, round_id, 2, reasons="hunch")
    with daily_app.app_context():
        set_id = db.session.get(Round, round_id).set_id
    # The next day its answers may be known: the rest of it is not served, nor can it be practised.
    daily_app.config["TODAY_OVERRIDE"] = NEXT_DAY
    late = client.post(f"/sets/{set_id}/next", data={"csrf_token": token})
    assert late.status_code == 302 and late.headers["Location"].endswith(f"/daily/{DAY}")
    assert "challenge is over" in client.get(f"/daily/{DAY}").get_data(as_text=True)
    practice = client.post(f"/daily/{DAY}/practice", data={"csrf_token": token})
    assert practice.headers["Location"].endswith(f"/daily/{DAY}")
    assert "you started it on the day" in client.get("/daily/archive").get_data(as_text=True)
    with daily_app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Round)) == 1
        assert db.session.get(GameSet, set_id).answered == 1


# -- the reminder --------------------------------------------------------------------------------


def test_the_reminder_is_offered_after_a_daily_and_turned_on_and_off(daily_app):
    client = daily_app.test_client()
    assert signup(client, username="cyd").status_code == 302
    token = csrf_token(client, "/daily")
    # Never on a first visit: the daily page before playing offers nothing.
    assert "Remind me tomorrow" not in client.get("/daily").get_data(as_text=True)
    shared.play_daily(client, token)
    results = client.get(f"/daily/{DAY}").get_data(as_text=True)
    assert "Remind me tomorrow" in results and "only\n    while this site is open" in results
    assert 'name="roft-daily-reminder"' not in results

    assert (
        client.post("/daily/reminder", data={"csrf_token": token, "remind": "x"}).status_code == 400
    )
    on = client.post("/daily/reminder", data={"csrf_token": token, "remind": "on"})
    assert on.headers["Location"].endswith(f"/daily/{DAY}")
    home = client.get("/").get_data(as_text=True)
    meta = re.search(r'<meta name="roft-daily-reminder" content="([^"]+)"', home)
    assert meta and meta.group(1).endswith("T00:00:00Z")
    assert "Turn the reminder off" in client.get("/account").get_data(as_text=True)
    assert "Remind me tomorrow" not in client.get(f"/daily/{DAY}").get_data(as_text=True)
    with daily_app.app_context():
        assert db.session.scalar(select(Player.daily_reminder).where(Player.username == "cyd"))

    off = client.post(
        "/daily/reminder", data={"csrf_token": token, "remind": "off", "back": "account"}
    )
    assert off.headers["Location"].endswith("/account#reminder")
    assert 'name="roft-daily-reminder"' not in client.get("/").get_data(as_text=True)
    with daily_app.app_context():
        assert not db.session.scalar(select(Player.daily_reminder).where(Player.username == "cyd"))
    # Someone not signed in changes nothing.
    stranger = daily_app.test_client()
    refused = stranger.post(
        "/daily/reminder", data={"csrf_token": csrf_token(stranger, "/"), "remind": "on"}
    )
    assert refused.status_code == 302 and refused.headers["Location"].endswith("/")

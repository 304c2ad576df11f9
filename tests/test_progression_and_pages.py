"""Progression (pure rules, the profile), the guided first round, static files and page basics."""

from __future__ import annotations

import re

import pytest

from app.extensions import db
from app.game import charts, progression
from app.game.progression import Played
from app.models import Player, Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import answer

# -- pure rules -------------------------------------------------------------------------------


def played(points: list[int], baseline: int = 2, category: str = "News") -> list[Played]:
    return [Played(p, p == 5, baseline, category) for p in points]


def test_rolling_mean():
    assert progression.rolling_mean([5, 0, 5, 0], window=2) == [5, 2.5, 2.5, 2.5]
    assert progression.rolling_mean([], window=3) == []


def test_mastery_needs_rounds_and_an_edge_over_all_human():
    assert progression.mastery("News", played([5] * 4)).level.name == "Newcomer"
    assert progression.mastery("News", played([5] * 6)).level.name == "Reader"
    # Ten rounds that only match "all human" stay Readers; beating it makes a Spotter.
    assert progression.mastery("News", played([2] * 12)).level.name == "Reader"
    assert progression.mastery("News", played([3] * 12)).level.name == "Spotter"
    sleuth = progression.mastery("News", played([3] * 30))
    assert sleuth.level.name == "Sleuth" and sleuth.next_level.name == "Expert"
    expert = progression.mastery("News", played([4] * 60))
    assert expert.level.name == "Expert" and expert.next_level is None and expert.rank == 5
    # The lazy strategy never climbs: its points equal the baseline by definition.
    lazy = [Played(b, b == 5, b, "News") for b in [5, 0, 1, 2, 3, 4] * 20]
    assert progression.mastery("News", lazy).level.name == "Reader"


def test_badges_follow_their_rules():
    none = {b.key: b.earned for b in progression.badges([], 0, 0, 0)}
    assert not any(none.values())
    history = played([0, 5, 5, 5, 5, 5] + [3] * 94)
    earned = {b.key: b.earned for b in progression.badges(history, 7, 1, 2)}
    assert earned == dict.fromkeys(earned, True)
    broken_run = played([5, 5, 5, 5, 0, 5])
    keys = {b.key: b.earned for b in progression.badges(broken_run, 6, 0, 0)}
    assert keys["first-exact"] and not keys["exact-5-row"] and not keys["streak-7"]


def test_charts_are_plain_svg_without_script_or_inline_style():
    svg = charts.line_chart(
        [charts.Series("you <b>", [1, 2, 3], "you")],
        y_max=5,
        title="T",
        description="D",
        y_ticks=[(0, "0"), (5, "5")],
    )
    assert svg.startswith("<svg") and "<script" not in svg and "style=" not in svg
    assert "you &lt;b&gt;" in svg
    bars = charts.bar_chart(["1", "2"], [0, 3], title="B", description="d", highlight=1, marked=0)
    assert bars.count("<rect") == 2 and 'class="chart-bar-answer"' in bars and "▲ you" in bars


# -- the profile ------------------------------------------------------------------------------


def test_profile_shows_skill_mastery_badges_and_reopens_past_rounds(app, client):
    client.post(
        "/signup",
        data={"csrf_token": csrf_token(client), "username": "reader1", "password": "a long pw!"},
    )
    with app.app_context():
        player = db.session.scalar(db.select(Player).where(
            Player.username == "reader1"))  # fmt: skip
        for i in range(6):
            example = factories.example(boundary=3, passage=f"p{i}")
            answer(player, example, 3, "Repeats itself" if i == 0 else "")
        first_round = db.session.scalar(db.select(Round.id).order_by(Round.id))
    page = client.get("/profile").get_data(as_text=True)
    assert "Points per round over time" in page and "<svg" in page
    assert "“all human” every time" in page
    assert "<strong>Reader</strong>" in page
    assert "★ Bullseye" in page and "★ On a roll" in page
    assert "★ Century" not in page
    rounds_page = client.get("/profile/rounds").get_data(as_text=True)
    assert f'href="/play/round/{first_round}"' in rounds_page
    reopened = client.get(f"/play/round/{first_round}").get_data(as_text=True)
    assert 'class="result"' in reopened and "/answer" not in reopened and "/next" not in reopened
    assert client.get("/profile/rounds?page=x").status_code == 400


# -- the guided first round -------------------------------------------------------------------


def test_tutorial_steps_then_play(app, client):
    with app.app_context():
        factories.example(boundary=3)
    home = client.get("/").get_data(as_text=True)
    assert 'name="start" value="tutorial"' in home  # a first visit: Play opens the guide
    token = csrf_token(client)
    to_guide = client.post("/play", data={"csrf_token": token, "start": "tutorial",
                                          "consent": "yes"})  # fmt: skip
    assert to_guide.status_code == 302 and to_guide.headers["Location"].endswith("/tutorial")
    step0 = client.get("/tutorial").get_data(as_text=True)
    assert "always written by a person" in step0 and "A machine wrote this one" not in step0
    early = client.get("/tutorial?step=2&flagged=2").get_data(as_text=True)
    assert "Not yet" in early and "0 points" in early
    exact = client.get("/tutorial?step=4&flagged=4").get_data(as_text=True)
    assert "Exactly right: 5 points" in exact and "Start playing" in exact
    assert 'value="yes" checked' in exact  # the consent chosen on the home page
    late = client.get("/tutorial?step=6&flagged=6").get_data(as_text=True)
    assert "2 sentences late: 3 points" in late
    assert client.get("/tutorial?step=x&flagged=y").status_code == 200
    started = client.post("/play", data={"csrf_token": token, "tutorial": "done",
                                         "category": "random", "consent": "yes"})  # fmt: skip
    assert re.search(r"/play/round/\d+$", started.headers["Location"])
    assert 'name="start" value="tutorial"' not in client.get("/").get_data(as_text=True)
    with app.app_context():
        assert db.session.scalar(db.select(Player.research_consent_at)) is not None


# -- static files and page basics -------------------------------------------------------------


def test_static_files_have_content_hashed_urls_and_a_long_cache(client):
    home = client.get("/").get_data(as_text=True)
    css = re.search(r'href="(/static/site\.css\?v=([0-9a-f]{16}))"', home)
    assert css, "site.css without a content hash"
    cached = client.get(css.group(1))
    assert cached.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    stale = client.get("/static/site.css?v=0000000000000000")
    assert stale.headers["Cache-Control"] == "no-cache"
    assert re.search(r'src="/static/game\.js\?v=[0-9a-f]{16}" defer', home)
    assert client.get("/favicon.ico").headers["Location"].startswith("/static/favicon.svg?v=")


@pytest.mark.parametrize("path", ["/", "/help", "/about", "/login", "/signup", "/daily",
                                  "/tutorial", "/leaderboard"])  # fmt: skip
def test_every_page_has_a_description_an_icon_and_no_inline_script(client, path):
    page = client.get(path).get_data(as_text=True)
    assert re.search(r'<meta name="description" content="[^"]{40,}">', page)
    assert 'rel="icon"' in page
    assert not re.search(r"<script(?![^>]*\bsrc=)", page), "inline script"
    assert "style=" not in page

"""The load benchmark plays the site's protocol: the requests Chromium sends when a player plays
a set through app/static/game.js are, one for one, the requests bench/web_load.py sends for the
same choices (method, address, body encoding and field names, the script's header, Origin).

Both are recorded where the site sees them (a hook on the test app), so the benchmark's own HTTP
client (`bench.web_load.exchange`, aiohttp) is what is checked, not a model of it.
"""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from flask import request
from playwright.sync_api import expect

from app.extensions import db
from app.models import Example, Player
from bench import web_load
from bench.protocol import Choice, RoundView, play_sets
from tests import factories
from tests.game_helpers import answer

pytestmark = pytest.mark.browser

MACHINE_AT = 3
REASONS = ("grammar", "generic")
WORDS = "It drifts away from the recipe."


@pytest.fixture
def app(make_app, db_uri):
    """The test app with sets of two texts, recording every request but static files."""
    application = make_app(SET_SIZE=2)
    application.config["SEEN_REQUESTS"] = seen = []

    @application.before_request
    def record():
        if request.path.startswith("/static/") or request.path == "/favicon.ico":
            return
        seen.append(
            (
                request.method,
                re.sub(r"\d+", "<n>", request.full_path.rstrip("?")),
                tuple(name for name, _ in request.form.items(multi=True))
                if request.method == "POST"
                else (),
                request.mimetype or None,
                request.headers.get("X-Requested-With") == "fetch",
                bool(request.headers.get("Origin")),
            )
        )

    with application.app_context():
        if db_uri.startswith("postgresql"):
            db.drop_all()
        db.create_all()
    yield application
    with application.app_context():
        db.session.remove()
        if db_uri.startswith("postgresql"):
            db.drop_all()


def readers(app) -> None:
    """Two players who have played a round before (so no tutorial), with the bench's password."""
    with app.app_context():
        first = db.session.scalars(db.select(Example).order_by(Example.id)).first()
        for name in ("browser", "bench"):
            player = factories.player(name, web_load.PASSWORD)
            answer(player, first, 2, "")
        assert db.session.query(Player).count() == 2


def decide_like_the_browser() -> callable:
    """The choices the browser below makes: the first text flagged at sentence 3, the second
    read to the end and called human."""
    rounds: list[int] = []

    def decide(view: RoundView) -> Choice:
        if view.round_id not in rounds:
            rounds.append(view.round_id)
        if len(rounds) == 1:
            if view.revealed < MACHINE_AT:
                return Choice("reveal")
            return Choice("machine", REASONS, WORDS)
        return Choice("reveal") if view.can_reveal else Choice("human")

    return decide


def play_in_chromium(page, base: str, script: bool) -> None:
    page.goto(base + "/login")
    page.get_by_label("Username").fill("browser")
    page.get_by_label("Password").fill(web_load.PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Log in").click()
    page.goto(base + "/")
    if script:
        page.locator("html[data-keys='ready']").wait_for(state="attached")
    page.get_by_role("button", name=re.compile("Play a set of texts")).click()
    progress = page.locator(".progress")
    expect(progress).to_contain_text("Sentence 1 of 10")
    for shown in range(2, MACHINE_AT + 1):
        page.get_by_role("button", name=re.compile("Still human")).click()
        expect(progress).to_contain_text(f"Sentence {shown} of 10")
    page.get_by_role("link", name=re.compile("A machine wrote this one")).click()
    for reason in REASONS:
        page.locator(f"form.why input[name=reasons][value={reason}]").check()
    page.locator("details.own-words summary").click()
    page.get_by_label("What made you think").fill(WORDS)
    page.get_by_role("button", name=f"Submit: a machine wrote sentence {MACHINE_AT}").click()
    expect(page.locator("#result")).to_be_visible()
    page.get_by_role("button", name=re.compile("Next text")).click()
    expect(progress).to_contain_text("Sentence 1 of 10")
    for shown in range(2, 11):
        page.get_by_role("button", name=re.compile("Still human")).click()
        expect(progress).to_contain_text(f"Sentence {shown} of 10")
    page.get_by_role("button", name=re.compile("The whole text is human-written")).click()
    expect(page.locator("#result")).to_be_visible()
    page.get_by_role("link", name=re.compile("See your set summary")).click()
    page.wait_for_url(re.compile(r"/sets/\d+$"))
    page.get_by_role("button", name=re.compile("Play another set")).click()
    page.wait_for_url(re.compile(r"/play/round/\d+$"))
    expect(page.locator(".progress")).to_contain_text("Sentence 1 of 10")


async def play_with_the_bench(base: str, requests: int, script: bool) -> None:
    """The benchmark's player, from its log-in on, sending `requests` requests of its plan."""
    player = await web_load.log_in(base, "bench")
    tally = web_load.Tally()
    try:
        moves = play_sets(decide_like_the_browser(), script=script)
        move = next(moves)
        for _ in range(requests - 1):
            move = moves.send(await web_load.exchange(tally, player.session, base, move))
        await web_load.exchange(tally, player.session, base, move)
    finally:
        await player.session.close()
    assert not tally.errors


@pytest.mark.parametrize("script", [True, False], ids=["script", "no-script"])
def test_the_benchmark_sends_what_chromium_sends(app, live_server, browser, script):
    readers(app)
    seen = app.config["SEEN_REQUESTS"]
    context = browser.new_context(java_script_enabled=script)
    try:
        page = context.new_page()
        page.set_default_timeout(15000)
        play_in_chromium(page, live_server, script)
    finally:
        context.close()
    home = max(i for i, r in enumerate(seen) if r[:2] == ("GET", "/"))
    browser_sent = seen[home:]
    seen.clear()

    # Playwright's synchronous API holds this thread's event loop: the bench gets a thread.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(
            asyncio.run, play_with_the_bench(live_server, len(browser_sent), script)
        ).result()
    home = max(i for i, r in enumerate(seen) if r[:2] == ("GET", "/"))
    bench_sent = seen[home:]

    fetch = [r for r in browser_sent if r[4]]
    reveals = [r for r in browser_sent if r[1] == "/play/round/<n>/next"]
    assert len(reveals) == MACHINE_AT - 1 + 9
    if script:
        # The page's script: reveals, answers and the next text by fetch, url-encoded; the rest
        # (start, summary, next set) by the browser.
        assert all(r[3] == "application/x-www-form-urlencoded" and r[5] for r in fetch), fetch
        assert (
            "POST",
            "/sets/<n>/next",
            ("csrf_token",),
            "application/x-www-form-urlencoded",
            True,
            True,
        ) in fetch
        assert [r[:2] for r in browser_sent if not r[4]] == [
            ("GET", "/"),
            ("POST", "/play"),
            ("GET", "/play/round/<n>"),
            ("GET", "/sets/<n>"),
            ("POST", "/play"),
            ("GET", "/play/round/<n>"),
        ]
    else:
        # Without it every action is a url-encoded post, a redirect and the round's page, and
        # the reasons are a page of their own.
        assert not fetch
        assert ("GET", "/play/round/<n>?flag=<n>", (), None, False, False) in browser_sent
        assert all(r[3] == "application/x-www-form-urlencoded" for r in browser_sent if r[2])
    # Request for request, the benchmark's player sends the same.
    assert len(bench_sent) == len(browser_sent)
    for number, (sent, expected) in enumerate(zip(bench_sent, browser_sent, strict=True)):
        assert sent == expected, f"request {number}: the bench sent {sent}, Chromium {expected}"

"""The numbers agree across pages in Chromium, on a desktop and a 390×844 phone: a player's daily
result, share text, card and profile; a replay by a second identity in the same browser earns
nothing on any of them; chart text stays readable (at least 12 px) on the phone; axe-core checks
every screen."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests import factories
from tests.e2e.conftest import audit
from tests.e2e.test_game_flows import (
    DAY,
    device,
    flag_second_sentence,
    play_daily_in_browser,
    shot,
)

pytestmark = pytest.mark.browser
__all__ = ["device"]  # the fixture, imported for this module's tests


def smallest_chart_text(page) -> float:
    """The smallest rendered font size, in CSS pixels, of any text in the page's charts."""
    return page.evaluate(
        """() => Math.min(...[...document.querySelectorAll('svg.chart text')].map(
             t => t.getBoundingClientRect().height > 0
               ? parseFloat(getComputedStyle(t).fontSize)
                 * t.ownerSVGElement.getBoundingClientRect().width
                 / t.ownerSVGElement.viewBox.baseVal.width
               : Infinity))"""
    )


def score_on(page) -> int:
    return int(page.locator(".daily-score strong").inner_text())


def test_a_replay_earns_nothing_on_any_page(app, live_server, device, shots):
    with app.app_context():
        for i in range(5):
            # The second sentence is the first machine one: flagging it is exact (5 points).
            factories.example(boundary=1, category_slug="news", passage=f"held-{i}", kind="daily")
    app.config["TODAY_OVERRIDE"] = DAY
    page = device
    page.goto(live_server + "/signup")
    page.get_by_label("Username").fill("ann_reads")
    page.get_by_label("Password").fill("a very good password")
    page.get_by_role("button", name="Create my account").click()
    page.goto(live_server + "/daily")
    play_daily_in_browser(page)
    assert score_on(page) == 25
    share = page.locator("#share-text").inner_text()
    assert "🟩🟩🟩🟩🟩 25/25" in share
    if page.device == "phone":
        assert smallest_chart_text(page) >= 12
    page.goto(live_server + "/profile")
    expect(page.locator(".stats")).to_contain_text("25")
    expect(page.locator(".badges li.earned")).to_contain_text(["Bullseye", "Set complete"])
    if page.device == "phone":
        assert smallest_chart_text(page) >= 12
    audit(page, "profile")
    shot(page, shots, "profile-charts")

    # Signed out, the same browser replays the challenge as a new guest.
    with page.expect_navigation():  # the menu's "Log out" (folded away on the phone)
        page.locator("form[action$='/logout']").evaluate("form => form.submit()")
    page.goto(live_server + "/daily")
    play_daily_in_browser(page)
    assert score_on(page) == 0
    expect(page.locator(".not-counted")).to_contain_text("This result does not count")
    share = page.locator("#share-text").inner_text()
    assert re.search(r"⬜{5} 0/25 \(replay, not counted\)", share), share
    audit(page, "replayed daily results")
    shot(page, shots, "daily-replay")
    page.goto(share.split("\n")[-1])
    assert score_on(page) == 0
    expect(page.locator(".not-counted")).to_contain_text("A replay")
    audit(page, "replayed share card")
    page.goto(live_server + "/profile")
    points = page.locator(".stats div").first
    expect(points).to_have_text(re.compile(r"^\s*0\s*points"))
    expect(page.locator(".badges li.earned")).to_have_count(0)
    expect(page.locator("table")).to_contain_text("not counted")
    audit(page, "replay profile")


def test_the_chosen_category_sticks_in_the_browser(live_server, device, shots):
    page = device
    page.goto(live_server + "/")
    page.get_by_role("button", name=re.compile("^Stories")).click()
    expect(page.locator("h1")).to_contain_text("Stories · text 1 of 5")
    flag_second_sentence(page)
    page.goto(live_server + "/")
    main = page.locator("button.play")
    expect(main).to_contain_text("Continue your set · text 2 of 5 · Stories")
    audit(page, "home with a chosen category")
    shot(page, shots, "home-category")
    main.click()
    expect(page.locator("h1")).to_contain_text("Stories · text 2 of 5")

"""A guest plays a full round in headless Chromium, signs up keeping the points, and is listed."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import press

pytestmark = pytest.mark.browser


def test_guest_round_signup_and_leaderboard(live_server, page, shots, browser):
    page.goto(live_server + "/")
    expect(
        page.get_by_role("heading", name="Can you tell where the machine takes over?")
    ).to_be_visible()
    page.screenshot(path=str(shots / "home.png"), full_page=True)
    page.get_by_label("I agree that my answers may be used").check()
    page.get_by_role("button", name=re.compile("^News")).click()

    progress = page.locator(".progress")
    expect(progress).to_contain_text("Sentence 1 of 10")
    expect(page.locator("ol.sentences li")).to_have_count(1)
    # Keyboard shortcut H reveals the next sentence; the round page shows only what is revealed.
    press(page, "h")
    expect(progress).to_contain_text("Sentence 2 of 10")
    press(page, "h")
    expect(progress).to_contain_text("Sentence 3 of 10")
    page.get_by_role("button", name=re.compile("Still human")).click()
    expect(progress).to_contain_text("Sentence 4 of 10")
    expect(page.locator("ol.sentences li")).to_have_count(4)
    expect(progress).to_contain_text("6 more to come")
    page.screenshot(path=str(shots / "round.png"), full_page=True)

    # M flags the latest sentence and asks why.
    press(page, "m")
    expect(
        page.get_by_role("heading", name=re.compile("Why do you think sentence 4"))
    ).to_be_visible()
    page.get_by_role("button", name="Submit and see the answer").click()
    expect(page.locator("#why")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Choose at least one reason")
    page.get_by_role("checkbox", name=re.compile("Irrelevant")).check()
    page.get_by_label("In your own words").fill("The recipe suddenly talks about <b>trains</b>.")
    page.screenshot(path=str(shots / "reasons.png"), full_page=True)
    page.get_by_role("button", name="Submit and see the answer").click()

    result = page.locator("#result")
    expect(result).to_be_visible()
    expect(page.locator("ol.sentences li")).to_have_count(10)
    points_text = result.locator(".points strong").inner_text()
    points = int(points_text)
    assert 0 <= points <= 5
    expect(result.locator("h2")).to_have_text(re.compile(r"Exact!|sentences? late|Too early"))
    expect(result.locator("b")).to_have_count(0)  # the explanation's markup is shown as text
    expect(result).to_contain_text("“The recipe suddenly talks about <b>trains</b>.”")
    page.screenshot(path=str(shots / "result.png"), full_page=True)

    # Sign up: the guest's round and points come along.
    page.get_by_role("link", name="Sign up to keep your points").click()
    expect(page.locator(".notice")).to_contain_text(f"You keep the 1 round and {points} point")
    page.get_by_label("Username").fill("keen_reader")
    page.get_by_label("Password").fill("a very good password")
    page.get_by_role("button", name="Create my account").click()
    expect(page.locator(".flash")).to_contain_text("Welcome, keen_reader!")

    # The skill board ranks from 10 rounds and says so; the most-played board lists at once.
    page.goto(live_server + "/leaderboard")
    expect(page.locator("#my-standing")).to_contain_text("Play 9 more rounds here to be ranked")
    page.get_by_role("link", name="Most played").click()
    row = page.locator("tr.me")
    expect(row).to_contain_text("keen_reader")
    expect(row).to_contain_text(str(points))
    page.screenshot(path=str(shots / "leaderboard.png"), full_page=True)

    page.goto(live_server + "/profile")
    expect(page.locator(".stats")).to_contain_text(f"{points}points")
    page.screenshot(path=str(shots / "profile.png"), full_page=True)
    page.goto(live_server + "/help")
    page.screenshot(path=str(shots / "help.png"), full_page=True)


def test_phone_layout_and_all_human_answer(live_server, browser, shots):
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(live_server + "/")
    page.get_by_role("button", name=re.compile("^Stories")).click()
    for n in range(2, 11):
        page.get_by_role("button", name=re.compile("Still human")).click()
        expect(page.locator(".progress")).to_contain_text(f"Sentence {n} of 10")
    expect(page.locator(".progress")).to_contain_text("this is the last sentence")
    page.screenshot(path=str(shots / "phone-round.png"), full_page=True)
    # The page fits the phone's width: nothing scrolls sideways.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.get_by_role("button", name=re.compile("whole text is human-written")).click()
    expect(page.locator("#result h2")).to_be_visible()
    page.screenshot(path=str(shots / "phone-result.png"), full_page=True)
    context.close()

"""A guest plays a full round in headless Chromium, signs up keeping the points, and is listed;
the same on a phone. Every page is checked with axe-core."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import audit, contrast, press

pytestmark = pytest.mark.browser


def test_guest_round_signup_and_leaderboard(live_server, page, shots, browser):
    page.goto(live_server + "/")
    expect(
        page.get_by_role("heading", name="Can you tell where the machine takes over?")
    ).to_be_visible()
    # The research consent comes before the Play button, and Play is above the fold.
    consent = page.get_by_label("I agree that my answers may be used")
    play = page.get_by_role("button", name="Play", exact=True)
    assert consent.bounding_box()["y"] < play.bounding_box()["y"] < 900
    audit(page, "home")
    page.screenshot(path=str(shots / "home.png"), full_page=True)
    consent.check()
    page.get_by_role("button", name=re.compile("^News")).click()

    progress = page.locator(".progress")
    expect(progress).to_contain_text("Sentence 1 of 10")
    expect(page.locator("h1")).to_contain_text("text 1 of 5")
    expect(page.locator("ol.sentences li")).to_have_count(1)
    # Sentence 1 is always human: no "machine" choice yet.
    expect(page.get_by_role("link", name=re.compile("A machine wrote this one"))).to_have_count(0)
    audit(page, "round, first sentence")
    # With the script, each sentence is one request and the page is never reloaded.
    page.evaluate("window.__samePage = true")
    press(page, "h")
    expect(progress).to_contain_text("Sentence 2 of 10")
    press(page, "h")
    expect(progress).to_contain_text("Sentence 3 of 10")
    page.get_by_role("button", name=re.compile("Still human")).click()
    expect(progress).to_contain_text("Sentence 4 of 10")
    expect(page.locator("ol.sentences li")).to_have_count(4)
    expect(progress).to_contain_text("6 more to come")
    assert page.evaluate("window.__samePage === true")
    expect(page.locator("#latest")).to_be_focused()
    page.screenshot(path=str(shots / "round.png"), full_page=True)

    # M opens the reasons inline; a submit without any is stopped with a prompt.
    press(page, "m")
    expect(page.get_by_role("heading", name="Why sentence 4?")).to_be_visible()
    page.get_by_role("button", name="Submit: a machine wrote sentence 4").click()
    expect(page.locator(".why-note")).to_contain_text("Tap at least one reason")
    press(page, "3")  # the third chip: Irrelevant
    expect(page.get_by_role("checkbox", name=re.compile("Irrelevant"))).to_be_checked()
    page.get_by_text("Add your own words").click()
    page.get_by_label("What made you think").fill("The recipe suddenly talks about <b>trains</b>.")
    audit(page, "reasons")
    page.screenshot(path=str(shots / "reasons.png"), full_page=True)
    page.get_by_role("button", name="Submit: a machine wrote sentence 4").click()

    result = page.locator("#result")
    expect(result).to_be_visible()
    assert page.evaluate("window.__samePage === true")
    expect(page.locator("ol.sentences li")).to_have_count(10)
    points = int(result.locator(".points-badge").inner_text())
    assert 0 <= points <= 5
    expect(result.locator("h2")).to_have_text(re.compile(r"Exact!|sentences? late|Too early"))
    # The truth in plain words, never an internal system name.
    expect(result.locator(".kind")).to_have_text(
        re.compile(r"language model|different human-written text|All human")
    )
    expect(page.locator("main")).not_to_contain_text("tiny-gpt2")
    expect(page.locator("main")).not_to_contain_text("splice-baseline")
    expect(page.locator(".teach b")).to_have_count(0)  # the explanation's markup is text
    expect(page.locator(".your-reasons")).to_contain_text(
        "“The recipe suddenly talks about <b>trains</b>.”"
    )
    expect(page.get_by_role("button", name=re.compile("Next text \\(2 of 5\\)"))).to_be_visible()
    audit(page, "result")
    page.screenshot(path=str(shots / "result.png"), full_page=True)

    # Sign up: the guest's round and points come along.
    page.get_by_role("link", name="Sign up").first.click()
    expect(page.locator(".notice")).to_contain_text(f"You keep the 1 round and {points} point")
    audit(page, "sign-up")
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
    audit(page, "leaderboard")
    page.screenshot(path=str(shots / "leaderboard.png"), full_page=True)

    page.goto(live_server + "/")
    expect(page.locator(".stats-strip")).to_contain_text(f"{points} points")
    expect(page.locator(".stats-strip")).to_contain_text("9 more rounds to join the skill board")
    expect(
        page.get_by_role("button", name=re.compile("Continue your set · text 2 of 5"))
    ).to_be_visible()

    page.goto(live_server + "/profile")
    expect(page.locator(".stats")).to_contain_text(f"{points}points")
    audit(page, "profile")
    page.screenshot(path=str(shots / "profile.png"), full_page=True)
    page.goto(live_server + "/help")
    audit(page, "help")
    page.screenshot(path=str(shots / "help.png"), full_page=True)
    for path in ("/about", "/login", "/daily"):
        page.goto(live_server + path)
        audit(page, path)


def test_focus_ring_and_key_hints_meet_contrast(live_server, page):
    page.goto(live_server + "/")
    page.keyboard.press("Tab")  # the skip link
    page.keyboard.press("Tab")
    assert contrast(page, ":focus", "outlineColor") >= 3, "focus ring below 3:1"
    page.get_by_role("button", name=re.compile("^News")).click()
    page.locator(".decide kbd").first.wait_for()
    # Key hints are text inside their buttons: 4.5:1 against the button (axe checks it too).
    assert contrast(page, ".decide .button kbd", "color") >= 4.5


def test_phone_layout_and_all_human_answer(live_server, browser, shots):
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(live_server + "/")
    # The menu is collapsed behind a button.
    expect(page.get_by_role("link", name="Leaderboard")).to_be_hidden()
    page.get_by_role("button", name="Menu").click()
    expect(page.get_by_role("link", name="Leaderboard")).to_be_visible()
    audit(page, "phone home, menu open")
    page.screenshot(path=str(shots / "phone-home.png"), full_page=False)
    page.get_by_role("button", name="Menu").click()
    page.get_by_role("button", name=re.compile("^Stories")).click()
    still = page.get_by_role("button", name=re.compile("Still human"))
    # Buttons are full width and key hints are hidden on a touch screen.
    assert still.bounding_box()["width"] > 300
    expect(page.locator(".decide kbd").first).to_be_hidden()
    for n in range(2, 11):
        still.click()
        expect(page.locator(".progress")).to_contain_text(f"Sentence {n} of 10")
    expect(page.locator(".progress")).to_contain_text("this is the last sentence")
    audit(page, "phone round")
    page.screenshot(path=str(shots / "phone-round.png"), full_page=True)
    # The page fits the phone's width: nothing scrolls sideways.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.get_by_role("button", name=re.compile("whole text is human-written")).click()
    expect(page.locator("#result h2")).to_be_visible()
    # The reveal keeps coloured sentences in view.
    coloured = page.locator("ol.sentences li.human, ol.sentences li.machine, ol.sentences li.other")
    in_view = [
        box
        for i in range(coloured.count())
        if (box := coloured.nth(i).bounding_box()) and 0 <= box["y"] < 844
    ]
    assert in_view, "no coloured sentence in view after the answer"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    audit(page, "phone result")
    page.screenshot(path=str(shots / "phone-result.png"), full_page=False)
    context.close()

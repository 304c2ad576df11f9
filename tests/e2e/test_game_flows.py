"""The game's flows in Chromium, on a desktop and a 390×844 phone: the guided first round, a set
with its summary, the daily challenge (twice in a day, and on two days), the teaching reveal with
votes and a hidden explanation, and play with JavaScript off. axe-core checks every screen."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest
from playwright.sync_api import expect

from app.accounts import service as accounts
from app.extensions import db
from app.models import Example, Round
from tests import factories
from tests.e2e.conftest import audit, press
from tests.game_helpers import others_answer

pytestmark = pytest.mark.browser

VIEWPORTS = {
    "desktop": {"viewport": {"width": 1100, "height": 900}},
    "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}
DAY = date(2026, 11, 20)


@pytest.fixture(params=list(VIEWPORTS))
def device(request, browser):
    context = browser.new_context(**VIEWPORTS[request.param])
    opened = context.new_page()
    opened.set_default_timeout(15000)
    opened.device = request.param
    yield opened
    context.close()


def shot(page, shots, name: str) -> None:
    suffix = "" if page.device == "desktop" else "-phone"
    page.screenshot(path=str(shots / f"{name}{suffix}.png"), full_page=page.device == "desktop")


def flag_second_sentence(page) -> None:
    """Reveal sentence 2 and call it machine-written with "Just a hunch"."""
    page.get_by_role("button", name=re.compile("Still human")).click()
    expect(page.locator(".progress")).to_contain_text("Sentence 2 of")
    page.get_by_role("link", name=re.compile("A machine wrote this one")).click()
    page.get_by_text("Just a hunch").click()
    page.get_by_role("button", name=re.compile("Submit: a machine wrote sentence 2")).click()
    expect(page.locator("#result")).to_be_visible()


def test_first_visit_guide_then_a_set_and_its_summary(live_server, device, shots):
    page = device
    page.goto(live_server + "/")
    page.get_by_label("I agree that my answers may be used").check()
    page.get_by_role("button", name="Play", exact=True).click()
    expect(page.get_by_role("heading", name=re.compile("Your first round"))).to_be_visible()
    expect(page.locator(".guide")).to_contain_text("always written by a person")
    audit(page, "tutorial")
    for _ in range(4):
        page.get_by_role("link", name=re.compile("Still human")).click()
    expect(page.locator(".guide")).to_contain_text("This is where a machine took over")
    shot(page, shots, "tutorial")
    page.get_by_role("link", name=re.compile("A machine wrote this one")).click()
    expect(page.locator("#result")).to_contain_text("Exactly right: 5 points")
    expect(page.get_by_label("I agree that my answers may be used")).to_be_checked()
    audit(page, "tutorial result")
    shot(page, shots, "tutorial-result")
    page.get_by_role("button", name=re.compile("Start playing")).click()

    for number in range(1, 6):
        expect(page.locator("h1")).to_contain_text(f"text {number} of 5")
        flag_second_sentence(page)
        if number == 1:
            audit(page, "reveal")
        if number < 5:
            page.get_by_role(
                "button", name=re.compile(f"Next text \\({number + 1} of 5\\)")
            ).click()
    page.get_by_role("link", name="See your set summary").click()
    expect(page.get_by_role("heading", name="Set complete")).to_be_visible()
    expect(page.locator(".stats-strip")).to_contain_text("of 25 points")
    expect(page.get_by_role("button", name=re.compile("Play another set"))).to_be_focused()
    audit(page, "set summary")
    shot(page, shots, "set-summary")
    page.get_by_role("button", name=re.compile("Play another set")).click()
    expect(page.locator("h1")).to_contain_text("text 1 of 5")
    # Progress on the profile: the skill chart against "all human", mastery and badges.
    page.goto(live_server + "/profile")
    expect(page.locator("figure svg").first).to_be_visible()
    expect(page.locator(".badges")).to_contain_text("Set complete")
    audit(page, "profile with progress")
    shot(page, shots, "profile-progress")


@pytest.fixture
def quiz(app, live_server):
    """Three "Quiz" texts, each answered by six other players with explanations."""
    with app.app_context():
        for i in range(3):
            example = factories.example(
                boundary=3, category_slug="quiz", system_label="Tiny GPT-2", passage=f"quiz-{i}"
            )
            others_answer(example, [3, 3, 4, 2, 5, 9], f"Text {i} repeats a phrase")
        accounts.sign_up("lab", "a long password", consent=False, researcher=True)
    return live_server


def test_the_reveal_teaches_and_explanations_get_votes(quiz, device, shots, browser):
    page = device
    page.goto(quiz + "/")
    page.get_by_role("button", name=re.compile("^Quiz")).click()
    for n in range(2, 5):
        page.get_by_role("button", name=re.compile("Still human")).click()
        expect(page.locator(".progress")).to_contain_text(f"Sentence {n} of 10")
    press(page, "m")
    page.get_by_text("Repetition").click()
    page.get_by_role("button", name=re.compile("Submit: a machine wrote sentence 4")).click()
    expect(page.locator("#result h2")).to_contain_text("Exact!")
    expect(page.locator(".kind")).to_have_text(
        "Tiny GPT-2, a language model, continued the text, choosing among its likelier words."
    )
    expect(page.locator("details.settings")).to_contain_text("nucleus sampling, p = 0.5")
    expect(page.locator(".spread figcaption")).to_contain_text(
        "You did better than 67% of the 6 other players on this text."
    )
    items = page.locator(".explanations li")
    expect(items).to_have_count(3)
    vote = items.first.get_by_role("button", name=re.compile("Helpful"))
    expect(vote).to_contain_text("0 Helpful")
    vote.click()
    expect(items.first.locator("[data-upvotes]")).to_have_text("1")
    expect(items.first.get_by_role("button")).to_be_disabled()
    audit(page, "teaching reveal")
    shot(page, shots, "reveal-teaching")
    page.reload()
    expect(page.locator(".explanations li").first).to_contain_text("Up-voted")
    first_text = page.locator(".explanations blockquote").first.inner_text()

    # A researcher hides that explanation: no player sees it again.
    lab = browser.new_context().new_page()
    lab.goto(quiz + "/login")
    lab.get_by_label("Username").fill("lab")
    lab.get_by_label("Password").fill("a long password")
    lab.get_by_role("button", name="Log in").click()
    lab.goto(quiz + "/research/explanations")
    audit(lab, "research explanations")
    row = lab.locator("tr", has_text=first_text)
    row.get_by_role("button", name="Hide").click()
    expect(lab.locator(".flash")).to_contain_text("hidden from players")
    lab.context.close()
    page.reload()
    expect(page.locator(".explanations")).not_to_contain_text(first_text)


def play_daily_in_browser(page) -> None:
    page.get_by_role("button", name=re.compile("today's challenge")).click()
    for number in range(1, 6):
        expect(page.locator("h1")).to_contain_text(f"text {number} of 5")
        flag_second_sentence(page)
        if number < 5:
            press(page, "n")
    page.get_by_role("link", name=re.compile("See today's results")).click()


def test_daily_challenge_once_a_day_with_a_streak_and_a_share_card(app, live_server, device, shots):
    with app.app_context():
        for i in range(10):
            factories.example(
                boundary=3 + i % 3, category_slug="news", passage=f"held-{i}", kind="daily"
            )
    app.config["TODAY_OVERRIDE"] = DAY
    page = device
    page.goto(live_server + "/daily")
    expect(page.get_by_role("heading", name=f"Daily challenge · {DAY}")).to_be_visible()
    audit(page, "daily")
    play_daily_in_browser(page)
    share = page.locator("#share-text")
    text = share.inner_text()
    # No spoilers: the day, one square per text, the total and a link; nothing else.
    assert re.fullmatch(
        rf"Real or Fake Text · daily challenge {DAY}\n[🟩🟨🟧⬛]{{5}} \d+/25\n\S+/card/[\w-]+", text
    ), text
    audit(page, "daily results")
    shot(page, shots, "daily-results")

    # A second attempt the same day goes to the results.
    page.goto(live_server + "/daily")
    expect(page).to_have_url(re.compile(f"/daily/{DAY}$"))

    # The share card: Open Graph tags and an image made on the server.
    card_url = text.split("\n")[-1]
    page.goto(card_url)
    image = page.locator('meta[property="og:image"]').get_attribute("content")
    assert image.endswith(".png")
    assert page.request.get(image).headers["content-type"] == "image/png"
    audit(page, "share card")
    shot(page, shots, "daily-card")

    # The next day, a new challenge and a streak of 2.
    app.config["TODAY_OVERRIDE"] = DAY + timedelta(days=1)
    page.goto(live_server + "/daily")
    play_daily_in_browser(page)
    expect(page.locator(".streak")).to_contain_text("2 day streak")


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_play_with_javascript_off(app, live_server, browser, shots, size):
    context = browser.new_context(java_script_enabled=False, **VIEWPORTS[size])
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(live_server + "/")
    # Without the script the menu is simply shown.
    expect(page.get_by_role("link", name="Leaderboard")).to_be_visible()
    page.get_by_role("button", name="Play", exact=True).click()
    page.get_by_role("link", name=re.compile("Still human")).click()
    expect(page.locator(".progress")).to_contain_text("Sentence 2 of 10")
    page.goto(live_server + "/")
    page.get_by_role("button", name=re.compile("^Recipes")).click()
    page.get_by_role("button", name=re.compile("Still human")).click()
    expect(page).to_have_url(re.compile(r"/play/round/\d+#latest$"))
    expect(page.locator(".progress")).to_contain_text("Sentence 2 of 10")
    page.get_by_role("link", name=re.compile("A machine wrote this one")).click()
    expect(page).to_have_url(re.compile(r"\?flag=1#why$"))
    page.get_by_role("button", name=re.compile("Submit: a machine wrote sentence 2")).click()
    expect(page.get_by_role("alert")).to_contain_text("Choose at least one reason")
    page.get_by_label("Just a hunch").check()
    page.get_by_role("button", name=re.compile("Submit: a machine wrote sentence 2")).click()
    expect(page.locator("#result")).to_be_visible()
    if size == "desktop":
        page.screenshot(path=str(shots / "no-script-result.png"), full_page=True)
    page.get_by_role("button", name=re.compile("Next text \\(2 of 5\\)")).click()
    expect(page.locator("h1")).to_contain_text("text 2 of 5")
    with app.app_context():
        answered = db.session.scalars(db.select(Round).where(Round.guess.is_not(None))).all()
        assert len(answered) == 1 and answered[0].guess == 1
        assert db.session.get(Example, answered[0].example_id).annotation_count == 1
    context.close()

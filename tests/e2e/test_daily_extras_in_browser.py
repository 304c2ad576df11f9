"""Around the daily challenge in Chromium, on a desktop and a 390×844 phone: the countdown and its
once-a-minute update, the share button (the system share sheet, else the clipboard, by keyboard),
the opt-in reminder and its notification, and a past day played for practice that counts
nowhere. axe-core checks every screen."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests import factories
from tests.e2e.conftest import audit, press
from tests.e2e.test_dark_mode import no_aa_violations
from tests.e2e.test_game_flows import DAY, VIEWPORTS, flag_second_sentence, shot

pytestmark = pytest.mark.browser

NO_SHARE_SHEET = "delete Navigator.prototype.share; delete Navigator.prototype.canShare;"
# A share sheet that records what it was given.
SHARE_SHEET = """
Navigator.prototype.share = function (data) { window.__shared = data; return Promise.resolve(); };
Navigator.prototype.canShare = function () { return true; };
"""
# Notifications that record what they would show; `answer` is what the permission prompt says.
NOTIFICATIONS = """
(() => {
  // What the player allowed lasts for the tab, as a browser remembers it for the site.
  let permission = sessionStorage.getItem("permission") || %(permission)s;
  window.__notes = [];
  class Recorded {
    constructor(title, options) { window.__notes.push({title, tag: options && options.tag}); }
    static get permission() { return permission; }
    static requestPermission() {
      permission = %(answer)s;
      sessionStorage.setItem("permission", permission);
      return Promise.resolve(permission);
    }
  }
  window.Notification = Recorded;
})();
"""


@pytest.fixture(params=list(VIEWPORTS))
def context(request, browser):
    made = browser.new_context(
        **VIEWPORTS[request.param], permissions=["clipboard-read", "clipboard-write"]
    )
    made.device = request.param
    yield made
    made.close()


def open_page(context, *scripts: str):
    for script in scripts:
        context.add_init_script(script)
    page = context.new_page()
    page.set_default_timeout(15000)
    page.device = context.device
    return page


def held_back(app, count: int = 10) -> None:
    with app.app_context():
        for i in range(count):
            factories.example(boundary=1, category_slug="news", passage=f"held-{i}", kind="daily")


def play_set_of_five(page, last_link: str) -> None:
    for number in range(1, 6):
        expect(page.locator("h1")).to_contain_text(f"text {number} of 5")
        flag_second_sentence(page)
        if number < 5:
            press(page, "n")
    page.get_by_role("link", name=re.compile(last_link)).click()


def test_countdown_share_by_clipboard_and_reminder(app, live_server, context, shots):
    held_back(app)
    app.config["TODAY_OVERRIDE"] = DAY
    page = open_page(
        context, NO_SHARE_SHEET, NOTIFICATIONS % {"permission": "'default'", "answer": "'denied'"}
    )
    page.clock.install()
    page.goto(live_server + "/daily")
    countdown = page.locator(".countdown")
    expect(countdown).to_contain_text(re.compile(r"Next challenge in\s+(\d+ h( \d+ min)?|\d+ min)"))
    # The script moves it on once a minute.
    before = countdown.locator("time").get_attribute("datetime")
    page.clock.run_for("01:00")
    after = countdown.locator("time").get_attribute("datetime")
    hours, minutes = (int(x) for x in re.fullmatch(r"PT(\d+)H(\d+)M", before).groups())
    assert re.fullmatch(r"PT(\d+)H(\d+)M", after)
    later = [int(x) for x in re.fullmatch(r"PT(\d+)H(\d+)M", after).groups()]
    assert 60 * later[0] + later[1] == 60 * hours + minutes - 1
    # No offer of a reminder before the player has played.
    expect(page.get_by_role("button", name="Remind me tomorrow")).to_have_count(0)
    audit(page, "daily with countdown")

    page.get_by_role("button", name=re.compile("today's challenge")).click()
    play_set_of_five(page, "See today's results")
    expect(page.locator(".countdown")).to_be_visible()
    share_text = page.locator("#share-text").inner_text().strip()
    # Shared by keyboard: no share sheet here, so the text goes to the clipboard, announced.
    button = page.get_by_role("button", name="Share your result")
    button.focus()
    page.keyboard.press("Enter")
    status = page.locator("#share-status")
    expect(status).to_have_text("Copied to the clipboard: paste it anywhere to share.")
    assert status.get_attribute("role") == "status"
    assert page.evaluate("navigator.clipboard.readText()") == share_text

    # The reminder is offered now, and says what it does; the browser refuses permission.
    offer = page.locator(".reminder")
    expect(offer).to_be_visible()
    expect(offer).to_contain_text("only while this site is open in one of its tabs")
    audit(page, "daily results with share and reminder")
    shot(page, shots, "daily-results-countdown")
    page.get_by_role("button", name="Remind me tomorrow").click()
    expect(offer.locator("[role=status]")).to_contain_text("blocks notifications")
    page.reload()
    expect(page.get_by_role("button", name="Remind me tomorrow")).to_be_visible()


def test_the_share_sheet_and_the_reminder_notification(app, live_server, context):
    held_back(app)
    app.config["TODAY_OVERRIDE"] = DAY
    page = open_page(
        context, SHARE_SHEET, NOTIFICATIONS % {"permission": "'default'", "answer": "'granted'"}
    )
    page.clock.install()
    page.goto(live_server + "/daily")
    page.get_by_role("button", name=re.compile("today's challenge")).click()
    play_set_of_five(page, "See today's results")
    share_text = page.locator("#share-text").inner_text().strip()
    page.get_by_role("button", name="Share your result").click()
    expect(page.locator("#share-status")).to_have_text("Shared.")
    shared = page.evaluate("window.__shared")
    # One source: the page's share text, its last line being the card's address.
    lines = share_text.split("\n")
    assert shared["url"] == lines[-1] and shared["text"] == "\n".join(lines[:-1])

    page.get_by_role("button", name="Remind me tomorrow").click()
    expect(page.locator(".flash")).to_contain_text("Reminder on")
    expect(page.get_by_role("button", name="Turn the reminder off")).to_be_visible()
    # This browser allowed notifications: nothing more to ask.
    expect(page.locator("[data-reminder-permission]")).to_be_hidden()
    # While a page of the site is open, the next challenge brings one notification.
    page.goto(live_server + "/")
    assert page.evaluate("window.__notes") == []
    page.clock.fast_forward("24:01:00")
    page.wait_for_function("window.__notes.length > 0")
    notes = page.evaluate("window.__notes")
    assert len(notes) == 1 and "challenge is out" in notes[0]["title"]
    # In another browser that has not allowed notifications, the account page says so and asks.
    elsewhere = context.browser.new_context(**VIEWPORTS[context.device])
    elsewhere.device = context.device
    elsewhere.add_cookies(context.cookies())
    other = open_page(elsewhere, NOTIFICATIONS % {"permission": "'default'", "answer": "'granted'"})
    other.goto(live_server + "/account")
    check = other.locator("[data-reminder-permission]")
    expect(check).to_contain_text("has not been allowed to show notifications yet")
    no_aa_violations(other, "account asking for notifications")
    other.get_by_role("button", name="Allow notifications in this browser").click()
    expect(check).to_be_hidden()
    elsewhere.close()
    # Turned off in the account settings: no more reminder script.
    page.goto(live_server + "/account")
    audit(page, "account with the reminder on")
    page.get_by_role("button", name="Turn the reminder off").click()
    expect(page.locator(".flash")).to_contain_text("Reminder off")
    assert page.locator('meta[name="roft-daily-reminder"]').count() == 0


def test_a_past_day_played_for_practice_counts_nowhere(app, live_server, context, shots):
    held_back(app)
    app.config["TODAY_OVERRIDE"] = DAY
    page = open_page(context)
    page.goto(live_server + "/daily")  # the day's challenge is drawn
    app.config["TODAY_OVERRIDE"] = DAY + timedelta(days=1)
    page.goto(live_server + "/daily")
    page.get_by_role("link", name="Past challenges, for practice").click()
    expect(page.get_by_role("heading", name="Past daily challenges")).to_be_visible()
    # Today's challenge is not in the archive, only the day before.
    expect(page.locator(".archive li")).to_have_count(1)
    expect(page.locator(".archive li")).to_contain_text(DAY.isoformat())
    audit(page, "daily archive")
    shot(page, shots, "daily-archive")
    page.get_by_role("button", name=f"Practise the challenge of {DAY}").click()
    expect(page.locator("h1")).to_contain_text(f"Practice · daily challenge {DAY}")
    expect(page.locator(".set-score")).to_have_text("practice, not counted")
    audit(page, "practice round")
    play_set_of_five(page, "See your practice results")
    expect(page.locator(".notice")).to_contain_text("Practice: not counted")
    expect(page.locator(".daily-score")).to_contain_text("would have earned 25 of 25 points")
    audit(page, "practice results")
    shot(page, shots, "daily-practice")
    page.goto(live_server + "/profile")
    expect(page.locator(".stats div").first).to_have_text(re.compile(r"^\s*0\s*points"))
    expect(page.locator(".badges li.earned")).to_have_count(0)
    page.goto(live_server + "/profile/rounds")
    expect(page.locator("table")).to_contain_text("practice, not counted")
    # Practising the same day again shows the first go's results.
    page.goto(live_server + "/daily/archive")
    page.get_by_role("link", name=f"Your practice for {DAY}").click()
    expect(page).to_have_url(re.compile(f"/daily/{DAY}/practice$"))


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_the_new_daily_screens_in_dark_mode(app, live_server, browser, size):
    held_back(app)
    context = browser.new_context(color_scheme="dark", **VIEWPORTS[size])
    context.device = size
    page = open_page(context)
    try:
        app.config["TODAY_OVERRIDE"] = DAY
        page.goto(live_server + "/daily")  # the day's challenge is drawn
        app.config["TODAY_OVERRIDE"] = DAY + timedelta(days=1)
        page.goto(live_server + "/daily")
        no_aa_violations(page, "daily page with countdown, dark")
        page.get_by_role("button", name=re.compile("today's challenge")).click()
        play_set_of_five(page, "See today's results")
        expect(page.locator(".reminder")).to_be_visible()
        no_aa_violations(page, "daily results with share and reminder, dark")
        page.goto(live_server + "/daily/archive")
        no_aa_violations(page, "daily archive, dark")
        page.get_by_role("button", name=f"Practise the challenge of {DAY}").click()
        no_aa_violations(page, "practice round, dark")
        play_set_of_five(page, "See your practice results")
        no_aa_violations(page, "practice results, dark")
    finally:
        context.close()

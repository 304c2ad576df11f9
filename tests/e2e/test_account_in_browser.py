"""The skill board and the account page in a real browser: rank and gap, a password change
(another browser is signed out), the data download and deleting the account."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from app.extensions import db
from app.game.scoring import Verdict
from app.leaderboard import recording, standings
from app.models import Player
from tests import factories


def test_skill_board_then_account_settings(app, live_server, page, browser, shots):
    with app.app_context():
        news = factories.category("news").id
        # cara finds the machine one sentence late (credit 4 of 5); hugo says "all human".
        for name, excess, detection in (
            ("careful_cara", 3, (1, 4, 0, 0)),
            ("lazy_hugo", 0, (1, 0, 0, 0)),
        ):
            player = factories.player(name)
            for _ in range(12):
                recording.record_answer(
                    player.id, news, Verdict(4, 1, ""), excess, detection=detection
                )
        db.session.commit()

    page.goto(live_server + "/signup")
    page.get_by_label("Username").fill("keen_reader")
    page.get_by_label("Password").fill("a very good password")
    page.get_by_role("button", name="Create my account").click()
    with app.app_context():
        reader = db.session.query(Player).filter_by(username="keen_reader").one()
        for _ in range(10):
            recording.record_answer(reader.id, news, Verdict(5, 0, ""), 1, detection=(1, 3, 0, 0))
        db.session.commit()
        standings.invalidate("news")

    page.goto(live_server + "/leaderboard")
    rows = page.locator("table.board tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("careful_cara")
    expect(page.locator("#my-standing")).to_contain_text("You are number 2.")
    expect(page.locator("#my-standing")).to_contain_text("more skill would take you past")
    page.screenshot(path=str(shots / "leaderboard-skill.png"), full_page=True)

    # Another browser signed in as the same player is signed out by a password change.
    other = browser.new_context().new_page()
    other.goto(live_server + "/login")
    other.get_by_label("Username").fill("keen_reader")
    other.get_by_label("Password").fill("a very good password")
    other.get_by_role("button", name="Log in").click()
    other.goto(live_server + "/profile")
    expect(other).to_have_url(live_server + "/profile")

    page.get_by_role("link", name="Account").click()
    page.get_by_label("Current password").fill("a very good password")
    page.get_by_label("New password", exact=False).first.fill("an even better phrase")
    page.get_by_label("New password again").fill("an even better phrase")
    page.keyboard.press("Enter")
    expect(page.locator(".flash")).to_contain_text("Every other session has been signed out")
    page.screenshot(path=str(shots / "account.png"), full_page=True)
    other.goto(live_server + "/profile")
    expect(other).to_have_url(live_server + "/login?next=%2Fprofile")

    with page.expect_download() as download:
        page.get_by_role("link", name="Download my data").click()
    data = json.loads(download.value.path().read_text())
    assert data["account"]["username"] == "keen_reader"

    page.get_by_label("Your password, to confirm").fill("an even better phrase")
    page.get_by_role("button", name="Delete my account").click()
    expect(page.locator(".flash")).to_contain_text("Your account is deleted")
    page.goto(live_server + "/leaderboard")
    expect(page.locator("table.board tbody tr")).to_have_count(2)

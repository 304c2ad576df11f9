"""Every page a study's worker sees, on a desktop and on a phone: the study's own layout (no menu
of the public game), the researcher's contact at the foot, the facts and bonus rule on the
landing page, instructions that follow the settings, a practice round without a points badge,
the completion page with the code and the bonus rule. With SAVE_SCREENSHOTS=1 the pictures go to
docs/screenshots (study-page-*.png), which docs/running-a-study.md shows."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from app.crowd import admin
from app.crowd.study_file import parse_study
from app.extensions import db
from app.models import Example
from tests.e2e.test_study_in_browser import STUDY, play_round, play_study

pytestmark = pytest.mark.browser

CONTACT = "Dr Ada Reader, roft-study@example.org"
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


@pytest.fixture
def pages_server(app, live_server):
    with app.app_context():
        first = db.session.scalar(
            select(Example.external_id).where(Example.kind == "normal").order_by(Example.id)
        )
        settings = {
            **STUDY,
            "slug": "pages",
            "contact": CONTACT,
            "bonus": {"per_exact": 0.05, "cap": 0.25},
            "time_limit_minutes": 20,
            "show_feedback": False,
            "tutorial": [first],
        }
        admin.create_study(parse_study(settings, "test"))
    return live_server


def study_layout(page) -> None:
    expect(page.locator("#study-contact")).to_contain_text(CONTACT)
    expect(page.get_by_role("link", name="Leaderboard")).to_have_count(0)
    expect(page.get_by_role("link", name="Sign up")).to_have_count(0)


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_every_worker_page_on_a_desktop_and_a_phone(pages_server, browser, shots, device):
    context = browser.new_context(
        **(PHONE if device == "phone" else {"viewport": {"width": 1100, "height": 900}})
    )
    page = context.new_page()
    page.set_default_timeout(15000)
    suffix = "-phone" if device == "phone" else ""

    def shot(name: str) -> None:
        study_layout(page)
        page.screenshot(path=str(shots / f"study-page-{name}{suffix}.png"), full_page=True)

    page.goto(f"{pages_server}/study/pages?PROLIFIC_PID=p{device}&STUDY_ID=st&SESSION_ID=s{device}")
    expect(page.locator("#study-facts")).to_contain_text("Reward: 1.00 GBP.")
    expect(page.locator("#study-facts")).to_contain_text("0.05 GBP for each text")
    shot("landing")
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_role("heading", name="Instructions")).to_be_visible()
    expect(page.locator("main")).not_to_contain_text("Then you see the answer")
    expect(page.locator("#bonus-rule")).to_be_visible()
    shot("instructions")
    page.get_by_role("button", name="Start with a practice round").click()
    expect(page.locator("h1")).to_contain_text("practice round")
    shot("practice")
    play_round(page, "human")
    expect(page.locator(".points-badge")).to_have_count(0)
    shot("practice-result")
    page.get_by_role("button", name="Next").click()
    expect(page.locator("h1")).to_contain_text("round 1 of 5")
    shot("round")
    play_study(page, "careful")
    expect(page.locator("#completion-code")).to_have_text("C1DONE01")
    expect(page.locator("#bonus-rule")).to_contain_text("paid once your submission is approved")
    shot("done")
    context.close()

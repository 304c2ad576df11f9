"""A researcher decides a worker verify sent to review, from the review page in Chromium, with
the keyboard, on a desktop and on a phone; `flask study verify`'s files then carry the decision."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.accounts import service as accounts
from app.crowd import admin, lookup, serving, verify, verify_files, verify_runs, verify_submissions
from app.crowd.study_file import parse_study
from tests.crowd.helpers import join, play_slot
from tests.e2e.conftest import audit
from tests.e2e.test_study_in_browser import STUDY

pytestmark = pytest.mark.browser

PASSWORD = "a long password here"
REJECTION = (
    "Thank you for taking part. We cannot approve this submission: the code you entered is not "
    "one this study gave, and every text was answered in under two seconds."
)


def submissions() -> list[verify_submissions.Submission]:
    # Both finished on the site but entered codes the study never gave: verify asks a person.
    return [
        verify_submissions.Submission(
            "w-typo", "WRONG123", "AWAITING REVIEW", {"Submission id": "s1"}
        ),
        verify_submissions.Submission(
            "w-other", "WRONG456", "AWAITING REVIEW", {"Submission id": "s2"}
        ),
    ]


@pytest.fixture
def reviewing(app, live_server):
    with app.app_context():
        study = admin.create_study(parse_study({**STUDY, "reward": 1.0}, "test"))
        for name in ("w-typo", "w-other"):
            worker = join(study, name, f"session-{name}")
            while serving.next_round(study, worker) is not None:
                play_slot(study, worker, flag_at=None)
        verify_runs.apply_decisions(study, verify.decide(study, submissions()))
        accounts.sign_up("lab", PASSWORD, consent=False, researcher=True)
    return live_server


def log_in(page, server) -> None:
    page.goto(f"{server}/login")
    page.get_by_label("Username").fill("lab")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def files_after_verify(app, out) -> dict[str, str]:
    """What `flask study verify` writes for the same submissions now."""
    with app.app_context():
        study = lookup.get_study("pilot")
        decided = verify.decide(study, submissions())
        verify_files.write_files(out, study, decided, "test", None, None)
    return {p.name: p.read_text() for p in out.iterdir()}


def test_a_review_is_decided_from_the_page_and_reaches_verifys_files(
    app, reviewing, page, tmp_path, shots
):
    before = files_after_verify(app, tmp_path / "before")
    assert before["review.csv"].count("\n") == 3  # the header and both workers
    assert before["approve.txt"] == ""

    log_in(page, reviewing)
    page.goto(f"{reviewing}/research/studies/pilot")
    page.get_by_role("link", name=re.compile("Review workers")).click()
    table = page.locator("#review-workers")
    expect(table).to_contain_text("w-typo")
    expect(table).to_contain_text("w-other")
    audit(page, "the review list")
    page.get_by_role("link", name="w-typo").click()
    expect(page.get_by_role("heading", name="Worker w-typo")).to_be_visible()
    expect(page.locator("#review-state")).to_have_text("review")
    expect(page.locator("#review-reasons")).to_contain_text("matches no code of this study")
    expect(page.locator("#review-checks tbody tr")).to_have_count(2)
    page.locator(".review-round summary").first.click()
    expect(page.locator(".review-round").first.locator("li").first).to_be_visible()
    audit(page, "a worker's review page")
    page.screenshot(path=str(shots / "review-worker.png"), full_page=True)

    # With the keyboard: tab to the approve button and press Enter.
    page.get_by_role("link", name=re.compile("Workers of")).focus()
    for _ in range(200):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim()") == "Approve w-typo":
            break
    else:
        pytest.fail("the approve button cannot be reached with Tab")
    page.keyboard.press("Enter")
    expect(page.locator(".flash")).to_contain_text("w-typo approved")
    expect(page.locator("#review-state")).to_have_text("approved")
    # Back and send it again: nothing new.
    page.go_back()
    page.get_by_role("button", name="Approve w-typo").click()
    expect(page.locator(".flash")).to_contain_text("already approved")
    page.get_by_role("link", name="Next worker to review: w-other").click()
    expect(page.get_by_role("heading", name="Worker w-other")).to_be_visible()
    expect(page.locator("#next-worker")).to_have_count(0)  # nobody else is waiting

    after = files_after_verify(app, tmp_path / "after")
    assert after["approve.txt"] == "w-typo\n"
    assert "w-typo" not in after["review.csv"] and "w-other" in after["review.csv"]
    assert after["decisions.csv"].count("w-typo") == 1  # one row per worker
    assert "w-typo,,approve,AWAITING REVIEW,,," in after["decisions.csv"]


def test_a_rejection_and_a_bonus_on_a_phone_in_dark_mode(app, reviewing, browser, tmp_path):
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True, color_scheme="dark"
    )
    page = context.new_page()
    page.set_default_timeout(15000)
    log_in(page, reviewing)
    page.goto(f"{reviewing}/research/studies/pilot/review?show=review")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    audit(page, "the review list on a phone")
    page.get_by_role("link", name="w-other").click()
    # The click only starts the navigation: measure the new page once it is there.
    expect(page.get_by_role("heading", name="Worker w-other")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    audit(page, "a worker's review page on a phone")
    # The browser itself holds back a message under 100 characters.
    page.get_by_label("Message for the worker").fill("Too quick.")
    page.get_by_role("button", name="Reject w-other").click()
    expect(page.locator("#review-state")).to_have_text("review")
    page.get_by_label("Reason (Prolific's rejection category)").select_option("BAD_CODE")
    page.get_by_label("Message for the worker").fill(REJECTION)
    page.get_by_role("button", name="Reject w-other").click()
    expect(page.locator(".flash")).to_contain_text("w-other rejected")
    expect(page.locator("#review-state")).to_have_text("rejected")

    page.get_by_label("Amount in GBP").fill("5")
    page.get_by_label("Reason (the worker may see it)").fill("helpful comments")
    page.get_by_role("button", name="Give the bonus").click()
    expect(page.get_by_role("alert")).to_contain_text("at most 1.00 GBP")
    expect(page.get_by_label("Reason (the worker may see it)")).to_have_value("helpful comments")
    audit(page, "a refused bonus")
    page.get_by_label("Amount in GBP").fill("0.40")
    page.get_by_role("button", name="Give the bonus").click()
    expect(page.locator("#review-bonuses")).to_contain_text("0.40 GBP: review: helpful comments")
    # Owed, with the one way it is paid: no file of its own to upload beside verify's.
    expect(page.locator("#review-bonuses")).to_contain_text("owed: the next verify --apply")
    context.close()

    after = files_after_verify(app, tmp_path / "after")
    assert "w-other,BAD_CODE," in after["reject.csv"] and "under two seconds" in after["reject.csv"]
    assert after["bonus.csv"] == "w-other,0.40\n"  # the review bonus, in verify's one file

"""A researcher labels 60 players' comments in Chromium, from the keyboard, blind to the coder;
the report then shows Cohen's κ, per-class figures and corrected reason shares with intervals."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.accounts import service as accounts
from app.research import validation
from tests.e2e.conftest import audit
from tests.research.validation_helpers import seed_rounds

pytestmark = pytest.mark.browser

PASSWORD = "a long password here"
KEYS = {name: str(i % 10) for i, name in enumerate(validation.LABEL_NAMES, start=1)}


@pytest.fixture
def labelling(app, live_server):
    from analysis import taxonomy

    app.config["VALIDATION_BOOT"] = 200
    taxonomy.default_model()  # trained once per process (seconds): not inside a page's timeout
    with app.app_context():
        labels = seed_rounds()
        accounts.sign_up("lab", PASSWORD, consent=False, researcher=True)
    return live_server, labels


def test_a_researcher_labels_60_comments_and_reads_the_report(labelling, page, shots):
    server, labels = labelling
    page.goto(f"{server}/login")
    page.get_by_label("Username").fill("lab")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{server}/research/validation/site")
    page.get_by_label("Comments in the sample").fill("60")
    page.get_by_role("button", name="Draw the sample").click()
    expect(page.locator("#validation-progress")).to_contain_text("0 of 60 labelled")
    audit(page, "the labelling page")
    page.screenshot(path=str(shots / "validation-labelling.png"))
    for done in range(60):
        expect(page.locator("#validation-progress")).to_contain_text(f"{done} of 60 labelled")
        if done == 30:  # resumable: leave and come back
            page.goto(f"{server}/research/")
            page.goto(f"{server}/research/validation/site")
            expect(page.locator("#validation-progress")).to_contain_text("30 of 60 labelled")
        comment = page.locator("#validation-comment").inner_text().strip()
        # blind: the page never says what the coder made of the comment
        assert "decided" not in page.content() and "coder said" not in page.content()
        page.locator("html[data-label-keys='ready']").wait_for(state="attached")
        page.keyboard.press(KEYS[labels[comment]])
    expect(page.locator("#validation-done")).to_be_visible()
    page.get_by_role("link", name="Report").click(timeout=60000)
    expect(page.locator("#validation-sample")).to_contain_text("60", timeout=60000)
    kappa = page.locator("#validation-kappa")
    expect(kappa).to_contain_text(re.compile(r"Cohen's κ 0\.\d\d\s+\(95% CI 0\.\d\d to \d\.\d\d"))
    per_class = page.locator("#validation-per-class")
    row = r"\d+ \d+ (?:\d\.\d\d|–) (?:\d\.\d\d|–)"
    for name in ("repetition", "irrelevant", "generic", "other"):
        expect(per_class.get_by_role("row", name=re.compile(rf"^{name} {row}$"))).to_be_visible()
    # the press-release comments: researchers say generic, the coder other (tone)
    expect(per_class.get_by_role("row", name=re.compile(r"^other \d+ \d+ 0\.\d\d"))).to_be_visible()
    shares = page.locator("#validation-shares")
    interval = r"\d\.\d\d to \d\.\d\d"
    for name in ("repetition", "irrelevant", "generic", "not_a_reason"):
        expect(
            shares.get_by_role("row", name=re.compile(rf"^{name} .*{interval}$"))
        ).to_be_visible()
    expect(page.get_by_text("primary reason data")).to_be_visible()
    audit(page, "the validation report")
    page.screenshot(path=str(shots / "validation-report.png"), full_page=True)

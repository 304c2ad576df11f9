"""Paste and typing signals from the explanation box in Chromium: a real paste (clipboard and
Ctrl+V) is stored as pasted; typing key by key is stored with its characters and time; on the
game's round page and on a crowd study's, where the paster is then flagged."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.crowd import admin, fraud, fraud_report, lookup
from app.crowd.study_file import parse_study
from app.extensions import db
from app.models import Round
from tests.e2e.conftest import audit, press

pytestmark = pytest.mark.browser

PASTED = "Copied from somewhere else: the sentence contradicts the one before it about the date."
TYPED = "The cook suddenly talks about trains."
STUDY = {
    "slug": "pilot",
    "title": "Spot the machine",
    "platform": "prolific",
    "rounds": 2,
    "attention_check_rate": 0,
    "categories": ["news"],
    "reward": 1.0,
    "expected_minutes": 5,
    "consent": "You will read two short texts. We store your answers without your name.",
    "instructions": "Read each text and say when a machine took over.",
    "completion_codes": {"completed": "C1DONE01", "failed_checks": "C2FAIL02"},
}


@pytest.fixture
def clip(browser, live_server):
    """A desktop page allowed to use the clipboard, as a person's browser is."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server)
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


def open_reasons(page) -> None:
    press(page, "h")
    expect(page.locator(".progress")).to_contain_text("Sentence 2 of")
    press(page, "m")
    page.get_by_role("checkbox", name=re.compile("Generic")).check()
    page.get_by_text("Add your own words").click()


def paste_into_box(page, text: str) -> None:
    box = page.get_by_label("What made you think")
    page.evaluate("text => navigator.clipboard.writeText(text)", text)
    box.click()
    page.keyboard.press("Control+V")
    expect(box).to_have_value(text)


def submit(page) -> int:
    round_id = int(re.search(r"/play/round/(\d+)", page.url).group(1))
    page.get_by_role("button", name=re.compile("^Submit: a machine wrote sentence")).click()
    expect(page.locator("#result")).to_be_visible()
    return round_id


def stored(app, round_id: int) -> tuple:
    with app.app_context():
        row = db.session.get(Round, round_id)
        db.session.refresh(row)
        return row.explanation, row.explanation_pasted, row.typing_ms, row.typed_chars


def test_a_paste_and_typing_in_the_game(app, live_server, clip):
    page = clip
    page.goto(live_server + "/")
    page.get_by_role("button", name=re.compile("^News")).click()
    open_reasons(page)
    paste_into_box(page, PASTED)
    audit(page, "reasons with a pasted explanation")
    first = submit(page)
    text, pasted, ms, typed = stored(app, first)
    # Nothing typed, so no typing time (Ctrl+V is not a keystroke of typing).
    assert (text, pasted, ms, typed) == (PASTED, True, None, 0)

    page.get_by_role("button", name=re.compile("^(Next text|News)")).first.click()
    expect(page.locator(".progress")).to_contain_text("Sentence 1 of")
    open_reasons(page)
    box = page.get_by_label("What made you think")
    box.click()
    box.press_sequentially(TYPED, delay=40)
    second = submit(page)
    text, pasted, ms, typed = stored(app, second)
    assert text == TYPED and pasted is False and typed == len(TYPED)
    # First keystroke to the answer: at least the 40 ms between keys, well under a minute.
    assert 40 * (len(TYPED) - 1) <= ms < 60_000


def test_a_paste_in_a_study_round_is_flagged_for_the_runner(app, live_server, clip):
    with app.app_context():
        admin.create_study(parse_study(STUDY, "test"))
    page = clip
    page.goto(f"{live_server}/study/pilot?PROLIFIC_PID=paster&STUDY_ID=st1&SESSION_ID=s1")
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start").click()
    page.get_by_role("button", name="Start the first round").click()
    expect(page.locator("h1")).to_contain_text("round 1 of 2")
    open_reasons(page)
    paste_into_box(page, PASTED)
    round_id = submit(page)
    assert stored(app, round_id)[1] is True
    with app.app_context():
        (flagged,) = fraud_report.study_flags(lookup.get_study("pilot"))
    assert flagged.worker_id == "paster"
    assert [(f.signal, f.rounds) for f in flagged.flags] == [
        (fraud.PASTED_EXPLANATION, (round_id,))
    ]

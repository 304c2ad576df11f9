"""Crowd workers in Chromium: a Prolific worker to the code, a failing worker, MTurk preview."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.crowd import admin
from app.crowd.study_file import parse_study
from tests.e2e.conftest import press

pytestmark = pytest.mark.browser

STUDY = {
    "slug": "pilot",
    "title": "Spot the machine",
    "platform": "prolific",
    "rounds": 5,
    "attention_check_rate": 0.4,
    "categories": ["news"],
    "reward": 1.0,
    "expected_minutes": 5,
    "consent": "You will read ten short texts. We store your answers without your name.",
    "instructions": "Read each text and say when a machine took over.",
    "completion_codes": {"completed": "C1DONE01", "failed_checks": "C2FAIL02"},
}


@pytest.fixture
def study_server(app, live_server):
    with app.app_context():
        admin.create_study(parse_study(STUDY, "test"))
        admin.create_study(
            parse_study({**STUDY, "slug": "turk", "platform": "mturk", "completion_codes": {}}, "t")
        )
    return live_server


INSIDE_CHECK = "say that a machine wrote this sentence"


def progress(page) -> tuple[int, int]:
    text = page.locator(".progress").inner_text()
    return tuple(map(int, re.search(r"Sentence (\d+) of (\d+)", text).groups()))


def flag_latest(page) -> None:
    if progress(page)[0] == 1:  # the first sentence is always human: flag the second
        press(page, "h")
        expect(page.locator(".progress")).to_contain_text("Sentence 2 of")
    press(page, "m")
    page.get_by_role("checkbox", name=re.compile("Generic")).check()
    page.get_by_role("button", name=re.compile("^Submit: a machine wrote sentence")).click()


def human_to_the_end(page) -> None:
    shown, total = progress(page)
    for n in range(shown + 1, total + 1):
        press(page, "h")
        expect(page.locator(".progress")).to_contain_text(f"Sentence {n} of {total}")
    page.get_by_role("button", name=re.compile("whole text is human-written")).click()


def play_round(page, strategy: str) -> bool:
    """Play the open round; returns whether it was an attention check.

    "careful" reads every sentence, flags one that asks for it and otherwise says "all human" at
    the end (right for both kinds of check); "human" presses H to the end of every text without
    reading; "first" flags the first sentence it may (the second) every time.
    """
    if strategy == "first":
        flag_latest(page)
    elif strategy == "human":
        human_to_the_end(page)
    else:
        while INSIDE_CHECK not in page.locator("ol.sentences li").last.inner_text():
            shown, total = progress(page)
            if shown == total:
                break
            press(page, "h")
            expect(page.locator(".progress")).to_contain_text(f"Sentence {shown + 1} of {total}")
        if INSIDE_CHECK in page.locator("ol.sentences li").last.inner_text():
            flag_latest(page)
        else:
            page.get_by_role("button", name=re.compile("whole text is human-written")).click()
    expect(page.locator("#result")).to_be_visible()
    return "attention check" in page.locator("#result").inner_text().lower()


def play_study(page, strategy: str, shots=None) -> int:
    """Play every round; returns how many attention checks were seen."""
    checks = 0
    while "/play/round/" in page.url:
        was_check = play_round(page, strategy)
        checks += was_check
        if shots is not None and checks == 1 and was_check:
            page.screenshot(path=str(shots / "study-check-result.png"), full_page=True)
        page.get_by_role("button", name=re.compile("^(Next|Finish and get your code)")).click()
    return checks


def enter(page, server, pid: str):
    page.goto(f"{server}/study/pilot?PROLIFIC_PID={pid}&STUDY_ID=st1&SESSION_ID=sess-{pid}")
    expect(page.get_by_role("heading", name="Consent")).to_be_visible()
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_role("heading", name="Instructions")).to_be_visible()
    page.get_by_role("button", name="Start the first round").click()


def test_prolific_worker_passes_checks_and_gets_the_code(study_server, page, shots):
    enter(page, study_server, "pw1")
    expect(page.locator("h1")).to_contain_text("round 1 of 5")
    page.screenshot(path=str(shots / "study-round.png"), full_page=True)
    assert play_study(page, "careful", shots=shots) == 2
    expect(page.locator("#completion-code")).to_have_text("C1DONE01")
    link = page.locator("#return-to-platform")
    expect(link).to_have_attribute(
        "href", "https://app.prolific.com/submissions/complete?cc=C1DONE01"
    )
    page.screenshot(path=str(shots / "study-done.png"), full_page=True)


def test_lazy_worker_pressing_human_fails_the_checks_inside_texts(study_server, page):
    enter(page, study_server, "pw2")
    assert play_study(page, "human") == 2
    expect(page.locator(".done")).to_contain_text("did not pass enough of the attention checks")
    expect(page.locator("#completion-code")).to_have_text("C2FAIL02")


def test_mturk_preview_shows_the_task_but_cannot_start(study_server, page):
    page.goto(f"{study_server}/study/turk?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    expect(page.get_by_text("This is a preview")).to_be_visible()
    expect(page.get_by_role("button", name="Start")).to_have_count(0)
    expect(page.locator("form")).to_have_count(0)  # no way to join from a preview

"""On a 390×844 phone, the sentence a player flags stays in view when the reason panel opens
(issue 22 item 8), early in a text and deep into it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import audit

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def _inside_viewport(page, selector: str) -> dict:
    box = page.locator(selector).bounding_box()
    height = page.evaluate("window.innerHeight")
    return {"box": box, "inside": box["y"] >= 0 and box["y"] + box["height"] <= height}


@pytest.mark.parametrize("flag_at", [2, 7])
def test_flagged_sentence_stays_in_view_when_the_reasons_open(live_server, browser, shots, flag_at):
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(live_server + "/")
    page.get_by_role("button", name=re.compile("^News")).click()
    still = page.get_by_role("button", name=re.compile("Still human"))
    progress = page.locator(".progress")
    for n in range(2, flag_at + 1):
        still.click()
        expect(progress).to_contain_text(f"Sentence {n} of 10")
    flagged = page.locator("#latest").inner_text()
    page.get_by_role("link", name=re.compile("A machine wrote this one")).tap()
    expect(page.get_by_role("heading", name=f"Why sentence {flag_at}?")).to_be_visible()
    page.wait_for_function("() => !document.getElementById('why').hidden")
    page.wait_for_timeout(300)  # let any scrolling settle
    assert page.locator("#latest").inner_text() == flagged
    seen = _inside_viewport(page, "#latest")
    assert seen["inside"], f"the flagged sentence is out of view: {seen['box']}"
    # The panel's first reason is in view too, ready to tap.
    chip = page.locator("#why input[name=reasons]").first.locator("xpath=..").bounding_box()
    assert chip["y"] >= 0 and chip["y"] + chip["height"] <= 844
    # Nothing (such as the sticky bar of buttons) covers the flagged sentence.
    assert page.evaluate(
        """() => { const box = document.getElementById('latest').getBoundingClientRect();
          const hit = document.elementFromPoint(box.left + 20, box.top + box.height / 2);
          return Boolean(hit && hit.closest('#latest')); }"""
    )
    page.screenshot(path=str(shots / f"phone-flag-{flag_at}.png"))
    audit(page, "phone reasons open")
    context.close()

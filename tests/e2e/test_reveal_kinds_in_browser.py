"""A set of five in Chromium, one text of each kind: a model's continuation, a splice of two human
texts, an all-human text, and texts that changed only at their last sentence (a model's and a
splice's). Every reveal says in a player's words what happened and whether the call was right."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests import factories
from tests.e2e.conftest import audit, press

pytestmark = pytest.mark.browser

# name: (boundary, p: None for a splice, what the player does, headline, detail)
TEXTS = {
    "model": (
        3,
        0.9,
        "flag 4",
        "Exact!",
        "The machine took over at sentence 4 of 10, and you flagged that very sentence.",
    ),
    "splice": (
        3,
        None,
        "flag 6",
        "2 sentences late.",
        "A different human-written text begins at sentence 4 of 10; you flagged sentence 6. "
        "Flagging there was right, only late: one point less for each sentence after the change.",
    ),
    "human": (
        10,
        0.9,
        "all human",
        "Right: the whole text was human-written!",
        "A person wrote every sentence, and you said so.",
    ),
    "lastmodel": (
        9,
        0.9,
        "all human",
        "Not all human: a machine wrote the last sentence.",
        "The machine took over at sentence 10 of 10; you said the whole text was human-written. "
        "Flagging sentence 10 would have been right;",
    ),
    "lastsplice": (
        9,
        None,
        "flag 2",
        "Too early, by 8 sentences.",
        "A different human-written text begins at sentence 10 of 10; you flagged sentence 2, "
        "which was still part of the first text.",
    ),
}


@pytest.fixture
def kinds(app, live_server):
    with app.app_context():
        for name, (boundary, p, *_rest) in TEXTS.items():
            sentences = [f"The {name} text, sentence {i + 1}, says little." for i in range(10)]
            factories.example(
                boundary=boundary,
                category_slug="kinds",
                sentences=sentences,
                p=p,
                splice=f"donor-{name}" if p is None else None,
            )
    return live_server


def test_a_set_of_five_reads_every_kind_of_reveal(kinds, page):
    page.goto(kinds + "/")
    page.get_by_role("button", name=re.compile("^Kinds")).click()
    seen = []
    for number in range(1, 6):
        expect(page.locator(".progress")).to_contain_text("Sentence 1 of 10")
        first = page.locator("ol.sentences li").first.inner_text()
        name = re.search(r"The (\w+) text", first).group(1)
        seen.append(name)
        _boundary, _p, action, headline, detail = TEXTS[name]
        if action == "all human":
            for n in range(2, 11):
                page.get_by_role("button", name=re.compile("Still human")).click()
                expect(page.locator(".progress")).to_contain_text(f"Sentence {n} of 10")
            page.get_by_role("button", name=re.compile("whole text is human-written")).click()
        else:
            at = int(action.split()[1])
            for n in range(2, at + 1):
                press(page, "h")
                expect(page.locator(".progress")).to_contain_text(f"Sentence {n} of 10")
            press(page, "m")
            page.get_by_text("Just a hunch").click()
            page.get_by_role("button", name=f"Submit: a machine wrote sentence {at}").click()
        expect(page.locator("#result h2")).to_contain_text(headline)
        expect(page.locator("#result .what-happened")).to_contain_text(detail)
        if number == 1:
            audit(page, "reveal of a kinds text")
        if number < 5:
            page.get_by_role(
                "button", name=re.compile(f"Next text \\({number + 1} of 5\\)")
            ).click()
    assert sorted(seen) == sorted(TEXTS)

"""Difficulty levels in Chromium (desktop and a 390×844 phone): once texts are rated, the home
page offers easy, medium and hard sets in the chosen category; choosing one serves a text of
that level and says so. axe-core finds no WCAG A/AA violation, in light and dark mode."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from app.extensions import db
from app.game import levels
from app.models import Example, Round
from tests import factories
from tests.e2e.test_dark_mode import no_aa_violations
from tests.e2e.test_game_flows import device, flag_second_sentence, shot
from tests.game_helpers import answer

pytestmark = pytest.mark.browser
__all__ = ["device"]  # the fixture, imported for this module's tests


def test_choosing_a_level_serves_a_text_of_that_level(app, live_server, device, shots):
    app.config.update(SET_SIZE=3, LEVEL_MIN_ANSWERS=3)
    with app.app_context():
        readers = [factories.player() for _ in range(3)]
        # Nine puzzles: three that every reader finds, three that one does, three that none do.
        for hits in (3, 3, 3, 1, 1, 1, 0, 0, 0):
            example = factories.example(boundary=3, category_slug="puzzles")
            for number, reader in enumerate(readers):
                answer(reader, example, 3 if number < hits else 6)
    page = device
    page.goto(live_server + "/")
    page.get_by_role("button", name=re.compile("^Puzzles")).click()
    flag_second_sentence(page)
    page.goto(live_server + "/")
    # Answered, but not rated yet: no levels, and why.
    expect(page.locator("section.level-sets")).to_contain_text("sets open once enough texts")
    expect(page.locator("section.level-sets button")).to_have_count(0)
    with app.app_context():
        levels.refresh()
    page.reload()
    section = page.locator("section.level-sets")
    expect(section.get_by_role("heading")).to_have_text("Levels · Puzzles")
    no_aa_violations(page, "home with levels")
    shot(page, shots, "home-levels")
    page.emulate_media(color_scheme="dark")
    no_aa_violations(page, "home with levels, dark")
    page.emulate_media(color_scheme="light")
    section.get_by_role("button", name=re.compile("^Hard")).click()
    expect(page.locator("h1")).to_contain_text("Puzzles · Hard · text 2 of 3")
    no_aa_violations(page, "a round of a hard set")
    round_id = int(re.search(r"/play/round/(\d+)", page.url).group(1))
    with app.app_context():
        served = db.session.get(Round, round_id).example
        assert served.level == "hard"
        hard = db.session.scalars(select(Example.id).where(Example.level == "hard")).all()
        assert len(hard) == 3
    flag_second_sentence(page)
    page.get_by_role("button", name=re.compile(r"Next text \(3 of 3\)")).click()
    expect(page.locator("h1")).to_contain_text("Puzzles · Hard · text 3 of 3")

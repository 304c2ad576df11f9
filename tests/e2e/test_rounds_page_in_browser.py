"""A player's "All your rounds" page on a desktop and a 390 px phone: each round with its date
and the reveal's own headline, reached from "My rounds" in the menu."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import audit
from tests.e2e.test_game_flows import VIEWPORTS, flag_second_sentence, shot

pytestmark = pytest.mark.browser


@pytest.fixture(params=list(VIEWPORTS))
def device(request, browser):
    context = browser.new_context(**VIEWPORTS[request.param])
    opened = context.new_page()
    opened.set_default_timeout(15000)
    opened.device = request.param
    yield opened
    context.close()


def test_all_your_rounds_show_their_date_and_headline(live_server, device, shots):
    page = device
    page.goto(live_server + "/")
    page.get_by_role("button", name=re.compile("^News")).click()
    flag_second_sentence(page)
    headline = " ".join(page.locator("#result h2").inner_text().split()[1:])
    page.goto(live_server + "/profile/rounds")
    expect(page.get_by_role("heading", name="Your rounds")).to_be_visible()
    row = page.locator("tbody tr").first
    expect(row.locator("time")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d$"))
    expect(row).to_contain_text(headline)
    audit(page, "all your rounds")
    shot(page, shots, "rounds")

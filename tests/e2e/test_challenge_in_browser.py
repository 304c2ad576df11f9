"""Challenge a friend in Chromium: the challenger finishes a set and sends the link; a friend in
another browser (desktop or a 390×844 phone) plays the same texts; both see the results side by
side with the same numbers. axe-core checks every screen."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests import factories
from tests.e2e.test_dark_mode import no_aa_violations
from tests.e2e.test_game_flows import VIEWPORTS, device, shot

pytestmark = pytest.mark.browser
__all__ = ["device"]  # the fixture, imported for this module's tests


def flag(page, sentence: int) -> None:
    """Read on to sentence `sentence` (1-based) and call it machine-written."""
    for shown in range(2, sentence + 1):
        page.get_by_role("button", name=re.compile("Still human")).click()
        expect(page.locator(".progress")).to_contain_text(f"Sentence {shown} of")
    page.get_by_role("link", name=re.compile("A machine wrote this one")).click()
    page.get_by_text("Just a hunch").click()
    page.get_by_role(
        "button", name=re.compile(f"Submit: a machine wrote sentence {sentence}")
    ).click()
    expect(page.locator("#result")).to_be_visible()


def play_five(page, last_link: str, sentence: int) -> None:
    for number in range(1, 6):
        expect(page.locator("h1")).to_contain_text(f"text {number} of 5")
        flag(page, sentence)
        if number < 5:
            page.get_by_role(
                "button", name=re.compile(f"Next text \\({number + 1} of 5\\)")
            ).click()
    page.get_by_role("link", name=last_link).click()


def side_by_side(page) -> tuple[list[list[str]], list[str]]:
    """The comparison table's point cells per text, and its totals."""
    table = page.locator("table.challenge-table")
    rows = [
        [cell.strip() for cell in row.locator("td").all_inner_texts()[2:]]
        for row in table.locator("tbody tr").all()
    ]
    totals = [t.split(" of ")[0].strip() for t in table.locator("tfoot td").all_inner_texts()]
    return rows, totals


def test_a_friend_plays_the_challenge_and_both_see_the_same_results(
    app, live_server, browser, device, shots
):
    with app.app_context():
        # Five puzzles whose first machine sentence is the 2nd, 2nd, 3rd, 3rd or 4th: the
        # challenger (who flags the 2nd) and the friend (the 3rd) score differently.
        for boundary in (1, 1, 2, 2, 3):
            factories.example(boundary=boundary, category_slug="puzzles")
    # The challenger's system asks for dark mode; the friend's does not.
    challenger_context = browser.new_context(color_scheme="dark", **VIEWPORTS["desktop"])
    challenger = challenger_context.new_page()
    challenger.set_default_timeout(15000)
    challenger.device = "desktop"
    challenger.goto(live_server + "/")
    challenger.get_by_role("button", name=re.compile("^Puzzles")).click()
    play_five(challenger, "See your set summary", 2)
    expect(challenger.get_by_role("heading", name="Set complete")).to_be_visible()
    challenger.get_by_role("button", name="Challenge a friend").click()
    link = challenger.locator("#challenge-url").inner_text().strip()
    assert re.search(r"/challenge/[A-Za-z0-9_-]{16,}$", link), link
    expect(challenger.locator("#challenge")).to_contain_text("No friend has finished it yet")
    no_aa_violations(challenger, "set summary with a challenge link")
    set_url = challenger.url.split("#")[0]
    mine = challenger.locator(".stats-strip strong").first.inner_text()

    friend = device
    friend.goto(link)
    expect(friend.get_by_role("heading", name=re.compile("challenged you"))).to_be_visible()
    no_aa_violations(friend, "challenge invitation")
    shot(friend, shots, "challenge-invite")
    friend.get_by_role("button", name="Accept the challenge").click()
    play_five(friend, "See both results", 3)
    expect(friend.get_by_role("heading", name=re.compile("challenged you"))).to_be_visible()
    expect(friend.locator("table.challenge-table thead")).to_contain_text("You")
    friend_rows, friend_totals = side_by_side(friend)
    assert len(friend_rows) == 5 and all(len(r) == 2 for r in friend_rows)
    assert friend_totals[0] == mine == "10"
    assert friend_totals[1] == "18"
    assert friend_totals == [str(sum(int(r[i]) for r in friend_rows)) for i in range(2)]
    no_aa_violations(friend, "challenge results")
    shot(friend, shots, "challenge-results")

    challenger.goto(set_url)
    expect(challenger.locator("#challenge table.challenge-table")).to_be_visible()
    rows, totals = side_by_side(challenger)
    assert rows == friend_rows and totals == friend_totals
    no_aa_violations(challenger, "set summary with a friend's result")
    challenger.goto(link)
    expect(challenger.get_by_role("heading", name="Your challenge")).to_be_visible()
    expect(challenger.get_by_role("button", name="Accept the challenge")).to_have_count(0)
    assert side_by_side(challenger) == (friend_rows, friend_totals)
    no_aa_violations(challenger, "own challenge page")
    challenger_context.close()

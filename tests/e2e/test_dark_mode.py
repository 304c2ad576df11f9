"""Dark mode follows the system setting: with `prefers-color-scheme: dark` the main pages (home,
a round, the reveal with its chart, the profile with its charts, a leaderboard) are dark, on a
desktop and a 390×844 phone, and axe-core finds no WCAG A/AA violation of any impact."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.accounts import service as accounts
from tests import factories
from tests.e2e.conftest import AXE, audit, contrast
from tests.game_helpers import answer, others_answer

pytestmark = pytest.mark.browser

VIEWPORTS = {
    "desktop": {"viewport": {"width": 1100, "height": 900}},
    "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}
AA_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
PASSWORD = "a long night password"


def background_luminance(page) -> float:
    """Relative luminance (0 black, 1 white) of the page's computed background."""
    return page.evaluate(
        r"""() => {
          const [r, g, b] = getComputedStyle(document.body).backgroundColor
            .match(/[\d.]+/g).slice(0, 3).map(v => { v /= 255;
              return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
          return 0.2126 * r + 0.7152 * g + 0.0722 * b;
        }"""
    )


def no_aa_violations(page, what: str) -> None:
    """axe-core with the WCAG A and AA rules: no violation at all, whatever its impact."""
    if not page.evaluate("() => Boolean(window.axe)"):
        page.evaluate(AXE.read_text())
    result = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags},"
        " resultTypes: ['violations']})",
        AA_TAGS,
    )
    assert not result["violations"], f"{what} ({page.url}): " + "; ".join(
        f"{v['id']} [{v['impact']}]: {v['nodes'][0]['target']} "
        f"{v['nodes'][0].get('failureSummary', '')[:200]}"
        for v in result["violations"]
    )
    audit(page, what)  # and the best practices the other browser tests hold


@pytest.fixture
def night(app, live_server):
    """Four quiz texts six other players answered; night_owl has answered three of them."""
    with app.app_context():
        texts = []
        for i in range(4):
            example = factories.example(
                boundary=3, category_slug="quiz", system_label="Tiny GPT-2", passage=f"night-{i}"
            )
            others_answer(example, [3, 3, 4, 2, 5, 9], f"Text {i} repeats a phrase")
            texts.append(example)
        owl = accounts.sign_up("night_owl", PASSWORD, consent=True)
        for example, flag_at in zip(texts[:3], (3, 2, 5), strict=True):
            answer(owl, example, flag_at)
    return live_server


@pytest.fixture(params=list(VIEWPORTS))
def dark(request, browser):
    context = browser.new_context(color_scheme="dark", **VIEWPORTS[request.param])
    opened = context.new_page()
    opened.set_default_timeout(15000)
    opened.device = request.param
    yield opened
    context.close()


def check(page, shots, name: str) -> None:
    """Dark background, AA in axe, nothing wider than the screen; a screenshot to look at."""
    assert background_luminance(page) < 0.02, f"{name}: the background is not dark"
    no_aa_violations(page, f"{name} in dark")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    suffix = "" if page.device == "desktop" else "-phone"
    page.screenshot(
        path=str(shots / f"dark-{name}{suffix}.png"), full_page=page.device == "desktop"
    )


def test_main_pages_in_dark_mode(night, dark, shots):
    page = dark
    page.goto(night + "/login")
    page.get_by_label("Username").fill("night_owl")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(night + "/")
    check(page, shots, "home")

    page.get_by_role("button", name=re.compile("^Quiz")).click()
    for n in range(2, 5):
        page.get_by_role("button", name=re.compile("Still human")).click()
        expect(page.locator(".progress")).to_contain_text(f"Sentence {n} of 10")
    check(page, shots, "round")
    page.get_by_role("link", name=re.compile("A machine wrote this one")).click()
    page.get_by_text("Repetition").click()
    check(page, shots, "reasons")
    page.get_by_role("button", name=re.compile("Submit: a machine wrote sentence 4")).click()
    expect(page.locator("#result h2")).to_contain_text("Exact!")
    chart = page.locator(".spread svg")
    expect(chart).to_be_visible()
    # The chart's words and counts read as text does: 4.5:1 against the page.
    for part in (".spread .chart-tick", ".spread .chart-count", ".spread .chart-you"):
        assert contrast(page, part, "fill") >= 4.5, part
    check(page, shots, "reveal")

    page.goto(night + "/profile")
    expect(page.locator("figure svg").first).to_be_visible()
    for part in ("figure .chart-tick", "figure .chart-legend"):
        assert contrast(page, part, "fill") >= 4.5, part
    for line in ("figure .chart-line-you", "figure .chart-line-baseline"):
        assert contrast(page, line, "stroke") >= 3, line  # graphics: 3:1
    check(page, shots, "profile")

    page.goto(night + "/leaderboard")
    page.get_by_role("link", name="Most played").click()
    expect(page.locator("tr.me")).to_contain_text("night_owl")
    check(page, shots, "leaderboard")


def test_light_is_kept_when_the_system_is_light(night, browser):
    context = browser.new_context(color_scheme="light", viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(night + "/")
    assert background_luminance(page) > 0.9
    no_aa_violations(page, "home in light")
    context.close()


def test_first_visit_and_other_pages_in_dark_mode(night, app, dark, shots):
    """The guided first round (its yellow guide), the account pages, the help pages and the
    researchers' dashboard: dark and AA too."""
    page = dark
    page.goto(night + "/")
    page.get_by_label("I agree that my answers may be used").check()
    page.get_by_role("button", name="Play", exact=True).click()
    expect(page.locator(".guide")).to_contain_text("always written by a person")
    check(page, shots, "tutorial")
    for path in ("/help", "/about", "/daily", "/signup", "/no-such-page"):
        page.goto(night + path)
        check(page, shots, path.strip("/"))
    with app.app_context():
        accounts.sign_up("night_lab", PASSWORD, consent=False, researcher=True)
    page.goto(night + "/login")
    page.get_by_label("Username").fill("night_lab")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    for path in ("/account", "/research/", "/research/explanations"):
        page.goto(night + path)
        check(page, shots, path.strip("/").replace("/", "-"))
    # The focus ring stands out on the dark page and its cards (3:1).
    page.goto(night + "/")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert contrast(page, ":focus", "outlineColor") >= 3

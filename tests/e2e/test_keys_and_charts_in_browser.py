"""Keys and a phone around the "Why sentence N?" panel, and chart labels that never overlap
(issue 37 item 3), in Chromium.

While the panel is open H and M do nothing (Enter submits, Esc closes it); on a 390 px phone its
Submit is on screen and "Still human" is not; the last sentence shows one "How sure are you?".
The charts' label boxes are measured at 390 and 1280 px, light and dark, on the site's own
stylesheet."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.accounts.profile import skill_chart
from app.game import charts, progression
from tests.e2e.conftest import press

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def start_news(page, live_server: str) -> None:
    page.goto(live_server + "/")
    page.get_by_role("button", name=re.compile("^News")).click()
    expect(page.locator(".progress")).to_contain_text("Sentence 1 of 10")


def read_to(page, sentence: int) -> None:
    for number in range(2, sentence + 1):
        press(page, "h")
        expect(page.locator(".progress")).to_contain_text(f"Sentence {number} of 10")


def test_h_and_m_wait_while_the_panel_is_open_enter_submits_esc_closes(live_server, page):
    start_news(page, live_server)
    read_to(page, 3)
    why = page.locator("#why")
    press(page, "m")
    expect(why).to_be_visible()
    # H would have read on (or answered "all human"); with the panel open it does nothing.
    page.keyboard.press("h")
    page.keyboard.press("m")
    page.wait_for_timeout(300)
    expect(page.locator(".progress")).to_contain_text("Sentence 3 of 10")
    expect(why).to_be_visible()
    expect(page.locator("#result")).to_have_count(0)
    # Esc closes it and hands the keys back.
    page.keyboard.press("Escape")
    expect(why).to_be_hidden()
    expect(page.get_by_role("button", name=re.compile("Still human"))).to_be_visible()
    # Open again, pick reason 1 by its digit, Enter submits.
    press(page, "m")
    expect(why).to_be_visible()
    page.keyboard.press("1")
    expect(why.locator("input[name=reasons]").first).to_be_checked()
    page.keyboard.press("Enter")
    expect(page.locator("#result")).to_be_visible()
    expect(page.locator("ol.sentences li.guessed")).to_have_count(1)
    assert page.locator("ol.sentences li").nth(2).get_attribute("class").count("guessed") == 1


def test_one_sureness_question_on_the_last_sentence(live_server, page):
    start_news(page, live_server)
    read_to(page, 10)
    sure = page.get_by_role("group", name=re.compile("How sure are you"))
    expect(sure).to_have_count(1)
    # A sureness picked before opening the panel goes with the panel's answer.
    page.locator(".decide").get_by_text("70%").click()
    press(page, "m")
    expect(page.locator("#why")).to_be_visible()
    expect(sure).to_have_count(1)
    expect(page.locator("#why input[name=confidence][value='70']")).to_be_checked()


def test_on_a_phone_the_panels_submit_is_in_view_and_still_human_is_not(live_server, browser):
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(15000)
    start_news(page, live_server)
    for number in range(2, 8):
        page.get_by_role("button", name=re.compile("Still human")).click()
        expect(page.locator(".progress")).to_contain_text(f"Sentence {number} of 10")
    page.get_by_role("link", name=re.compile("A machine wrote this one")).tap()
    page.wait_for_function("() => !document.getElementById('why').hidden")
    page.wait_for_timeout(300)
    submit = page.get_by_role("button", name="Submit: a machine wrote sentence 7")
    box = submit.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 844, box
    expect(page.get_by_role("button", name=re.compile("Still human"))).to_be_hidden()
    # The flagged sentence is still on screen, above the panel.
    latest = page.locator("#latest").bounding_box()
    assert latest["y"] >= 0 and latest["y"] + latest["height"] <= 844
    page.get_by_text("Just a hunch").tap()
    submit.tap()
    expect(page.locator("#result")).to_be_visible()
    context.close()


# -- chart labels -----------------------------------------------------------------------------


def chart_markup() -> dict[str, str]:
    """The site's charts at their most crowded: the daily histogram of 0..25 points marked at
    24 beside a bar at 25 (and at the edges), the spread, and the skill chart whose lines run
    high on the right, where its legend once sat."""
    scores = [str(p) for p in range(26)]
    crowded = [0] * 20 + [3, 9, 12, 11, 10, 9]
    played = [
        progression.Played(points=5 if i % 3 else 4, exact=bool(i % 3), baseline=4, category="n")
        for i in range(30)
    ]
    return {
        "daily": charts.bar_chart(scores, crowded, "Scores", "d", marked=24),
        "daily-first": charts.bar_chart(scores, [7, 6, *[1] * 24], "Scores", "d", marked=0),
        "daily-last": charts.bar_chart(scores, crowded, "Scores", "d", marked=25),
        "spread": charts.bar_chart(
            [*[str(i) for i in range(2, 11)], "human"],
            [0, 1, 3, 12, 11, 4, 2, 0, 1, 5],
            "Spread",
            "s",
            highlight=3,
            marked=4,
        ),
        "skill": str(skill_chart(played)),
    }


OVERLAPS = """
(ids) => ids.map((id) => {
  const svg = document.getElementById(id).querySelector("svg");
  const frame = svg.getBoundingClientRect();
  const boxes = [...svg.querySelectorAll("text")].map((t) => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent, cls: t.getAttribute("class"),
            left: r.left, right: r.right, top: r.top, bottom: r.bottom};
  });
  const clash = [];
  for (let i = 0; i < boxes.length; i++) {
    const a = boxes[i];
    if (a.left < frame.left - 0.5 || a.right > frame.right + 0.5 ||
        a.top < frame.top - 0.5 || a.bottom > frame.bottom + 0.5) clash.push(["outside", a.text]);
    for (let j = i + 1; j < boxes.length; j++) {
      const b = boxes[j];
      if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) {
        clash.push([a.text, b.text]);
      }
    }
  }
  // No line runs through a legend: sample every polyline and test the legends' boxes.
  const legends = [...svg.querySelectorAll("text.chart-legend")].map((t) => t.getBBox());
  for (const line of svg.querySelectorAll("polyline")) {
    const points = [...line.points];
    for (let k = 1; k < points.length; k++) {
      for (let s = 0; s <= 20; s++) {
        const x = points[k - 1].x + (points[k].x - points[k - 1].x) * s / 20;
        const y = points[k - 1].y + (points[k].y - points[k - 1].y) * s / 20;
        for (const g of legends) {
          if (x >= g.x && x <= g.x + g.width && y >= g.y && y <= g.y + g.height) {
            clash.push(["line through legend", x, y]);
          }
        }
      }
    }
  }
  return {id, labels: boxes.length, clash};
})
"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_chart_labels_never_overlap(live_server, browser, width, scheme):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.goto(live_server + "/help")
    markup = chart_markup()
    page.evaluate(
        """(charts) => { const main = document.querySelector("main");
          for (const [id, svg] of Object.entries(charts)) {
            const figure = document.createElement("figure");
            figure.className = "spread"; figure.id = id; figure.innerHTML = svg;
            main.prepend(figure);
          } }""",
        markup,
    )
    found = page.evaluate(OVERLAPS, list(markup))
    for chart in found:
        assert chart["labels"] >= 3, chart
        assert chart["clash"] == [], chart
    texts = page.locator("#daily text").all_text_contents()
    assert "24" in texts and "▲ you" in texts and "25" not in texts
    context.close()

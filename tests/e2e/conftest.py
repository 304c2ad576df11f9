"""A live server on a free port and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from app import PROJECT_ROOT
from app.catalog.importer import import_file
from app.extensions import db

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def live_server(app):
    """Serve the test app (its fresh database, with the demo set) on 127.0.0.1."""
    with app.app_context():
        import_file(PROJECT_ROOT / "data" / "demo" / "examples.jsonl")
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=10)
    with app.app_context():
        db.session.remove()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make chromium` (Debian's chromium package).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15000)
    yield opened
    context.close()


@pytest.fixture
def shots(tmp_path):
    """Where screenshots go: docs/screenshots with SAVE_SCREENSHOTS=1, else a temp folder."""
    if os.environ.get("SAVE_SCREENSHOTS") == "1":
        folder = PROJECT_ROOT / "docs" / "screenshots"
    else:
        folder = tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


AXE = PROJECT_ROOT / "node_modules" / "axe-core" / "axe.min.js"
# axe-core's rules for WCAG 2.x A and AA, and its best practices.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]


def audit(page, what: str) -> None:
    """axe-core on the page as it is shown now: no serious or critical violation.

    The script is evaluated through the browser's debugging protocol, which the page's strict CSP
    does not govern, so the site needs no exception for it.
    """
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: run `make axe` (npm install of axe-core).")
    if not page.evaluate("() => Boolean(window.axe)"):
        page.evaluate(AXE.read_text())
    result = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags},"
        " resultTypes: ['violations']})",
        AXE_TAGS,
    )
    bad = [v for v in result["violations"] if v["impact"] in ("serious", "critical")]
    assert not bad, f"{what} ({page.url}): " + "; ".join(
        f"{v['id']} [{v['impact']}] {v['help']}: {len(v['nodes'])} node(s), e.g. "
        f"{v['nodes'][0]['target']} {v['nodes'][0].get('failureSummary', '')[:200]}"
        for v in bad
    )


def contrast(page, selector: str, property_name: str) -> float:
    """Contrast ratio between an element's colour `property_name` and the page's background."""
    return page.evaluate(
        r"""([selector, property]) => {
          const parse = (c) => c.match(/[\d.]+/g).slice(0, 3).map(Number);
          const lum = (rgb) => {
            const [r, g, b] = rgb.map(v => { v /= 255;
              return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
            return 0.2126 * r + 0.7152 * g + 0.0722 * b;
          };
          const element = document.querySelector(selector);
          const fg = parse(getComputedStyle(element)[property]);
          const bg = parse(getComputedStyle(document.body).backgroundColor);
          const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
          return (a + 0.05) / (b + 0.05);
        }""",
        [selector, property_name],
    )


def press(page, key: str) -> None:
    """Press a game shortcut once the page's script is listening (not while it still loads)."""
    page.locator("html[data-keys='ready']").wait_for(state="attached")
    page.keyboard.press(key)

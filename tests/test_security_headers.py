"""Security headers on every response: pages, error pages, static files, for every kind of client.

Every GET rule of `app.url_map` is requested by every client of tests/test_fuzz.py (anonymous, a
guest, a registered player, crowd workers of a Prolific and an MTurk study, a researcher) and by a
worker who finished the study, with path values from the seeded data, so that the pages render as
they do for real visitors. Each response must carry:

- Content-Security-Policy with default-src 'self', script-src 'self' and frame-ancestors 'none',
  or exactly MTurk's origins on the pages MTurk frames (an MTurk study's pages, and the rounds of a
  worker who came from MTurk), which then send no X-Frame-Options; every other page sends
  X-Frame-Options: DENY;
- X-Content-Type-Options: nosniff and Referrer-Policy: same-origin;
- HttpOnly and SameSite on every cookie it sets or clears.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from flask import Flask
from sqlalchemy import select
from werkzeug.routing import Rule

from app.crowd import lookup, review
from app.extensions import db
from app.models import Player
from app.research import validation
from tests import factories
from tests.conftest import csrf_token
from tests.crowd.helpers import play_slot
from tests.game_helpers import others_answer
from tests.test_fuzz import PASSWORD, PERSONAS, Persona, World, build_world, rules_of

MTURK_ORIGINS = {"https://www.mturk.com", "https://workersandbox.mturk.com"}
# Pages that only ever redirect somewhere else.
REDIRECT_ONLY = {"game.resume", "crowd.current", "favicon"}
ARGUMENT_RE = re.compile(r"<(?:[^>:]+:)?([^>]+)>")
# Entry links that let a study's landing page render.
ENTRY_QUERIES = {
    "pilot": "PROLIFIC_PID=newcomer&STUDY_ID=st1&SESSION_ID=sess9",
    "turk": "workerId=NEWTURKER&assignmentId=AS9&hitId=H1&turkSubmitTo=https%3A%2F%2Fwww.mturk.com",
    "closed": "pid=newcomer&session=s9",
}
CLIENTS = (*PERSONAS, "finished")


@pytest.fixture
def world(app) -> World:
    """The fuzzer's world plus a worker who has finished the Prolific study."""
    world = build_world(app)
    client = app.test_client()
    page = client.get("/study/pilot?PROLIFIC_PID=finisher&SESSION_ID=sess3").get_data(as_text=True)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page))
    client.post("/study/pilot/join", data={**fields, "consent": "yes"})
    with app.app_context():
        study = lookup.get_study("pilot")
        participant = lookup.find_participant(study, "finisher")
        while participant.status not in lookup.FINISHED:
            play_slot(study, participant)
        assert participant.status == "completed"
        # A bonus given in review, so that the worker's review page lists one.
        review.give_bonus(study, "finisher", 0.1, "headers")
        # A validation sample of the site's comments, labelled, so that its report renders.
        others_answer(factories.example(), [3, 4], "It says the same thing twice")
        lab = db.session.scalar(select(Player).where(Player.username == "lab"))
        for item in validation.draw(validation.SITE, size=5):
            validation.record(validation.SITE, item.id, lab, "other")
    cookies = {"session": client.get_cookie("session").value}
    world.personas["finished"] = Persona("finished", cookies, "")
    world.own["finished"] = {"slug": ["pilot"]}
    return world


def security_problems(response, framed: bool) -> list[str]:
    """What is missing or wrong in the response's security headers (empty: all good)."""
    problems = []
    headers = response.headers
    policy = {}
    for directive in headers.get("Content-Security-Policy", "").split(";"):
        if directive.strip():
            name, *values = directive.split()
            policy[name] = values
    if policy.get("default-src") != ["'self'"]:
        problems.append(f"default-src is {policy.get('default-src')}")
    if policy.get("script-src") != ["'self'"]:
        problems.append(f"script-src is {policy.get('script-src')}")
    ancestors = policy.get("frame-ancestors")
    if framed:
        if set(ancestors or ()) != MTURK_ORIGINS or len(ancestors) != len(MTURK_ORIGINS):
            problems.append(f"frame-ancestors is {ancestors}, not MTurk's origins")
        if "X-Frame-Options" in headers:
            problems.append("X-Frame-Options on a page MTurk frames")
    else:
        if ancestors != ["'none'"]:
            problems.append(f"frame-ancestors is {ancestors}")
        if headers.get("X-Frame-Options") != "DENY":
            problems.append(f"X-Frame-Options is {headers.get('X-Frame-Options')}")
    if headers.get("X-Content-Type-Options") != "nosniff":
        problems.append(f"X-Content-Type-Options is {headers.get('X-Content-Type-Options')}")
    if headers.get("Referrer-Policy") != "same-origin":
        problems.append(f"Referrer-Policy is {headers.get('Referrer-Policy')}")
    for cookie in headers.getlist("Set-Cookie"):
        attributes = {part.split("=")[0].strip().lower() for part in cookie.split(";")[1:]}
        if not {"httponly", "samesite"} <= attributes:
            problems.append(f"cookie without HttpOnly or SameSite: {cookie[:60]}")
    return problems


def assert_secure(response, framed: bool, what: str) -> None:
    problems = security_problems(response, framed)
    assert not problems, f"{what} -> {response.status_code}: " + "; ".join(problems)


def page_paths(world: World, rule: Rule, client: str) -> list[str]:
    """The rule filled from the seeded data: the client's own round, each study (with an entry
    link on a landing page), a category, a public player, a static file."""
    names = ARGUMENT_RE.findall(rule.rule)
    blueprint = rule.endpoint.rpartition(".")[0]
    if "slug" in names and blueprint in ("crowd", "research"):
        slugs = world.names["slug"]
    elif "slug" in names:
        slugs = world.names["leaderboard.slug"]
    else:
        slugs = [None]
    own_rounds = world.own[client].get("round_id") or [str(world.rounds["guest_open"])]
    day_name = "practice_day" if rule.endpoint == "game.practice_results" else "day"
    values = {
        "round_id": own_rounds[-1],
        "username": "fuzzer",
        "filename": "site.css",
        # A normal set (a daily set's page redirects to its day), today and its share card (a
        # practice's page: the past day practised).
        "set_id": world.names["set_id"][-1],
        "day": world.names[day_name][0],
        # The daily share card's token, or the challenge link's.
        "token": world.names["token"][1 if rule.endpoint.startswith("game.challenge") else 0],
        "worker_id": "5f1a2b3c",
        # A validation sample's scope: the site's comments (a study's slug also works).
        "scope": "site",
    }
    paths = []
    for slug in slugs:
        filled = {**values, "slug": slug}
        path = ARGUMENT_RE.sub(
            lambda match, filled=filled: quote(filled[match.group(1)], safe=""), rule.rule
        )
        if rule.endpoint == "crowd.landing":
            path += "?" + ENTRY_QUERIES[slug]
        paths.append(path)
    return paths


def frames_expected(rule: Rule, path: str, client: str) -> bool:
    """MTurk frames the MTurk study's pages and the game pages of a worker who came from it."""
    if rule.endpoint.startswith("crowd."):
        return path.startswith("/study/turk")
    return rule.endpoint.startswith("game.") and client == "turker"


def test_every_page_has_the_security_headers_for_every_client(world):
    rendered = {}
    for rule in rules_of(world.app):
        if "GET" not in rule.methods:
            continue
        for client in CLIENTS:
            for path in page_paths(world, rule, client):
                response = world.client(client).get(path)
                assert response.status_code < 500, f"{client}: GET {path}"
                assert_secure(response, frames_expected(rule, path, client), f"{client}: {path}")
                if response.status_code == 200:
                    rendered.setdefault(rule.endpoint, set()).add(client)
    never = {
        rule.endpoint
        for rule in rules_of(world.app)
        if "GET" in rule.methods and rule.endpoint not in rendered
    }
    # The seeded data must be good enough for every page to render for someone.
    assert never <= REDIRECT_ONLY, f"pages no client could open: {sorted(never - REDIRECT_ONLY)}"
    assert {"anonymous", "player", "researcher", "turker"} <= rendered["game.home"]
    assert rendered["crowd.done"] == {"finished"}


def test_framing_follows_the_mturk_study(world):
    probe = world.client("anonymous").get(f"/study/turk?{ENTRY_QUERIES['turk']}")
    assert probe.status_code == 302  # one redirect checks that the frame keeps its cookie
    assert_secure(probe, framed=True, what="MTurk cookie check")
    landing = world.client("anonymous").get(probe.headers["Location"])
    assert landing.status_code == 200
    assert_secure(landing, framed=True, what="MTurk landing")
    prolific = world.client("anonymous").get(f"/study/pilot?{ENTRY_QUERIES['pilot']}")
    assert_secure(prolific, framed=False, what="Prolific landing")
    round_page = world.client("turker").get(f"/play/round/{world.rounds['turker_open']}")
    assert round_page.status_code == 200
    assert_secure(round_page, framed=True, what="MTurk worker's round")
    # The same worker's pages outside the game and the study are not framed.
    assert_secure(world.client("turker").get("/help"), framed=False, what="MTurk worker's help")
    # A Prolific worker's round is not framed.
    worker_round = world.client("worker").get(f"/play/round/{world.rounds['worker_open']}")
    assert_secure(worker_round, framed=False, what="Prolific worker's round")


def test_error_pages_have_the_security_headers(world):
    app = world.app
    anonymous, player = world.client("anonymous"), world.client("player")
    cases = [
        ("400 CSRF", anonymous.post("/login", data={"username": "x"}), 400, False),
        ("400 entry link", anonymous.get("/study/pilot"), 400, False),
        ("400 MTurk entry link", anonymous.get("/study/turk?workerId=A"), 400, True),
        ("403 research", player.get("/research/"), 403, False),
        ("404 private profile", anonymous.get("/players/private_player"), 404, False),
        ("403 MTurk study not joined", anonymous.get("/study/turk/continue"), 403, True),
        ("404 nowhere", anonymous.get("/nowhere"), 404, False),
        ("404 round", player.get("/play/round/999999"), 404, False),
        ("404 study", anonymous.get("/study/nothing"), 404, False),
        ("404 static", anonymous.get("/static/nothing.css"), 404, False),
        ("405 GET /play", anonymous.get("/play"), 405, False),
        ("405 DELETE /", anonymous.delete("/"), 405, False),
        ("409 closed study", join_closed_study(world), 409, False),
    ]
    app.config["LOGIN_RATE_LIMIT"] = "1 per minute"
    token = world.personas["anonymous"].token
    attempt = {"csrf_token": token, "username": "nobody", "password": PASSWORD}
    address = {"REMOTE_ADDR": "192.0.2.1"}
    anonymous.post("/login", data=attempt, environ_base=address)
    limited = anonymous.post("/login", data=attempt, environ_base=address)
    cases.append(("429 login", limited, 429, False))
    for what, response, status, framed in cases:
        assert response.status_code == status, what
        assert "text/html" in response.content_type, what
        assert_secure(response, framed, what)


def join_closed_study(world: World):
    client = world.client("anonymous")
    data = {"csrf_token": world.personas["anonymous"].token, "pid": "p1", "consent": "yes"}
    return client.post("/study/closed/join", data=data)


def test_503_and_500_pages_have_the_security_headers(make_app, app):
    broken = make_app(SQLALCHEMY_DATABASE_URI="postgresql+psycopg://nobody@127.0.0.1:1/none")
    client = broken.test_client()
    page = client.get("/leaderboard")
    assert page.status_code == 503
    assert_secure(page, framed=False, what="503 page")
    assert_secure(client.get("/readyz"), framed=False, what="503 readyz")

    failing = make_app(PROPAGATE_EXCEPTIONS=False)

    def boom():
        raise RuntimeError("boom")

    failing.add_url_rule("/boom", "boom", boom)
    response = failing.test_client().get("/boom")
    assert response.status_code == 500
    assert "Our fault, not yours" in response.get_data(as_text=True)
    assert_secure(response, framed=False, what="500 page")


def test_static_files_have_the_security_headers(client):
    for name in ("site.css", "game.js"):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200
        assert_secure(response, framed=False, what=name)
        again = client.get(f"/static/{name}", headers={"If-None-Match": response.headers["ETag"]})
        assert again.status_code == 304
        assert_secure(again, framed=False, what=f"{name} (not modified)")
        assert_secure(client.head(f"/static/{name}"), framed=False, what=f"HEAD {name}")
    options = client.options("/static/site.css")
    assert_secure(options, framed=False, what="OPTIONS static")


def test_cookies_set_and_cleared_are_httponly_and_samesite(app: Flask, client):
    """Signing up, logging in and out: the session and remember cookies, set and cleared."""
    with app.app_context():
        factories.example()
    token = csrf_token(client)
    responses = {
        "signup": client.post(
            "/signup", data={"csrf_token": token, "username": "ann", "password": PASSWORD}
        )
    }
    # Signing up and logging in give the session a new CSRF secret: read the token again.
    responses["logout"] = client.post("/logout", data={"csrf_token": csrf_token(client)})
    token = csrf_token(client)
    responses["login"] = client.post(
        "/login", data={"csrf_token": token, "username": "ann", "password": PASSWORD}
    )
    responses["logout again"] = client.post("/logout", data={"csrf_token": csrf_token(client)})
    guest = app.test_client()
    responses["guest"] = guest.post("/play", data={"csrf_token": csrf_token(guest)})
    cookies = [cookie for r in responses.values() for cookie in r.headers.getlist("Set-Cookie")]
    assert any(cookie.startswith("remember_token=;") for cookie in cookies)  # cleared too
    assert all("SameSite=Lax" in cookie for cookie in cookies)  # the site's own pages: Lax
    for what, response in responses.items():
        assert_secure(response, framed=False, what=what)

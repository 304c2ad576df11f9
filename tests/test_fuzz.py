"""Hypothesis fuzzing of every route and form: no 5xx, and a rejected request changes nothing.

Every rule in `app.url_map` is fuzzed, so a new route is covered without editing this file; a
route whose path converter this file cannot fill fails `test_every_route_can_be_filled`. The
requests come from seven clients (anonymous, a guest in the middle of a round, a registered
player, a crowd worker in a study, one who has only joined, an MTurk worker, a researcher), with
the CSRF token of their own session (replayed on every request), none, a random one or another
session's. Path parameters are real round ids, study and category slugs and usernames, or random,
huge and negative values; forms carry the fields the templates really send plus random extra
ones, with values that are valid, random text (NUL bytes and every plane of unicode), numbers,
100,000-character strings, repeated keys or missing.

Every response must be below 500. A rejected response (400 and up) must leave the stored data as
it was (except a refused login, which is counted in `login_failures` by design): every table's
rows, in primary-key order, are compared with the seeded rows whenever the request sent anything
but a SELECT to the database (with only SELECTs nothing can have changed).
A successful request may change data; the tables are then put back to the seeded rows before the
next request, so every request starts from the same data.

Sizing: ROFT_FUZZ_EXAMPLES is the number of generated requests, shared by the three hypothesis
tests (default 600: the whole file takes 30-60 s); a deterministic sweep of every rule, method
and client (about 700 requests) runs on top. The nightly run generates 10,000, on both databases:

    ROFT_FUZZ_EXAMPLES=10000 .venv/bin/pytest -q tests/test_fuzz.py
    TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/roft_test \
        ROFT_FUZZ_EXAMPLES=10000 .venv/bin/pytest -q tests/test_fuzz.py

Failing examples are kept in .pytest_cache/hypothesis and replayed first on the next run.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlencode

import pytest
from flask import Flask
from hypothesis import HealthCheck, Phase, currently_in_test_context, given, note, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from sqlalchemy import event, select
from werkzeug.datastructures import MultiDict
from werkzeug.routing import IntegerConverter, PathConverter, Rule, UnicodeConverter

from app import PROJECT_ROOT
from app.accounts import service as accounts
from app.accounts.survey import NAMES as SURVEY_NAMES
from app.crowd import admin
from app.extensions import db
from app.game.reasons import REASONS
from app.models import DailyChallenge, GameSet, Round
from tests import factories
from tests.conftest import csrf_token
from tests.crowd.helpers import make_pool, make_study
from tests.game_helpers import answer_http, play_through_set, reveal_http, start_http

FUZZ_TESTS = 3
TOTAL_EXAMPLES = int(os.environ.get("ROFT_FUZZ_EXAMPLES", "600"))
PER_TEST = max(-(-TOTAL_EXAMPLES // FUZZ_TESTS), 1)

FUZZ = settings(
    max_examples=PER_TEST,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
    database=DirectoryBasedExampleDatabase(str(PROJECT_ROOT / ".pytest_cache" / "hypothesis")),
    # No "explain" phase: it replays a failing request hundreds of times to little use here.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    print_blob=True,
)

PASSWORD = "a long password"
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
PERSONAS = ("anonymous", "guest", "player", "worker", "joined", "turker", "researcher")
MTURK_LINK = (
    "/study/turk?workerId=TURKER1&assignmentId=ASSIGN1&hitId=HIT1"
    "&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"
)
LIKERT = {
    "name": "fluency",
    "question": "How fluent is the flagged sentence?",
    "labels": ["Unreadable", "Awkward", "Acceptable", "Good", "Perfect"],
}
ENTRY_KEYS = (
    "PROLIFIC_PID", "SESSION_ID", "STUDY_ID", "workerId", "assignmentId", "hitId", "turkSubmitTo",
    "pid", "session", "study",
)  # fmt: skip

# -- values ---------------------------------------------------------------------------------


def weighted(*options: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """`one_of` with weights: hypothesis picks one_of's branches about evenly, whatever they are,
    so valid values would be as rare as random ones."""
    return st.sampled_from([s for weight, s in options for _ in range(weight)]).flatmap(
        lambda strategy: strategy
    )


TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
NASTY = st.sampled_from([
    "", " ", "\x00", "a\x00b", "%00", "\r\n", "\t", "\u202e", "\ufeff", "😀", "ｎｅｗｓ", "١٢",
    "None", "null", "-1", "0", "1e309", "NaN", "0x10", "<script>alert(1)</script>", "' OR 1=1 --",
    "../../etc/passwd", "https://[", "https://evil.example", "//evil.example", "%s%n{0}",
])  # fmt: skip
NUMBERS = st.integers(min_value=-(2**80), max_value=2**80).map(str)
LONG = st.builds(
    lambda piece, size: piece * size,
    st.sampled_from(["x", "é", "\x00", "😀", "1"]),
    st.sampled_from([256, 4_097, 100_000]),
)
FUZZ_VALUE = st.one_of(TEXT, NASTY, NUMBERS, LONG)
# Addresses the site parses (MTurk's turkSubmitTo, the `next` after login).
URLS = st.one_of(
    st.sampled_from([
        "https://[", "https://[::1]", "https://ex\uff03ample.com", "https://www.mturk.com.evil.example",
        "https://www.mturk.com:99999", "http://www.mturk.com", "javascript:alert(1)",
        "//evil.example", "/\\evil.example", "/[", "/%00",
    ]),
    st.builds("{}{}".format, st.sampled_from(["https://", "/", "//"]), TEXT),
)  # fmt: skip

REASON_LISTS = st.lists(st.sampled_from(sorted(REASONS)), min_size=1, max_size=3, unique=True)
ENTRY_IDS = st.one_of(st.sampled_from(["W1", "fuzz-worker", "5f1a2b3c"]), st.from_regex(
    r"\A[A-Za-z0-9_-]{1,12}\Z"
))  # fmt: skip
# Plausible values for the fields the site's forms send: most requests should get past the first
# check, so the validation behind it is fuzzed too.
PLAUSIBLE = {
    "category": st.sampled_from(["random", "news", "nothing"]),
    "level": st.sampled_from(["easy", "medium", "hard", "any", "extreme"]),
    "consent": st.just("yes"),
    "choice": st.sampled_from(["machine", "human"]),
    "reasons": REASON_LISTS,
    "explanation": weighted((3, st.just("")), (3, TEXT), (1, st.just("y" * 2001))),
    "extra": st.just("1"),
    "screening": st.sampled_from(["yes", "no"]),
    "username": st.sampled_from(["fuzzer", "lab", "newcomer", "FUZZER", "x"]),
    "password": st.sampled_from([PASSWORD, "wrong password", "short"]),
    "profile_public": st.just("yes"),
    "rating_fluency": st.sampled_from(["1", "3", "5", "6"]),
    **{key: ENTRY_IDS for key in ENTRY_KEYS},
    "assignmentId": weighted((4, ENTRY_IDS), (1, st.just("ASSIGNMENT_ID_NOT_AVAILABLE"))),
    "turkSubmitTo": weighted(
        (2, st.sampled_from(["https://workersandbox.mturk.com", "https://www.mturk.com"])),
        (1, URLS),
    ),
    "next": weighted((1, st.just("/profile")), (1, URLS)),
    "flag": st.just("1"),
    "remind": st.sampled_from(["on", "off", "maybe"]),
    "start": st.just("tutorial"),
    "tutorial": st.just("done"),
    "back": st.sampled_from(["1", "2", "3", "x"]),
    "hidden": st.sampled_from(["0", "1"]),
    "show": st.sampled_from(["all", "hidden", "nope"]),
    "step": st.sampled_from(["0", "3", "4", "9", "99", "-1"]),
    "flagged": st.sampled_from(["1", "4", "10", "x"]),
    "page": st.sampled_from(["1", "2", "0", "x"]),
    "size": st.sampled_from(["5", "60", "0", "-1", "x", "3000"]),
    "item": st.sampled_from(["1", "2", "0", "x", "99999999999999999999"]),
    "label": st.sampled_from(["grammar", "other", "not_a_reason", "nope", ""]),
    **{name: st.sampled_from(["", "0", "1", "4", "5", "6"]) for name in SURVEY_NAMES},
}
# The fields each form of the site sends (read from the templates); "seen" and "round_id" are
# filled from the round in play.
FORM_FIELDS = {
    "research.review_reject": ("message", "category", "show"),
    "research.review_bonus": ("amount", "reason", "show"),
    "research.review_approve": ("show",),
    "game.start": ("category", "consent", "start", "tutorial", "level"),
    "game.challenge_play": ("consent",),
    "game.daily_start": ("consent",),
    "game.practice_start": ("consent",),
    "game.daily_reminder": ("remind", "back"),
    "game.vote": ("back",),
    "research.hide_explanation": ("hidden", "show"),
    "research.validation_draw": ("size",),
    "research.validation_label": ("item", "label"),
    "game.reveal": ("seen",),
    "game.answer": ("seen", "choice", "reasons", "explanation", "rating_fluency"),
    "accounts.signup": ("username", "password", "consent"),
    "accounts.login": ("username", "password"),
    "accounts.logout": (),
    "accounts.settings": ("profile_public", "consent"),
    "accounts.survey_page": SURVEY_NAMES,
    "crowd.join": ("consent", "screening", *ENTRY_KEYS),
    "crowd.next_round": ("round_id", "extra", "rating_fluency"),
}
# The query parameters pages read.
QUERY_FIELDS = {
    "crowd.landing": ENTRY_KEYS,
    "game.show": ("flag",),
    "game.tutorial_page": ("step", "flagged"),
    "accounts.past_rounds": ("page",),
    "game.daily_archive": ("page",),
    "research.explanations": ("show",),
    "accounts.login": ("next",),
    "accounts.signup": ("next",),
}
FIELD_NAMES = sorted({"seen", "round_id", *PLAUSIBLE})
# Weights by repetition: most requests carry the session's own (replayed) token.
CSRF_MODES = ("own",) * 10 + ("header", "missing", "random", "foreign", "twice")
FIELD_MUTATIONS = ("valid",) * 10 + ("fuzz", "missing", "repeated")
BODIES = ("form", "form", "form", "multipart", "json", "raw", "none")


# -- the seeded world -----------------------------------------------------------------------


@dataclass
class Persona:
    name: str
    cookies: dict[str, str]
    token: str


@dataclass(repr=False)
class World:
    """The seeded data, the clients' sessions, and the checks every request goes through."""

    app: Flask
    personas: dict[str, Persona]
    # Named rounds ("guest_open", "worker_answered", ...) -> id, and each round's `revealed`.
    rounds: dict[str, int]
    revealed: dict[int, int]
    names: dict[str, list[str]]
    # Per client: the path values that are its own (its rounds, its study, its name).
    own: dict[str, dict[str, list[str]]]
    seed_rows: dict[str, list[dict]] = field(default_factory=dict)
    seeded: dict[str, list[tuple]] = field(default_factory=dict)
    dirty: bool = False
    sent: int = 0
    # Statements other than SELECT that reached the database during the current request.
    writes: int = 0

    def __repr__(self) -> str:
        return f"World({len(self.personas)} clients, rounds {self.rounds})"

    def _repr_pretty_(self, printer, cycle) -> None:
        """How hypothesis prints the fixture in a failing example: briefly."""
        printer.text(repr(self))

    # The stored data, every table in primary-key order.
    def snapshot(self) -> dict[str, list[tuple]]:
        with self.app.app_context():
            rows = {
                table.name: [
                    tuple(row)
                    for row in db.session.execute(
                        select(table).order_by(*table.primary_key.columns)
                    )
                ]
                for table in db.metadata.sorted_tables
            }
            db.session.rollback()
        return rows

    def remember_seed(self) -> None:
        with self.app.app_context():
            self.seed_rows = {
                table.name: [dict(row._mapping) for row in db.session.execute(select(table))]
                for table in db.metadata.sorted_tables
            }
            db.session.rollback()
        self.seeded = self.snapshot()

    def restore(self) -> None:
        """Put every table back to the seeded rows (ids included, so sessions stay valid)."""
        with self.app.app_context():
            for table in reversed(db.metadata.sorted_tables):
                db.session.execute(table.delete())
            for table in db.metadata.sorted_tables:
                if self.seed_rows[table.name]:
                    db.session.execute(table.insert(), self.seed_rows[table.name])
            db.session.commit()
        self.dirty = False

    def client(self, persona: str):
        client = self.app.test_client()
        for name, value in self.personas[persona].cookies.items():
            client.set_cookie(name, value)
        return client

    def send(self, persona: str, method: str, path: str, **kwargs):
        """One request from a fresh copy of the persona's browser, checked."""
        if self.dirty:
            self.restore()
        self.sent += 1
        # A distinct client address per request keeps the rate limits out of the way while
        # they still run on every request.
        address = f"10.{(self.sent >> 16) & 255}.{(self.sent >> 8) & 255}.{self.sent & 255}"
        if currently_in_test_context():
            note(f"{persona}: {method} {path} {kwargs!r}"[:2000])
        self.dirty = True
        self.writes = 0
        response = self.client(persona).open(
            path, method=method, environ_base={"REMOTE_ADDR": address}, **kwargs
        )
        assert response.status_code < 500, f"{method} {path}: {response.status_code}"
        # Only SELECTs reached the database: nothing can have changed, no need to compare.
        if self.writes:
            after = self.snapshot()
            if response.status_code >= 400:
                # A refused login is counted against the name tried, by design (the lock).
                kept = {"login_failures"} if path.startswith("/login") else set()
                assert_unchanged(
                    self.seeded, after, f"{method} {path} -> {response.status_code}", kept
                )
            if after != self.seeded:
                return response
        self.dirty = False
        return response

    def count_writes(self, conn, cursor, statement: str, *args) -> None:
        if not statement.lstrip().upper().startswith("SELECT"):
            self.writes += 1


def assert_unchanged(before: dict, after: dict, what: str, may_change=frozenset()) -> None:
    changed = [name for name in before if before[name] != after[name] and name not in may_change]
    assert not changed, f"{what} was rejected but changed the tables {changed}"


def _location_round(response) -> int:
    """The round id in a redirect (a response) or in a URL."""
    location = response if isinstance(response, str) else response.headers.get("Location", "")
    match = re.search(r"/play/round/(\d+)", location)
    assert match, (getattr(response, "status_code", None), location)
    return int(match.group(1))


def _play_public_round(client, token: str, category: str = "news") -> tuple[int, int]:
    """Start and answer one public round, then start another: (answered id, open id)."""
    answered = _location_round(start_http(client, token, category))
    reveal_http(client, token, answered, 1)
    answer_http(client, token, answered, 2, reasons="generic")
    opened = _location_round(start_http(client, token, category))
    reveal_http(client, token, opened, 1)
    return answered, opened


def _play_daily(client, token: str) -> tuple[int, str]:
    """Play today's challenge to the end, answering "all human" on every text: (set id, its
    share token)."""

    def all_human(round_id: int) -> None:
        for seen in range(1, 10):
            reveal_http(client, token, round_id, seen)
        assert answer_http(client, token, round_id, 10, "human").status_code == 302

    play_through_set(
        client, token, client.post("/daily/start", data={"csrf_token": token}), all_human
    )
    results = client.get(f"/daily/{datetime.now(UTC).date().isoformat()}").text
    share = re.search(r"/daily/[\d-]+/card/([\w-]+)", results)
    assert share, "the finished challenge has a share card"
    with client.application.app_context():
        set_id = db.session.scalar(select(GameSet.id).where(GameSet.kind == "daily"))
    return set_id, share.group(1)


def _join(client, link: str, **extra) -> None:
    # An MTurk link first redirects once to check that the browser keeps its cookie.
    page = client.get(link, follow_redirects=True).get_data(as_text=True)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page))
    response = client.post(link.split("?")[0] + "/join", data={**fields, "consent": "yes", **extra})
    assert response.status_code == 302, response.get_data(as_text=True)


def _finish_study_round(client, token: str, round_id: int, revealed: int = 1) -> None:
    """Reveal to the end and answer all human (a valid answer for any round)."""
    for seen in range(revealed, 10):
        reveal_http(client, token, round_id, seen)
    answered = answer_http(client, token, round_id, 10, "human", rating_fluency="3")
    assert answered.status_code == 302, answered.get_data(as_text=True)


def _practise_a_past_day(client, token: str) -> str:
    """Hold a challenge for yesterday and answer its first text as practice; the day."""
    day = datetime.now(UTC).date() - timedelta(days=1)
    with client.application.app_context():
        texts = [
            factories.example(boundary=3, category_slug="news", kind="daily").id for _ in range(5)
        ]
        db.session.add(DailyChallenge(day=day, example_ids=texts))
        db.session.commit()
    location = client.post(f"/daily/{day}/practice", data={"csrf_token": token}).headers["Location"]
    round_id = _location_round(location)
    for seen in range(1, 10):
        reveal_http(client, token, round_id, seen)
    answered = answer_http(client, token, round_id, 10, "human")
    assert answered.status_code == 302
    return day.isoformat()


def build_world(app: Flask) -> World:
    """Studies, players and seven browser sessions, made through the site as visitors make them."""
    with app.app_context():
        make_pool(normal=12, human=4)
        factories.example(boundary=5, category_slug="stories")
        for _ in range(5):
            factories.example(boundary=3, category_slug="news", kind="daily")
        make_study(likert=[LIKERT])
        make_study(
            slug="turk",
            title="Turk study",
            platform="mturk",
            completion_codes={},
            max_rounds=12,
            likert=[LIKERT],
            likert_when="before",
            screening={"question": "Are you fluent?", "options": ["yes", "no"], "accept": ["yes"]},
        )
        closed = make_study(slug="closed", title="Closed study", platform="generic")
        admin.set_open(closed, False)
        factories.player("private_player")
        accounts.sign_up("lab", PASSWORD, consent=False, researcher=True)

    clients = {name: app.test_client() for name in PERSONAS}
    rounds: dict[str, int] = {}
    tokens = {name: csrf_token(client) for name, client in clients.items()}

    rounds["guest_answered"], rounds["guest_open"] = _play_public_round(
        clients["guest"], tokens["guest"]
    )

    player, token = clients["player"], tokens["player"]
    signed_up = player.post(
        "/signup", data={"csrf_token": token, "username": "fuzzer", "password": PASSWORD}
    )
    assert signed_up.status_code == 302
    # Signing up, logging in and joining a study give the session a new CSRF secret.
    tokens["player"] = token = csrf_token(player)
    player.post("/profile/settings", data={"csrf_token": token, "profile_public": "yes"})
    daily_set, share_token = _play_daily(player, token)
    practice_day = _practise_a_past_day(player, token)
    rounds["player_answered"], rounds["player_open"] = _play_public_round(player, token)
    with app.app_context():
        normal_set = db.session.get(Round, rounds["player_answered"]).set_id
        # A finished set of the player's, sent as a challenge (app/game/challenge.py).
        challenged = GameSet(
            player_id=db.session.get(Round, rounds["player_answered"]).player_id,
            kind="normal",
            size=1,
            answered=1,
            finished_at=datetime.now(UTC),
            challenge_token="fuzz-challenge-token-1",
        )
        db.session.add(challenged)
        db.session.commit()

    worker, token = clients["worker"], tokens["worker"]
    _join(worker, "/study/pilot?PROLIFIC_PID=5f1a2b3c&STUDY_ID=st1&SESSION_ID=sess1")
    tokens["worker"] = token = csrf_token(worker)
    first = _location_round(worker.post("/study/pilot/next", data={"csrf_token": token}))
    _finish_study_round(worker, token, first)
    rounds["worker_answered"] = first
    rounds["worker_open"] = _location_round(
        worker.post(
            "/study/pilot/next",
            data={"csrf_token": token, "round_id": str(first), "rating_fluency": "4"},
        )
    )

    _join(clients["joined"], "/study/pilot?PROLIFIC_PID=joinedonly&SESSION_ID=sess2")
    tokens["joined"] = csrf_token(clients["joined"])

    turker, token = clients["turker"], tokens["turker"]
    _join(turker, MTURK_LINK, screening="yes")
    tokens["turker"] = token = csrf_token(turker)
    rounds["turker_open"] = _location_round(
        turker.post("/study/turk/next", data={"csrf_token": token})
    )

    logged_in = clients["researcher"].post(
        "/login", data={"csrf_token": tokens["researcher"], "username": "lab", "password": PASSWORD}
    )
    assert logged_in.status_code == 302
    tokens["researcher"] = csrf_token(clients["researcher"])

    personas = {}
    for name, client in clients.items():
        cookies = {
            key: cookie.value
            for key in ("session", "remember_token")
            if (cookie := client.get_cookie(key)) is not None
        }
        personas[name] = Persona(name, cookies, tokens[name])
    with app.app_context():
        revealed = {
            round_id: db.session.get(Round, round_id).revealed for round_id in rounds.values()
        }
    # Real values for path arguments, by argument name ("blueprint.name" first).
    names = {
        "round_id": [str(round_id) for round_id in sorted(rounds.values())],
        "slug": ["pilot", "turk", "closed"],
        "leaderboard.slug": ["news", "stories", "random"],
        "username": ["fuzzer", "lab", "private_player", "FUZZER"],
        "filename": ["site.css", "game.js", "../__init__.py", "missing.css", "."],
        "set_id": [str(daily_set), str(normal_set)],
        "day": [datetime.now(UTC).date().isoformat(), "2020-02-30", "2026-01-01", practice_day],
        "practice_day": [practice_day],
        "token": [share_token, "fuzz-challenge-token-1"],
        "worker_id": ["5f1a2b3c", "joinedonly", "TURKER1"],
    }
    own: dict[str, dict[str, list[str]]] = {name: {} for name in PERSONAS}
    for key, round_id in rounds.items():
        own[key.partition("_")[0]].setdefault("round_id", []).append(str(round_id))
    own["worker"]["slug"] = own["joined"]["slug"] = own["researcher"]["slug"] = ["pilot"]
    own["turker"]["slug"] = ["turk"]
    own["player"]["username"] = ["fuzzer"]
    own["player"]["set_id"] = [str(daily_set), str(normal_set)]
    world = World(app, personas, rounds, revealed, names, own)
    world.remember_seed()
    with app.app_context():
        event.listen(db.engine, "before_cursor_execute", world.count_writes)
    return world


@pytest.fixture
def world(app) -> World:
    return build_world(app)


# -- requests -------------------------------------------------------------------------------

ARGUMENT_RE = re.compile(r"<(?:[^>:]+:)?([^>]+)>")
KNOWN_CONVERTERS = (IntegerConverter, UnicodeConverter, PathConverter)


def rules_of(app: Flask) -> list[Rule]:
    return sorted(app.url_map.iter_rules(), key=lambda rule: rule.rule)


def unknown_converters(rule: Rule) -> list[str]:
    # Werkzeug keeps a rule's converters in `_converters` (argument name -> converter).
    return [
        f"{rule.rule}: <{name}> uses {type(converter).__name__}"
        for name, converter in rule._converters.items()
        if not isinstance(converter, KNOWN_CONVERTERS)
    ]


def argument_values(world: World, rule: Rule, name: str, persona: str, real_bias: int):
    """The client's own rounds and study most often, then any seeded id or slug, then random,
    huge and negative values."""
    blueprint = rule.endpoint.rpartition(".")[0]
    real = world.names.get(f"{blueprint}.{name}") or world.names.get(name)
    if real is None:
        real = sorted({value for values in world.names.values() for value in values})
    own = [value for value in world.own[persona].get(name, ()) if value in real]
    if isinstance(rule._converters[name], IntegerConverter):
        odd = st.one_of(
            st.integers(min_value=-5, max_value=2**80).map(str),
            st.sampled_from(["0", "007", "1.5", "١٢", "abc", "9" * 40]),
        )
    else:
        odd = st.one_of(TEXT.filter(bool), NASTY.filter(bool), NUMBERS, LONG)
    choices = [(real_bias, st.sampled_from(real)), (1, odd)]
    if own:
        choices.append((2 * real_bias, st.sampled_from(own)))
    return weighted(*choices)


@st.composite
def paths(draw, world: World, rule: Rule, persona: str, real_bias: int = 1) -> str:
    def fill(match: re.Match) -> str:
        value = draw(argument_values(world, rule, match.group(1), persona, real_bias))
        return quote(value, safe="")

    return ARGUMENT_RE.sub(fill, rule.rule)


def plausible_value(world: World, name: str, path: str, persona: str):
    """A value the site's own page would send for this field ("seen": the round's count,
    "round_id": mostly one of the client's rounds)."""
    match = re.search(r"/play/round/(\d+)", path)
    in_path = int(match.group(1)) if match else None
    if name == "seen" and in_path in world.revealed:
        return st.sampled_from([world.revealed[in_path], world.revealed[in_path] + 1]).map(str)
    if name in ("seen", "round_id"):
        anything = st.sampled_from([*world.names["round_id"], "1", "10"])
        own = world.own[persona].get("round_id")
        return weighted((3, st.sampled_from(own)), (1, anything)) if own else anything
    return PLAUSIBLE.get(name, TEXT)


@st.composite
def fields(
    draw, world: World, names: tuple[str, ...], path: str, persona: str
) -> list[tuple[str, str]]:
    """The given fields, each valid, fuzzed, repeated or missing; plus random extras."""
    pairs: list[tuple[str, str]] = []
    for name in names:
        how = draw(st.sampled_from(FIELD_MUTATIONS))
        if how == "missing":
            continue
        if how == "fuzz":
            values = [draw(FUZZ_VALUE)]
        else:
            value = draw(plausible_value(world, name, path, persona))
            values = value if isinstance(value, list) else [value]
            if how == "repeated":
                values = [*values, draw(FUZZ_VALUE)]
        pairs.extend((name, value) for value in values)
    extras = draw(
        st.lists(st.tuples(st.one_of(st.sampled_from(FIELD_NAMES), TEXT), FUZZ_VALUE), max_size=3)
    )
    return pairs + extras


def form_fields(world: World, rule: Rule, path: str, persona: str):
    return fields(world, FORM_FIELDS.get(rule.endpoint, ()), path, persona)


def query_strings(world: World, rule: Rule, path: str, persona: str):
    return fields(world, QUERY_FIELDS.get(rule.endpoint, ()), path, persona).map(urlencode)


def request_body(world: World, persona: str, csrf: str, body: str, fields: list, data) -> dict:
    """The keyword arguments of the test client's `open` for this body and CSRF token."""
    own = world.personas[persona].token
    headers = {}
    pairs = list(fields)
    if csrf in ("own", "twice"):
        pairs.insert(0, ("csrf_token", own))
    if csrf == "twice":
        pairs.append(("csrf_token", data.draw(FUZZ_VALUE, label="second token")))
    elif csrf == "header":
        headers["X-CSRFToken"] = own
    elif csrf == "random":
        pairs.insert(0, ("csrf_token", data.draw(FUZZ_VALUE, label="token")))
    elif csrf == "foreign":
        other = data.draw(st.sampled_from([p for p in PERSONAS if p != persona]), label="from")
        pairs.insert(0, ("csrf_token", world.personas[other].token))
    if body == "form":
        return {"data": MultiDict(pairs), "headers": headers}
    if body == "multipart":
        return {"data": MultiDict(pairs), "content_type": "multipart/form-data", "headers": headers}
    if body == "json":
        return {
            "data": json.dumps(dict(pairs)),
            "content_type": "application/json",
            "headers": headers,
        }
    if body == "raw":
        raw = data.draw(st.binary(max_size=300), label="raw body")
        kind = data.draw(
            st.sampled_from(
                [
                    "application/x-www-form-urlencoded",
                    "multipart/form-data",
                    "multipart/form-data; boundary=zz",
                    "text/plain",
                    "application/json",
                ]
            ),
            label="content type",
        )
        return {"data": raw, "content_type": kind, "headers": headers}
    return {"headers": headers}


# -- the tests ------------------------------------------------------------------------------


def test_every_route_can_be_filled(app):
    """A route with a converter this file cannot fill must be taught to it, not skipped."""
    problems = [problem for rule in rules_of(app) for problem in unknown_converters(rule)]
    assert not problems, "teach tests/test_fuzz.py these converters: " + "; ".join(problems)


def first_real_path(world: World, rule: Rule, persona: str) -> str:
    """The rule filled with the client's own values (its round, its study), else seeded ones."""

    def fill(match: re.Match) -> str:
        name = match.group(1)
        blueprint = rule.endpoint.rpartition(".")[0]
        real = world.names.get(f"{blueprint}.{name}") or world.names.get(name) or ["x"]
        own = [value for value in world.own[persona].get(name, ()) if value in real]
        return quote((own or real)[0], safe="")

    return ARGUMENT_RE.sub(fill, rule.rule)


def test_every_route_and_method_once_per_client(world):
    """The exhaustive sweep behind the random ones: each rule with each of its methods for each
    client, and every other method once (a 405 comes before any session is looked at)."""
    for rule in rules_of(world.app):
        for persona in PERSONAS:
            path = first_real_path(world, rule, persona)
            methods = METHODS if persona == "anonymous" else sorted(rule.methods)
            for method in methods:
                token = world.personas[persona].token
                data = {"csrf_token": token} if method not in ("GET", "HEAD") else None
                world.send(persona, method, path, data=data)


@FUZZ
@given(data=st.data())
def test_any_request_to_any_route(world, data):
    """Any client, any route, any method, any body and token."""
    rule = data.draw(st.sampled_from(rules_of(world.app)), label="rule")
    persona = data.draw(st.sampled_from(PERSONAS), label="persona")
    method = data.draw(
        weighted((3, st.sampled_from(sorted(rule.methods))), (1, st.sampled_from(METHODS))),
        label="method",
    )
    path = data.draw(paths(world, rule, persona), label="path")
    query = data.draw(query_strings(world, rule, path, persona), label="query")
    fields = data.draw(form_fields(world, rule, path, persona), label="fields")
    csrf = data.draw(st.sampled_from(CSRF_MODES), label="csrf")
    body = data.draw(st.sampled_from(BODIES), label="body")
    kwargs = request_body(world, persona, csrf, body, fields, data)
    world.send(persona, method, path, query_string=query, **kwargs)


@FUZZ
@given(data=st.data())
def test_forms_with_their_real_fields(world, data):
    """POSTs to every form handler with its real fields, mostly valid, from every client."""
    rules = [rule for rule in rules_of(world.app) if "POST" in rule.methods]
    rule = data.draw(st.sampled_from(rules), label="rule")
    persona = data.draw(st.sampled_from(PERSONAS), label="persona")
    path = data.draw(paths(world, rule, persona, real_bias=4), label="path")
    fields = data.draw(form_fields(world, rule, path, persona), label="fields")
    csrf = data.draw(st.sampled_from(CSRF_MODES), label="csrf")
    kwargs = request_body(world, persona, csrf, "form", fields, data)
    world.send(persona, "POST", path, **kwargs)


@FUZZ
@given(data=st.data())
def test_pages_with_fuzzed_paths_and_query_strings(world, data):
    """GET and HEAD of every page with real and random path values and query strings."""
    rules = [rule for rule in rules_of(world.app) if "GET" in rule.methods]
    rule = data.draw(st.sampled_from(rules), label="rule")
    persona = data.draw(st.sampled_from(PERSONAS), label="persona")
    method = data.draw(st.sampled_from(["GET"] * 4 + ["HEAD"]), label="method")
    path = data.draw(paths(world, rule, persona, real_bias=2), label="path")
    query = data.draw(query_strings(world, rule, path, persona), label="query")
    world.send(persona, method, path, query_string=query)


# -- regressions: what the fuzzer found, pinned ---------------------------------------------


def stored(app) -> dict[str, list[tuple]]:
    with app.app_context():
        rows = {
            table.name: [tuple(row) for row in db.session.execute(select(table))]
            for table in db.metadata.sorted_tables
        }
        db.session.rollback()
    return rows


def test_options_on_research_pages_is_refused_for_anonymous_visitors(client):
    # login_required lets OPTIONS through; the researcher check then met an anonymous user.
    for path in ("/research/", "/research/studies/pilot.csv"):
        assert client.open(path, method="OPTIONS").status_code == 403


def test_round_ids_beyond_the_database_integers_are_not_found(app, client):
    with app.app_context():
        factories.example()
    token = csrf_token(client)
    start_http(client, token)
    for round_id in (2**31, 2**63, 2**80):
        assert client.get(f"/play/round/{round_id}").status_code == 404
        answer = {"csrf_token": token, "seen": "1", "choice": "human"}
        assert client.post(f"/play/round/{round_id}/answer", data=answer).status_code == 404
        reveal = {"csrf_token": token, "seen": "1"}
        assert client.post(f"/play/round/{round_id}/next", data=reveal).status_code == 404


def test_refused_start_stores_no_guest_and_no_consent(app, client):
    token = csrf_token(client)
    nothing_to_play = client.post("/play", data={"csrf_token": token})
    assert nothing_to_play.status_code == 409
    assert stored(app)["players"] == []
    with app.app_context():
        factories.example()
    before = stored(app)
    for category in ("nothing", "", "\x00", "x" * 100_000):
        refused = start_http(client, token, category)
        assert refused.status_code == 404
        assert "There is no category" in refused.get_data(as_text=True)
    assert stored(app) == before
    player = app.test_client()
    player_token = csrf_token(player)
    player.post(
        "/signup", data={"csrf_token": player_token, "username": "ann", "password": PASSWORD}
    )
    player_token = csrf_token(player)  # a new CSRF secret after sign-up
    before = stored(app)
    data = {"csrf_token": player_token, "category": "nothing", "consent": "yes"}
    assert player.post("/play", data=data).status_code == 404
    assert stored(app) == before


def test_refused_next_round_does_not_mark_the_instructions_read(app, client):
    with app.app_context():
        make_pool()
        make_study()
    _join(client, "/study/pilot?PROLIFIC_PID=5f1a2b3c&SESSION_ID=sess1")
    token = csrf_token(client)
    before = stored(app)
    for round_id in ("999", str(2**63), "-1"):
        data = {"csrf_token": token, "round_id": round_id}
        assert client.post("/study/pilot/next", data=data).status_code == 403
    assert stored(app) == before
    assert client.get("/study/pilot/continue").status_code == 200  # still the instructions


def test_nul_bytes_and_huge_names_get_a_4xx_page(app, client):
    """PostgreSQL refuses NUL bytes in text: they must be turned away before a query."""
    with app.app_context():
        factories.example()
        make_pool()
        make_study()
        accounts.sign_up("lab", PASSWORD, consent=False, researcher=True)
    for path in ("/study/%00", "/leaderboard/%00", "/players/%00", "/study/a%00b/continue"):
        assert client.get(path).status_code == 404, path
    long = "a" * 100_000
    for path in (f"/study/{long}", f"/leaderboard/{long}", f"/players/{long}"):
        assert client.get(path).status_code == 404
    token = csrf_token(client)
    login = {"csrf_token": token, "username": "lab\x00", "password": PASSWORD}
    assert client.post("/login", data=login).status_code == 401
    client.post("/login", data={"csrf_token": token, "username": "lab", "password": PASSWORD})
    token = csrf_token(client)  # a new CSRF secret after login
    assert client.get("/research/studies/%00.json").status_code == 404
    round_id = _location_round(client.post("/play", data={"csrf_token": token}))
    answer = {"csrf_token": token, "seen": "1", "choice": "machine", "explanation": "a\x00b"}
    refused = client.post(f"/play/round/{round_id}/answer", data=answer)
    assert refused.status_code == 400
    assert "NUL character" in refused.get_data(as_text=True)


def test_malformed_turk_submit_address_gets_the_problem_page(app, client):
    with app.app_context():
        make_pool()
        make_study(slug="turk", platform="mturk", completion_codes={})
    for address in ("https://[", "https://[::1", "https://ex\uff03ample.com"):
        query = urlencode({"workerId": "A1", "assignmentId": "AS1", "turkSubmitTo": address})
        page = client.get(f"/study/turk?{query}")
        assert page.status_code == 400
        assert "does not come from Mechanical Turk" in page.get_data(as_text=True)
        data = {"csrf_token": csrf_token(client), "workerId": "A1", "assignmentId": "AS1"}
        joined = client.post("/study/turk/join", data={**data, "turkSubmitTo": address})
        assert joined.status_code == 400


def test_login_next_does_not_leave_the_site_through_backslashes_or_tabs(app, client):
    with app.app_context():
        accounts.sign_up("ann", PASSWORD, consent=False)
    for target in ("/\\evil.example", "/\t/evil.example", "/\\/evil.example"):
        # Each login gives the session a new CSRF secret: read the form's token each time.
        data = {"csrf_token": csrf_token(client), "username": "ann", "password": PASSWORD}
        response = client.post(f"/login?{urlencode({'next': target})}", data=data)
        assert response.headers["Location"] == "/", target
    data = {"csrf_token": csrf_token(client), "username": "ann", "password": PASSWORD}
    kept = client.post("/login?next=/profile", data=data)
    assert kept.headers["Location"] == "/profile"

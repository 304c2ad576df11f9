"""The work a round costs: which texts the indexed pick may return, and how few statements each
request of a round makes (nothing is loaded twice across a commit, logging reads nothing)."""

from __future__ import annotations

import json
import random
import re
import tomllib
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import event, inspect, select

from app import PROJECT_ROOT
from app.extensions import commit_keeping, db
from app.game import starts
from app.models import Example, GameSet, Player, Round
from bench.protocol import Choice, Decide, play_sets
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import others_answer, play_protocol, start_http

FETCH = {"X-Requested-With": "fetch"}
ROUND_PATH = re.compile(r"/play/round/\d+")


@contextmanager
def statements(app):
    """The SQL statements run while the block runs (any connection of the app's engine)."""
    seen: list[str] = []

    def record(conn, cursor, statement, params, context, executemany):
        seen.append(statement)

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


@dataclass
class Work:
    """What one request asked of the database: its statements and its round trips.

    A round trip is a statement, or the BEGIN, COMMIT or ROLLBACK of a transaction (the driver
    sends each and waits for the answer). A transaction begins with the first statement that is
    not a plain SELECT (reads before it run on their own: app/database.py on PostgreSQL, the
    driver itself on SQLite) and not a write that runs alone in autocommit (PostgreSQL); a
    COMMIT or ROLLBACK with no transaction open sends nothing, and the
    pool's ROLLBACK of a connection given back inside a transaction counts.
    `tests/test_database.py` checks when BEGIN, COMMIT and ROLLBACK are sent on a trace of
    PostgreSQL's protocol.
    """

    statements: list[str] = field(default_factory=list)
    begins: int = 0
    ends: int = 0

    @property
    def round_trips(self) -> int:
        return len(self.statements) + self.begins + self.ends


@contextmanager
def work(app):
    """Count the statements and round trips of every connection of the app's engine meanwhile."""
    counted = Work()
    open_transactions: set[int] = set()

    def statement(conn, cursor, statement, params, context, executemany):
        counted.statements.append(statement)
        dbapi_connection = id(conn.connection.dbapi_connection)
        words = statement.upper()
        plain_read = words.lstrip().startswith("SELECT") and " FOR UPDATE" not in words
        # A write that is a transaction by itself (app/database.py: ALONE) runs in autocommit.
        alone = getattr(conn.connection.dbapi_connection, "autocommit", None) is True
        if dbapi_connection not in open_transactions and not plain_read and not alone:
            open_transactions.add(dbapi_connection)
            counted.begins += 1

    def end(dbapi_connection) -> None:
        if id(dbapi_connection) in open_transactions:
            open_transactions.discard(id(dbapi_connection))
            counted.ends += 1

    def connection_end(conn) -> None:
        end(conn.connection.dbapi_connection)

    def pool_reset(dbapi_connection, record, reset_state) -> None:
        end(dbapi_connection)

    with app.app_context():
        engine = db.engine
    hooks = [
        (engine, "before_cursor_execute", statement),
        (engine, "commit", connection_end),
        (engine, "rollback", connection_end),
        (engine.pool, "reset", pool_reset),
    ]
    for target, name, hook in hooks:
        event.listen(target, name, hook)
    try:
        yield counted
    finally:
        for target, name, hook in hooks:
            event.remove(target, name, hook)


def test_the_pick_returns_only_least_annotated_texts_the_player_may_read(ctx):
    quiet = [factories.example(boundary=3, passage=f"quiet-{i}") for i in range(5)]
    same_passage = factories.example(boundary=3, passage="quiet-0", external_id="quiet-0-again")
    busy = [factories.example(boundary=3, passage=f"busy-{i}") for i in range(3)]
    story = factories.example(boundary=3, category_slug="stories", passage="story-0")
    for example in [*busy, story]:
        example.annotation_count = 2
    db.session.commit()
    player = factories.player()
    played = factories.round_of(player, quiet[0], "news")  # reads passage quiet-0
    played.guess = 2
    db.session.commit()

    picks = Counter(starts.pick(player) for _ in range(300))
    # Random among the least annotated the player may read: every one comes up, no other.
    assert set(picks) == {example.id for example in quiet[1:]}
    assert quiet[0].id not in picks and same_passage.id not in picks

    assert starts.pick(player, "stories") == story.id


def test_the_pick_moves_on_to_the_next_count_and_ends_when_all_are_read(ctx):
    first = factories.example(boundary=3, passage="a")
    second = factories.example(boundary=3, passage="b")
    second.annotation_count = 7
    db.session.commit()
    player = factories.player()
    for expected in (first, second):
        assert starts.pick(player) == expected.id
        factories.round_of(player, expected, "news").guess = 2
        db.session.commit()
    assert starts.pick(player) is None


def test_the_pick_walks_back_from_the_point_in_the_same_statement(ctx, app, monkeypatch):
    """A random point past every readable text: the last one before it, in one statement."""
    texts = [factories.example(boundary=3, passage=f"back-{i}") for i in range(4)]
    texts[3].annotation_count = 5  # not among the least annotated
    db.session.commit()
    player = factories.player()
    factories.round_of(player, texts[2], "news").guess = 2  # read: not served again
    db.session.commit()
    monkeypatch.setattr(starts.random, "random", lambda: 0.999)
    assert player.id  # loaded again after the commit, before counting
    with work(app) as counted:
        picked = starts.pick(player)
    assert picked == texts[1].id
    assert len(counted.statements) == 1, counted.statements
    monkeypatch.setattr(starts.random, "random", lambda: 0.0)
    assert starts.pick(player) == texts[0].id


def test_commit_keeping_keeps_only_the_named_objects_loaded(ctx):
    kept = factories.player("kept")
    other = factories.player("other")
    assert kept.username and other.username  # both loaded after the factories' commits
    commit_keeping(kept)
    assert not inspect(kept).expired_attributes
    assert "username" in inspect(other).expired_attributes


def play_with_script(app, client) -> dict[str, list[list[str]]]:
    """One round as the page's script plays it; the statements of each request, by action."""
    token = csrf_token(client)
    by_action: dict[str, list[list[str]]] = {"start": [], "reveal": [], "answer": []}
    started = start_http(client, token)  # a guest
    url = ROUND_PATH.search(started.headers["Location"]).group(0)
    with statements(app) as seen:
        started = start_http(client, token, fetch=True)  # the open round again: no new round
    by_action["start"].append(list(seen))
    assert started.status_code == 200
    for shown in (1, 2):
        with statements(app) as seen:
            page = client.post(
                f"{url}/next", data={"csrf_token": token, "seen": str(shown)}, headers=FETCH
            )
        assert page.status_code == 200
        by_action["reveal"].append(list(seen))
    with statements(app) as seen:
        page = client.post(
            f"{url}/answer",
            data={"csrf_token": token, "seen": "3", "choice": "machine", "reasons": "hunch"},
            headers=FETCH,
        )
    assert page.status_code == 200 and 'class="result"' in page.get_data(as_text=True)
    by_action["answer"].append(list(seen))
    return by_action


def test_a_round_loads_the_player_and_its_round_once_per_request(app, client, db_uri):
    with app.app_context():
        factories.example(boundary=3)
        factories.example(boundary=3, passage="second")
    by_action = play_with_script(app, client)
    for action, runs in by_action.items():
        for run in runs:
            players = [s for s in run if s.lstrip().startswith("SELECT players.id")]
            round_loads = [s for s in run if "FROM rounds JOIN " in s]
            if action == "start":
                # The player by the user loader; the open round in one statement, without them.
                assert len(players) == 1 and len(round_loads) == 1, (action, run)
                assert "JOIN players" not in round_loads[0], run
            else:
                # A reveal or an answer loads the player with the round: no SELECT of its own.
                assert not players and len(round_loads) == 1, (action, run)
                assert "JOIN players" in round_loads[0], run
    # A reveal: the round with its player, text, set and place in the set, the guarded update
    # and the reveal row (on PostgreSQL the two in one statement).
    writes = 1 if db_uri.startswith("postgresql") else 2
    assert all(len(run) == 1 + writes for run in by_action["reveal"]), by_action["reveal"]
    # The set comes with the round: no page loads it on its own.
    for run in (*by_action["reveal"], *by_action["answer"]):
        assert not [s for s in run if s.lstrip().startswith("SELECT game_sets")], run


def _session_ended_elsewhere(app, player_id: int) -> None:
    """What "sign out everywhere" or a password change does to a player's other sessions."""
    with app.app_context():
        player = db.session.get(Player, player_id)
        player.session_version += 1
        db.session.commit()


def test_a_round_or_set_loaded_with_its_player_still_checks_the_session(app, client):
    """The hot routes load the player with the round or set, yet an ended session is still
    signed out there, and another player's round or set is still not found."""
    with app.app_context():
        for passage in ("one", "two", "three"):
            factories.example(boundary=3, passage=passage)
    token = csrf_token(client)
    started = start_http(client, token)
    url = ROUND_PATH.search(started.headers["Location"]).group(0)
    with app.app_context():
        round_ = db.session.scalar(select(Round))
        owner, set_id = round_.player_id, round_.set_id
    # Someone else, signed in as a guest of their own, asks for the first player's round and set.
    other = app.test_client()
    other_token = csrf_token(other)
    start_http(other, other_token)
    assert other.get(url).status_code == 404
    assert other.get(f"/sets/{set_id}").status_code == 404
    revealed = other.post(
        f"{url}/next", data={"csrf_token": other_token, "seen": "1"}, headers=FETCH
    )
    assert revealed.status_code == 404
    # The owner's session is ended elsewhere: the same cookie no longer plays the round.
    assert client.get(url).status_code == 200
    _session_ended_elsewhere(app, owner)
    for response in (
        client.get(url),
        client.post(f"{url}/next", data={"csrf_token": token, "seen": "1"}, headers=FETCH),
        client.post(
            f"{url}/answer",
            data={"csrf_token": token, "seen": "1", "choice": "human"},
            headers=FETCH,
        ),
        client.get(f"/sets/{set_id}"),
        client.post(f"/sets/{set_id}/next", data={"csrf_token": token}, headers=FETCH),
    ):
        assert response.status_code == 302 and response.headers["Location"] == "/", response
    with app.app_context():
        assert db.session.get(Round, round_.id).revealed == 1


def test_the_scripts_pages_show_the_set_as_stored(app_with):
    """Each answer's page, drawn from the objects kept across the commit, shows the set's
    figures as the database holds them, and the last one leads to the summary."""
    app = app_with(SET_SIZE=3)
    with app.app_context():
        for boundary in (2, 3, 4):
            factories.example(boundary=boundary, passage=f"p{boundary}")
    client = app.test_client()
    token = csrf_token(client)
    data = {"csrf_token": token, "category": "news"}
    page = client.post("/play", data=data, headers=FETCH)
    for number in (1, 2, 3):
        body = page.get_data(as_text=True)
        assert page.status_code == 200 and f"text {number} of 3" in body
        url = page.headers["X-Round-URL"]
        revealed = client.post(f"{url}/next", data={**data, "seen": "1"}, headers=FETCH)
        assert f"text {number} of 3" in revealed.get_data(as_text=True)
        answered = client.post(
            f"{url}/answer",
            data={**data, "seen": "2", "choice": "machine", "reasons": "hunch"},
            headers=FETCH,
        )
        body = answered.get_data(as_text=True)
        with app.app_context():
            stored = db.session.scalar(select(GameSet))
            figures = (stored.answered, stored.points, stored.finished)
        assert figures[0] == number
        assert f'<progress max="3" value="{figures[0]}"' in body
        assert f'<span class="set-score">{figures[1]} point' in body
        assert ("See your set summary" in body) == figures[2] == (number == 3)
        if number < 3:
            assert f"Next text ({number + 1} of 3)" in body
            next_path = re.search(r'action="(/sets/\d+/next)"', body).group(1)
            page = client.post(next_path, data={"csrf_token": token}, headers=FETCH)


def test_a_new_round_is_shown_without_loading_it_again(app, client):
    with app.app_context():
        factories.example(boundary=3)
    token = csrf_token(client)
    start_http(client, token)  # guest and first round
    with app.app_context():
        factories.example(boundary=3, passage="second")
        player_round = db.session.scalar(select(Round))
        player_round.guess = 2
        db.session.commit()
    with statements(app) as seen:
        started = start_http(client, token, fetch=True)
    assert started.status_code == 200 and started.headers["X-Round-URL"]
    # On PostgreSQL the round is inserted by a WITH of the start's one statement.
    after_insert = seen[next(i for i, s in enumerate(seen) if "INSERT INTO rounds" in s) :]
    assert not [
        s
        for s in after_insert
        if s.lstrip().startswith(("SELECT players", "SELECT rounds", "SELECT game_sets"))
    ]
    assert not [s for s in after_insert if s.lstrip().startswith("SELECT examples")]


def test_the_access_line_names_the_player_without_a_query(make_app, app, capsys):
    with app.app_context():
        factories.example(boundary=3)
    app = make_app()  # built inside the test so its handler writes to the captured stderr
    client = app.test_client()
    token = csrf_token(client)
    started = start_http(client, token)
    url = started.headers["Location"]
    capsys.readouterr()
    with statements(app) as seen:
        client.post(f"{url}/next", data={"csrf_token": token, "seen": "1"})  # commits, redirects
    lines = [
        json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")
    ]
    access = [line for line in lines if line.get("message") == "request"]
    assert access and access[-1]["player"] is not None and access[-1]["status"] == 302
    # The player was loaded once, with the round, and not again for the line.
    assert len([s for s in seen if "players" in s]) == 1
    assert not [s for s in seen if s.lstrip().startswith("SELECT players")]


# Budgets: the statements and round trips each hot request of the page's protocol may cost.

BUDGETS_FILE = PROJECT_ROOT / "tests" / "budgets.toml"


def budgets(dialect: str = "postgresql") -> dict[tuple[str, str, bool], tuple[int, int]]:
    """(method, path shape, sent by the script) -> (statements, round trips) on `dialect`, from
    tests/budgets.toml: the numbers are stated once, there."""
    found = {}
    for request in tomllib.loads(BUDGETS_FILE.read_text())["request"]:
        stated = request.get(dialect, request) if dialect == "sqlite" else request
        found[request["method"], request["path"], request.get("script", False)] = (
            stated["statements"],
            stated["round_trips"],
        )
    return found


def test_a_budget_may_state_sqlites_number_apart():
    stated = {dialect: budgets(dialect) for dialect in ("postgresql", "sqlite")}
    assert stated["postgresql"].keys() == stated["sqlite"].keys() and len(stated["sqlite"]) == 7
    answer = ("POST", "/play/round/<n>/answer", True)
    assert stated["postgresql"][answer] == (5, 7) and stated["sqlite"][answer] == (12, 14)
    assert stated["postgresql"]["GET", "/", False] == stated["sqlite"]["GET", "/", False] == (6, 6)


class WireTrace:
    """libpq's trace of the messages every new connection of the app's engine sends (PostgreSQL).

    `round_trips()` counts, since its last call, the messages the driver waits on: a simple query
    (BEGIN, COMMIT, ROLLBACK, a statement without parameters) or a Sync ending a statement. A Sync
    after a lone Parse is psycopg preparing a statement on its fifth use on a connection, once:
    not counted.
    """

    def __init__(self, app, path):
        self.path = path
        self.file = open(path, "w")  # noqa: SIM115 (closed in close())
        self.read_to = 0
        with app.app_context():
            db.engine.dispose()  # connections made from now on are traced
            event.listen(db.engine, "connect", self._trace)

    def _trace(self, dbapi_connection, record) -> None:
        dbapi_connection.pgconn.trace(self.file.fileno())

    def round_trips(self) -> int:
        self.file.flush()
        lines = self.path.read_text().splitlines()
        sent = [line.split("\t")[3] for line in lines[self.read_to :] if "\tF\t" in line]
        self.read_to = len(lines)
        waited, since = 0, []
        for message in sent:
            if message == "Query" or (message == "Sync" and since != ["Parse"]):
                waited += 1
            since = [] if message in ("Query", "Sync") else [*since, message]
        return waited

    def close(self) -> None:
        self.file.close()


def scripted(*choices: Choice) -> Decide:
    """A player who makes these choices, in order."""
    queue = list(choices)
    return lambda view: queue.pop(0)


def test_each_hot_request_of_the_page_protocol_keeps_to_its_budget(
    app_with, db_uri, tmp_path, monkeypatch
):
    """A set of two texts played with the page's script (the requests `bench/web_load.py`
    sends), each request's statements and round trips within its budget in tests/budgets.toml."""
    # The pick walks the texts from a random point and, when no text the player may read lies
    # after it, once more from the start: one statement more, by chance. The budgets are for the
    # first walk, so the point is fixed at the start of the range.
    monkeypatch.setattr(starts.random, "random", lambda: 0.0)
    app = app_with(SET_SIZE=2)
    with app.app_context():
        for boundary in (2, 3, 4, 5):
            factories.example(boundary=boundary, passage=f"p{boundary}")
        # Others' answers, so that the answer's page shows the spread and explanations.
        for example in db.session.scalars(select(Example)).all():
            others_answer(example, [2, 3, None], "It changes topic")
        factories.player("reader", "reader-password")
    wire = WireTrace(app, tmp_path / "libpq.trace") if db_uri.startswith("postgresql") else None
    client = app.test_client()
    token = csrf_token(client)
    login = {"csrf_token": token, "username": "reader", "password": "reader-password"}
    assert client.post("/login", data=login).status_code == 302
    player = play_sets(
        scripted(
            Choice("reveal"),
            Choice("reveal"),
            Choice("machine", ("grammar", "generic"), "It drifts."),
            *[Choice("reveal")] * 9,
            Choice("human"),
        ),
        script=True,
        sets=1,
    )
    by_request: dict[tuple[str, str, bool], list[Work]] = {}

    def counted(request, send):
        key = (request.method, request.shape()[1], request.fetch)
        if wire:
            wire.round_trips()  # from here on
        with work(app) as counted:
            response = send()
        if wire:
            # On PostgreSQL the count is the driver's: the messages it sent and waited for.
            assert wire.round_trips() == counted.round_trips, (key, counted)
        by_request.setdefault(key, []).append(counted)
        return response

    play_protocol(client, player, counted)
    if wire:
        wire.close()
    stated = budgets("postgresql" if db_uri.startswith("postgresql") else "sqlite")
    assert len(stated) == 7 and set(stated) <= set(by_request), (stated, by_request.keys())
    for key, (statements, round_trips) in stated.items():
        for counted in by_request[key]:
            assert len(counted.statements) <= statements, (key, counted.statements)
            assert counted.round_trips <= round_trips, (key, counted)


# Requests per round: what a player's browser sends, with the page's script, per round played.


def test_a_round_with_the_script_takes_its_revealed_sentences_plus_at_most_two_requests(app):
    """Two sets played with the page's script (the requests of bench/protocol.py): inside a set a
    round is its reveals, its answer and the "Next text" that started it (revealed + 1); a set's
    first round also has "Play a set" and its redirect, and its last the summary, so over the
    sets a round takes revealed + 1 + 2 / set size requests on average (+ the home page once)."""
    size = app.config["SET_SIZE"]
    with app.app_context():
        for number in range(2 * size + 2):
            factories.example(boundary=3 + number % 5, n=8, passage=f"p{number}")
    client = app.test_client()
    rng = random.Random(23)

    def decide(view):
        if view.can_reveal and (not view.can_flag or rng.random() < 0.7):
            return Choice("reveal")
        if view.can_flag and (view.can_reveal or rng.random() < 0.5):
            return Choice("machine", ("hunch",))
        return Choice("human")

    since_last, per_round = 0, []  # (requests, revealed) per round

    def count(request, send):
        nonlocal since_last
        since_last += 1
        if request.step == "answer":
            per_round.append([since_last, int(dict(request.fields)["seen"])])
            since_last = 0
        return send()

    play_protocol(client, play_sets(decide, script=True, sets=2), count)
    per_round[-1][0] += since_last  # the last set's summary
    assert len(per_round) == 2 * size
    # The home page, "Play a set" and the round's page, then the reveals and the answer.
    assert per_round[0][0] == per_round[0][1] + 3
    # The summary after the last round of the first set, "Play another set", its redirect.
    assert per_round[size][0] == per_round[size][1] + 3
    for requests, revealed in per_round[1:size] + per_round[size + 1 : -1]:
        assert requests == revealed + 1
    assert per_round[-1][0] == per_round[-1][1] + 2  # the summary
    requests = sum(r for r, _ in per_round)
    revealed = sum(s for _, s in per_round)
    assert requests == revealed + len(per_round) + 2 * 2 + 1
    assert requests / len(per_round) <= revealed / len(per_round) + 2

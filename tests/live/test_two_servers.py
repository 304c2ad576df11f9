"""Two app servers (two gunicorn processes on different ports) on one PostgreSQL and one Redis.

This is the setup of `docker-compose.yml` and docs/scaling.md, minus Docker: the servers share
nothing but the database, Redis and SECRET_KEY. A small round-robin proxy (standard library, in
this file) stands in for nginx, so consecutive requests of one player, redirects included, land
on different servers. The tests check what must not depend on which server answers: every round
is stored once, sessions, rate limits, the daily challenge and the leaderboards. Where nginx is
installed (`make test` installs it), the last tests run `deploy/nginx.conf` itself in front of
the servers (tests/nginx_server.py): round robin, and upstream connections kept alive and closed
by nginx before gunicorn would close them.
"""

from __future__ import annotations

import http.client
import itertools
import random
import re
import runpy
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from sqlalchemy import select, update

from app import PROJECT_ROOT
from app.extensions import db
from app.models import DailyChallenge, Example, GameSet, PlayerTotal, Round
from app.models import Player as PlayerRow
from tests.gunicorn_server import free_port, wait_until
from tests.live.invariants import check_database, check_seen_rounds, count_players
from tests.live.player import Player, RoundPage
from tests.nginx_server import DEPLOY_CONF, NginxProxy, nginx_binary

# A Redis database of its own (see tests/live/conftest.py for the others), flushed around each test.
REDIS_DB = 11
PLAYERS = 6
ROUNDS_EACH = 2
REASONS = ["grammar", "repetition", "irrelevant", "generic", "common_sense"]
BAD_LOGIN = {"username": "nobody-here", "password": "not-the-password"}
BOARD_ROW_RE = re.compile(
    r"<tr(?: class=\"me\")?>\s*<td>(\d+)</td><td>(?:<a [^>]*>)?([^<]+)(?:</a>)?</td>\s*"
    r"<td>(\d+)</td><td>(\d+)</td>"
)
# Headers that belong to one connection, not to the request (RFC 9110, 7.6.1).
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


@pytest.fixture(autouse=True)
def _postgresql_only(demo_db):
    if not demo_db.startswith("postgresql"):
        pytest.skip("two app servers share a database server: run with TEST_DATABASE_URL")


@pytest.fixture
def redis_db() -> int:
    return REDIS_DB  # not test_abuse's: the two need not take turns


@pytest.fixture
def two_servers(serve, redis_url):
    """`two_servers(workers, **env)`: servers A and B on one database and one Redis (flushed:
    rate limits and the board cache)."""

    def start(workers: int = 1, **env: str):
        settings = {"REDIS_URL": redis_url, "SECRET_KEY": "one-key-for-both-servers", **env}
        first = serve(workers=workers, env=settings)
        second = serve(workers=workers, env=settings)
        assert first.port != second.port
        for server in (first, second):
            assert "without REDIS_URL" not in server.log_tail(200)
        return first, second

    return start


class _ProxyHandler(BaseHTTPRequestHandler):
    """Forward each request to the next backend in turn, as a reverse proxy would."""

    protocol_version = "HTTP/1.0"

    def _forward(self) -> None:
        server: RoundRobinProxy = self.server.owner
        backend = server.next_backend()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        # As nginx's $proxy_add_x_forwarded_for: the client's address appended.
        client = self.client_address[0]
        before = self.headers.get("X-Forwarded-For")
        headers["X-Forwarded-For"] = f"{before}, {client}" if before else client
        headers["X-Forwarded-Proto"] = "http"
        parts = urlsplit(backend)
        upstream = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            reply = upstream.getresponse()
            data = reply.read()
        finally:
            upstream.close()
        self.send_response_only(reply.status, reply.reason)
        for name, value in reply.getheaders():
            if name.lower() not in HOP_BY_HOP | {"content-length"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        server.record(backend, self.command, self.path)

    do_GET = do_POST = do_HEAD = _forward

    def log_message(self, format, *args) -> None:
        pass


class RoundRobinProxy:
    """`with RoundRobinProxy([url_a, url_b]) as proxy:` serves on `proxy.url`."""

    def __init__(self, backends: list[str]) -> None:
        self._backends = itertools.cycle(backends)
        self._lock = threading.Lock()
        self.routed: list[tuple[str, str, str]] = []  # (backend, method, path)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _ProxyHandler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def next_backend(self) -> str:
        with self._lock:
            return next(self._backends)

    def record(self, backend: str, method: str, path: str) -> None:
        with self._lock:
            self.routed.append((backend, method, path))

    def __enter__(self) -> RoundRobinProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


def board(url: str, player: Player | None = None) -> list[tuple[int, str, int, int]]:
    """(rank, name, points, rounds) of each row of the all-time points board served at `url`."""
    reader = player or Player(url)
    reader.base_url = url
    page = reader.get("/leaderboard?by=points")
    assert page.status == 200, page.text[:300]
    return [(int(r), name, int(p), int(n)) for r, name, p, n in BOARD_ROW_RE.findall(page.text)]


def plan(rng: random.Random) -> dict:
    reveal_to = rng.randint(1, 10)
    return {
        "reveal_to": reveal_to,
        "choice": "human" if reveal_to == 10 and rng.random() < 0.5 else "machine",
        "reasons": rng.sample(REASONS, rng.randint(1, 2)),
        "explanation": rng.choice(["", "Feels off.", "  The tone changes.  "]),
    }


def test_rounds_through_a_proxy_to_two_servers_are_stored_once_and_boards_agree(app, two_servers):
    first, second = two_servers(workers=2, PROXY_FIX="1")
    # Both servers draw the (still empty) board now, so each has had the chance to memoise it.
    assert board(first.url) == board(second.url) == []

    with RoundRobinProxy([first.url, second.url]) as proxy:
        start_together = threading.Barrier(PLAYERS)

        def play(index: int):
            rng = random.Random(index)
            player = Player(proxy.url)
            form = {"username": f"player{index}", "password": "correct-horse", "consent": "yes"}
            assert player.post("/signup", form).first_status == 302
            start_together.wait(timeout=30)
            return [player.play_round(**plan(rng)) for _ in range(ROUNDS_EACH)]

        with ThreadPoolExecutor(PLAYERS) as pool:
            per_player = list(pool.map(play, range(PLAYERS)))
        routed = list(proxy.routed)

    # The proxy sent half of the requests to each server, and both answered their share.
    by_backend = {url: sum(b == url for b, _, _ in routed) for url in (first.url, second.url)}
    assert abs(by_backend[first.url] - by_backend[second.url]) <= 1, by_backend
    assert {s.status for s in first.served()} <= {200, 302, 303}
    assert {s.status for s in second.served()} <= {200, 302, 303}

    # Every round a client finished is stored once, as the page showed it (points included), and
    # the totals add up; each client stayed one player though its requests hopped servers.
    played = [r for rounds in per_player for r in rounds]
    assert len(played) == PLAYERS * ROUNDS_EACH
    stored = check_database(app)
    check_seen_rounds(stored, played)
    owners = [{stored[r.round_id].player_id for r in rounds} for rounds in per_player]
    assert all(len(owner) == 1 for owner in owners)
    assert count_players(app) == PLAYERS
    assert all(r.guess is not None for r in stored.values())

    # Both servers show the same board, the one the database holds (no stale memoised copy).
    with app.app_context():
        db.session.remove()
        totals = {
            row.username: (total.points, total.rounds)
            for total, row in db.session.execute(
                select(PlayerTotal, PlayerRow).join(
                    PlayerRow, PlayerRow.id == PlayerTotal.player_id
                )
            )
        }
        db.session.remove()
    shown_a, shown_b = board(first.url), board(second.url)
    assert shown_a == shown_b
    assert {name: (points, rounds) for _, name, points, rounds in shown_a} == totals
    assert [points for _, _, points, _ in shown_a] == sorted(totals[n][0] for n in totals)[::-1]
    # Ranks: 1 for the top, ties share one, otherwise the position on the board.
    for position, (rank, _, points, _) in enumerate(shown_a):
        previous = shown_a[position - 1] if position else None
        expected = previous[0] if previous and previous[2] == points else position + 1
        assert rank == expected, shown_a

    # A round answered on one server moves the board the other one shows.
    player = Player(first.url)
    player.get("/login")
    signed_in = player.post("/login", {"username": "player0", "password": "correct-horse"})
    assert signed_in.first_status == 302
    before = {name: points for _, name, points, _ in board(second.url)}
    extra = player.play_round(reveal_to=3, choice="machine")
    after = {name: points for _, name, points, _ in board(second.url)}
    assert after["player0"] == before["player0"] + extra.points
    assert board(first.url) == board(second.url)


def test_sessions_and_rate_limits_are_shared_by_both_servers(app, two_servers):
    first, second = two_servers(LOGIN_RATE_LIMIT="5 per minute")

    # Signed up on A, signed in on B: the session cookie is signed with the key both hold.
    ada = Player(first.url)
    form = {"username": "ada", "password": "correct-horse", "consent": "yes"}
    assert ada.post("/signup", form).first_status == 302
    ada.base_url = second.url
    profile = ada.get("/profile", follow=False)
    assert profile.status == 200 and "ada" in profile.text
    # A form whose token was issued by A is accepted by B.
    ada.base_url = first.url
    ada.get("/")
    ada.base_url = second.url
    page = ada.start()
    assert page.revealed == 1
    ada.base_url = first.url
    assert ada.reveal(page).revealed == 2
    # Signing out on B ends the session for A too (the cookie is the session).
    ada.base_url = second.url
    ada.post("/logout")
    ada.base_url = first.url
    assert ada.get("/profile", follow=False).status in (302, 303)

    # Failed logins, alternating between the servers: five get the normal answer, then both
    # refuse, since they count in the same Redis; the right password too, on either server.
    bot = Player(first.url)
    bot.get("/login")
    statuses = []
    for attempt in range(8):
        bot.base_url = (first.url, second.url)[attempt % 2]
        statuses.append(bot.post(f"/login?attempt={attempt}", BAD_LOGIN).status)
    assert statuses == [401] * 5 + [429] * 3
    for server in (first, second):
        refused = [s for s in server.served() if s.target.startswith("/login?attempt=")]
        assert 429 in {s.status for s in refused}, server.url
        bot.base_url = server.url
        right = bot.post("/login", {"username": "ada", "password": "correct-horse"})
        assert right.status == 429


def test_the_daily_challenge_drawn_on_both_servers_at_once_is_one(app, demo_db, two_servers):
    # Hold back a quarter of the demo texts for the daily challenge.
    with app.app_context():
        ids = db.session.scalars(select(Example.id).order_by(Example.id)).all()
        held = ids[::4]
        db.session.execute(update(Example).where(Example.id.in_(held)).values(kind="daily"))
        db.session.commit()
        db.session.remove()
    first, second = two_servers()
    players = [Player((first.url, second.url)[i % 2]) for i in range(6)]
    for player in players:
        player.get("/")  # a CSRF token; today's texts are drawn by the first /daily request

    together = threading.Barrier(len(players))

    def start(player: Player) -> RoundPage:
        together.wait(timeout=30)
        return RoundPage.parse(player.post("/daily/start", {"consent": "yes"}))

    with ThreadPoolExecutor(len(players)) as pool:
        pages = list(pool.map(start, players))

    with app.app_context():
        db.session.remove()
        challenges = db.session.scalars(select(DailyChallenge)).all()
        assert len(challenges) == 1
        texts = challenges[0].example_ids
        assert set(texts) <= set(held)
        first_texts = {
            db.session.get(Round, page.round_id).example_id for page in pages
        }  # every player, on either server, starts on the day's first text
        sets = db.session.scalars(select(GameSet).where(GameSet.kind == "daily")).all()
        db.session.remove()
    assert first_texts == {texts[0]}
    assert len(sets) == len(players)
    # What the players read: the same first sentence, whichever server drew the page.
    shown = {
        re.search(r'<li class="sentence latest"[^>]*>(.*?)</li>', p.response.text, re.S).group(1)
        for p in pages
    }
    assert len(shown) == 1 and shown != {""}, shown
    assert {urlsplit(p.response.url).port for p in pages} == {first.port, second.port}
    # Both servers show the day's page with the same texts to come.
    for server in (first, second):
        assert Player(server.url).get("/daily").status == 200
    with app.app_context():
        db.session.remove()
        assert db.session.scalars(select(DailyChallenge.example_ids)).all() == [texts]
        db.session.remove()


NO_NGINX = "nginx is not installed: `make test` installs it (scripts/ensure-nginx.sh)"


@pytest.mark.skipif(nginx_binary() is None, reason=NO_NGINX)
def test_the_shipped_nginx_config_spreads_a_players_requests_over_both_servers(
    app, two_servers, tmp_path
):
    first, second = two_servers(PROXY_FIX="1")
    with NginxProxy(tmp_path / "nginx", [first.port, second.port]) as nginx:
        player = Player(nginx.url)
        form = {"username": "grace", "password": "correct-horse", "consent": "yes"}
        assert player.post("/signup", form).first_status == 302
        played = [player.play_round(reveal_to=k, choice="machine") for k in (2, 4, 3)]
        upstreams = set(nginx.upstreams())

    stored = check_database(app)
    check_seen_rounds(stored, played)
    # nginx went round robin: both servers served this player's rounds, signed in on both.
    for server in (first, second):
        paths = [s.target for s in server.served() if s.target.startswith("/play/round/")]
        assert paths, f"{server.url} served no round request"
        assert {s.status for s in server.served()} <= {200, 302, 303}
    assert upstreams == {f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"}


def upstream_keepalive_timeout() -> float:
    """Seconds deploy/nginx.conf keeps an idle upstream connection (its upstream block's
    `keepalive_timeout`; nginx's default is 60 s)."""
    conf = DEPLOY_CONF.read_text()
    block = re.search(r"upstream roft_app \{(.*?)\}", conf, re.S).group(1)
    assert re.search(r"^\s*keepalive \d+;", block, re.M), "no keepalive pool in the upstream"
    found = re.search(r"^\s*keepalive_timeout (\d+)s;", block, re.M)
    return float(found.group(1)) if found else 60.0


@pytest.mark.skipif(nginx_binary() is None, reason=NO_NGINX)
def test_nginx_reuses_its_connections_to_gunicorn_and_closes_them_before_gunicorn_does(
    serve, tmp_path, monkeypatch
):
    # If gunicorn closed an idle connection first, a request nginx sent down it at that moment
    # would fail, and nginx does not resend a POST: the player would get a 502.
    idle = upstream_keepalive_timeout()
    monkeypatch.delenv("GUNICORN_KEEPALIVE", raising=False)
    monkeypatch.delenv("GUNICORN_WORKER_CLASS", raising=False)
    defaults = runpy.run_path(str(PROJECT_ROOT / "gunicorn.conf.py"))
    assert defaults["worker_class"] == "gthread"
    assert idle < defaults["keepalive"], (idle, defaults["keepalive"])

    # gunicorn keeps idle connections far longer here, so whatever closes them is nginx.
    server = serve(workers=1, env={"PROXY_FIX": "1", "GUNICORN_KEEPALIVE": "60"})
    with NginxProxy(tmp_path / "nginx", [server.port]) as nginx:
        client = http.client.HTTPConnection("127.0.0.1", nginx.port, timeout=10)
        open_after: list[list[int]] = []  # the server's open connections after each request
        try:
            for _ in range(8):
                client.request("GET", "/healthz")
                reply = client.getresponse()
                reply.read()
                assert reply.status == 200
                open_after.append(
                    sorted(p for ports in server.connections().values() for p in ports)
                )
        finally:
            client.close()
        # The same upstream connections (one per nginx worker that has proxied a request, at
        # most) carried all the requests, and they stay open while idle...
        assert open_after[0] and all(ports == open_after[0] for ports in open_after), open_after
        assert len(nginx.upstreams()) == 8 + 1  # NginxProxy.start's probe, then these
        kept = time.monotonic()
        time.sleep(1)
        assert sorted(p for ports in server.connections().values() for p in ports) == open_after[0]
        # ...until nginx's idle timeout, well before gunicorn's.
        wait_until(
            lambda: not any(server.connections().values()),
            idle + 5,
            f"nginx kept its idle upstream connection past {idle} s",
        )
        assert idle - 1 <= time.monotonic() - kept <= idle + 5

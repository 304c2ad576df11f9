"""Benchmark: the server's cost of a full game round, against an earlier commit in the same run.

    .venv/bin/python bench/web_load.py [--baseline-ref REF] [--database sqlite|postgresql|both]
                                       [--players 16,64] [--seconds 15] [--pairs 2] [--workers 5]
                                       [--texts 5000] [--seed-rounds 100000] [--seed-players 2000]
                                       [--think 0.5,1.5] [--profile DIR] [--modes script,form]
                                       [--configs "NAME:KEY=VALUE,...;NAME2:..."]
                                       [--current-env KEY=VALUE,...] [--proxy none|nginx|both]

Why not a load-testing library (Locust): the players here follow bench/protocol.py, the page
script's own requests, which bench/round_cpu.py plays too, and the trees alternate in A-B phases
under one load; a library would run one target per run with all of that written around it.

Trees. The current tree (the checkout this script is in, with any uncommitted change) always runs.
With --baseline-ref, a detached `git worktree` of REF (e.g. the commit before a change) runs too,
in a temporary folder removed at the end. Each tree is measured with its own code: its own
migrations, demo texts, wsgi.py and gunicorn.conf.py.

Configurations. With --configs, the sides are the current tree under several gunicorn
configurations instead (GUNICORN_* variables of gunicorn.conf.py, e.g. the worker class, workers
and threads), each on its own database, played in turns like two trees; ratios are against the
first. --current-env sets variables for the current tree only in a --baseline-ref run.

Proxy. With --proxy nginx the players connect to an nginx in front of each server instead of to
gunicorn: the tree's deploy/nginx.conf (the reverse proxy docker-compose.yml runs), made local by
tests/nginx_server.py (its one upstream the side's gunicorn, its port, logs and buffers on this
machine). --proxy both measures each tree or configuration twice, directly and behind nginx
(NAME_nginx), each on its own database. In --configs, NGINX=deploy or NGINX=PATH (another
nginx.conf, e.g. an earlier commit's) puts that configuration behind nginx. nginx's own CPU per
round is measured as gunicorn's is (column "nginx ms"; "-" when served directly); the ratios add
gunicorn's and nginx's together too, and each side behind nginx is also divided by the first one
behind nginx and by its twin served directly. Error lines in nginx's error log count as errors.

Data. Each tree gets a fresh database (a SQLite file; on PostgreSQL roft_loadbench_base and
roft_loadbench_head, dropped and recreated; BENCH_PG_PREFIX=NAME makes them NAME_base and
NAME_head), prepared by a subprocess running that tree's code: the migrations, the demo texts
repeated until there are --texts of them (each copy with its own passages; both trees get as
many texts however large their demo sets, though the number of passages follows each set's
texts per passage), the bench players, and --seed-rounds answered rounds spread over
--seed-players background players
(heavy-tailed, at most one round per player and text, points from the scoring rule), with the
statistics, leaderboard rows, passages read and annotation counts they imply, inserted in bulk.

Load. Both trees are served at once by gunicorn (tests/gunicorn_server.py) with their own
gunicorn.conf.py and the same --workers. An asynchronous client in this process (aiohttp; it
shares the machine's cores with the servers) plays complete rounds as browsers do, one player per
connection pool kept alive between requests (a server that closes every connection pays for new
ones; one that keeps them does not). At each concurrency level (--players) it runs, after an
unmeasured warm-up, --pairs A-B pairs, the order of the trees alternating from pair to pair:

- script: the page's JavaScript (app/static/game.js): each reveal, answer and "Next text" is one
  fetch POST with an url-encoded body and X-Requested-With: fetch, answered with the updated round;
  the start of a set, its summary and "Play another set" are the browser's own requests;
- form: JavaScript off; every action is an url-encoded POST, a redirect and the page, plus the
  "why" page;

the requests of bench/protocol.py, read from the pages' own forms and links as a browser reads
them, from the home page through whole sets (tests/e2e/test_bench_protocol.py checks them
request by request against Chromium's);

each phase --seconds long, players playing back to back; then a paced phase per tree, twice as long,
where players pause a random --think time after every page as a reader would.

Measured per phase: completed rounds per second; the server's CPU per completed round (user and
system time of the gunicorn master and all its workers from /proc/PID/stat, end minus start of the
phase, divided by the rounds); requests per round; p50/p99 latency per request and per round (the
wall time from a round's first request to its last); sentences shown per round (sent/rnd: with
the page's script a round takes at least that many requests plus one, the answer); errors (an
unexpected status or a failed connection; a request on a kept-alive connection the server had
just closed is retried once, as a browser does); the load client's own CPU per round (client ms:
this process's CPU time over the phase; it runs on the same cores as the servers, so a client that
works harder per round leaves them less); on PostgreSQL its CPU per round (db ms: every process of
the local cluster, the ended backends too, so anything else using it meanwhile counts as well).
Rows give the mean over the pairs (per-pair values below them); the summary gives, per database,
level and mode, current / baseline of CPU per round and of rounds per second (mean of the pairs'
ratios, each pair's ratio too), and the paced players' p50/p99 per request.

Check. For each tree, with plain SQL (so it reads either tree's schema): every round a client
finished is stored once with the points its page showed and the points the rule gives; no other
bench player's round was answered, and none is uncounted; each bench player's statistics and
all-time leaderboard row equal the sums of their rounds; the annotation counts grew by exactly the
rounds answered; the other players have as many answered rounds as were seeded. The exit status
is 1 on any error or failed check.

--profile DIR records one worker of each tree with py-spy during an extra (unmeasured) script phase
at the first level, writes DIR/<tree>.svg (flame graph) and DIR/<tree>.txt (collapsed stacks), and
prints the functions with the most samples of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench.protocol (appended: a seeded tree's code comes first)

from bench.protocol import (  # noqa: E402
    MULTIPART,
    Choice,
    Decide,
    ProtocolError,
    Reply,
    Request,
    RoundView,
    play_sets,
)

# Runs this file in a tree's code to prepare its database (see `seed_tree`).
SEED_COMMAND = "--seed-tree"
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
# BENCH_PG_PREFIX names them otherwise, so that runs side by side do not drop each other's.
_PG_PREFIX = os.environ.get("BENCH_PG_PREFIX", "roft_loadbench")
PG_DATABASES = {"baseline": f"{_PG_PREFIX}_base", "current": f"{_PG_PREFIX}_head"}
# A server configuration of --configs gets a database of its own: NAME_<config>.
PASSWORD = "bench-password-1"
BENCH_PREFIX, SEED_PREFIX = "bench", "seed"
# Seeded rounds were answered over these many days before now.
SEED_DAYS = 45
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
POINTS = re.compile(r'<span class="points-badge">(\d+)</span>')
ROUND_URL = re.compile(r"/play/round/(\d+)")
# Loose enough for a shared 2-core machine at 64 players; a stuck request is an error.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30)
MODES = ("script", "form")
_modes: list[tuple[str, ...]] = [MODES]  # --modes


def args_modes() -> tuple[str, ...]:
    """The modes this run measures (--modes)."""
    return _modes[0]


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# A request on a kept-alive connection the server closed meanwhile fails so; browsers retry it.
STALE_CONNECTION = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


# The client: players playing rounds.


@dataclass
class Tally:
    """What the client saw in one phase, and the server CPU it cost."""

    latencies: list[float] = field(default_factory=list)  # seconds per request
    round_times: list[float] = field(default_factory=list)  # seconds, first to last request
    sentences: list[int] = field(default_factory=list)  # shown per completed round
    errors: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    retries: int = 0
    elapsed: float = 0.0
    rounds: int = 0
    cpu: float = 0.0  # server CPU seconds
    proxy_cpu: float = 0.0  # the reverse proxy's CPU seconds (--proxy), not in `cpu`
    # The load client's own CPU seconds (this process): it shares the machine with the servers.
    client_cpu: float = 0.0
    # The local PostgreSQL's CPU seconds, every process of it (nan on SQLite): whatever else
    # uses the cluster meanwhile is in it too.
    database_cpu: float = math.nan

    @property
    def requests(self) -> int:
        return len(self.latencies)

    @property
    def round_rate(self) -> float:
        return self.rounds / self.elapsed if self.elapsed else 0.0

    @property
    def cpu_per_round(self) -> float:
        """Server CPU milliseconds per completed round."""
        return self.cpu * 1000 / self.rounds if self.rounds else math.nan

    @property
    def host_cpu_per_round(self) -> float:
        """gunicorn's and the proxy's CPU milliseconds per completed round."""
        return (self.cpu + self.proxy_cpu) * 1000 / self.rounds if self.rounds else math.nan

    @property
    def database_cpu_per_round(self) -> float:
        """PostgreSQL's CPU milliseconds per completed round (nan on SQLite)."""
        return self.database_cpu * 1000 / self.rounds if self.rounds else math.nan

    @property
    def client_cpu_per_round(self) -> float:
        """The load client's CPU milliseconds per completed round (not the server's)."""
        return self.client_cpu * 1000 / self.rounds if self.rounds else math.nan

    @property
    def proxy_cpu_per_round(self) -> float:
        """The reverse proxy's CPU milliseconds per completed round (0 without one)."""
        return self.proxy_cpu * 1000 / self.rounds if self.rounds else math.nan


def percentile(values: list[float], q: float) -> float:
    """The q-quantile in milliseconds (nan without values)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


@dataclass
class Finished:
    round_id: int
    player: str
    points: int


class UnexpectedResponse(Exception):
    pass


def _body(request: Request) -> aiohttp.FormData | None:
    """The request's fields, encoded as the request says: url-encoded for a form the browser
    submits itself and for the script's URLSearchParams, multipart for a FormData body."""
    if request.content_type is None:
        return None
    return aiohttp.FormData(
        list(request.fields), default_to_multipart=request.content_type == MULTIPART
    )


async def exchange(tally: Tally, session, base: str, request: Request) -> Reply:
    """Send one request of the protocol as the browser does, timed; raises UnexpectedResponse
    on another status than the one a working site answers."""
    headers = dict(request.headers)
    if request.method == "POST":
        headers["Origin"] = base  # a browser names the page's origin on every POST
    kwargs: dict = {"headers": headers, "data": _body(request)}
    started = time.perf_counter()
    retried = False
    while True:
        try:
            async with session.request(
                request.method, base + request.path, allow_redirects=False, **kwargs
            ) as response:
                reply = Reply(
                    response.status,
                    response.headers.get("Location"),
                    await response.text(),
                    response.headers.get("X-Round-URL"),
                )
            break
        except (aiohttp.ClientError, TimeoutError) as failure:
            if isinstance(failure, STALE_CONNECTION) and not retried:
                retried = True
                tally.retries += 1
                kwargs["data"] = _body(request)  # a FormData is sent only once
                continue
            tally.errors[type(failure).__name__] += 1
            raise UnexpectedResponse(type(failure).__name__) from None
    tally.latencies.append(time.perf_counter() - started)
    if reply.status != request.expect:
        shape = request.shape()
        tally.errors[f"HTTP {reply.status} on {shape[0]} {shape[1]}"] += 1
        raise UnexpectedResponse(reply.status)
    return reply


@functools.cache
def reason_codes() -> list[str]:
    from roftcore.reasons import REASONS  # the current tree's; the game's reasons

    return sorted(REASONS)


def new_session() -> aiohttp.ClientSession:
    """A browser's connections to the site: kept alive unless the server closes them."""
    return aiohttp.ClientSession(
        cookie_jar=aiohttp.CookieJar(unsafe=True),
        connector=aiohttp.TCPConnector(limit=0),
        timeout=REQUEST_TIMEOUT,
    )


@dataclass
class Player:
    session: aiohttp.ClientSession
    token: str
    username: str


async def log_in(base: str, username: str) -> Player:
    session = new_session()
    try:
        page = await (await session.get(f"{base}/login")).text()
        token = CSRF.search(page).group(1)
        response = await session.post(
            f"{base}/login",
            data={"csrf_token": token, "username": username, "password": PASSWORD},
            allow_redirects=False,
        )
        await response.read()
        if response.status != 302:
            raise RuntimeError(f"log-in of {username} failed with {response.status}")
        # Logging in gives the session a new CSRF secret: the token of the page after it.
        page = await (await session.get(f"{base}/")).text()
    except BaseException:
        await session.close()
        raise
    return Player(session, CSRF.search(page).group(1), username)


def chooser(rng: random.Random) -> Decide:
    """A player who reads on (70%) or flags the sentence with two reasons, and at the end says
    human or machine at even odds."""

    def decide(view: RoundView) -> Choice:
        if view.can_reveal and (not view.can_flag or rng.random() < 0.7):
            return Choice("reveal")
        if view.can_flag and (view.can_reveal or rng.random() < 0.5):
            return Choice(
                "machine",
                tuple(rng.sample(reason_codes(), 2)),
                "The last sentence drifts away from the topic.",
            )
        return Choice("human")

    return decide


async def play_rounds(
    base: str,
    player: Player,
    tally: Tally,
    rng: random.Random,
    think: tuple[float, float] | None,
    mode: str,
    deadline: float,
    finished: list[Finished],
) -> None:
    """Play sets as a browser does (bench/protocol.py: from the home page, with the page's
    script or plain forms) until the deadline, finishing the round in hand. A round is timed
    from the request that starts it to the page that shows its result."""
    moves = play_sets(chooser(rng), script=mode == "script")
    request = next(moves)
    started = answered = None
    while True:
        if think and request.step != "redirect":
            await asyncio.sleep(rng.uniform(*think))  # reading before the next action
        if request.step == "start" and started is None:
            started = time.perf_counter()
        reply = await exchange(tally, player.session, base, request)
        if request.step == "answer":
            answered = int(ROUND_URL.search(request.path).group(1))
            shown = int(dict(request.fields)["seen"])
        if answered is not None and reply.status == 200:
            tally.round_times.append(time.perf_counter() - started)
            tally.rounds += 1
            tally.sentences.append(shown)
            finished.append(
                Finished(answered, player.username, int(POINTS.search(reply.text).group(1)))
            )
            started = answered = None
            if time.perf_counter() >= deadline:
                return
        request = moves.send(reply)


async def game_phase(
    base: str,
    players: list[Player],
    seconds: float,
    seed: int,
    mode: str,
    think: tuple[float, float] | None = None,
    rounds_of=None,
) -> tuple[Tally, list[Finished]]:
    """Every player plays rounds until the time is up (finishing the round in hand): this
    site's rounds, or another protocol's (`rounds_of`, with `play_rounds`'s parameters)."""
    rounds_of = rounds_of or play_rounds
    tally, finished = Tally(), []
    deadline = time.perf_counter() + seconds

    async def play(player: Player, rng: random.Random) -> None:
        if think:
            # Paced players arrive spread over one pause, not all in the same millisecond.
            await asyncio.sleep(rng.uniform(0, think[1]))
        while time.perf_counter() < deadline:
            try:
                await rounds_of(base, player, tally, rng, think, mode, deadline, finished)
            except (UnexpectedResponse, ProtocolError):
                # From the home page again, which leads back to the open set and round (the
                # site keeps them), after a failed request.
                await asyncio.sleep(0.05)

    started = time.perf_counter()
    await asyncio.gather(*(play(p, random.Random(seed * 1000 + i)) for i, p in enumerate(players)))
    tally.elapsed = time.perf_counter() - started
    return tally, finished


# The trees, their databases and their servers.


@dataclass(frozen=True)
class Tree:
    name: str  # "baseline" or "current", or a server configuration's name (--configs)
    root: Path
    label: str  # the commit
    env: tuple[tuple[str, str], ...] = ()  # the configuration's environment for gunicorn
    proxy: Path | None = None  # the nginx.conf whose nginx the players connect to (--proxy)


def parse_env(assignments: str) -> dict[str, str]:
    """ "KEY=VALUE,KEY=VALUE" -> {KEY: VALUE}."""
    env = {}
    for assignment in filter(None, assignments.split(",")):
        key, equals, value = assignment.partition("=")
        if not equals or not re.fullmatch(r"[A-Z][A-Z0-9_]*", key):
            raise SystemExit(f"{assignment!r} is not KEY=value")
        env[key] = value
    return env


def parse_configs(spec: str) -> list[tuple[str, dict[str, str]]]:
    """--configs "sync5:GUNICORN_WORKERS=5;gthread3x4:GUNICORN_WORKER_CLASS=gthread,..." ->
    [(name, environment)], in order (the first is the one the others are divided by)."""
    configs = []
    for part in filter(None, (piece.strip() for piece in spec.split(";"))):
        name, _, assignments = part.partition(":")
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,20}", name) or name in ("baseline", "current"):
            raise SystemExit(f"--configs: {name!r} is not a usable name (a-z, 0-9, _)")
        configs.append((name, parse_env(assignments)))
    if len(configs) < 2 or len({name for name, _ in configs}) != len(configs):
        raise SystemExit("--configs needs two or more configurations with different names")
    return configs


@dataclass
class Side:
    """One tree on one database: its server and what its clients finished."""

    tree: Tree
    work: Path
    url: str = ""
    seeded: dict = field(default_factory=dict)
    server: object = None  # tests.gunicorn_server.GunicornServer
    proxy: object = None  # tests.nginx_server.NginxProxy in front of it, with --proxy
    finished: list[Finished] = field(default_factory=list)
    other: Tally = field(default_factory=Tally)  # warm-up and profiled phases, not in the rows

    @property
    def base(self) -> str:
        """Where the players connect: the proxy when there is one, else gunicorn."""
        return (self.proxy or self.server).url


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@contextmanager
def baseline_worktree(ref: str):
    """A detached worktree of `ref` in a temporary folder, removed on the way out."""
    folder = Path(tempfile.mkdtemp(prefix="roft-baseline-"))
    where = folder / "tree"
    try:
        try:
            git("worktree", "add", "--detach", "--quiet", str(where), ref)
        except subprocess.CalledProcessError as failure:
            raise SystemExit(f"no worktree of {ref}: {failure.stderr.strip()}") from None
        yield Tree("baseline", where, git("rev-parse", "--short", "HEAD", cwd=where))
    finally:
        if where.exists():
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(where)], cwd=ROOT, capture_output=True
            )
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


def current_tree() -> Tree:
    label = git("rev-parse", "--short", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no"):
        label += "+changes"
    return Tree("current", ROOT, label)


def database_url(kind: str, side: Side) -> str:
    """A fresh, empty database for the side."""
    if kind == "sqlite":
        side.work.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{side.work / 'bench.sqlite3'}"
    return pg_database_url(PG_DATABASES.get(side.tree.name, f"{_PG_PREFIX}_{side.tree.name}"))


def pg_database_url(name: str, fresh: bool = True) -> str:
    """The address of the local PostgreSQL database `name`, dropped and created empty first when
    `fresh` (bench/round_cpu.py's databases too; --no-seed reuses them as they are)."""
    if fresh:
        admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
    return make_url(PG_URL).set(database=name).render_as_string(hide_password=False)


def prepare_databases(kind: str, sides: list[Side], args, bench_players: int) -> None:
    """Fill each side's database with its own tree's code, the sides in parallel."""
    started = time.perf_counter()
    running = []
    for side in sides:
        side.url = database_url(kind, side)
        spec = {
            "tree": str(side.tree.root),
            "url": side.url,
            "texts": args.texts,
            "bench_players": bench_players,
            "seed_rounds": args.seed_rounds,
            "seed_players": args.seed_players,
        }
        env = {**os.environ, "DATABASE_URL": side.url, "PYTHONUNBUFFERED": "1"}
        env.pop("REDIS_URL", None)
        running.append(
            subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), SEED_COMMAND, json.dumps(spec)],
                cwd=side.tree.root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for side, process in zip(sides, running, strict=True):
            out, err = process.communicate(timeout=900)
            if process.returncode:
                raise RuntimeError(
                    f"preparing the {side.tree.name} database failed:\n{err[-3000:]}"
                )
            side.seeded = json.loads(out.strip().splitlines()[-1])
    finally:
        for process in running:
            if process.poll() is None:
                process.kill()
                process.wait()
    for side in sides:
        s = side.seeded
        print(
            f"  {kind} {side.tree.name}: {s['texts']} texts, {s['rounds']} rounds of "
            f"{s['players']} players seeded ({s['seconds']:.1f} s)"
        )
    print(f"  databases ready in {time.perf_counter() - started:.1f} s", flush=True)


def copies_of(records: list, texts: int) -> list:
    """The demo records repeated up to `texts` records, each copy with its own ids and passages."""
    out = []
    for copy in range(-(-texts // len(records))):
        for record in records:
            source = dict(record.source)
            for key in ("doc_id", "splice_doc_id"):
                if key in source:
                    source[key] = f"{source[key]}~{copy}"
            out.append(dataclasses.replace(record, id=f"{record.id}~{copy}", source=source))
    return out[:texts]


def round_counts(rounds: int, players: int, texts: int, rng: random.Random) -> list[int]:
    """Rounds per player: heavy-tailed, each at most `texts`, summing to `rounds`."""
    if rounds > players * texts:
        raise SystemExit("too many --seed-rounds: a player plays each text at most once")
    weights = [rng.paretovariate(1.5) for _ in range(players)]
    sizes = [0] * players
    for player in rng.choices(range(players), weights, k=rounds):
        sizes[player] += 1
    overflow = sum(max(0, size - texts) for size in sizes)
    sizes = [min(size, texts) for size in sizes]
    while overflow:
        player = rng.randrange(players)
        if sizes[player] < texts:
            sizes[player] += 1
            overflow -= 1
    return sizes


def seed_tree(spec: dict) -> None:
    """Prepare a fresh database with the code of tree `spec["tree"]` (this process's cwd).

    Runs in a subprocess (`web_load.py --seed-tree SPEC`); prints a JSON summary.
    """
    tree = Path(spec["tree"]).resolve()
    sys.path[0] = str(tree)  # the tree's app, not the one next to this file
    from datetime import UTC, datetime, timedelta

    from flask_migrate import upgrade
    from sqlalchemy import func, insert, select

    import app as app_package
    from app import create_app
    from app.catalog.importer import import_records, read_records
    from app.extensions import db
    from app.game.scoring import verdict
    from app.leaderboard import skill
    from app.models import (
        BoardCount,
        BoardTotal,
        CategoryTotal,
        Example,
        Player,
        PlayerTotal,
        Round,
    )

    if not Path(app_package.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"imported {app_package.__file__}, not the app of {tree}")
    started = time.perf_counter()
    rng = random.Random(14)
    flask_app = create_app({"SQLALCHEMY_DATABASE_URI": spec["url"], "LOG_REQUESTS": False})
    with flask_app.app_context():
        upgrade(directory=str(tree / "migrations"))
        demo = read_records(tree / "data" / "demo" / "examples.jsonl")
        import_records(Path("demo"), copies_of(demo, spec["texts"]))

        template = Player(username="template")
        template.set_password(PASSWORD)  # hash once; every bench player shares the password
        players = Player.__table__
        db.session.execute(
            insert(players),
            [
                {"username": f"{BENCH_PREFIX}{i:03d}", "password_hash": template.password_hash}
                | {"is_guest": False}
                for i in range(spec["bench_players"])
            ],
        )
        db.session.execute(
            insert(players),
            [
                {"username": f"{SEED_PREFIX}{i:05d}", "is_guest": False}
                for i in range(spec["seed_players"])
            ],
        )
        seeders = db.session.scalars(
            select(players.c.id).where(players.c.username.like(f"{SEED_PREFIX}%"))
        ).all()
        texts = db.session.execute(
            select(Example.id, Example.category_id, Example.boundary, Example.n_sentences).where(
                Example.kind == "normal"
            )
        ).all()

        # The rounds, with the statistics and boards `recording.record_answer` would keep.
        now = datetime.now(UTC)
        rounds: list[dict] = []
        stats: defaultdict[tuple, list[int]] = defaultdict(lambda: [0] * 6)
        boards: defaultdict[tuple, list[int]] = defaultdict(lambda: [0] * 4)
        period_keys: dict = {}  # a day's week, month and all time
        sizes = round_counts(spec["seed_rounds"], len(seeders), len(texts), rng)
        for player_id, size in zip(seeders, sizes, strict=True):
            times = sorted(
                now - timedelta(seconds=rng.uniform(60, SEED_DAYS * 86400)) for _ in range(size)
            )
            for order, ((example_id, category_id, boundary, n), answered) in enumerate(
                zip(rng.sample(texts, size), times, strict=True), start=1
            ):
                guess = boundary if rng.random() < 0.2 else rng.randint(1, n)
                outcome = verdict(guess, boundary, n)
                rounds.append(
                    {
                        "player_id": player_id,
                        "example_id": example_id,
                        "order_index": order,
                        "kind": "normal",
                        "chosen_category": "random",
                        "revealed": min(guess + 1, n),
                        "guess": guess,
                        "points": outcome.points,
                        "reasons": [] if guess == n else ["generic"],
                        "explanation": "",
                        "started_at": answered - timedelta(seconds=20),
                        "answered_at": answered,
                    }
                )
                figures = (
                    outcome.points,
                    1,
                    int(outcome.exact),
                    int(outcome.too_early),
                    outcome.distance,
                    abs(outcome.distance),
                )
                for key in ((player_id,), (player_id, category_id)):
                    stats[key] = [a + b for a, b in zip(stats[key], figures, strict=True)]
                excess = skill.excess(guess, boundary, n)
                day = answered.date()
                if day not in period_keys:
                    period_keys[day] = skill.period_keys(answered)
                for period in period_keys[day]:
                    for scope in (0, category_id):
                        board = boards[period, scope, player_id]
                        board[0] += outcome.points
                        board[1] += 1
                        board[2] += int(outcome.exact)
                        board[3] += excess
        for start in range(0, len(rounds), 10_000):
            db.session.execute(insert(Round.__table__), rounds[start : start + 10_000])

        names = ("points", "rounds", "exact", "too_early", "distance_sum", "abs_distance_sum")
        for table, keys in (
            (PlayerTotal, ("player_id",)),
            (CategoryTotal, ("player_id", "category_id")),
        ):
            rows = [
                dict(zip(keys, key, strict=True)) | dict(zip(names, values, strict=True))
                for key, values in stats.items()
                if len(key) == len(keys)
            ]
            if rows:
                db.session.execute(insert(table.__table__), rows)
        board_rows, counts = [], Counter()
        for (period, scope, player_id), (points, n, exact, excess) in boards.items():
            ranked = n >= skill.MIN_ROUNDS
            value = skill.shrunk(excess, n)
            board_rows.append(
                {"period": period, "scope": scope, "player_id": player_id, "points": points}
                | {"rounds": n, "exact": exact, "excess": excess, "skill": value}
                | {"listed": True, "ranked": ranked}
            )
            counts[period, scope, "points", points] += 1
            if ranked:
                counts[period, scope, "skill", value] += 1
        if board_rows:
            db.session.execute(insert(BoardTotal.__table__), board_rows)
            db.session.execute(
                insert(BoardCount.__table__),
                [
                    {"period": p, "scope": s, "measure": m, "value": v, "players": c}
                    for (p, s, m, v), c in counts.items()
                ],
            )
        db.session.execute(
            text(
                "INSERT INTO passage_reads (player_id, passage_id, read_at) "
                "SELECT r.player_id, ep.passage_id, MIN(r.started_at) FROM rounds r "
                "JOIN example_passages ep ON ep.example_id = r.example_id "
                "GROUP BY r.player_id, ep.passage_id"
            )
        )
        db.session.execute(
            text(
                "UPDATE examples SET annotation_count = (SELECT COUNT(*) FROM rounds r "
                "WHERE r.example_id = examples.id AND r.guess IS NOT NULL)"
            )
        )
        db.session.commit()
        if db.engine.dialect.name == "postgresql":
            # Autovacuum would analyse the tables soon after such a load; do it now.
            with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM ANALYZE"))
        annotations = db.session.scalar(select(func.sum(Example.annotation_count)))
        db.session.remove()
        db.engine.dispose()
    summary = {
        "texts": len(texts),
        "rounds": len(rounds),
        "players": len(seeders),
        "annotations": int(annotations or 0),
        "seconds": time.perf_counter() - started,
    }
    print(json.dumps(summary))


# Measuring the servers.


def cpu_ticks(server) -> dict[int, int]:
    """Clock ticks of user + system time so far, per process of the server (master, workers)."""
    return process_ticks([server.process.pid, *server.worker_pids()])


def process_ticks(pids: list[int]) -> dict[int, int]:
    """Clock ticks of user + system time so far, per process (Linux /proc)."""
    ticks = {}
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # from field 3 on: utime is 14, stime 15
        ticks[pid] = int(fields[11]) + int(fields[12])
    return ticks


def postgres_ticks() -> int:
    """Clock ticks of user + system time so far of the local PostgreSQL: its live processes, and
    the backends that have ended (the postmaster's reaped children). Linux /proc only."""
    processes = {}
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = stat_file.read_text()
        except OSError:
            continue
        if stat[stat.find("(") + 1 : stat.rfind(")")] == "postgres":
            processes[int(stat_file.parent.name)] = stat[stat.rfind(")") + 2 :].split()
    total = 0
    for fields in processes.values():
        total += int(fields[11]) + int(fields[12])  # utime, stime
        if int(fields[1]) not in processes:  # the postmaster: its children that ended
            total += int(fields[13]) + int(fields[14])  # cutime, cstime
    return total


async def measured_phase(side: Side, players: list[Player], seconds: float, **kwargs) -> Tally:
    """A game phase on the side's server, with the server CPU it took (and the load client's,
    and PostgreSQL's when the side is on it)."""
    proxy_pids = side.proxy.pids() if side.proxy else []
    on_postgres = side.url.startswith("postgresql")
    database_before = postgres_ticks() if on_postgres else 0
    before, proxy_before = cpu_ticks(side.server), process_ticks(proxy_pids)
    client_before = time.process_time()
    tally, finished = await game_phase(side.base, players, seconds, **kwargs)
    tally.client_cpu = time.process_time() - client_before
    after, proxy_after = cpu_ticks(side.server), process_ticks(proxy_pids)
    if on_postgres:
        tally.database_cpu = (postgres_ticks() - database_before) / CLOCK_TICKS
    tally.cpu = sum(ticks - before.get(pid, 0) for pid, ticks in after.items()) / CLOCK_TICKS
    tally.proxy_cpu = (
        sum(ticks - proxy_before.get(pid, 0) for pid, ticks in proxy_after.items()) / CLOCK_TICKS
    )
    side.finished += finished
    return tally


def merge(into: Tally, tally: Tally) -> None:
    into.latencies += tally.latencies
    into.round_times += tally.round_times
    into.sentences += tally.sentences
    for kind, count in tally.errors.items():
        into.errors[kind] += count
    into.retries += tally.retries
    into.rounds += tally.rounds
    into.elapsed += tally.elapsed
    into.cpu += tally.cpu
    into.proxy_cpu += tally.proxy_cpu
    into.client_cpu += tally.client_cpu
    into.database_cpu = (
        tally.database_cpu
        if math.isnan(into.database_cpu)
        else into.database_cpu + tally.database_cpu
    )


def fmt_errors(tallies: list[Tally]) -> str:
    merged: Counter[str] = Counter()
    for tally in tallies:
        merged.update(tally.errors)
    return str(sum(merged.values())) + (f" {dict(merged)}" if merged else "")


HEADER = (
    f"{'database':<11}{'players':>7}  {'tree':<16} {'mode':<7}{'rounds/s':>9}{'cpu ms/rnd':>11}"
    f"{'req/rnd':>8}{'p50 req':>10}{'p99 req':>10}{'p50 rnd':>10}{'p99 rnd':>10}{'sent/rnd':>9}"
    f"{'db ms':>7}{'client ms':>10}{'nginx ms':>9}  errors"
)


def row(
    kind: str, level: int, tree: str, mode: str, tallies: list[Tally], proxied: bool = False
) -> str:
    """One line of the table: means over the phases, latencies pooled."""
    pooled = Tally()
    for tally in tallies:
        merge(pooled, tally)
    rate = statistics.mean(t.round_rate for t in tallies)
    cpu = statistics.mean(t.cpu_per_round for t in tallies)
    per_round = pooled.requests / pooled.rounds if pooled.rounds else math.nan
    sentences = statistics.mean(pooled.sentences) if pooled.sentences else math.nan
    # Behind a proxy: its CPU ms per round (not in cpu ms/rnd, which is gunicorn's).
    proxy = f"{statistics.mean(t.proxy_cpu_per_round for t in tallies):.1f}" if proxied else "-"
    # The load client's own CPU ms per round: on one machine it takes CPU the servers could use.
    client = statistics.mean(t.client_cpu_per_round for t in tallies)
    database = statistics.mean(t.database_cpu_per_round for t in tallies)
    if mode == "paced":  # a paced round's time is mostly the reader's pauses
        round_p50 = round_p99 = f"{'-':>10}"
    else:
        round_p50 = f"{percentile(pooled.round_times, 0.5):>8.0f}ms"
        round_p99 = f"{percentile(pooled.round_times, 0.99):>8.0f}ms"
    line = (
        f"{kind:<11}{level:>7}  {tree:<16} {mode:<7}{rate:>9.1f}{cpu:>11.1f}{per_round:>8.1f}"
        f"{percentile(pooled.latencies, 0.5):>8.1f}ms{percentile(pooled.latencies, 0.99):>8.1f}ms"
        f"{round_p50}{round_p99}{sentences:>9.1f}{database:>7.1f}"
        f"{client:>10.1f}{proxy:>9}  {fmt_errors(tallies)}"
    )
    if len(tallies) > 1:
        line += (
            f"\n{'':<20}pairs: rounds/s "
            + " ".join(f"{t.round_rate:.1f}" for t in tallies)
            + "; cpu ms/rnd "
            + " ".join(f"{t.cpu_per_round:.1f}" for t in tallies)
            + (
                "; nginx cpu ms/rnd " + " ".join(f"{t.proxy_cpu_per_round:.1f}" for t in tallies)
                if proxied
                else ""
            )
        )
    return line


def ratio_line(
    kind: str,
    level: int,
    mode: str,
    base: list[Tally],
    head: list[Tally],
    label: str = "",
    proxied: bool = False,
) -> str:
    cpu = [h.cpu_per_round / b.cpu_per_round for b, h in zip(base, head, strict=True)]
    rate = [
        h.round_rate / b.round_rate if b.round_rate else math.nan
        for b, h in zip(base, head, strict=True)
    ]
    # The slowest rounds: the p99 of a round's time, phase by phase.
    tail = [
        percentile(h.round_times, 0.99) / percentile(b.round_times, 0.99)
        for b, h in zip(base, head, strict=True)
    ]
    line = (
        f"  {kind:<11}{level:>4} {mode:<7}{label + ' ' if label else ''}"
        f"cpu/round {statistics.mean(cpu):.2f}× "
        f"(pairs {' '.join(f'{r:.2f}' for r in cpu)}), rounds/s {statistics.mean(rate):.2f}× "
        f"(pairs {' '.join(f'{r:.2f}' for r in rate)}), round p99 {statistics.mean(tail):.2f}× "
        f"(pairs {' '.join(f'{r:.2f}' for r in tail)})"
    )
    if proxied:
        # gunicorn's and the proxy's CPU together: what the host spends per round. Asked for by
        # the caller, not inferred from the proxy's CPU: in a short run nginx may use less than
        # a clock tick, and its 0 is a figure too.
        total = [
            h.host_cpu_per_round / b.host_cpu_per_round for b, h in zip(base, head, strict=True)
        ]
        line += (
            f", gunicorn+nginx cpu/round {statistics.mean(total):.2f}× "
            f"(pairs {' '.join(f'{r:.2f}' for r in total)})"
        )
    return line


def listening(log_path: Path) -> str | None:
    """How gunicorn.conf.py set the server's listening sockets, and why, from its start-up log
    line (one socket per worker where net.ipv4.tcp_migrate_req is on: the figures depend on it);
    None for a tree whose configuration does not log it."""
    for line in log_path.read_text(errors="replace").splitlines():
        _, found, rest = line.partition("] Listening on ")
        if found:
            return rest.strip()
    return None


def app_time_by_endpoint(log_path: Path) -> list[str]:
    """Mean and p50 of the time inside the app per game endpoint, from its JSON access lines."""
    times: defaultdict[str, list[float]] = defaultdict(list)
    for line in log_path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
            if str(entry.get("endpoint")).startswith("game."):
                times[f"{entry['method']} {entry['endpoint']}"].append(entry["duration_ms"])
        except (ValueError, KeyError, AttributeError):
            continue
    return [
        f"    {name:<28}{len(values):>7} requests  mean {statistics.mean(values):6.2f} ms"
        f"  p50 {statistics.median(values):6.2f} ms"
        for name, values in sorted(times.items())
    ]


# Profiling one worker with py-spy.


def start_profile(side: Side, seconds: float, folder: Path) -> list[tuple[str, subprocess.Popen]]:
    """py-spy on one worker of the side: a flame graph, and collapsed stacks alongside."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    pid = str(side.server.worker_pids()[0])
    folder.mkdir(parents=True, exist_ok=True)
    common = ["record", "--pid", pid, "--duration", str(math.ceil(seconds)), "--rate", "100"]
    name = side.tree.name
    try:
        return [
            (
                "flame graph",
                subprocess.Popen(
                    [spy, *common, "--format", "flamegraph", "-o", str(folder / f"{name}.svg")],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
            ),
            (
                # A second sampler cannot pause the process the first one pauses.
                "collapsed stacks",
                subprocess.Popen(
                    [
                        *(spy, *common, "--format", "raw", "--nonblocking", "--nolineno"),
                        *("-o", str(folder / f"{name}.txt")),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
            ),
        ]
    except OSError as failure:
        print(f"  py-spy could not start ({failure}); no profile of the {name} tree")
        return []


def finish_profile(side: Side, running: list, folder: Path) -> None:
    for what, process in running:
        try:
            out, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        if process.returncode:
            print(
                f"  py-spy could not record the {what} of the {side.tree.name} tree's worker "
                f"(ptrace not permitted?): {out.strip()[-300:]}; continuing without it"
            )
    collapsed = folder / f"{side.tree.name}.txt"
    if collapsed.exists():
        print(f"  profile of one {side.tree.name} worker ({folder / side.tree.name}.svg):")
        print("\n".join(top_frames(collapsed)))


FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def top_frames(collapsed: Path, n: int = 15) -> list[str]:
    """The functions with the most samples of their own, from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    total = outside = 0
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        total += int(count)
        match = FRAME.match(frames[-1])
        own[f"{match['function']} ({match['file']})" if match else frames[-1]] += int(count)
        files = [m["file"] for f in frames if (m := FRAME.match(f))]
        if not any(f.startswith(("app/", "app\\")) for f in files):
            outside += int(count)
    if not total:
        return ["    no samples"]
    lines = [
        f"    {total} samples; {100 * outside / total:.1f}% with no frame of the app's code "
        "(gunicorn, Flask, Werkzeug and the like around it); most samples of their own:"
    ]
    lines += [f"    {100 * count / total:5.1f}%  {name}" for name, count in own.most_common(n)]
    return lines


# The database check.


def check_database(side: Side) -> list[str]:
    """What is wrong in the stored data of the bench players, or an empty list."""
    from roftcore.boundary import points as rule

    problems = []
    engine = create_engine(side.url)
    bench = f"p.username LIKE '{BENCH_PREFIX}%'"
    with engine.connect() as conn:
        stored = {
            row.id: row
            for row in conn.execute(
                text(
                    "SELECT r.id, r.player_id, r.points, r.guess, r.uncounted, r.kind, "
                    "e.boundary FROM rounds r JOIN players p ON p.id = r.player_id "
                    f"JOIN examples e ON e.id = r.example_id WHERE {bench} "
                    "AND r.guess IS NOT NULL"
                )
            )
        }
        totals = conn.execute(
            text(
                "SELECT p.id, t.points, t.rounds, b.points, b.rounds FROM players p "
                "LEFT JOIN player_totals t ON t.player_id = p.id "
                "LEFT JOIN board_totals b ON b.player_id = p.id AND b.period = 'all' "
                f"AND b.scope = 0 WHERE {bench}"
            )
        ).all()
        annotations = conn.scalar(text("SELECT COALESCE(SUM(annotation_count), 0) FROM examples"))
        others = conn.scalar(
            text(
                "SELECT COUNT(*) FROM rounds r JOIN players p ON p.id = r.player_id "
                f"WHERE r.guess IS NOT NULL AND NOT ({bench})"
            )
        )
    engine.dispose()

    ids = [done.round_id for done in side.finished]
    if len(ids) != len(set(ids)):
        problems.append("a client finished the same round twice")
    if set(ids) != set(stored):
        problems.append(f"{len(stored)} bench rounds answered, clients finished {len(set(ids))}")
    for done in side.finished:
        found = stored.get(done.round_id)
        if found is not None and not found.points == done.points == rule(
            found.guess, found.boundary
        ):
            problems.append(
                f"round {done.round_id}: page {done.points}, stored {found.points}, "
                f"rule {rule(found.guess, found.boundary)}"
            )
    uncounted = [r.id for r in stored.values() if r.uncounted is not None or r.kind != "normal"]
    if uncounted:
        problems.append(f"{len(uncounted)} bench rounds are not counted normal rounds")
    sums: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])
    for found in stored.values():
        sums[found.player_id][0] += found.points
        sums[found.player_id][1] += 1
    for player_id, stat_points, stat_rounds, board_points, board_rounds in totals:
        expected = sums.get(player_id, [0, 0])
        if [stat_points or 0, stat_rounds or 0] != expected:
            problems.append(f"player {player_id}: statistics {stat_points} points, sums {expected}")
        if [board_points or 0, board_rounds or 0] != expected:
            problems.append(
                f"player {player_id}: leaderboard {board_points} points, sums {expected}"
            )
    if annotations - side.seeded["annotations"] != len(stored):
        problems.append(
            f"annotation counts grew by {annotations - side.seeded['annotations']}, "
            f"{len(stored)} rounds answered"
        )
    if others != side.seeded["rounds"]:
        problems.append(
            f"{others} answered rounds of other players, {side.seeded['rounds']} seeded"
        )
    return problems


# The run.


async def run_levels(kind: str, sides: list[Side], args) -> tuple[bool, list[str]]:
    """Serve every side, play the phases at each level, print the rows; (no errors, ratios)."""
    from tests.gunicorn_server import GunicornServer
    from tests.nginx_server import NginxProxy

    levels = [int(n) for n in args.players.split(",")]
    think = tuple(float(x) for x in args.think.split(","))
    results: defaultdict[tuple, list[Tally]] = defaultdict(list)
    ratios = []
    env = {"LOGIN_RATE_LIMIT": "100000 per minute"}
    with ExitStack() as stack:
        for side in sides:
            own = dict(side.tree.env)
            workers = int(own.get("GUNICORN_WORKERS", args.workers))
            side.server = stack.enter_context(
                GunicornServer(
                    side.url,
                    side.work,
                    workers=workers,
                    env={**env, **own},
                    root=side.tree.root,
                )
            )
            if side.tree.proxy:
                side.proxy = stack.enter_context(
                    NginxProxy(side.work / "nginx", [side.server.port], source=side.tree.proxy)
                )
            sockets = listening(side.server.log_path)
            if sockets:
                print(f"  {side.tree.name} listens on {sockets}", flush=True)
        for index, level in enumerate(levels):
            logged_in: dict[str, list[Player]] = {}
            try:
                for side in sides:
                    logged_in[side.tree.name] = players = []
                    for i in range(level):
                        players.append(await log_in(side.base, f"{BENCH_PREFIX}{i:03d}"))
                await one_level(kind, level, index, sides, logged_in, think, results, args)
            finally:
                for players in logged_in.values():
                    await asyncio.gather(*(p.session.close() for p in players))
            ratios += report_level(kind, level, sides, results)
    errors = sum(sum(t.errors.values()) for tallies in results.values() for t in tallies)
    errors += sum(sum(side.other.errors.values()) for side in sides)
    for side in sides:
        if side.other.errors:
            outside = fmt_errors([side.other])
            print(f"  {side.tree.name}: errors outside the measured phases: {outside}")
    retries = sum(t.retries for tallies in results.values() for t in tallies)
    if retries:
        print(f"  requests retried on a connection the server had closed: {retries}")
    for side in sides:
        if side.proxy:
            logged = side.proxy.error_log.read_text(errors="replace").splitlines()
            failed = [line for line in logged if "[error]" in line or "[crit]" in line]
            print(f"  nginx of {side.tree.name}: {len(failed)} error lines in its log")
            for line in failed[:5]:
                print(f"    {line[:300]}")
            errors += len(failed)
    for side in sides:
        print(f"  time inside the app ({kind}, {side.tree.name}, all phases, from its access log):")
        print("\n".join(app_time_by_endpoint(side.server.log_path)) or "    (no access lines)")
    return errors == 0, ratios


def report_level(kind: str, level: int, sides: list[Side], results: dict) -> list[str]:
    """Print the level's rows; its current / baseline lines, for the summary."""
    print(HEADER)
    for side in sides:
        for mode in (*args_modes(), "paced"):
            tallies = results[level, side.tree.name, mode]
            print(row(kind, level, side.tree.name, mode, tallies, proxied=bool(side.proxy)))
    if len(sides) < 2:
        return []
    lines = [
        ratio_line(
            kind,
            level,
            mode,
            results[level, base.tree.name, mode],
            results[level, head.tree.name, mode],
            f"{head.tree.name} / {base.tree.name}"
            if len(sides) > 2 or base.tree.name != "baseline"
            else "",
            proxied=bool(base.proxy or head.proxy),
        )
        for base, head in comparisons(sides)
        for mode in args_modes()
    ]
    paced = []
    for side in sides:
        latencies = [ms for t in results[level, side.tree.name, "paced"] for ms in t.latencies]
        p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
        paced.append(f"{side.tree.name} {p50:.1f}/{p99:.1f} ms")
    lines.append(f"  {kind:<11}{level:>4} paced   p50/p99 per request: {', '.join(paced)}")
    return lines


def comparisons(sides: list[Side]) -> list[tuple[Side, Side]]:
    """(base, head) pairs of sides to divide: each side by the first (the baseline tree, or the
    first of --configs); with sides behind a proxy and sides without, each proxied side by the
    first proxied one too, and by its twin served directly (the same tree and configuration)."""
    pairs = [(sides[0], side) for side in sides[1:]]
    proxied = [side for side in sides if side.proxy]
    if proxied and proxied[0] is not sides[0]:
        pairs += [(proxied[0], side) for side in proxied[1:]]
    for side in proxied:
        twin = next(
            (
                other
                for other in sides
                if not other.proxy
                and (other.tree.root, other.tree.env) == (side.tree.root, side.tree.env)
            ),
            None,
        )
        if twin is not None and (twin, side) not in pairs:
            pairs.append((twin, side))
    return pairs


async def one_level(kind, level, index, sides, logged_in, think, results, args) -> None:
    """Warm-up, the A-B pairs, the profiled phase and the paced phases at one level."""
    if index == 0 and args.warmup > 0:
        for side in sides:
            for mode in args_modes():
                tally = await measured_phase(
                    side, logged_in[side.tree.name], args.warmup, seed=9_000, mode=mode
                )
                merge(side.other, tally)
    for pair in range(args.pairs):
        order = sides if pair % 2 == 0 else sides[::-1]
        for offset, mode in enumerate(args_modes()):
            for side in order:
                results[level, side.tree.name, mode].append(
                    await measured_phase(
                        side,
                        logged_in[side.tree.name],
                        args.seconds,
                        seed=level * 100 + pair * 10 + offset,
                        mode=mode,
                    )
                )
    if index == 0 and args.profile:
        for side in sides:
            running = start_profile(side, args.seconds, args.profile)
            tally = await measured_phase(
                side, logged_in[side.tree.name], args.seconds, seed=8_000, mode="script"
            )
            merge(side.other, tally)
            print(
                f"  profiled script phase, {side.tree.name}: {tally.round_rate:.1f} rounds/s, "
                f"{tally.cpu_per_round:.1f} cpu ms/rnd (not in the rows)"
            )
            finish_profile(side, running, args.profile)
    for side in sides:
        results[level, side.tree.name, "paced"].append(
            await measured_phase(
                side,
                logged_in[side.tree.name],
                args.seconds * 2,
                seed=level * 100 + 7,
                mode="script",
                think=think,
            )
        )


def run_database(kind: str, trees: list[Tree], args) -> tuple[bool, list[str]]:
    work = Path(tempfile.mkdtemp(prefix=f"roft-load-{kind}-"))
    sides = [Side(tree, work / tree.name) for tree in trees]
    levels = [int(n) for n in args.players.split(",")]
    ok = False
    try:
        prepare_databases(kind, sides, args, max(levels))
        ok, ratios = asyncio.run(run_levels(kind, sides, args))
        for side in sides:
            problems = check_database(side)
            ok &= not problems
            verdict = "OK" if not problems else "FAILED: " + "; ".join(problems[:5])
            rounds = len(side.finished)
            print(f"  database check ({kind}, {side.tree.name}): {rounds} rounds, {verdict}")
    finally:
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"  gunicorn logs and SQLite files kept in {work}")
    return ok, ratios


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        # The docstring without its usage line (argparse writes its own).
        description="\n\n".join(__doc__.split("\n\n", 2)[::2]),
        formatter_class=HelpFormatter,
        epilog="Method and latest results: docs/performance.md.",
    )
    add = parser.add_argument
    add("--baseline-ref", metavar="REF", help="also run a git worktree of this commit, A-B")
    add(
        "--database",
        choices=["sqlite", "postgresql", "both"],
        default="both",
        help="PostgreSQL: 127.0.0.1:5432",
    )
    add("--players", default="16,64", help="concurrency levels, comma-separated")
    add("--seconds", type=float, default=15.0, help="length of each phase (paced: 2×)")
    add("--pairs", type=int, default=2, help="A-B pairs per level and mode")
    add(
        "--warmup",
        type=float,
        default=2.0,
        help="unmeasured seconds per tree and mode first (0: none)",
    )
    add("--think", default="0.5,1.5", help="paced players' pause after each page, seconds")
    add("--workers", type=int, default=5, help="gunicorn workers of each tree")
    add("--texts", type=int, default=5000, help="texts in each database: the demo set repeated")
    add("--seed-rounds", type=int, default=100_000, help="answered rounds stored first")
    add("--seed-players", type=int, default=2000, help="players those rounds are spread over")
    add("--profile", type=Path, metavar="DIR", help="py-spy one worker per tree into DIR")
    add(
        "--configs",
        metavar="SPEC",
        help="instead of two trees, the current tree under several server configurations, "
        'A-B-C...: "NAME:KEY=VALUE,KEY=VALUE;NAME2:..." (gunicorn.conf.py\'s GUNICORN_* '
        "variables); ratios against the first",
    )
    add("--modes", default=",".join(MODES), help="the modes measured: script, form or both")
    add(
        "--proxy",
        choices=["none", "nginx", "both"],
        default="none",
        help="nginx: the players connect to a local nginx running the tree's deploy/nginx.conf "
        "(made local as tests/nginx_server.py does) in front of each server; both: each tree or "
        "configuration served directly and behind nginx (NAME_nginx). In --configs, NGINX=deploy "
        "or NGINX=PATH (another nginx.conf) puts one configuration behind nginx",
    )
    add(
        "--current-env",
        metavar="KEY=VALUE,...",
        default="",
        help="environment for the current tree's server only, e.g. GUNICORN_WORKERS=2 to "
        "serve each tree with the worker count of its own gunicorn.conf.py",
    )
    add("--keep", action="store_true", help="keep the SQLite files and gunicorn logs")
    args = parser.parse_args(argv)
    modes = tuple(m for m in args.modes.split(",") if m)
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}")
    _modes[0] = modes
    if args.configs and args.baseline_ref:
        parser.error("--configs compares configurations of the current tree: no --baseline-ref")

    sys.path.insert(0, str(ROOT))  # tests.gunicorn_server, roftcore
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        return 1 if run(args) else 0
    except KeyboardInterrupt:
        print("interrupted (servers stopped, worktree removed)", file=sys.stderr)
        return 130


def with_proxy(trees: list[Tree], proxy: str) -> list[Tree]:
    """--proxy: every tree behind nginx with its own deploy/nginx.conf, or each tree served
    directly and again behind nginx (the direct ones first)."""
    if proxy == "none":
        return trees

    def behind(tree: Tree) -> Tree:
        if tree.proxy:
            return tree
        name = tree.name if proxy == "nginx" else f"{tree.name}_nginx"
        return dataclasses.replace(tree, name=name, proxy=tree.root / "deploy" / "nginx.conf")

    if proxy == "nginx":
        return [behind(tree) for tree in trees]
    return trees + [behind(tree) for tree in trees if not tree.proxy]


def run(args) -> bool:
    """Every database for every tree; whether anything failed."""
    kinds = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    with ExitStack() as stack:
        trees = []
        if args.baseline_ref:
            trees.append(stack.enter_context(baseline_worktree(args.baseline_ref)))
        if args.configs:
            tree = current_tree()
            for name, env in parse_configs(args.configs):
                proxy = env.pop("NGINX", None)
                if proxy is not None:
                    proxy = tree.root / "deploy" / "nginx.conf" if proxy == "deploy" else proxy
                    proxy = Path(proxy).resolve()
                    if not proxy.is_file():
                        raise SystemExit(f"--configs {name}: no nginx.conf at {proxy}")
                trees.append(Tree(name, tree.root, tree.label, tuple(sorted(env.items())), proxy))
        else:
            tree = current_tree()
            own = parse_env(args.current_env)
            trees.append(Tree(tree.name, tree.root, tree.label, tuple(sorted(own.items()))))
            if own:
                print(f"  current: {' '.join(f'{k}={v}' for k, v in sorted(own.items()))}")
        trees = with_proxy(trees, args.proxy)
        if args.configs or args.proxy != "none":
            for side in trees:
                behind = f" behind nginx ({side.proxy})" if side.proxy else " direct"
                print(f"  {side.name}: {' '.join(f'{k}={v}' for k, v in side.env)}{behind}")
        print(
            "trees: "
            + ", ".join(f"{tree.name} = {tree.label} ({tree.root})" for tree in trees)
            + (f"\n{args.workers} gunicorn workers per tree" if not args.configs else "")
            + f"; phases of {args.seconds:g} s, "
            f"{args.pairs} pair(s) per level and mode",
            flush=True,
        )
        failed, ratios = False, []
        for kind in kinds:
            ok, lines = run_database(kind, trees, args)
            failed |= not ok
            ratios += lines
        if ratios:
            names = [tree.name for tree in trees]
            versus = "current / baseline" if names == ["baseline", "current"] else f"/ {names[0]}"
            print(f"{versus} (mean of the pairs' ratios):")
            print("\n".join(ratios))
    return failed


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == SEED_COMMAND:
        seed_tree(json.loads(sys.argv[2]))
    else:
        sys.exit(main())

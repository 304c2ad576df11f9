"""Benchmark: this site beside RoFT's own Django site, on PostgreSQL, in one run.

    .venv/bin/python bench/roft_side_by_side.py --roft-dir DIR [--roft-python PYTHON]
                                                [--players 16,64] [--seconds 12] [--pairs 2]
                                                [--warmup 3] [--roft-workers 5] [--texts 5000]
                                                [--seed-rounds 100000] [--seed-players 2000]
                                                [--roft-label TEXT] [--keep]

RoFT. DIR is a checkout of RoFT's public repository (github.com/kirubarajan/roft) that you
provide; this script never changes it. Its Django project (`annotation/`: `trick/settings.py`,
`core/`) is served by gunicorn with --roft-workers sync workers under PYTHON, a virtual
environment of its own holding Django, psycopg2, markdown2 and gunicorn (see docs/performance.md,
"Side by side with RoFT's site"; never this project's environment). The settings are RoFT's own
with two overrides, written by this script into its temporary folder, not into DIR: DEBUG off (as
in production) and DATABASES pointing at a PostgreSQL database of its own. Its tables come from
its own migrations (`python -m django migrate`).

This site. The checkout this script is in, served by tests/gunicorn_server.py with its own
gunicorn.conf.py defaults (worker class, workers, threads), prepared by bench/web_load.py's
seeding: --texts texts (the demo set repeated), the bench players, and --seed-rounds answered
rounds of --seed-players players.

The same data on both. After this site's database is seeded, the same texts (each text's human
sentences become RoFT's prompt, its machine sentences the generation: RoFT's boundary is ours
minus one), the same players (RoFT's users with profiles; the bench players share one password)
and the same prior rounds (RoFT's annotations, guess minus one) are copied into RoFT's tables in
bulk, with RoFT's eight reasons as its feedback options.

Load. The client of bench/web_load.py (aiohttp, one connection pool per player, kept alive as
a browser keeps it; it shares the machine's cores with both servers) plays whole rounds, each
player from the home page at the start of every phase:

- this site: bench/protocol.py's script mode, the requests the page's JavaScript makes;
- RoFT: what its pages make a browser do for "Start Game (Random Category)": `GET /annotate`
  (a permanent redirect to `/annotate/`, which the browser then remembers), `GET /annotate/`
  (the whole text, its boundary and the sentences in one page; reading on happens in the
  page), and the page's jQuery `POST /save/` (url-encoded, X-CSRFToken and X-Requested-With
  headers) with the fields RoFT's `save` view reads; "Continue" loads `/annotate/` again.
  Points are computed by the client, as RoFT's page does.

Both play the same way: read on at 70% per sentence, otherwise flag the sentence with two reasons;
at the last sentence, human or machine at even odds. At each level (--players) an unmeasured
warm-up, then --pairs A-B pairs of --seconds phases, the order alternating from pair to pair.

Measured per phase (as bench/web_load.py does): completed rounds per second; round p50/p99 (the
first request of a round to the reply that ends it); requests per round; server CPU per round
(gunicorn master and workers from /proc; PostgreSQL's own CPU is counted for neither); errors.
Ratios are this site / RoFT, per pair and their mean.

Check. This site: bench/web_load.py's database check. RoFT: every round a client finished is
stored once (one annotation per player and text), with the guess and points the client sent,
its timestamps and reasons; no other bench annotation exists; the prior annotations are
unchanged. The exit status is 1 on any error or failed check.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# Databases of their own, so as not to drop those of a bench/web_load.py run beside this one.
os.environ.setdefault("BENCH_PG_PREFIX", "roft_sidebyside")

from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from bench import web_load  # noqa: E402
from bench.protocol import ProtocolError, Request, path_of  # noqa: E402
from bench.web_load import (  # noqa: E402
    BENCH_PREFIX,
    PASSWORD,
    PG_URL,
    SEED_PREFIX,
    Player,
    Side,
    Tally,
    Tree,
    exchange,
    measured_phase,
    merge,
    new_session,
    percentile,
)
from roftcore.reasons import REASON_NAMES  # noqa: E402

URLENCODED = "application/x-www-form-urlencoded"
# RoFT's separator of sentences inside a prompt's or a generation's body (core/models.py).
SEP = "_SEP_"
# RoFT's page: the values its script is given (annotate.html).
PAGE_VALUES = {
    "sentences": re.compile(r"const all_sentences = (.*?);\s*$", re.M),
    "boundary": re.compile(r"const boundary = (-?\d+);"),
    "max_sentences": re.compile(r"const max_sentences = (\d+);"),
    "text_id": re.compile(r'const text_id = "(\d+)";'),
    "attention_check": re.compile(r"const attention_check = (\d+);"),
    "name": re.compile(r'const name = "([^"]*)";'),
}
LOGIN_TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
# Reasons a RoFT player can tick; its form groups them so.
FLUENCY = ("grammar", "repetition")
MAX_POINTS = 5


# RoFT's pages and its round, as a browser plays them (pure).


@dataclass(frozen=True)
class RoftPage:
    """What RoFT's annotate page gives its script."""

    text_id: int
    sentences: list[str]
    boundary: int  # index of the first machine sentence among `sentences`
    max_sentences: int
    attention_check: int
    name: str


def read_annotate_page(html: str) -> RoftPage:
    """The values of RoFT's annotate page; ProtocolError when it is not one."""
    found = {}
    for key, pattern in PAGE_VALUES.items():
        match = pattern.search(html)
        if match is None:
            raise ProtocolError(f"RoFT's annotate page has no {key}")
        found[key] = match.group(1)
    return RoftPage(
        text_id=int(found["text_id"]),
        sentences=json.loads(found["sentences"]),
        boundary=int(found["boundary"]),
        max_sentences=int(found["max_sentences"]),
        attention_check=int(found["attention_check"]),
        name=found["name"],
    )


def roft_points(index: int, boundary: int) -> int:
    """The points RoFT's page gives for flagging sentence `index` (max_sentences: all human)."""
    if index == boundary:
        return MAX_POINTS
    if index > boundary:
        return max(MAX_POINTS - abs(boundary - index), 0)
    return 0


@dataclass(frozen=True)
class RoftGuess:
    index: int  # the flagged sentence; max_sentences for "the entire thing was human-written"
    shown: int  # sentences on the screen when the player decided
    reasons: tuple[str, ...]


def decide(page: RoftPage, rng: random.Random) -> RoftGuess:
    """The bench's player (as bench/web_load.py's `chooser`): reads on at 70%, otherwise flags
    the sentence with two reasons; at the last sentence, human or machine at even odds."""
    shown = 1
    while True:
        can_reveal = shown < page.max_sentences
        if can_reveal and rng.random() < 0.7:
            shown += 1
            continue
        if can_reveal or rng.random() < 0.5:
            return RoftGuess(shown - 1, shown, tuple(rng.sample(REASON_NAMES, 2)))
        return RoftGuess(page.max_sentences, shown, ())


def save_fields(
    page: RoftPage, guess: RoftGuess, started_ms: int, now_ms: int
) -> tuple[tuple[str, str], ...]:
    """The body of the page's `POST /save/`: the fields RoFT's `save` view reads, booleans
    as jQuery encodes them, a timestamp for the start, each sentence read on, and the answer."""
    steps = [started_ms + (now_ms - started_ms) * i // guess.shown for i in range(guess.shown)]
    return (
        ("text", str(page.text_id)),
        ("name", page.name),
        ("playlist_id", "-1"),  # "Start Game (Random Category)"
        ("boundary", str(guess.index)),
        ("points", str(roft_points(guess.index, page.boundary))),
        ("attention_check", str(page.attention_check)),
        ("timestamps", ",".join(str(ms) for ms in [*steps, now_ms])),
        *((name, "true" if name in guess.reasons else "false") for name in REASON_NAMES),
        ("other_reason", ""),
    )


@dataclass(frozen=True)
class RoftRequest(Request):
    """A request of RoFT's page, with the headers its jQuery adds."""

    extra: tuple[tuple[str, str], ...] = ()

    @property
    def headers(self) -> dict[str, str]:
        return dict(self.extra)


@dataclass
class RoftFinished:
    username: str
    text_id: int
    guess: int
    points: int
    timestamps: int
    reasons: int


def ratio(ours: float, roft: float) -> float:
    """ours / RoFT, nan where RoFT's figure is 0 or missing."""
    return ours / roft if roft and not math.isnan(roft) else math.nan


# Playing RoFT.


async def roft_rounds(
    base: str,
    player: Player,
    tally: Tally,
    rng: random.Random,
    think,
    mode: str,
    deadline: float,
    finished: list,
) -> None:
    """Play RoFT's rounds as a browser does, from its home page, until the deadline (finishing
    the round in hand); the signature of bench/web_load.py's `play_rounds`."""
    session = player.session
    await exchange(tally, session, base, Request("GET", "/"))
    path = "/annotate"  # the home page's "Start Game (Random Category)"
    while True:
        started = time.perf_counter()
        if path == "/annotate":  # the browser keeps the permanent redirect after the first
            reply = await exchange(tally, session, base, Request("GET", path, expect=301))
            path = path_of(reply.location) if reply.location else "/annotate/"
        reply = await exchange(tally, session, base, Request("GET", path))
        try:
            page = read_annotate_page(reply.text)
        except ProtocolError:  # counted: a checkout whose page differs must not pass quietly
            tally.errors["RoFT's annotate page without its round's values"] += 1
            raise
        guess = decide(page, rng)
        started_ms = int(time.time() * 1000)
        fields = save_fields(page, guess, started_ms - 2000 * guess.shown, started_ms)
        save = RoftRequest(
            "POST",
            "/save/",
            fields,
            URLENCODED,
            extra=(("X-CSRFToken", player.token), ("X-Requested-With", "XMLHttpRequest")),
        )
        reply = await exchange(tally, session, base, save)
        if json.loads(reply.text).get("status") != 200:
            tally.errors["RoFT's save did not answer status 200"] += 1
            raise ProtocolError(f"RoFT's save answered {reply.text[:100]}")
        tally.round_times.append(time.perf_counter() - started)
        tally.rounds += 1
        tally.sentences.append(guess.shown + 1)  # with the prompt, as this site counts
        finished.append(
            RoftFinished(
                player.username,
                page.text_id,
                guess.index,
                roft_points(guess.index, page.boundary),
                guess.shown + 1,
                len(guess.reasons),
            )
        )
        if time.perf_counter() >= deadline:
            return


async def roft_log_in(base: str, username: str) -> Player:
    """RoFT's log-in form (join page); the player's CSRF cookie is what its pages' jQuery sends."""
    session = new_session()
    try:
        page = await (await session.get(f"{base}/join/")).text()
        token = LOGIN_TOKEN.search(page).group(1)
        response = await session.post(
            f"{base}/login/",
            data={"csrfmiddlewaretoken": token, "username": username, "password": PASSWORD},
            allow_redirects=False,
        )
        await response.read()
        if response.status != 302 or response.headers.get("Location") != "/":
            raise RuntimeError(f"RoFT log-in of {username} failed with {response.status}")
        cookie = next(c for c in session.cookie_jar if c.key == "csrftoken")
    except BaseException:
        await session.close()
        raise
    return Player(session, cookie.value, username)


# RoFT's server and database.


def django_project(roft_dir: Path) -> Path:
    """The folder of RoFT's Django project (trick/settings.py and core/) inside the checkout."""
    for folder in (roft_dir / "annotation", roft_dir):
        if (folder / "trick" / "settings.py").is_file() and (folder / "core").is_dir():
            return folder
    raise SystemExit(f"{roft_dir} is not a checkout of RoFT: no annotation/trick/settings.py")


def roft_label(roft_dir: Path) -> str:
    try:
        return web_load.git("rev-parse", "--short", "HEAD", cwd=roft_dir)
    except (subprocess.CalledProcessError, OSError):
        return "not a git checkout"


class RoftSite:
    """RoFT's Django project with the bench's settings: its environment, migrations and server."""

    def __init__(self, roft_dir: Path, python: str, work: Path, database: str, workers: int):
        self.project = django_project(roft_dir)
        self.python = python
        self.work = work
        self.database = database
        self.workers = workers
        self.port = web_load_free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = work / "gunicorn.log"
        self.process: subprocess.Popen | None = None
        settings = work / "settings"
        settings.mkdir(parents=True, exist_ok=True)
        pg = make_url(PG_URL)
        # RoFT's own settings, then the bench's two overrides; nothing is written into its tree.
        (settings / "roft_bench_settings.py").write_text(
            "from trick.settings import *  # noqa: F401,F403 (RoFT's own settings)\n\n"
            "DEBUG = False\n"
            "DATABASES = {'default': {\n"
            "    'ENGINE': 'django.db.backends.postgresql',\n"
            f"    'NAME': {database!r}, 'USER': {pg.username or 'postgres'!r},\n"
            f"    'PASSWORD': {pg.password or ''!r}, 'HOST': {pg.host or '127.0.0.1'!r},\n"
            f"    'PORT': {str(pg.port or 5432)!r},\n"
            "}}\n"
        )
        (settings / "roft_bench_wsgi.py").write_text(
            "from django.core.wsgi import get_wsgi_application\n\n"
            "application = get_wsgi_application()\n"
        )
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "roft_bench_settings",
            "PYTHONPATH": os.pathsep.join([str(settings), str(self.project)]),
            "DEBUG": "False",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",  # leave the checkout as it was
        }
        for key in ("VIRTUAL_ENV", "PYTHONHOME"):
            self.env.pop(key, None)

    def run(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run(
            [self.python, *args],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode:
            raise RuntimeError(f"RoFT: {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def versions(self) -> str:
        return self.run(
            "-c",
            "import sys, django, psycopg2; "
            "print(f'Python {sys.version.split()[0]}, Django {django.get_version()}, "
            "psycopg2 {psycopg2.__version__.split()[0]}')",
        ).strip()

    def migrate(self) -> None:
        self.run("-m", "django", "migrate", "--noinput")

    def password_hash(self) -> str:
        """The bench players' password as RoFT's Django stores it."""
        return (
            self.run(
                "-c",
                "import django; django.setup(); "
                "from django.contrib.auth.hashers import make_password; "
                f"print(make_password({PASSWORD!r}))",
            )
            .strip()
            .splitlines()[-1]
        )

    # The interface bench/web_load.py's measuring reads: process, worker_pids, url.

    def __enter__(self) -> RoftSite:
        log = open(self.log_path, "ab")
        self._log = log
        self.process = subprocess.Popen(
            [
                *(self.python, "-m", "gunicorn", "--workers", str(self.workers)),
                *("--worker-class", "sync", "--bind", f"127.0.0.1:{self.port}"),
                *("--chdir", str(self.project), "--no-control-socket"),
                "roft_bench_wsgi:application",
            ],
            cwd=self.work,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"RoFT's gunicorn exited:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/join/", timeout=2) as response:
                    if response.status == 200 and len(self.worker_pids()) == self.workers:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"RoFT's gunicorn did not become ready:\n{self.log_tail()}")

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

    def worker_pids(self) -> list[int]:
        from tests.gunicorn_server import children_of

        return children_of(self.process.pid) if self.process else []

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


def web_load_free_port() -> int:
    from tests.gunicorn_server import free_port

    return free_port()


def fresh_database(name: str) -> str:
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(PG_URL).set(database=name).render_as_string(hide_password=False)


def drop_database(name: str) -> None:
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def copy_into_roft(ours_url: str, roft_url: str, password_hash: str) -> dict:
    """This site's seeded texts, players and answered rounds, into RoFT's tables, in bulk."""
    import psycopg

    started = time.perf_counter()
    source = create_engine(ours_url)
    with source.connect() as conn:
        texts = conn.execute(
            text(
                "SELECT e.id, e.sentences, e.boundary, c.slug, s.name, e.decoding_p "
                "FROM examples e JOIN categories c ON c.id = e.category_id "
                "JOIN systems s ON s.id = e.system_id WHERE e.kind = 'normal' ORDER BY e.id"
            )
        ).all()
        players = conn.execute(
            text(
                "SELECT id, username FROM players WHERE username LIKE :bench "
                "OR username LIKE :seed ORDER BY id"
            ),
            {"bench": f"{BENCH_PREFIX}%", "seed": f"{SEED_PREFIX}%"},
        ).all()
        rounds = conn.execute(
            text(
                "SELECT r.player_id, r.example_id, r.guess, r.points, r.answered_at "
                "FROM rounds r JOIN players p ON p.id = r.player_id "
                "JOIN examples e ON e.id = r.example_id "
                "WHERE r.guess IS NOT NULL AND e.kind = 'normal' AND p.username LIKE :seed"
            ),
            {"seed": f"{SEED_PREFIX}%"},
        ).all()
    source.dispose()

    conninfo = make_url(roft_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo) as conn, conn.cursor() as cur:
        datasets = {slug: i for i, slug in enumerate(sorted({t.slug for t in texts}), start=1)}
        cur.executemany(
            "INSERT INTO core_dataset (id, name, split) VALUES (%s, %s, 'bench')",
            [(i, slug) for slug, i in datasets.items()],
        )
        cur.executemany(
            "INSERT INTO core_system (name, description) VALUES (%s, '')",
            [(name,) for name in sorted({t.name for t in texts})],
        )
        cur.execute("INSERT INTO core_decodingstrategy (id, name, value) VALUES (1, 'top-p', NULL)")
        with cur.copy(
            "COPY core_prompt (id, body, num_sentences, dataset_id, prompt_index) FROM STDIN"
        ) as copy:
            for t in texts:
                copy.write_row(
                    (t.id, SEP.join(t.sentences[: t.boundary]), t.boundary, datasets[t.slug], t.id)
                )
        with cur.copy(
            "COPY core_generation (id, system_id, prompt_id, decoding_strategy_id, body) FROM STDIN"
        ) as copy:
            for t in texts:
                copy.write_row((t.id, t.name, t.id, 1, SEP.join(t.sentences[t.boundary :])))
        with cur.copy(
            "COPY auth_user (id, password, is_superuser, username, first_name, last_name, "
            "email, is_staff, is_active, date_joined) FROM STDIN"
        ) as copy:
            for p in players:
                secret = password_hash if p.username.startswith(BENCH_PREFIX) else "!"
                copy.write_row((p.id, secret, False, p.username, "", "", "", False, True, "now"))
        cur.execute(
            "INSERT INTO core_profile (user_id, is_turker, is_temporary, source) "
            "SELECT id, false, false, 'bench' FROM auth_user"
        )
        with cur.copy(
            "COPY core_annotation (date, annotator_id, generation_id, playlist, boundary, "
            "points, attention_check) FROM STDIN"
        ) as copy:
            for r in rounds:
                copy.write_row(
                    (r.answered_at, r.player_id, r.example_id, "", r.guess - 1, r.points, False)
                )
        cur.executemany(
            "INSERT INTO core_feedbackoption (shortname, description, category, is_default) "
            "VALUES (%s, %s, %s, true)",
            [(name, name, "fluency" if name in FLUENCY else "substance") for name in REASON_NAMES],
        )
        for table in (
            "core_dataset",
            "core_decodingstrategy",
            "core_prompt",
            "core_generation",
            "auth_user",
        ):
            cur.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT MAX(id) FROM {table}))"
            )
        conn.commit()
        conn.autocommit = True
        cur.execute("VACUUM ANALYZE")
    return {
        "texts": len(texts),
        "players": len(players),
        "annotations": len(rounds),
        "seconds": time.perf_counter() - started,
    }


def check_roft(url: str, finished: list[RoftFinished], prior: int) -> list[str]:
    """What is wrong in RoFT's stored annotations of the bench players, or an empty list."""
    problems = []
    engine = create_engine(url)
    with engine.connect() as conn:
        stored = conn.execute(
            text(
                "SELECT u.username, a.generation_id, a.boundary, a.points, "
                "(SELECT COUNT(*) FROM core_timestamp t WHERE t.annotation_id = a.id), "
                "(SELECT COUNT(*) FROM core_annotation_reason r WHERE r.annotation_id = a.id) "
                "FROM core_annotation a JOIN auth_user u ON u.id = a.annotator_id "
                "WHERE u.username LIKE :bench"
            ),
            {"bench": f"{BENCH_PREFIX}%"},
        ).all()
        others = conn.scalar(
            text(
                "SELECT COUNT(*) FROM core_annotation a JOIN auth_user u "
                "ON u.id = a.annotator_id WHERE u.username NOT LIKE :bench"
            ),
            {"bench": f"{BENCH_PREFIX}%"},
        )
    engine.dispose()
    by_key: dict[tuple[str, int], list] = {}
    for row in stored:
        by_key.setdefault((row[0], row[1]), []).append(row[2:])
    twice = [key for key, rows in by_key.items() if len(rows) > 1]
    if twice:
        problems.append(f"{len(twice)} texts stored twice for the same player")
    keys = [(done.username, done.text_id) for done in finished]
    if len(keys) != len(set(keys)):
        problems.append("a client was given the same text twice")
    if set(keys) != set(by_key):
        problems.append(
            f"{len(by_key)} bench annotations stored, clients finished {len(set(keys))}"
        )
    for done in finished:
        rows = by_key.get((done.username, done.text_id))
        if rows and tuple(rows[0]) != (done.guess, done.points, done.timestamps, done.reasons):
            problems.append(
                f"{done.username} text {done.text_id}: stored {tuple(rows[0])}, sent "
                f"{(done.guess, done.points, done.timestamps, done.reasons)}"
            )
    if others != prior:
        problems.append(f"{others} annotations of other players, {prior} copied in")
    return problems


# The run.


def own_workers() -> int:
    """The worker count this tree's gunicorn.conf.py gives on this machine."""
    import runpy

    saved = os.environ.pop("GUNICORN_WORKERS", None)
    try:
        return int(runpy.run_path(str(ROOT / "gunicorn.conf.py"))["workers"])
    finally:
        if saved is not None:
            os.environ["GUNICORN_WORKERS"] = saved


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


async def play_levels(roft: Side, ours: Side, args) -> tuple[dict, int]:
    """Warm-up and A-B pairs at each level; the tallies by (level, side) and the error count."""
    levels = [int(n) for n in args.players.split(",")]
    results: dict[tuple[int, str], list[Tally]] = {}
    top = max(levels)
    players = {
        "roft": [await roft_log_in(roft.base, f"{BENCH_PREFIX}{i:03d}") for i in range(top)],
        "ours": [await web_load.log_in(ours.base, f"{BENCH_PREFIX}{i:03d}") for i in range(top)],
    }
    rounds_of = {"roft": roft_rounds, "ours": web_load.play_rounds}
    errors = 0
    try:
        for level in levels:
            print(f"  {level} players (load average {load()})", flush=True)
            sides = [("roft", roft), ("ours", ours)]
            for name, side in sides:
                if args.warmup > 0:
                    tally = await measured_phase(
                        side,
                        players[name][:level],
                        args.warmup,
                        seed=9_000 + level,
                        mode="script",
                        rounds_of=rounds_of[name],
                    )
                    merge(side.other, tally)
            for pair in range(args.pairs):
                for name, side in sides if pair % 2 == 0 else sides[::-1]:
                    tally = await measured_phase(
                        side,
                        players[name][:level],
                        args.seconds,
                        seed=level * 100 + pair,
                        mode="script",
                        rounds_of=rounds_of[name],
                    )
                    results.setdefault((level, name), []).append(tally)
                    print(
                        f"    pair {pair + 1} {name:<5} {tally.round_rate:7.1f} rounds/s  "
                        f"round p99 {percentile(tally.round_times, 0.99):7.0f} ms  "
                        f"load {load()}",
                        flush=True,
                    )
    finally:
        for group in players.values():
            await asyncio.gather(*(p.session.close() for p in group))
    for tallies in results.values():
        errors += sum(sum(t.errors.values()) for t in tallies)
    errors += sum(sum(side.other.errors.values()) for side in (roft, ours))
    return results, errors


def report(results: dict, levels: list[int]) -> list[str]:
    """The rows per side and level, then ours / RoFT per level."""
    lines = [web_load.HEADER]
    for level in levels:
        for name in ("roft", "ours"):
            lines.append(web_load.row("postgresql", level, name, "script", results[level, name]))
    lines.append("this site / RoFT (mean of the pairs' ratios; pairs in brackets):")
    for level in levels:
        roft, ours = results[level, "roft"], results[level, "ours"]
        lines.append(web_load.ratio_line("postgresql", level, "script", roft, ours, "ours / roft"))
        per_round = [
            ratio(o.requests / o.rounds, r.requests / r.rounds)
            if o.rounds and r.rounds
            else math.nan
            for r, o in zip(roft, ours, strict=True)
        ]
        p50 = [
            ratio(percentile(o.round_times, 0.5), percentile(r.round_times, 0.5))
            for r, o in zip(roft, ours, strict=True)
        ]
        lines.append(
            f"  {'':<15}requests/round {sum(per_round) / len(per_round):.2f}× "
            f"(pairs {' '.join(f'{x:.2f}' for x in per_round)}), round p50 "
            f"{sum(p50) / len(p50):.2f}× (pairs {' '.join(f'{x:.2f}' for x in p50)})"
        )
    return lines


def run(args) -> bool:
    roft_dir = args.roft_dir.resolve()
    levels = [int(n) for n in args.players.split(",")]
    work = Path(tempfile.mkdtemp(prefix="roft-sidebyside-"))
    ours_tree = web_load.current_tree()
    ours = Side(Tree("current", ROOT, ours_tree.label), work / "ours")
    roft_name = f"{os.environ['BENCH_PG_PREFIX']}_roft"
    ok = False
    try:
        site = RoftSite(roft_dir, args.roft_python, work / "roft", roft_name, args.roft_workers)
        workers = own_workers()
        print(
            f"this site: {ours_tree.label}, its gunicorn.conf.py ({workers} workers)\n"
            f"RoFT: {args.roft_label or roft_label(roft_dir)} ({site.project}), "
            f"{args.roft_workers} sync workers, {site.versions()}\n"
            f"PostgreSQL; phases of {args.seconds:g} s, {args.pairs} pair(s) per level; "
            f"load average {load()}",
            flush=True,
        )
        web_load.prepare_databases("postgresql", [ours], args, max(levels))
        roft_url = fresh_database(roft_name)
        site.migrate()
        copied = copy_into_roft(ours.url, roft_url, site.password_hash())
        print(
            f"  postgresql roft: {copied['texts']} texts, {copied['annotations']} annotations of "
            f"{copied['players']} players copied ({copied['seconds']:.1f} s)",
            flush=True,
        )
        from tests.gunicorn_server import GunicornServer

        with ExitStack() as stack:
            ours.server = stack.enter_context(
                GunicornServer(
                    ours.url,
                    ours.work,
                    workers=workers,
                    env={"LOGIN_RATE_LIMIT": "100000 per minute"},
                    root=ROOT,
                )
            )
            print(f"  this site listens on {web_load.listening(ours.server.log_path)}", flush=True)
            roft = Side(Tree("roft", roft_dir, "roft"), work / "roft", url=roft_url)
            roft.server = stack.enter_context(site)
            results, errors = asyncio.run(play_levels(roft, ours, args))
        print("\n".join(report(results, levels)))
        ok = errors == 0
        if any(t.rounds == 0 for tallies in results.values() for t in tallies):
            ok = False
            print("  a measured phase finished no round")
        if errors:
            for label, side in (("roft", roft), ("ours", ours)):
                every = [t for (_, name), ts in results.items() if name == label for t in ts]
                print(f"  errors ({label}): {web_load.fmt_errors([*every, side.other])}")
        for name, problems, count in (
            ("this site", web_load.check_database(ours), len(ours.finished)),
            (
                "RoFT",
                check_roft(roft_url, roft.finished, copied["annotations"]),
                len(roft.finished),
            ),
        ):
            ok &= not problems
            verdict = "OK" if not problems else "FAILED: " + "; ".join(problems[:5])
            print(f"  database check ({name}): {count} rounds, {verdict}")
        print(f"load average at the end: {load()}")
    finally:
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
            drop_database(roft_name)
            if ours.url:
                drop_database(make_url(ours.url).database)
        else:
            print(f"  gunicorn logs kept in {work}; databases {roft_name} and ours kept")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="\n\n".join(__doc__.split("\n\n", 2)[::2]),
        formatter_class=web_load.HelpFormatter,
        epilog="Method and latest results: docs/performance.md, 'Side by side with RoFT's site'.",
    )
    add = parser.add_argument
    add("--roft-dir", type=Path, required=True, help="a checkout of RoFT's repository")
    add(
        "--roft-python",
        default="/tmp/roft-venv/bin/python",
        help="the Python of RoFT's own virtual environment (Django, psycopg2, markdown2, gunicorn)",
    )
    add("--roft-label", default="", help="what to call RoFT's version (default: its git commit)")
    add("--players", default="16,64", help="concurrency levels, comma-separated")
    add("--seconds", type=float, default=12.0, help="length of each measured phase")
    add("--pairs", type=int, default=2, help="A-B pairs per level")
    add("--warmup", type=float, default=3.0, help="unmeasured seconds per site and level first")
    add("--roft-workers", type=int, default=5, help="RoFT's gunicorn sync workers")
    add("--texts", type=int, default=5000, help="texts on both sites: the demo set repeated")
    add("--seed-rounds", type=int, default=100_000, help="answered rounds stored first")
    add("--seed-players", type=int, default=2000, help="players those rounds are spread over")
    add("--keep", action="store_true", help="keep the databases and gunicorn logs")
    args = parser.parse_args(argv)
    if not Path(args.roft_python).exists():
        parser.error(f"--roft-python {args.roft_python} does not exist")
    signal.signal(signal.SIGTERM, web_load._interrupted)
    try:
        return 0 if run(args) else 1
    except KeyboardInterrupt:
        print("interrupted (servers stopped)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: full game rounds under load, as browsers with and without JavaScript play them,
against a baseline endpoint that writes one row.

    .venv/bin/python bench/web_load.py [--database sqlite|postgresql|both] [--players 16,64]
                                       [--seconds 15] [--think 0.5,1.5] [--workers N]
                                       [--copies 20]

For each database it creates a fresh schema with the migrations, loads the demo texts `--copies`
times (each copy its own passages, so players do not run out of texts they have not read), seeds
players, and starts the site under gunicorn exactly as `make run` does (gunicorn.conf.py, sync
workers) with one extra route, `POST /bench/write` (bench/web_load_app.py). An asynchronous
client in this process (aiohttp; it shares the machine's cores with the server) then runs, at each
concurrency:

1. baseline: that many clients post to /bench/write back to back;
2. game, plain forms (a browser without JavaScript; the site before its one-request reveal): start
   a round (POST, then the page), reveal sentences (POST, then the page), open the "why" form,
   answer with reasons and an explanation (POST, then the result page);
3. game, with the page's script: the same round where every action is one request answered with
   the updated round (start, each reveal, the answer; the "why" panel opens without a request);
4. baseline again; the ratio uses the mean of both baseline runs;
5. paced: players with the script for twice as long, pausing a random `--think` time after each
   page as a reader would, arriving spread over the first pause.

It prints completed rounds per second, requests per round, requests per second, p50/p99 latency
per request and errors (any unexpected status or failed connection), then checks the database:
every round a client finished is stored once, with the points its page showed and the points the
scoring rule gives, no other round was answered, and the leaderboard totals equal the sums of
stored points.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

import aiohttp
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import PROJECT_ROOT, create_app
from app.catalog.importer import import_records, read_records
from app.extensions import db
from app.game.reasons import REASONS
from app.game.scoring import verdict
from app.models import Example, Player, PlayerTotal, Round
from tests.gunicorn_server import GunicornServer

BASELINE_TABLE = "bench_writes"  # written by bench/web_load_app.py
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/roft_loadbench"
PASSWORD = "bench-password-1"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
SEEN = re.compile(r'name="seen" value="(\d+)"')
POINTS = re.compile(r'<span class="points-badge">(\d+)</span>')
ROUND_URL = re.compile(r"/play/round/(\d+)")
# Loose enough for a shared 2-core machine at 64 players; a stuck request is an error.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30)


FRAGMENT = {"X-Requested-With": "fetch"}
MODES = ("form", "script")


@dataclass
class Tally:
    """Latencies (seconds), errors and completed rounds of one phase."""

    latencies: list[float] = field(default_factory=list)
    errors: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    elapsed: float = 0.0
    rounds: int = 0

    @property
    def requests(self) -> int:
        return len(self.latencies)

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed if self.elapsed else 0.0

    @property
    def round_rate(self) -> float:
        return self.rounds / self.elapsed if self.elapsed else 0.0

    @property
    def per_round(self) -> float:
        return self.requests / self.rounds if self.rounds else float("nan")

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


@dataclass
class Finished:
    round_id: int
    player: str
    points: int


class UnexpectedResponse(Exception):
    pass


async def timed(tally: Tally, session, method: str, url: str, expect: int, **kwargs) -> str:
    """One request, timed; raises UnexpectedResponse on another status."""
    started = time.perf_counter()
    try:
        async with session.request(method, url, allow_redirects=False, **kwargs) as response:
            body = await response.text()
            status, location = response.status, response.headers.get("Location", "")
    except (aiohttp.ClientError, TimeoutError) as failure:
        tally.errors[type(failure).__name__] += 1
        raise UnexpectedResponse(type(failure).__name__) from None
    tally.latencies.append(time.perf_counter() - started)
    if status != expect:
        tally.errors[f"HTTP {status} on {method} {url.split('/', 3)[-1]}"] += 1
        raise UnexpectedResponse(status)
    return location or body


def new_session() -> aiohttp.ClientSession:
    # gunicorn's sync workers close every connection, so each request opens one, as here.
    return aiohttp.ClientSession(
        cookie_jar=aiohttp.CookieJar(unsafe=True),
        connector=aiohttp.TCPConnector(force_close=True, limit=0),
        timeout=REQUEST_TIMEOUT,
    )


async def log_in(base: str, username: str) -> tuple[aiohttp.ClientSession, str]:
    session = new_session()
    page = await (await session.get(f"{base}/login")).text()
    token = CSRF.search(page).group(1)
    response = await session.post(
        f"{base}/login",
        data={"csrf_token": token, "username": username, "password": PASSWORD},
        allow_redirects=False,
    )
    if response.status != 302:
        raise RuntimeError(f"log-in of {username} failed with {response.status}")
    # Logging in gives the session a new CSRF secret: the token of the page after it.
    page = await (await session.get(f"{base}/")).text()
    return session, CSRF.search(page).group(1)


async def play_round(
    base: str,
    session,
    token: str,
    tally: Tally,
    rng: random.Random,
    username: str,
    think: tuple[float, float] | None,
    mode: str,
) -> Finished:
    """One round as a browser plays it: with plain forms (POST, redirect, page) or with the
    page's script (each action one request, answered with the updated round)."""
    script = mode == "script"
    headers = FRAGMENT if script else {}

    async def read() -> None:
        if think:
            await asyncio.sleep(rng.uniform(*think))

    async def act(path: str, data: dict) -> str:
        """POST an action; returns the round as the browser then shows it."""
        if script:
            return await timed(
                tally, session, "POST", path, 200, data=data, headers=headers
            )  # fmt: skip
        await timed(tally, session, "POST", path, 302, data=data)
        return await timed(tally, session, "GET", page_url, 200)

    if script:
        page = await timed(
            tally, session, "POST", f"{base}/play", 200, headers=headers,
            data={"csrf_token": token, "category": "random"},
        )  # fmt: skip
        round_id = int(ROUND_URL.search(page).group(1))
        page_url = f"{base}/play/round/{round_id}"
    else:
        location = await timed(
            tally, session, "POST", f"{base}/play", 302,
            data={"csrf_token": token, "category": "random"},
        )  # fmt: skip
        round_id = int(ROUND_URL.search(location).group(1))
        page_url = f"{base}/play/round/{round_id}"
        page = await timed(tally, session, "GET", page_url, 200)
    while True:
        await read()
        seen = SEEN.search(page).group(1)
        can_reveal = f"/play/round/{round_id}/next" in page
        can_flag = seen != "1"
        if can_reveal and (not can_flag or rng.random() < 0.7):
            page = await act(f"{page_url}/next", {"csrf_token": token, "seen": seen})
            continue
        if can_flag and (can_reveal or rng.random() < 0.5):
            if not script:  # the script opens the "why" panel without a request
                await timed(tally, session, "GET", f"{page_url}?flag=1", 200)
            await read()
            answer = {
                "choice": "machine",
                "reasons": rng.sample(list(REASONS), 2),
                "explanation": "The last sentence drifts away from the topic.",
            }
        else:
            answer = {"choice": "human"}
        result = await act(f"{page_url}/answer", {"csrf_token": token, "seen": seen, **answer})
        await read()
        tally.rounds += 1
        return Finished(round_id, username, int(POINTS.search(result).group(1)))


async def game_phase(
    base: str,
    players: list[tuple[aiohttp.ClientSession, str, str]],
    seconds: float,
    seed: int,
    mode: str,
    think: tuple[float, float] | None = None,
) -> tuple[Tally, list[Finished]]:
    """Every player plays rounds until the time is up (finishing the round in hand)."""
    tally, finished = Tally(), []
    deadline = time.perf_counter() + seconds

    async def player(session, token: str, username: str, rng: random.Random) -> None:
        if think:
            # Paced players arrive spread over one pause, not all in the same millisecond.
            await asyncio.sleep(rng.uniform(0, think[1]))
        while time.perf_counter() < deadline:
            try:
                done = await play_round(base, session, token, tally, rng, username, think, mode)
                finished.append(done)
            except UnexpectedResponse:
                # Resume the open round (the site keeps it) after a failed request.
                await asyncio.sleep(0.05)

    started = time.perf_counter()
    await asyncio.gather(
        *(player(s, t, u, random.Random(seed + i)) for i, (s, t, u) in enumerate(players))
    )
    tally.elapsed = time.perf_counter() - started
    return tally, finished


async def baseline_phase(base: str, concurrency: int, seconds: float) -> Tally:
    tally = Tally()
    deadline = time.perf_counter() + seconds

    async def writer() -> None:
        async with new_session() as session:
            while time.perf_counter() < deadline:
                try:
                    await timed(tally, session, "POST", f"{base}/bench/write", 204)
                except UnexpectedResponse:
                    await asyncio.sleep(0.05)

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(concurrency)))
    tally.elapsed = time.perf_counter() - started
    return tally


def catalogue(copies: int) -> list:
    """The demo examples `copies` times, each copy with its own ids and passages."""
    demo = read_records(PROJECT_ROOT / "data" / "demo" / "examples.jsonl")
    records = []
    for copy in range(copies):
        for record in demo:
            source = dict(record.source)
            for key in ("doc_id", "splice_doc_id"):
                if key in source:
                    source[key] = f"{source[key]}~{copy}"
            records.append(replace(record, id=f"{record.id}~{copy}", source=source))
    return records


def prepare_database(kind: str, work: Path, n_players: int, copies: int) -> tuple[str, object]:
    """A fresh migrated database with the demo texts, the baseline table and players."""
    if kind == "postgresql":
        url = PG_URL
        admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("DROP DATABASE IF EXISTS roft_loadbench WITH (FORCE)"))
            conn.execute(text("CREATE DATABASE roft_loadbench"))
        admin.dispose()
    else:
        url = f"sqlite:///{work / 'bench.sqlite3'}"
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "LOG_REQUESTS": False})
    with app.app_context():
        from flask_migrate import upgrade

        upgrade(directory=str(PROJECT_ROOT / "migrations"))
        import_records(Path("demo"), catalogue(copies))
        id_column = "SERIAL" if kind == "postgresql" else "INTEGER"
        db.session.execute(
            text(f"CREATE TABLE {BASELINE_TABLE} (id {id_column} PRIMARY KEY, note TEXT)")
        )
        template = Player(username="template")
        template.set_password(PASSWORD)  # hash once; every bench player shares the password
        db.session.add_all(
            Player(username=f"bench{i:03d}", password_hash=template.password_hash)
            for i in range(n_players)
        )
        db.session.commit()
    return url, app


def check_database(app, finished: list[Finished], baseline_writes: int) -> list[str]:
    """What is wrong in the stored data, or an empty list."""
    problems = []
    with app.app_context():
        answered = {
            r.id: r for r in db.session.scalars(select(Round).where(Round.guess.is_not(None)))
        }
        seen_ids = [f.round_id for f in finished]
        if len(seen_ids) != len(set(seen_ids)):
            problems.append("a client finished the same round twice")
        if set(seen_ids) != set(answered):
            problems.append(
                f"{len(answered)} answered rounds stored, clients finished {len(set(seen_ids))}"
            )
        for done in finished:
            stored = answered.get(done.round_id)
            if stored is None:
                continue
            example = stored.example
            rule = verdict(stored.guess, example.boundary, example.n_sentences).points
            if not stored.points == done.points == rule:
                problems.append(
                    f"round {done.round_id}: page {done.points}, "
                    f"stored {stored.points}, rule {rule}"
                )
        per_player = defaultdict(int)
        for stored in answered.values():
            per_player[stored.player_id] += stored.points
        totals = {t.player_id: t.points for t in db.session.scalars(select(PlayerTotal))}
        if totals != {k: v for k, v in per_player.items()}:
            problems.append("leaderboard totals differ from the sums of stored points")
        counted = db.session.scalar(select(func.sum(Example.annotation_count)))
        if counted != len(answered):
            problems.append(f"annotation counts add to {counted}, not {len(answered)}")
        rows = db.session.scalar(text(f"SELECT count(*) FROM {BASELINE_TABLE}"))
        if rows != baseline_writes:
            problems.append(f"baseline table has {rows} rows, clients saw {baseline_writes}")
    return problems


def app_time_by_endpoint(log_path: Path) -> str:
    """Mean and p50 of the time spent inside the app per endpoint, from its JSON access lines."""
    times: defaultdict[str, list[float]] = defaultdict(list)
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("{") and '"message": "request"' in line:
            entry = json.loads(line)
            if entry.get("endpoint") and entry["endpoint"].startswith(("game.", "write_one")):
                times[f"{entry['method']} {entry['endpoint']}"].append(entry["duration_ms"])
    return "\n".join(
        f"    {name:<28}{len(values):>7} requests  mean {sum(values) / len(values):6.2f} ms"
        f"  p50 {sorted(values)[len(values) // 2]:6.2f} ms"
        for name, values in sorted(times.items())
    )


def fmt_errors(*tallies: Tally) -> str:
    merged = defaultdict(int)
    for tally in tallies:
        for kind, count in tally.errors.items():
            merged[kind] += count
    return str(sum(merged.values())) + (f" {dict(merged)}" if merged else "")


async def run_database(
    kind: str,
    levels: list[int],
    seconds: float,
    workers: int,
    think: tuple[float, float],
    copies: int,
) -> list[dict]:
    work = Path(tempfile.mkdtemp(prefix=f"roft-load-{kind}-"))
    url, app = prepare_database(kind, work, max(levels), copies)
    rows, finished_all, baseline_writes = [], [], 0
    env = {"LOGIN_RATE_LIMIT": "100000 per minute"}
    with GunicornServer(
        url, work, workers=workers, env=env, app_module="bench.web_load_app:app"
    ) as server:
        base = server.url
        for level in levels:
            players = []
            for i in range(level):
                session, token = await log_in(base, f"bench{i:03d}")
                players.append((session, token, f"bench{i:03d}"))
            before = await baseline_phase(base, level, seconds)
            games = {}
            for offset, mode in enumerate(MODES):
                games[mode], finished = await game_phase(
                    base, players, seconds, seed=level + offset, mode=mode
                )
                finished_all += finished
            after = await baseline_phase(base, level, seconds)
            paced, paced_finished = await game_phase(
                base, players, seconds * 2, seed=level + 7, mode="script", think=think
            )
            for session, _, _ in players:
                await session.close()
            finished_all += paced_finished
            baseline_writes += before.requests + after.requests
            bare_rate = (before.rate + after.rate) / 2
            errors = fmt_errors(*games.values(), before, after, paced)
            for mode, game in games.items():
                rows.append(
                    {
                        "database": kind,
                        "players": level,
                        "mode": mode,
                        "rounds_ps": game.round_rate,
                        "per_round": game.per_round,
                        "game_rps": game.rate,
                        "bare_rps": bare_rate,
                        "bare_spread": abs(before.rate - after.rate) / bare_rate,
                        "ratio": game.rate / bare_rate,
                        "game_p50": game.percentile(0.50),
                        "game_p99": game.percentile(0.99),
                        "errors": errors,
                    }
                )
                print_row(rows[-1])
            print(
                f"{kind:<11}{level:>8}  paced   {paced.round_rate:>8.1f}{paced.per_round:>9.1f}"
                f"{paced.rate:>9.0f}{paced.percentile(0.5):>8.1f}ms{paced.percentile(0.99):>7.1f}ms"
                f"  (paced: pauses of {think[0]}-{think[1]} s)",
                flush=True,
            )
    print(f"  gunicorn log and database: {work}")
    print(f"  time inside the app ({kind}, all phases, from its access log):")
    print(app_time_by_endpoint(server.log_path))
    problems = check_database(app, finished_all, baseline_writes)
    with app.app_context():
        db.engine.dispose()
    verdict_line = "OK" if not problems else "FAILED: " + "; ".join(problems[:5])
    print(f"  database check ({kind}): {len(finished_all)} rounds, {verdict_line}", flush=True)
    for row in rows:
        row["check"] = "ok" if not problems else "FAILED"
    return rows


HEADER = (
    f"{'database':<11}{'players':>8}  {'mode':<7}{'rounds/s':>9}{'req/rnd':>9}{'req/s':>9}"
    f"{'p50':>10}{'p99':>9}{'bare req/s':>12}{'ratio':>7}  errors"
)


def print_row(row: dict) -> None:
    print(
        f"{row['database']:<11}{row['players']:>8}  {row['mode']:<7}{row['rounds_ps']:>8.1f}"
        f"{row['per_round']:>9.1f}{row['game_rps']:>9.0f}{row['game_p50']:>8.1f}ms"
        f"{row['game_p99']:>7.1f}ms{row['bare_rps']:>12.0f}{row['ratio']:>6.2f}×  {row['errors']}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Full game rounds under gunicorn against a one-row-write baseline.",
        epilog="Method and latest results: docs/BENCHMARKS.md.",
    )
    parser.add_argument("--database", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument(
        "--players", default="16,64", help="concurrency levels, comma-separated (default 16,64)"
    )
    parser.add_argument(
        "--seconds", type=float, default=15.0, help="length of each saturated phase (paced: 2×)"
    )
    parser.add_argument(
        "--think",
        default="0.5,1.5",
        help="paced players wait a uniform time in this range (seconds) after each page",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="gunicorn workers (default: gunicorn.conf.py)"
    )
    parser.add_argument(
        "--copies",
        type=int,
        default=20,
        help="load the demo texts this many times, each copy with its own passages (default 20)",
    )
    args = parser.parse_args(argv)
    levels = [int(n) for n in args.players.split(",")]
    low, high = (float(x) for x in args.think.split(","))
    think = (low, high)
    kinds = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    workers = args.workers or _default_workers()
    print(f"gunicorn sync workers: {workers}; each phase {args.seconds:.0f} s\n{HEADER}")
    failed = False
    for kind in kinds:
        rows = asyncio.run(run_database(kind, levels, args.seconds, workers, think, args.copies))
        failed |= any(row["check"] != "ok" or row["errors"] != "0" for row in rows)
    return 1 if failed else 0


def _default_workers() -> int:
    """The worker count gunicorn.conf.py picks on this machine."""
    settings: dict = {}
    exec((PROJECT_ROOT / "gunicorn.conf.py").read_text(), settings)
    return settings["workers"]


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: full game rounds under load, against a baseline endpoint that writes one row.

    .venv/bin/python bench/web_load.py [--database sqlite|postgresql|both] [--players 16,64]
                                       [--seconds 15] [--think 0.5,1.5] [--workers N]

For each database it creates a fresh schema with the migrations, loads the demo texts, seeds
players, and starts the site under gunicorn exactly as `make run` does (gunicorn.conf.py, sync
workers) with one extra route, `POST /bench/write` (bench/web_load_app.py). An asynchronous
client in this process (aiohttp; it shares the machine's cores with the server) then runs, at each
concurrency:

1. baseline: that many clients post to /bench/write back to back;
2. game: that many logged-in players play full rounds back to back, as a browser would: start a
   round, load the page, reveal sentences (POST, then the page), open the "why" form, answer with
   a reason and an explanation, and read the result;
3. baseline again; the ratio uses the mean of both baseline runs;
4. paced: the same players for twice as long, pausing a random `--think` time after each page as a
   reader would, arriving spread over the first pause.

It prints requests per second, p50/p99 latency per request and errors (any unexpected status or
failed connection), then checks the database: every round a client finished is stored once, with
the points its page showed and the points the scoring rule gives, no other round was answered, and
the leaderboard totals equal the sums of stored points.
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
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import PROJECT_ROOT, create_app
from app.catalog.importer import import_file
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
POINTS = re.compile(r'<p class="points"><strong>(\d+)</strong>')
ROUND_URL = re.compile(r"/play/round/(\d+)")
# Loose enough for a shared 2-core machine at 64 players; a stuck request is an error.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30)


@dataclass
class Tally:
    """Latencies (seconds) and errors of one phase."""

    latencies: list[float] = field(default_factory=list)
    errors: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    elapsed: float = 0.0

    @property
    def requests(self) -> int:
        return len(self.latencies)

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed if self.elapsed else 0.0

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
) -> Finished:
    async def read() -> None:
        if think:
            await asyncio.sleep(rng.uniform(*think))

    location = await timed(
        tally,
        session,
        "POST",
        f"{base}/play",
        302,
        data={"csrf_token": token, "category": "random"},
    )
    round_id = int(ROUND_URL.search(location).group(1))
    page_url = f"{base}/play/round/{round_id}"
    page = await timed(tally, session, "GET", page_url, 200)
    while True:
        await read()
        seen = SEEN.search(page).group(1)
        can_reveal = f"/play/round/{round_id}/next" in page
        if can_reveal and rng.random() < 0.7:
            await timed(
                tally, session, "POST", f"{page_url}/next", 302,
                data={"csrf_token": token, "seen": seen},
            )  # fmt: skip
            page = await timed(tally, session, "GET", page_url, 200)
            continue
        if can_reveal:
            await timed(tally, session, "GET", f"{page_url}?flag=1", 200)
            await read()
            answer = {
                "choice": "machine",
                "reasons": rng.sample(list(REASONS), 2),
                "explanation": "The last sentence drifts away from the topic.",
            }
        else:
            answer = {"choice": "human"}
        await timed(
            tally, session, "POST", f"{page_url}/answer", 302,
            data={"csrf_token": token, "seen": seen, **answer},
        )  # fmt: skip
        result = await timed(tally, session, "GET", page_url, 200)
        await read()
        return Finished(round_id, username, int(POINTS.search(result).group(1)))


async def game_phase(
    base: str,
    players: list[tuple[aiohttp.ClientSession, str, str]],
    seconds: float,
    seed: int,
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
                done = await play_round(base, session, token, tally, rng, username, think)
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


def prepare_database(kind: str, work: Path, n_players: int) -> tuple[str, object]:
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
        import_file(PROJECT_ROOT / "data" / "demo" / "examples.jsonl")
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
    kind: str, levels: list[int], seconds: float, workers: int, think: tuple[float, float]
) -> list[dict]:
    work = Path(tempfile.mkdtemp(prefix=f"roft-load-{kind}-"))
    url, app = prepare_database(kind, work, max(levels))
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
            game, finished = await game_phase(base, players, seconds, seed=level)
            after = await baseline_phase(base, level, seconds)
            paced, paced_finished = await game_phase(
                base, players, seconds * 2, seed=level + 1, think=think
            )
            for session, _, _ in players:
                await session.close()
            finished_all += finished + paced_finished
            baseline_writes += before.requests + after.requests
            bare_rate = (before.rate + after.rate) / 2
            rows.append(
                {
                    "database": kind,
                    "players": level,
                    "game_rps": game.rate,
                    "bare_rps": bare_rate,
                    "bare_spread": abs(before.rate - after.rate) / bare_rate,
                    "ratio": game.rate / bare_rate,
                    "game_p50": game.percentile(0.50),
                    "game_p99": game.percentile(0.99),
                    "bare_p99": max(before.percentile(0.99), after.percentile(0.99)),
                    "paced_rps": paced.rate,
                    "paced_p50": paced.percentile(0.50),
                    "paced_p99": paced.percentile(0.99),
                    "errors": fmt_errors(game, before, after, paced),
                    "rounds": len(finished) + len(paced_finished),
                }
            )
            print_row(rows[-1])
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
    f"{'':<19}{'--------- saturated (no pause) ---------':^48}  {'---- paced players ----':^26}\n"
    f"{'database':<11}{'players':>8}{'game req/s':>11}{'bare req/s':>11}{'ratio':>7}"
    f"{'p50':>9}{'p99':>10}  {'req/s':>7}{'p50':>9}{'p99':>10}  errors"
)


def print_row(row: dict) -> None:
    print(
        f"{row['database']:<11}{row['players']:>8}{row['game_rps']:>11.0f}{row['bare_rps']:>11.0f}"
        f"{row['ratio']:>6.2f}×{row['game_p50']:>7.1f}ms{row['game_p99']:>8.1f}ms"
        f"  {row['paced_rps']:>7.0f}{row['paced_p50']:>7.1f}ms{row['paced_p99']:>8.1f}ms"
        f"  {row['errors']}",
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
    args = parser.parse_args(argv)
    levels = [int(n) for n in args.players.split(",")]
    low, high = (float(x) for x in args.think.split(","))
    think = (low, high)
    kinds = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    workers = args.workers or _default_workers()
    print(f"gunicorn sync workers: {workers}; each phase {args.seconds:.0f} s\n{HEADER}")
    failed = False
    for kind in kinds:
        rows = asyncio.run(run_database(kind, levels, args.seconds, workers, think))
        failed |= any(row["check"] != "ok" or row["errors"] != "0" for row in rows)
    return 1 if failed else 0


def _default_workers() -> int:
    """The worker count gunicorn.conf.py picks on this machine."""
    settings: dict = {}
    exec((PROJECT_ROOT / "gunicorn.conf.py").read_text(), settings)
    return settings["workers"]


if __name__ == "__main__":
    sys.exit(main())

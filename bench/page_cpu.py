"""In-process benchmark: the CPU each game page costs, per route, against earlier commits.

    .venv/bin/python bench/page_cpu.py [--ref 3da502d] [--ref 0537e7a] [--turns 8] [--sets 6]
                                       [--players 4] [--texts 5000] [--seed-rounds 100000]
                                       [--seed-players 2000] [--no-seed] [--profile DIR]

Trees. A detached `git worktree` of each --ref, in temporary folders removed at the end, and the
current checkout (with any uncommitted change). Each tree runs its own code in a process of its
own, with its own database. Compare worktrees with each other (--ref HEAD for a committed
change): in one run a process of the checkout came out up to a fifth slower than one of a
worktree of the same commit (docs/BENCHMARKS.md), so the checkout's column is a check, not a
measurement to rely on alone.

Data. Each tree's PostgreSQL database (BENCH_PG_PREFIX, default roft_pagecpu, then _<tree>;
dropped and recreated) is prepared by that tree's code exactly as bench/web_load.py prepares it
(`web_load.py --seed-tree`: the migrations, --texts texts, the bench players, --seed-rounds
answered rounds of --seed-players players, VACUUM ANALYZE). --no-seed reuses the databases of an
earlier run as they are (they hold that run's rounds too).

Method. Every tree's process builds its app as wsgi.py does (create_app(), the access log
written to a file) and drives it with Flask's test client, as a signed-in returning player with
the page's script, the requests of bench/protocol.py (the same as web_load.py's script mode):
the home page, "Play a set of texts" (POST /play and the round page it redirects to), every
round's reveals and answer, "Next text" after each answer but the last, and the set's summary.
Requests send the Accept-Encoding of web_load.py's client (aiohttp: gzip, deflate, br, zstd), so
pages are compressed as in a load run. Each request is timed with time.process_time (the
process's CPU: the app, the driver's side of PostgreSQL, the test client's small share; not
PostgreSQL's own work) and time.perf_counter (wall).

--players bench players take turns; each turn a tree's process plays --sets sets (one per player
in turn, each from the home page). The trees take --turns turns each, in an order that rotates
every turn (A-B-C, B-C-A, ...), after one unmeasured warm-up turn each (templates compiled,
statements prepared by psycopg after their fifth use). Per route and tree: the median CPU and wall
time per request over all measured requests, and the median of the per-turn medians' ratios to
the first --ref (the baseline) and to every other tree.

--profile DIR also writes one cProfile file per tree and route (DIR/<tree>.<route>.prof, all
measured turns) and prints the functions with the most cumulative time of the home page.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIX = os.environ.get("BENCH_PG_PREFIX", "roft_pagecpu")
PASSWORD = "bench-password-1"  # web_load.py's bench players' password
ACCEPT_ENCODING = "gzip, deflate, br, zstd"  # aiohttp's, as web_load.py's players send
ROUTES = ("home", "start", "round page", "reveal", "answer", "next text", "summary")
SERVE = "--serve"


def route_of(method: str, path: str) -> str:
    """Which page or action a request of bench/protocol.py is."""
    if path == "/":
        return "home"
    if path == "/play":
        return "start"
    if re.fullmatch(r"/play/round/\d+", path):
        return "round page"
    if path.endswith("/next") and path.startswith("/play/"):
        return "reveal"
    if path.endswith("/answer"):
        return "answer"
    if re.fullmatch(r"/sets/\d+/next", path):
        return "next text"
    if re.fullmatch(r"/sets/\d+", path):
        return "summary"
    return f"{method} {path}"


# --- One tree's process ------------------------------------------------------------------------


def serve(spec: dict) -> None:
    """Run in a tree's own process: build its app, log the players in, then play as told on
    stdin ("turn N measured|warmup" lines), answering each turn with one JSON line."""
    tree = Path(spec["tree"]).resolve()
    # This checkout's bench.protocol and web_load's chooser, imported before the tree's folder
    # takes the path's first place: a tree has a bench/ of its own, perhaps an older one.
    sys.path[0] = str(ROOT)
    from bench.protocol import Reply, log_in_test_client, play_sets
    from bench.web_load import chooser

    sys.path[0] = str(tree)
    import cProfile
    import random

    from werkzeug.datastructures import MultiDict

    import app as app_package
    from app import create_app

    if not Path(app_package.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"imported {app_package.__file__}, not the app of {tree}")
    flask_app = create_app()
    players = []
    for i in range(spec["players"]):
        client = flask_app.test_client()
        log_in_test_client(client, f"bench{i:03d}", PASSWORD)
        players.append(client)
    profiles: dict[str, cProfile.Profile] = {}
    profiling = bool(spec.get("profile"))
    headers = {"Accept-Encoding": ACCEPT_ENCODING}
    for turn_number, line in enumerate(sys.stdin):
        command = line.split()
        if command[0] == "quit":
            break
        measured = command[1] == "measured"
        cpu: dict[str, list[float]] = {}
        wall: dict[str, list[float]] = {}
        for s in range(spec["sets"]):
            client = players[s % len(players)]
            rng = random.Random(turn_number * 1000 + s)
            moves = play_sets(chooser(rng), script=True, sets=1)
            request = next(moves)
            while True:
                route = route_of(request.method, request.path)
                profile = None
                if profiling and measured:
                    profile = profiles.setdefault(route, cProfile.Profile())
                kwargs = {"headers": {**headers, **request.headers}}
                if request.content_type is not None:
                    kwargs["data"] = MultiDict(list(request.fields))
                    kwargs["content_type"] = request.content_type
                if request.method == "POST":
                    kwargs["headers"]["Origin"] = "http://localhost"
                started_wall, started_cpu = time.perf_counter(), time.process_time()
                if profile is not None:
                    profile.enable()
                response = client.open(request.path, method=request.method, **kwargs)
                body = response.get_data()  # compressed, as sent
                if profile is not None:
                    profile.disable()
                spent_cpu = time.process_time() - started_cpu
                spent_wall = time.perf_counter() - started_wall
                cpu.setdefault(route, []).append(spent_cpu)
                wall.setdefault(route, []).append(spent_wall)
                # The protocol reads the page: uncompressed, outside the timing.
                text = _decoded(body, response.headers.get("Content-Encoding"))
                reply = Reply(
                    response.status_code,
                    response.headers.get("Location"),
                    text,
                    response.headers.get("X-Round-URL"),
                )
                try:
                    request = moves.send(reply)
                except StopIteration:
                    break
        print(json.dumps({"cpu": cpu, "wall": wall}), flush=True)
    if profiling:
        folder = Path(spec["profile"])
        for route, profile in profiles.items():
            profile.dump_stats(str(folder / f"{spec['name']}.{route.replace(' ', '_')}.prof"))


def _decoded(body: bytes, encoding: str | None) -> str:
    if encoding == "br":
        import brotli

        body = brotli.decompress(body)
    elif encoding == "gzip":
        import gzip

        body = gzip.decompress(body)
    elif encoding == "zstd":
        import zstandard

        body = zstandard.ZstdDecompressor().decompress(body)
    elif encoding == "deflate":
        import zlib

        body = zlib.decompress(body)
    return body.decode()


# --- The run -----------------------------------------------------------------------------------


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@contextmanager
def worktree(ref: str, folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    where = folder / ref.replace("/", "_")
    try:
        git("worktree", "add", "--detach", "--quiet", str(where), ref)
    except subprocess.CalledProcessError as failure:
        raise SystemExit(f"no worktree of {ref}: {failure.stderr.strip()}") from None
    try:
        yield where
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(where)], cwd=ROOT, capture_output=True
        )
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


def database(name: str, fresh: bool) -> str:
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    from bench.web_load import pg_database_url

    return pg_database_url(name, fresh)


def seed(trees: list[tuple[str, Path, str]], args) -> None:
    """Each tree's database prepared by its own code, as web_load.py does (in parallel)."""
    running = []
    for _name, root, url in trees:
        spec = {
            "tree": str(root),
            "url": url,
            "texts": args.texts,
            "bench_players": args.players,
            "seed_rounds": args.seed_rounds,
            "seed_players": args.seed_players,
        }
        env = {**os.environ, "DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
        env.pop("REDIS_URL", None)
        command = [sys.executable, str(ROOT / "bench" / "web_load.py"), "--seed-tree"]
        running.append(
            subprocess.Popen(
                [*command, json.dumps(spec)],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for (name, _, _), process in zip(trees, running, strict=True):
        out, err = process.communicate(timeout=900)
        if process.returncode:
            raise SystemExit(f"seeding {name} failed:\n{err[-3000:]}")
        print(f"  {name}: {out.strip().splitlines()[-1]}", flush=True)


def median_ratio(turns_a: list[dict], turns_b: list[dict], route: str) -> float | None:
    """The median over turns of (a's median / b's median) for `route`."""
    ratios = []
    for a, b in zip(turns_a, turns_b, strict=True):
        if a["cpu"].get(route) and b["cpu"].get(route):
            ratios.append(statistics.median(a["cpu"][route]) / statistics.median(b["cpu"][route]))
    return statistics.median(ratios) if ratios else None


def report(names: list[str], results: list[list[dict]], turns: int, sets: int) -> None:
    """Print the table: per route, each tree's median and its ratios to the trees before it."""
    trees = names
    print(f"median CPU (wall) ms per request; {turns} turns x {sets} sets per tree")
    # Every tree against every tree before it (the first --ref: the baseline).
    pairs = [(i, j) for i in range(1, len(trees)) for j in range(i)]
    print(
        "| route | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{names[i]} / {names[j]}" for i, j in pairs)
        + " |"
    )
    print("|---" * (1 + len(names) + len(pairs)) + "|")
    for route in ROUTES:
        cells = []
        for turns in results:
            cpu = [x for r in turns for x in r["cpu"].get(route, [])]
            wall = [x for r in turns for x in r["wall"].get(route, [])]
            cells.append(
                f"{statistics.median(cpu) * 1000:.2f} ({statistics.median(wall) * 1000:.2f})"
                if cpu
                else "-"
            )
        ratios = [median_ratio(results[i], results[j], route) for i, j in pairs]
        cells += [f"{r:.2f}x" if r is not None else "-" for r in ratios]
        print(f"| {route} | " + " | ".join(cells) + " |")
    # Everything a set cost (its home page, start, rounds, Next texts and summary), per set.
    per_set = [
        [sum(sum(v) for v in r["cpu"].values()) * 1000 / sets for r in turns] for turns in results
    ]
    cells = [f"{statistics.median(values):.1f}" for values in per_set]
    cells += [
        f"{statistics.median(a / b for a, b in zip(per_set[i], per_set[j], strict=True)):.2f}x"
        for i, j in pairs
    ]
    print("| a whole set, CPU ms | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="\n\n".join(__doc__.split("\n\n", 2)[::2]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Method and latest results: docs/BENCHMARKS.md.",
    )
    add = parser.add_argument
    add("--ref", action="append", default=[], help="also run a worktree of this commit")
    add("--turns", type=int, default=8, help="measured turns per tree (default 8)")
    add("--sets", type=int, default=6, help="sets each tree plays per turn (default 6)")
    add("--players", type=int, default=4, help="bench players taking turns (default 4)")
    add("--texts", type=int, default=5000, help="texts in each database (default 5000)")
    add("--seed-rounds", type=int, default=100_000, help="answered rounds stored first")
    add("--seed-players", type=int, default=2000, help="players those rounds are spread over")
    add("--no-seed", action="store_true", help="reuse the databases of an earlier run")
    add("--profile", type=Path, metavar="DIR", help="cProfile files per tree and route in DIR")
    args = parser.parse_args(argv)

    with ExitStack() as stack:
        folder = Path(tempfile.mkdtemp(prefix="roft-pagecpu-"))
        stack.callback(shutil.rmtree, folder, True)
        trees: list[tuple[str, Path, str]] = []
        for number, ref in enumerate(args.ref):
            root = stack.enter_context(worktree(ref, folder / str(number)))
            label = git("rev-parse", "--short", "HEAD", cwd=root)
            if label in [name for name, _, _ in trees]:
                label += f"-{number}"  # the same commit twice: names tell the processes apart
            trees.append((label, root, ""))
        label = git("rev-parse", "--short", "HEAD")
        if git("status", "--porcelain", "--untracked-files=no"):
            label += "+changes"
        trees.append((f"{label} (checkout)", ROOT, ""))
        trees = [
            (name, root, database(f"{PREFIX}_{i}", not args.no_seed))
            for i, (name, root, _) in enumerate(trees)
        ]
        print(f"load average at start: {os.getloadavg()}", flush=True)
        if not args.no_seed:
            seed(trees, args)
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
        processes = []
        for name, root, url in trees:
            spec = {
                "name": name,
                "tree": str(root),
                "players": args.players,
                "sets": args.sets,
                "profile": str(args.profile.resolve()) if args.profile else None,
            }
            env = {
                **os.environ,
                "DATABASE_URL": url,
                "SECRET_KEY": "page-cpu-secret",
                "CACHE_DIR": str(folder / f"cache-{name}"),
                "LOG_REQUESTS": "1",
                "PYTHONUNBUFFERED": "1",
            }
            env.pop("REDIS_URL", None)
            log = open(folder / f"{name}.log", "w")  # noqa: SIM115 (closed with the stack)
            stack.callback(log.close)
            process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), SERVE, json.dumps(spec)],
                cwd=root,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            stack.callback(process.kill)
            processes.append(process)

        def turn(index: int, kind: str) -> dict:
            process = processes[index]
            process.stdin.write(f"turn {kind}\n")
            process.stdin.flush()
            line = process.stdout.readline()
            if not line:
                name = trees[index][0]
                log_text = (folder / f"{name}.log").read_text()
                raise SystemExit(f"{name} stopped:\n{log_text[-3000:]}")
            return json.loads(line)

        for i in range(len(trees)):
            turn(i, "warmup")
        results: list[list[dict]] = [[] for _ in trees]
        loads = []
        for t in range(args.turns):
            for k in range(len(trees)):
                i = (t + k) % len(trees)
                results[i].append(turn(i, "measured"))
            loads.append(os.getloadavg()[0])
        for process in processes:
            process.stdin.write("quit\n")
            process.stdin.flush()
            process.wait(timeout=120)

    print(f"load average (1 min) during the turns: {min(loads):.2f}-{max(loads):.2f}")
    names = [name for name, _, _ in trees]
    report(names, results, args.turns, args.sets)
    if args.profile:
        import pstats

        for name in names:
            path = args.profile / f"{name}.home.prof"
            if path.exists():
                print(f"\n{name}: the home page, by cumulative time")
                pstats.Stats(str(path)).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == SERVE:
        serve(json.loads(sys.argv[2]))
    else:
        sys.exit(main())

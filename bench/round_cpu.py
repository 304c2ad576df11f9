"""In-process benchmark: the app's CPU per request of a round and per page, A-B against commits.

    .venv/bin/python bench/round_cpu.py --baseline-ref 3da502d [--ref REF ...]
        [--database postgresql] [--texts 3000] [--turns 8] [--rounds 30 | --sets 6]
        [--players 8] [--compress] [--pages] [--no-seed] [--profile DIR] [--cprofile DIR]

(bench/page_cpu.py, which measured per route over whole sets, is merged into this tool: its
`--ref A --ref B --sets 8 --players 4` is `--ref A --ref B --sets 8 --players 4 --compress` here,
with its seeding sizes `--texts 5000 --seed-rounds 100000 --seed-players 2000`; its per-route
table is the second table, printed with --sets or --pages, and its cProfile per route --cprofile.)

Trees. The current checkout (with any uncommitted change) and a detached git worktree of each
--baseline-ref / --ref, in the order given (the first is the baseline every other tree is
divided by), each running its own app in a process of its own, with its own database.

Data. Each tree's database is prepared exactly as bench/web_load.py prepares one (its
`--seed-tree`: the migrations of the tree, the demo texts repeated to --texts, the bench
players, --seed-rounds answered rounds of --seed-players background players with their totals
and boards, VACUUM ANALYZE), by this checkout's seeding code running against the tree's own app
and models, so a tree older than the seeding code (3da502d, before issue 23's work, has none of
its own) is seeded all the same. On PostgreSQL the databases are <BENCH_PG_PREFIX>_rc_base,
_rc_head and _rc_<tree> (BENCH_PG_PREFIX roft_roundcpu by default), dropped and made afresh;
--no-seed reuses an earlier run's as they are (with that run's rounds in them). On SQLite, a
file each in a temporary folder.

Method. Flask's test client plays the page's script (the requests of bench/protocol.py, as
bench/web_load.py plays them, with its players' choices) as signed-in bench players. The
players' choices and the text picks' random points come from fixed seeds, so all trees make
the same decisions. A turn is --rounds completed rounds (one round per player in turn, each
player's sets running on from turn to turn), or with --sets N, N whole sets each from the home
page (one per player in turn). The trees take --turns turns each, the order rotating every turn
(A-B, B-A; A-B-C, B-C-A, ...), after --warmup unmeasured rounds (sets) each. --compress sends
the Accept-Encoding of web_load.py's aiohttp players (gzip, deflate, br, zstd), so the app
compresses its pages as in a load run (without it pages go out uncompressed).

Every request is timed twice with time.process_time (the process's CPU: the app and the
driver's side of the database, not the database server's own work): inside a WSGI wrapper
around the app (the session cookie, Flask-Login, CSRF, the limiter, the view, the template,
compression, the security headers and the access line, which is written to /dev/null), and
around the test client's call (the same plus the test client building the request and the
response), with the wall time too.

The first table, per request kind (reveal, answer, "Next text", the start of a set, the
round's page, the summary, the home page): how many were timed, the median over the turns of
the mean app CPU per request (the WSGI wrapper's), the statements per request, each later
tree / the baseline with the range of the turns' ratios; the CPU per completed round; then
each kind's CPU split into the before-request hooks, the view, the after-request hooks and the
rest (the request's context, the cookie read).
The second table (with --sets, or --pages): per route, the median CPU and wall per request
around the test client's call over all measured requests, the median over the turns of the
ratios of the turns' medians for every tree to every tree before it, and what a whole set (or
a round, without --sets) cost, every request of it.

ROUNDCPU_CPROFILE=KIND,FILE runs cProfile over the measured requests of one kind (e.g. reveal)
and writes its statistics to FILE; --cprofile DIR writes one cProfile file per tree and kind
(DIR/<tree>.<kind>.prof) and prints the home page's functions by cumulative time (wall time:
to look at, not to compare). --profile DIR runs an extra, unmeasured turn per tree under
`py-spy record --gil`, writes DIR/<tree>.txt (collapsed stacks) and DIR/<tree>.svg, and
prints each tree's hottest functions by samples of their own and by samples under them.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKER_COMMAND = "--worker"
KINDS = (
    ("reveal", "POST", re.compile(r"/play/round/\d+/next")),
    ("answer", "POST", re.compile(r"/play/round/\d+/answer")),
    ("next text", "POST", re.compile(r"/sets/\d+/next")),
    ("start", "POST", re.compile(r"/play")),
    ("round page", "GET", re.compile(r"/play/round/\d+")),
    ("summary", "GET", re.compile(r"/sets/\d+")),
    ("home", "GET", re.compile(r"/")),
)
# The order of the per-page table: a set's requests as they come.
ROUTES = ("home", "start", "round page", "reveal", "answer", "next text", "summary")
ACCEPT_ENCODING = "gzip, deflate, br, zstd"  # aiohttp's, as web_load.py's players send
_PG_PREFIX = os.environ.get("BENCH_PG_PREFIX", "roft_roundcpu")


def kind_of(method: str, path: str) -> str:
    """Which request of a round (which page or action) a request of bench/protocol.py is;
    anything else is kept apart under its method and path."""
    for name, wanted, pattern in KINDS:
        if method == wanted and pattern.fullmatch(path):
            return name
    return f"{method} {path}"


def _load(name: str, path: Path):
    """A module of this checkout's bench/ by its file (the tree's own `bench` may differ)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- The worker: one tree, in its own process --------------------------------------------------


def worker(spec: dict) -> None:
    """Serve commands on stdin (one JSON object a line), answer each on stdout."""
    tree = Path(spec["tree"]).resolve()
    # This checkout's bench modules, imported before the tree's folder takes the path's first
    # place: a tree has a bench/ of its own, perhaps an older one.
    sys.path[0] = str(ROOT)
    from bench import protocol, web_load

    sys.path[0] = str(tree)
    import random

    from sqlalchemy import event

    import app as app_package
    from app import create_app
    from app.extensions import db

    if not Path(app_package.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"imported {app_package.__file__}, not the app of {tree}")
    flask_app = create_app({"SQLALCHEMY_DATABASE_URI": spec["url"]})
    for handler in flask_app.logger.handlers:  # the access line is written, to nowhere
        handler.stream = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)

    statements = [0]
    with flask_app.app_context():
        event.listen(
            db.engine,
            "before_cursor_execute",
            lambda *args: statements.__setitem__(0, statements[0] + 1),
        )
    timed: list[tuple[str, float, int, dict]] = []
    inner = flask_app.wsgi_app

    # cProfile over the measured requests of some kinds: ROUNDCPU_CPROFILE=KIND,FILE for one
    # kind, --cprofile DIR for every kind (DIR/<tree>.<kind>.prof); written when the worker ends.
    import cProfile

    profile_files: dict[str, str] = {}
    cprofile_kind, _, cprofile_path = os.environ.get("ROUNDCPU_CPROFILE", "").partition(",")
    if cprofile_kind:
        profile_files[cprofile_kind] = cprofile_path
    if spec.get("cprofile"):
        for kind in ROUTES:
            name = f"{spec['name']}.{kind.replace(' ', '_')}.prof"
            profile_files.setdefault(kind, str(Path(spec["cprofile"]) / name))
    profilers = {kind: cProfile.Profile() for kind in profile_files}
    profiling = [False]  # in a measured turn

    def measured(environ, start_response):
        kind = kind_of(environ["REQUEST_METHOD"], environ["PATH_INFO"])
        profiler = profilers.get(kind) if profiling[0] else None
        ran = statements[0]
        if profiler is not None:
            profiler.enable()
        started = time.process_time()
        body = inner(environ, start_response)
        try:
            data = b"".join(body)
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
        spent = time.process_time() - started
        if profiler is not None:
            profiler.disable()
        split = {
            "before": phases.pop("preprocess_request", 0.0),
            "view": phases.pop("dispatch_request", 0.0),
            "after": phases.pop("finalize_request", 0.0),
        }
        split["around"] = spent - sum(split.values())
        timed.append((kind, spent, statements[0] - ran, split))
        return [data]

    flask_app.wsgi_app = measured
    # Where each request's CPU goes: the before-request hooks, the view, the after-request hooks
    # and the session's cookie; the rest (the request's context, the cookie read) is "around".
    phases: dict[str, float] = defaultdict(float)
    for phase in ("preprocess_request", "dispatch_request", "finalize_request"):
        method = getattr(flask_app, phase)

        def timed_phase(*args, _method=method, _phase=phase, **kwargs):
            begun = time.process_time()
            try:
                return _method(*args, **kwargs)
            finally:
                phases[_phase] += time.process_time() - begun

        setattr(flask_app, phase, timed_phase)
    players = []
    for number in range(spec["players"]):
        client = flask_app.test_client()
        protocol.log_in_test_client(client, f"bench{number:03d}", spec["password"])
        rng = random.Random(1000 + number)
        players.append([client, protocol.play_sets(web_load.chooser(rng), script=True), None])
    # The text picks' random points: the same sequence in every tree.
    random.seed(spec.get("seed", 7))
    sent_headers = {"Accept-Encoding": ACCEPT_ENCODING} if spec.get("compress") else {}
    outer: list[tuple[str, float, float]] = []  # kind, CPU and wall around the test client

    def send(client, request):
        kwargs = {"headers": {**sent_headers, **request.headers}}
        if request.content_type == protocol.URLENCODED:
            kwargs["data"] = _multi(request.fields)
            kwargs["content_type"] = request.content_type
        started_wall, started_cpu = time.perf_counter(), time.process_time()
        response = client.open(request.path, method=request.method, **kwargs)
        body = response.get_data()  # compressed, as sent
        outer.append(
            (
                kind_of(request.method, request.path),
                time.process_time() - started_cpu,
                time.perf_counter() - started_wall,
            )
        )
        # The player reads the page uncompressed, outside the timing.
        return protocol.Reply(
            response.status_code,
            response.headers.get("Location"),
            _decoded(body, response.headers.get("Content-Encoding")),
            response.headers.get("X-Round-URL"),
        )

    def exchange(client, game, reply):
        """One request of `game` and its reply; exit when the site answers otherwise."""
        request = game.send(reply) if reply is not None else next(game)
        reply = send(client, request)
        if reply.status != request.expect:
            raise SystemExit(
                f"{request.method} {request.path} answered {reply.status}: {reply.text[:300]}"
            )
        return request, reply

    sets_played = [0]

    def play(rounds: int, sets: int) -> dict:
        timed.clear()
        outer.clear()
        done = 0
        started = time.process_time()
        if sets:  # whole sets, each from the home page, one per player in turn
            for _ in range(sets):
                client = players[sets_played[0] % len(players)][0]
                rng = random.Random(sets_played[0])
                sets_played[0] += 1
                game = protocol.play_sets(web_load.chooser(rng), script=True, sets=1)
                reply = None
                try:
                    while True:
                        request, reply = exchange(client, game, reply)
                        done += request.step == "answer"
                except StopIteration:
                    pass
        turn = 0
        while done < rounds:  # one round per player in turn: requests until an answer
            player = players[turn % len(players)]
            turn += 1
            client, game, reply = player
            while True:
                request, reply = exchange(client, game, reply)
                if request.step == "answer":
                    done += 1
                    break
            player[2] = reply
        whole = time.process_time() - started
        by_kind: dict[str, list] = defaultdict(lambda: [0, 0.0, 0, Counter()])
        for kind, spent, ran, split in timed:
            entry = by_kind[kind]
            entry[0] += 1
            entry[1] += spent
            entry[2] += ran
            entry[3].update(split)
        pages: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"cpu": [], "wall": []})
        for kind, cpu, wall in outer:
            pages[kind]["cpu"].append(cpu)
            pages[kind]["wall"].append(wall)
        return {
            "rounds": done,
            "sets": sets,
            "whole": whole,
            "kinds": dict(by_kind),
            "pages": dict(pages),
        }

    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("quit"):
            break
        profiling[0] = command.get("measured", False)
        result = play(command.get("rounds", 0), command.get("sets", 0))
        print(json.dumps(result), flush=True)
    for kind, profiler in profilers.items():
        profiler.create_stats()
        if profiler.stats:  # none for a kind the turns never requested (home, with --rounds)
            profiler.dump_stats(profile_files[kind])
    with flask_app.app_context():
        db.session.remove()
        db.engine.dispose()


def _multi(fields):
    from werkzeug.datastructures import MultiDict

    return MultiDict(list(fields))


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


# --- The driver ----------------------------------------------------------------------------------


class Worker:
    def __init__(self, name: str, tree: Path, spec: dict) -> None:
        self.name = name
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.setdefault("SECRET_KEY", "bench-secret-key")
        env.pop("REDIS_URL", None)
        self.cache = Path(tempfile.mkdtemp(prefix=f"roundcpu-{name}-"))
        env["CACHE_DIR"] = str(self.cache)
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), WORKER_COMMAND, json.dumps(spec)],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = json.loads(self._line())["ready"]

    def _line(self) -> str:
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.name} worker stopped (its errors are above)")
        return line

    def play(self, rounds: int, sets: int = 0, measured: bool = False) -> dict:
        command = {"rounds": rounds, "sets": sets, "measured": measured}
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return json.loads(self._line())

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"quit": True}) + "\n")
                self.process.stdin.flush()
                self.process.wait(timeout=120)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.cache, ignore_errors=True)


def profile_turn(worker: Worker, rounds: int, sets: int, folder: Path) -> None:
    """An unmeasured turn under py-spy (--gil), and its hottest frames."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    folder.mkdir(parents=True, exist_ok=True)
    outputs = []
    for fmt, suffix in (("raw", "txt"), ("flamegraph", "svg")):
        outputs.append(
            subprocess.Popen(
                [
                    *(py_spy, "record", "--pid", str(worker.pid), "--gil", "--rate", "250"),
                    *("--format", fmt, "--output", str(folder / f"{worker.name}.{suffix}")),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    time.sleep(1.5)
    worker.play(rounds, sets)
    for process in outputs:
        process.send_signal(2)
        process.wait(timeout=60)
    collapsed = folder / f"{worker.name}.txt"
    if not collapsed.exists():
        print(f"  no profile of {worker.name} (py-spy failed; is ptrace allowed?)")
        return
    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = stack.split(";")
        own[_short(frames[-1])] += n
        for frame in set(map(_short, frames)):
            under[frame] += n
    print(f"  profile of {worker.name}: {total} samples (--gil: CPU holding the GIL)")
    print("    own samples:")
    for frame, n in own.most_common(20):
        print(f"      {100 * n / total:5.1f}%  {frame}")
    print("    samples under (app code):")
    app_frames = [(f, n) for f, n in under.most_common() if "(app/" in f]
    for frame, n in app_frames[:30]:
        print(f"      {100 * n / total:5.1f}%  {frame}")


def _short(frame: str) -> str:
    return re.sub(r"\(.*?/(site-packages|app|lib/python3\.\d+)/", r"(\1/", frame)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=_HelpFormatter, epilog="Results: docs/performance.md."
    )
    add = parser.add_argument
    trees_help = "also run a git worktree of REF (repeatable, in order; the first: the baseline)"
    refs = {"dest": "refs", "action": "append", "default": [], "metavar": "REF"}
    add("--baseline-ref", "--ref", **refs, help=trees_help)
    add("--database", choices=("postgresql", "sqlite"), default="postgresql")
    add("--texts", type=int, default=3000, help="texts in each database")
    add("--seed-rounds", type=int, default=20000, help="answered rounds stored first")
    add("--seed-players", type=int, default=400, help="players of those rounds")
    add("--no-seed", action="store_true", help="reuse an earlier run's databases (PostgreSQL)")
    add("--players", type=int, default=8, help="bench players per tree")
    add("--turns", type=int, default=8, help="measured turns per tree")
    add("--rounds", type=int, default=30, help="completed rounds per turn")
    add("--sets", type=int, default=0, help="whole sets per turn instead of --rounds rounds")
    add(
        "--warmup",
        type=int,
        help="unmeasured rounds first, 10 if None (with --sets: sets, one turn's)",
    )
    add("--compress", action="store_true", help="accept compressed pages, as web_load's players")
    add("--pages", action="store_true", help="print the per-page table without --sets too")
    add("--profile", type=Path, metavar="DIR", help="py-spy each tree into DIR")
    add("--cprofile", type=Path, metavar="DIR", help="cProfile files per tree and kind in DIR")
    args = parser.parse_args(argv)
    if args.no_seed and args.database != "postgresql":
        parser.error("--no-seed reuses PostgreSQL databases only")

    sys.path.append(str(ROOT))
    web_load = _load("roundcpu_web_load", ROOT / "bench" / "web_load.py")
    with ExitStack() as stack:
        trees = []
        for number, ref in enumerate(args.refs):
            tree = stack.enter_context(web_load.baseline_worktree(ref))
            trees.append(tree if number == 0 else dataclasses.replace(tree, name=f"ref{number}"))
        trees.append(web_load.current_tree())
        web_load.PG_DATABASES.update({tree.name: f"{_PG_PREFIX}_rc_{tree.name}" for tree in trees})
        web_load.PG_DATABASES.update(
            {"baseline": f"{_PG_PREFIX}_rc_base", "current": f"{_PG_PREFIX}_rc_head"}
        )
        work = Path(tempfile.mkdtemp(prefix="roundcpu-"))
        stack.callback(shutil.rmtree, work, True)
        sides = [web_load.Side(tree, work / tree.name) for tree in trees]
        print(
            f"{args.database}: {args.texts} texts, {args.seed_rounds} seeded rounds; "
            f"{' vs '.join(f'{t.name} {t.label}' for t in trees)}; load average "
            f"{os.getloadavg()[0]:.2f}",
            flush=True,
        )
        if args.no_seed:
            for side in sides:
                side.url = web_load.pg_database_url(web_load.PG_DATABASES[side.tree.name], False)
        else:
            seed_args = argparse.Namespace(
                texts=args.texts, seed_rounds=args.seed_rounds, seed_players=args.seed_players
            )
            web_load.prepare_databases(args.database, sides, seed_args, args.players)
        if args.cprofile:
            args.cprofile.mkdir(parents=True, exist_ok=True)
        workers = []
        for side in sides:
            spec = {
                "name": side.tree.name,
                "tree": str(side.tree.root),
                "url": side.url,
                "players": args.players,
                "password": web_load.PASSWORD,
                "compress": args.compress,
                "cprofile": str(args.cprofile.resolve()) if args.cprofile else None,
            }
            started = Worker(side.tree.name, side.tree.root, spec)
            stack.callback(started.stop)
            workers.append(started)
        rounds, sets = (0, args.sets) if args.sets else (args.rounds, 0)
        for each in workers:
            if sets:
                each.play(0, args.sets if args.warmup is None else args.warmup)
            else:
                each.play(10 if args.warmup is None else args.warmup)
        results: dict[str, list[dict]] = {each.name: [] for each in workers}
        loads = []
        for turn in range(args.turns):
            for k in range(len(workers)):
                each = workers[(turn + k) % len(workers)]
                results[each.name].append(each.play(rounds, sets, measured=True))
            loads.append(os.getloadavg()[0])
        names = [each.name for each in workers]
        report(results, names, args, loads)
        if args.sets or args.pages:
            report_pages(results, names, args)
        if args.profile:
            for each in workers:
                profile_turn(each, rounds * 5, sets * 5, args.profile)
        for each in workers:
            each.stop()  # writes the cProfile files
    if args.cprofile:
        import pstats

        for name in names:
            path = args.cprofile / f"{name}.home.prof"
            if path.exists():
                print(f"\n{name}: the home page, by cumulative time")
                pstats.Stats(str(path)).sort_stats("cumulative").print_stats(25)
    return 0


def report(results: dict[str, list[dict]], names: list[str], args, loads: list[float]) -> None:
    """Per request kind: the app's CPU (the WSGI wrapper's), statements, later trees / the first."""
    kinds = [name for name, *_ in KINDS]
    unit = f"{args.sets} sets" if args.sets else f"{args.rounds} rounds"
    print(
        f"\n{args.turns} turns x {unit} per tree, CPU of the app in process "
        f"(median over turns of the mean per request); load average during: "
        f"{min(loads):.2f}-{max(loads):.2f}"
    )
    header = f"{'request':<12}" + "".join(
        f"{n + ' n':>14}{n + ' ms':>14}{'stmts':>7}" for n in names
    )
    later = names[1:]
    for name in later:
        label = "ratio" if len(names) == 2 else f"{name}/base"
        header += f"{label:>{max(8, len(label) + 2)}}{'turns':>22}"
    print(header)
    for kind in [*kinds, "per round"]:
        line = f"{kind:<12}"
        per_turn: dict[str, list[float]] = {}
        for name in names:
            turns = results[name]
            if kind == "per round":
                values = [sum(e[1] for e in t["kinds"].values()) / t["rounds"] for t in turns]
                count = sum(t["rounds"] for t in turns)
                stmts = sum(sum(e[2] for e in t["kinds"].values()) for t in turns) / count
            else:
                present = [t["kinds"][kind] for t in turns if kind in t["kinds"]]
                if not present:
                    line += f"{'-':>14}{'-':>14}{'-':>7}"
                    continue
                values = [e[1] / e[0] for e in present]
                count = sum(e[0] for e in present)
                stmts = sum(e[2] for e in present) / count
            per_turn[name] = values
            line += f"{count:>14}{statistics.median(values) * 1000:>14.3f}{stmts:>7.2f}"
        base = names[0]
        for name in later:
            if base not in per_turn or name not in per_turn:
                continue
            ratio = statistics.median(per_turn[name]) / statistics.median(per_turn[base])
            pairs = [c / b for b, c in zip(per_turn[base], per_turn[name], strict=False) if b]
            spread = f"{min(pairs):.2f}-{max(pairs):.2f}" if pairs else ""
            width = 8 if len(names) == 2 else max(8, len(name) + 7)
            line += f"{ratio:>{width}.3f}{spread:>22}"
        print(line)
    print(
        "\nwhere it goes, ms per request (median over turns): before-request hooks / view /"
        " after-request hooks / around"
    )
    for kind in kinds:
        line = f"{kind:<12}"
        for name in names:
            present = [t["kinds"][kind] for t in results[name] if kind in t["kinds"]]
            if not present:
                continue
            parts = [
                statistics.median(e[3].get(part, 0.0) / e[0] for e in present) * 1000
                for part in ("before", "view", "after", "around")
            ]
            line += f"  {name}: " + " / ".join(f"{p:.2f}" for p in parts)
        print(line)


def median_ratio(turns_a: list[dict], turns_b: list[dict], route: str) -> float | None:
    """The median over turns of (a's median / b's median) CPU for `route`."""
    ratios = []
    for a, b in zip(turns_a, turns_b, strict=True):
        cpu_a, cpu_b = a["pages"].get(route, {}).get("cpu"), b["pages"].get(route, {}).get("cpu")
        if cpu_a and cpu_b:
            ratios.append(statistics.median(cpu_a) / statistics.median(cpu_b))
    return statistics.median(ratios) if ratios else None


def report_pages(results: dict[str, list[dict]], names: list[str], args) -> None:
    """Per route: the median CPU (wall) around the test client, every tree / every tree before
    it, and what a whole set (a round, without --sets) cost."""
    runs = [results[name] for name in names]
    print(
        "\nper page, median CPU (wall) ms per request around the test client's call;"
        " ratios: the median over turns of the turns' medians"
    )
    pairs = [(i, j) for i in range(1, len(names)) for j in range(i)]
    print(
        "| route | "
        + " | ".join(names)
        + "".join(f" | {names[i]} / {names[j]}" for i, j in pairs)
        + " |"
    )
    print("|---" * (1 + len(names) + len(pairs)) + "|")
    for route in ROUTES:
        cells = []
        for turns in runs:
            cpu = [x for t in turns for x in t["pages"].get(route, {}).get("cpu", [])]
            wall = [x for t in turns for x in t["pages"].get(route, {}).get("wall", [])]
            cells.append(
                f"{statistics.median(cpu) * 1000:.2f} ({statistics.median(wall) * 1000:.2f})"
                if cpu
                else "-"
            )
        ratios = [median_ratio(runs[i], runs[j], route) for i, j in pairs]
        cells += [f"{r:.2f}x" if r is not None else "-" for r in ratios]
        print(f"| {route} | " + " | ".join(cells) + " |")
    # Everything a set (a round) cost: every request of it, the home page and summary included.
    unit = "sets" if args.sets else "rounds"
    whole = [
        [sum(sum(p["cpu"]) for p in t["pages"].values()) * 1000 / t[unit] for t in turns]
        for turns in runs
    ]
    cells = [f"{statistics.median(values):.1f}" for values in whole]
    cells += [
        f"{statistics.median(a / b for a, b in zip(whole[i], whole[j], strict=True)):.2f}x"
        for i, j in pairs
    ]
    print(f"| a whole {unit[:-1]}, CPU ms | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == WORKER_COMMAND:
        worker(json.loads(sys.argv[2]))
    else:
        raise SystemExit(main())

"""In-process benchmark: the app's CPU per request of a round, against an earlier commit.

    .venv/bin/python bench/round_cpu.py --baseline-ref 0537e7a [--database postgresql]
        [--texts 3000] [--turns 8] [--rounds 30] [--players 8] [--profile DIR]

No server and no network client: each tree (the current checkout, and with --baseline-ref a
detached git worktree of REF) runs in a process of its own that plays whole sets of texts through
Flask's test client with the page's script (the requests of bench/protocol.py, as
bench/web_load.py plays them, with its players' choices), and measures the CPU time of its own
process spent inside the app for each request (a WSGI wrapper around the app: the session
cookie, Flask-Login, CSRF, the limiter, the view, the template, the security headers and the
access line, which goes to /dev/null; not the test client building the request or the player
parsing the page). The two processes take turns, --rounds completed rounds each per turn, the
order alternating from turn to turn, so that the machine's load falls on both alike.

Each tree gets a fresh database prepared by its own code, exactly as bench/web_load.py prepares
one (`--seed-tree`: the demo texts repeated to --texts, --seed-rounds answered rounds of
--seed-players background players with their totals and boards, the bench players), named
`<BENCH_PG_PREFIX>_rc_base` and `_rc_head` on PostgreSQL (roft_roundcpu by default), or a SQLite
file.
The players' choices and the text picks' random points come from fixed seeds, so both trees play
the same decisions.

Printed per request kind (reveal, answer, "Next text", the start of a set, the round's page, the
summary, the home page): how many were timed, the median over the turns of the mean CPU per
request, the statements per request, and current / baseline; the CPU per completed round; and
each kind's CPU split into the before-request hooks, the view, the after-request hooks and the
rest (the request's context, the cookie read). ROUNDCPU_CPROFILE=KIND,FILE runs cProfile over
the requests of one kind (e.g. reveal) and writes its statistics to FILE (wall time: to look
at, not to compare).
--profile DIR runs an extra, unmeasured turn per tree under `py-spy record --gil` and writes
DIR/<tree>.txt (collapsed stacks) and DIR/<tree>.svg, then prints each tree's hottest functions
by samples of their own and by samples under them.
"""

from __future__ import annotations

import argparse
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
_PG_PREFIX = os.environ.get("BENCH_PG_PREFIX", "roft_roundcpu")


def kind_of(method: str, path: str) -> str:
    for name, wanted, pattern in KINDS:
        if method == wanted and pattern.fullmatch(path):
            return name
    return f"{method} other"


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
    sys.path[0] = str(tree)
    protocol = _load("roundcpu_protocol", ROOT / "bench" / "protocol.py")
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
    timed: list[tuple[str, float, int]] = []
    inner = flask_app.wsgi_app

    # ROUNDCPU_CPROFILE=KIND,PATH: run cProfile over the requests of one kind (e.g. reveal) and
    # write its statistics to PATH when the worker ends (for looking, not for timing).
    cprofile_kind, _, cprofile_path = os.environ.get("ROUNDCPU_CPROFILE", "").partition(",")
    profiler = None
    if cprofile_kind:
        import cProfile

        profiler = cProfile.Profile()

    def measured(environ, start_response):
        kind = kind_of(environ["REQUEST_METHOD"], environ["PATH_INFO"])
        profiled = profiler is not None and kind == cprofile_kind
        ran = statements[0]
        if profiled:
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
        if profiled:
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
    from roftcore.reasons import REASONS

    codes = sorted(REASONS)  # as bench/web_load.py's players choose

    def chooser(rng):
        def decide(view):
            if view.can_reveal and (not view.can_flag or rng.random() < 0.7):
                return protocol.Choice("reveal")
            if view.can_flag and (view.can_reveal or rng.random() < 0.5):
                return protocol.Choice(
                    "machine",
                    tuple(rng.sample(codes, 2)),
                    "The last sentence drifts away from the topic.",
                )
            return protocol.Choice("human")

        return decide

    players = []
    for number in range(spec["players"]):
        client = flask_app.test_client()
        protocol.log_in_test_client(client, f"bench{number:03d}", spec["password"])
        rng = random.Random(1000 + number)
        players.append([client, protocol.play_sets(chooser(rng), script=True), None])
    # The text picks' random points: the same sequence in both trees.
    random.seed(spec.get("seed", 7))

    def send(client, request):
        if request.content_type == protocol.URLENCODED:
            response = client.open(
                request.path,
                method=request.method,
                data=_multi(request.fields),
                headers=request.headers,
                content_type=request.content_type,
            )
        else:
            response = client.open(request.path, method=request.method, headers=request.headers)
        return protocol.Reply(
            response.status_code,
            response.headers.get("Location"),
            response.get_data(as_text=True),
            response.headers.get("X-Round-URL"),
        )

    def play(rounds: int) -> dict:
        timed.clear()
        done = 0
        started = time.process_time()
        turn = 0
        while done < rounds:
            player = players[turn % len(players)]
            turn += 1
            client, game, reply = player
            # One round per player in turn: requests until an answer.
            while True:
                request = game.send(reply) if reply is not None else next(game)
                reply = send(client, request)
                if reply.status != request.expect:
                    raise SystemExit(
                        f"{request.method} {request.path} answered {reply.status}:"
                        f" {reply.text[:300]}"
                    )
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
        return {"rounds": done, "whole": whole, "kinds": dict(by_kind)}

    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("quit"):
            break
        result = play(command["rounds"])
        print(json.dumps(result), flush=True)
    if profiler is not None:
        profiler.dump_stats(cprofile_path)
    with flask_app.app_context():
        db.session.remove()
        db.engine.dispose()


def _multi(fields):
    from werkzeug.datastructures import MultiDict

    return MultiDict(list(fields))


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

    def play(self, rounds: int) -> dict:
        self.process.stdin.write(json.dumps({"rounds": rounds}) + "\n")
        self.process.stdin.flush()
        return json.loads(self._line())

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"quit": True}) + "\n")
                self.process.stdin.flush()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.cache, ignore_errors=True)


def profile_turn(worker: Worker, rounds: int, folder: Path) -> None:
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
    worker.play(rounds)
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
        description=__doc__, formatter_class=_HelpFormatter, epilog="Results: docs/BENCHMARKS.md."
    )
    parser.add_argument("--baseline-ref", metavar="REF", help="also run a git worktree of REF, A-B")
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--texts", type=int, default=3000, help="texts in each database")
    parser.add_argument(
        "--seed-rounds", type=int, default=20000, help="answered rounds stored first"
    )
    parser.add_argument("--seed-players", type=int, default=400, help="players of those rounds")
    parser.add_argument("--players", type=int, default=8, help="bench players per tree")
    parser.add_argument("--turns", type=int, default=8, help="measured turns per tree")
    parser.add_argument("--rounds", type=int, default=30, help="completed rounds per turn")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured rounds first")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="py-spy each tree into DIR")
    args = parser.parse_args(argv)

    sys.path.append(str(ROOT))
    web_load = _load("roundcpu_web_load", ROOT / "bench" / "web_load.py")
    web_load.PG_DATABASES.update(
        {"baseline": f"{_PG_PREFIX}_rc_base", "current": f"{_PG_PREFIX}_rc_head"}
    )
    with ExitStack() as stack:
        trees = [web_load.current_tree()]
        if args.baseline_ref:
            trees.insert(0, stack.enter_context(web_load.baseline_worktree(args.baseline_ref)))
        work = Path(tempfile.mkdtemp(prefix="roundcpu-"))
        stack.callback(shutil.rmtree, work, True)
        sides = [web_load.Side(tree, work / tree.name) for tree in trees]
        print(
            f"{args.database}: {args.texts} texts, {args.seed_rounds} seeded rounds; "
            f"{' vs '.join(f'{t.name} {t.label}' for t in trees)}; load average "
            f"{os.getloadavg()[0]:.2f}",
            flush=True,
        )
        seed_args = argparse.Namespace(
            texts=args.texts, seed_rounds=args.seed_rounds, seed_players=args.seed_players
        )
        web_load.prepare_databases(args.database, sides, seed_args, args.players)
        workers = []
        for side in sides:
            spec = {
                "tree": str(side.tree.root),
                "url": side.url,
                "players": args.players,
                "password": web_load.PASSWORD,
            }
            started = Worker(side.tree.name, side.tree.root, spec)
            stack.callback(started.stop)
            workers.append(started)
        for each in workers:
            each.play(args.warmup)
        results: dict[str, list[dict]] = {each.name: [] for each in workers}
        loads = []
        for turn in range(args.turns):
            order = workers if turn % 2 == 0 else workers[::-1]
            for each in order:
                results[each.name].append(each.play(args.rounds))
            loads.append(os.getloadavg()[0])
        report(results, [each.name for each in workers], args, loads)
        if args.profile:
            for each in workers:
                profile_turn(each, args.rounds * 5, args.profile)
    return 0


def report(results: dict[str, list[dict]], names: list[str], args, loads: list[float]) -> None:
    kinds = [name for name, *_ in KINDS]
    print(
        f"\n{args.turns} turns x {args.rounds} rounds per tree, CPU of the app in process "
        f"(median over turns of the mean per request); load average during: "
        f"{min(loads):.2f}-{max(loads):.2f}"
    )
    header = f"{'request':<12}" + "".join(
        f"{n + ' n':>14}{n + ' ms':>14}{'stmts':>7}" for n in names
    )
    if len(names) == 2:
        header += f"{'ratio':>8}{'turns':>22}"
    print(header)
    medians: dict[tuple[str, str], float] = {}
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
            medians[name, kind] = statistics.median(values)
            line += f"{count:>14}{medians[name, kind] * 1000:>14.3f}{stmts:>7.2f}"
        if len(names) == 2 and all(n in per_turn for n in names):
            base, current = names
            ratio = medians[current, kind] / medians[base, kind]
            pairs = [c / b for b, c in zip(per_turn[base], per_turn[current], strict=False) if b]
            spread = f"{min(pairs):.2f}-{max(pairs):.2f}" if pairs else ""
            line += f"{ratio:>8.3f}{spread:>22}"
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


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == WORKER_COMMAND:
        worker(json.loads(sys.argv[2]))
    else:
        raise SystemExit(main())

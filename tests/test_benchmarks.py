"""The benchmarks still run end to end, at a tiny size (their numbers are not checked here).

Each pass of `make test` runs them on its database: SQLite, then PostgreSQL.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import mixed
from app import PROJECT_ROOT
from bench.web_load import Tally, ratio_line
from tests.nginx_server import nginx_binary

DATABASE = "postgresql" if os.environ.get("TEST_DATABASE_URL") else "sqlite"


def bench_env() -> dict[str, str]:
    """The environment of a benchmark run: on PostgreSQL, database names of this test run's own
    (web_load.py drops and recreates its databases, and the default names are shared by every
    checkout and pytest worker on the server, so two runs at once would drop each other's)."""
    env = dict(os.environ)
    if DATABASE == "postgresql":
        test_db = re.sub(r"\W", "_", os.environ["TEST_DATABASE_URL"].rsplit("/", 1)[-1])
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        env["BENCH_PG_PREFIX"] = f"lb_{test_db}_{worker}"[:40]
    return env


def run_bench(script: str, *args: str) -> str:
    finished = subprocess.run(
        [sys.executable, f"bench/{script}", "--database", DATABASE, *args],
        cwd=PROJECT_ROOT,
        env=bench_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    return finished.stdout


TINY_LOAD = (
    *("--players", "2", "--seconds", "1", "--think", "0.05,0.1", "--pairs", "1"),
    # Texts of some 500 passages, as two copies of the demo set gave: a player reads each passage
    # once, and with fewer the bench players run out of texts mid-run (409 on "Play").
    *("--texts", "2700", "--seed-rounds", "200", "--seed-players", "20", "--warmup", "0.5"),
)


def load_rows(out: str) -> dict[tuple[str, str], list[str]]:
    """(tree, mode) -> the fields of its row in web_load.py's table."""
    return {
        (fields[2], fields[3]): fields
        for line in out.splitlines()
        if line.startswith(DATABASE) and (fields := line.split())
    }


def assert_played_and_checked(out: str, trees: set[str]) -> None:
    rows = load_rows(out)
    assert set(rows) == {(tree, mode) for tree in trees for mode in ("script", "form", "paced")}
    for (tree, mode), fields in rows.items():
        assert fields[1] == "2", (tree, mode)  # 2 players
        assert float(fields[4]) > 0, (tree, mode)  # rounds/s
        assert float(fields[5]) > 0, (tree, mode)  # server CPU ms per round
        assert float(fields[-3]) > 0, (tree, mode)  # the load client's CPU ms per round
        # PostgreSQL's CPU ms per round; none measured on SQLite.
        assert (float(fields[-4]) > 0) == (DATABASE == "postgresql"), (tree, mode, fields)
        assert fields[-1] == "0", (tree, mode)  # no errors
    # The script needs fewer requests per round than plain forms (one per action).
    for tree in trees:
        assert float(rows[tree, "script"][6]) < float(rows[tree, "form"][6])
    for tree in trees:
        match = re.search(rf"database check \({DATABASE}, {tree}\): (\d+) rounds, (.*)", out)
        assert match and int(match[1]) > 0 and match[2] == "OK", out[-2000:]


def test_web_load_plays_rounds_without_errors_and_checks_the_database():
    out = run_bench("web_load.py", *TINY_LOAD)
    assert_played_and_checked(out, {"current"})
    assert "current / baseline" not in out


def test_web_load_compares_server_configurations_of_the_current_tree():
    configs = (
        "sync:GUNICORN_WORKER_CLASS=sync,GUNICORN_WORKERS=2;"
        "threads:GUNICORN_WORKER_CLASS=gthread,GUNICORN_WORKERS=1,GUNICORN_THREADS=2"
    )
    out = run_bench("web_load.py", "--configs", configs, "--modes", "script", "--keep", *TINY_LOAD)
    kept = Path(re.search(r"gunicorn logs and SQLite files kept in (\S+)", out)[1])
    try:
        logs = {tree: (kept / tree / "gunicorn.log").read_text() for tree in ("sync", "threads")}
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    # Each configuration ran as asked, by its own gunicorn's account.
    assert "Using worker: sync" in logs["sync"] and "Using worker: gthread" in logs["threads"]
    # How each listened, which the host's kernel setting decides for threads, is printed.
    assert "  sync listens on one socket shared by the workers: sync workers" in out
    assert re.search(r"  threads listens on (a socket per worker|one socket shared by .*): ", out)
    rows = load_rows(out)
    assert set(rows) == {
        (tree, mode) for tree in ("sync", "threads") for mode in ("script", "paced")
    }
    assert all(fields[-1] == "0" for fields in rows.values())  # no errors
    assert re.search(rf"{DATABASE} +2 script threads / sync cpu/round [\d.]+× .*round p99", out)
    for tree in ("sync", "threads"):
        match = re.search(rf"database check \({DATABASE}, {tree}\): (\d+) rounds, (.*)", out)
        assert match and int(match[1]) > 0 and match[2] == "OK", out[-2000:]


@pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (make test installs it)")
def test_web_load_behind_nginx_plays_through_the_proxy_and_checks_the_database():
    out = run_bench("web_load.py", "--proxy", "both", "--modes", "script", "--keep", *TINY_LOAD)
    kept = Path(re.search(r"gunicorn logs and SQLite files kept in (\S+)", out)[1])
    try:
        proxied = (kept / "current_nginx" / "nginx" / "access.log").read_text()
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    rows = load_rows(out)
    assert set(rows) == {
        (tree, mode) for tree in ("current", "current_nginx") for mode in ("script", "paced")
    }
    for (tree, mode), fields in rows.items():
        assert float(fields[4]) > 0 and float(fields[5]) > 0, (tree, mode)
        assert fields[-1] == "0", (tree, mode)  # no errors
        # nginx's CPU per round: measured behind it, "-" for the server players reach directly.
        assert (fields[-2] == "-") == (tree == "current"), fields
    # The players of current_nginx went through nginx: it logged their game requests, each
    # answered by the one gunicorn behind it; nginx logged no error.
    answers = re.findall(r'"POST /play/round/\d+/answer HTTP/1.1" 200 .* upstream=(\S+)', proxied)
    assert answers and len(set(answers)) == 1, proxied[-2000:]
    assert "nginx of current_nginx: 0 error lines in its log" in out
    assert re.search(
        rf"{DATABASE} +2 script current_nginx / current cpu/round [\d.]+×.*"
        r"gunicorn\+nginx cpu/round [\d.]+×",
        out,
    )
    for tree in ("current", "current_nginx"):
        match = re.search(rf"database check \({DATABASE}, {tree}\): (\d+) rounds, (.*)", out)
        assert match and int(match[1]) > 0 and match[2] == "OK", out[-2000:]


@pytest.mark.skipif(DATABASE != "sqlite", reason="the SQLite pass covers the worktree")
def test_web_load_against_a_baseline_worktree_measures_both_trees():
    out = run_bench("web_load.py", "--baseline-ref", "HEAD", *TINY_LOAD)
    assert_played_and_checked(out, {"baseline", "current"})
    for mode in ("script", "form"):
        assert re.search(rf"{DATABASE} +2 {mode} +cpu/round [\d.]+× .*rounds/s [\d.]+×", out)
    assert re.search(rf"{DATABASE} +2 paced +p50/p99 per request: baseline .*, current ", out)
    # The baseline ran from its own worktree, which is gone afterwards.
    baseline = Path(re.search(r"baseline = \w+ \((\S+)\)", out)[1])
    assert baseline != PROJECT_ROOT and not baseline.exists()
    worktrees = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=PROJECT_ROOT, capture_output=True, text=True
    ).stdout
    assert f"worktree {baseline}\n" not in worktrees


def test_leaderboard_bench_agrees_with_the_naive_queries():
    out = run_bench(
        "leaderboard.py",
        *("--rounds", "3000", "--players", "60", "--guests", "10", "--examples", "200"),
        *("--sample", "10", "--passes", "1", "--repeat", "5", "--warmup", "1"),
        *("--naive-repeat", "1", "--naive-sample", "3"),
    )
    for board in (
        "skill all overall",
        "points all news",
        "skill week overall",
        "points month recipes",
    ):
        assert f"| rank of one player | {board} |" in out, board


@pytest.mark.skipif(DATABASE != "sqlite", reason="in process, on a SQLite file of its own")
def test_request_overhead_bench_measures_every_variant_and_counts_the_limiters_calls():
    finished = subprocess.run(
        [sys.executable, "bench/request_overhead.py", "--requests", "3", "--repeats", "1"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    rows = {
        line[:46].strip(): line[46:].split()
        for line in finished.stdout.splitlines()[2:]
        if line.strip()
    }
    assert len(rows) == 11 and rows["multipart, token in body (baseline)"][1] == "1.000"
    calls = {name: float(fields[2]) for name, fields in rows.items()}
    # The hot routes have no limits and signed-in players are exempt: no storage call.
    assert calls["url-encoded, token in body"] == calls["limited view, signed in (exempt)"] == 0
    # A visitor is counted; the X-RateLimit headers (now off) cost more calls on top.
    counted = calls["limited view, visitor (counted), CSRF off"]
    assert 0 < counted < calls["limited view, visitor, CSRF off, headers on"]


def test_round_cpu_bench_times_each_request_of_a_round_on_both_trees():
    out = run_bench(
        "round_cpu.py",
        *("--baseline-ref", "HEAD", "--texts", "1000", "--seed-rounds", "200"),
        *("--seed-players", "20", "--players", "2", "--turns", "2", "--rounds", "2"),
        "--warmup",
        "1",
    )
    table = out.split("where it goes")[0]
    rows = {
        fields[0]: fields
        for line in table.splitlines()
        if (fields := line.split()) and fields[0] in ("reveal", "answer")
    }
    # name, then per tree: requests timed, CPU ms, statements; then the ratio and its turns.
    for kind in ("reveal", "answer"):
        fields = rows[kind]
        assert int(fields[1]) == int(fields[4]) > 0, out[-2000:]  # both trees played alike
        assert float(fields[2]) > 0 and float(fields[5]) > 0
        assert float(fields[7]) > 0
    assert re.search(r"^per round +4 ", out, re.MULTILINE), out[-2000:]
    assert "where it goes" in out and "baseline:" in out


def test_round_cpu_bench_times_each_page_of_whole_sets_on_three_trees(tmp_path):
    """page_cpu's view: whole sets, compressed pages, three trees and cProfile files per kind."""
    out = run_bench(
        "round_cpu.py",
        *("--ref", "HEAD", "--ref", "HEAD", "--texts", "1000", "--seed-rounds", "200"),
        *("--seed-players", "20", "--players", "2", "--turns", "2", "--sets", "1"),
        *("--compress", "--cprofile", str(tmp_path)),
    )
    pages = out.split("per page")[1]
    rows = {
        cells[0]: cells[1:]
        for line in pages.splitlines()
        if line.startswith("| ")
        and (cells := [cell.strip() for cell in line.strip("|").split("|")])
    }
    # route, then CPU (wall) ms per tree, then each tree / each tree before it.
    assert rows["route"] == [
        *("baseline", "ref1", "current"),
        *("ref1 / baseline", "current / baseline", "current / ref1"),
    ]
    for route in ("home", "start", "round page", "reveal", "answer", "next text", "summary"):
        cpu = [float(cell.split()[0]) for cell in rows[route][:3]]
        assert all(ms > 0 for ms in cpu), out[-3000:]
        assert all(cell.endswith("x") for cell in rows[route][3:])
    assert len(rows["a whole set, CPU ms"]) == 6
    # The per-request table counts the same requests in every tree: one set each turn.
    starts = next(line.split() for line in out.splitlines() if line.startswith("start "))
    assert starts[1] == starts[4] == starts[7] == "2", out[-3000:]
    assert (tmp_path / "current.reveal.prof").exists() and "the home page" in out


def _phase(cpu: float, proxy_cpu: float) -> Tally:
    return Tally(round_times=[0.5, 1.0], rounds=10, elapsed=1.0, cpu=cpu, proxy_cpu=proxy_cpu)


def test_the_host_cpu_ratio_is_printed_for_a_proxied_pair_even_when_nginx_used_no_tick():
    """In a short run nginx may use less than a clock tick: its 0 is a measurement, and the line
    still gives gunicorn's and nginx's CPU together (it failed a CI run when it did not)."""
    direct, behind = [_phase(0.2, 0.0)], [_phase(0.1, 0.0)]
    proxied = ratio_line("postgresql", 2, "script", direct, behind, "b / a", proxied=True)
    assert re.search(r"cpu/round 0\.50×.*gunicorn\+nginx cpu/round 0\.50×", proxied), proxied
    behind = [_phase(0.1, 0.05)]
    proxied = ratio_line("postgresql", 2, "script", direct, behind, "b / a", proxied=True)
    assert "gunicorn+nginx cpu/round 0.75×" in proxied, proxied
    assert "nginx" not in ratio_line("postgresql", 2, "script", direct, direct)


@pytest.mark.skipif(
    mixed.r_available() is None, reason="R with lme4 is not installed (scripts/ensure-r.sh)"
)
def test_mixed_models_bench_fits_both_models_at_the_sizes_asked():
    finished = subprocess.run(
        [sys.executable, "bench/mixed_models.py", "--rows", "2000", "--per-text", "50"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    lines = finished.stdout.splitlines()
    assert [line.split(",")[0].strip() for line in lines] == ["2", "2"]  # "2,000 rows, ..."
    assert "100 annotators, 40 texts, exact_hit" in lines[0] and "glmer" in lines[0]
    assert "40 texts, points" in lines[1] and "lmer" in lines[1]

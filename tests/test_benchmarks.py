"""The benchmarks still run end to end, at a tiny size (their numbers are not checked here).

Each pass of `make test` runs them on its database: SQLite, then PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys

from app import PROJECT_ROOT

DATABASE = "postgresql" if os.environ.get("TEST_DATABASE_URL") else "sqlite"


def run_bench(script: str, *args: str) -> str:
    finished = subprocess.run(
        [sys.executable, f"bench/{script}", "--database", DATABASE, *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    return finished.stdout


def test_web_load_plays_rounds_without_errors_and_checks_the_database():
    out = run_bench(
        "web_load.py", "--players", "2", "--seconds", "1", "--think", "0.05,0.1", "--copies", "2"
    )
    rows = {
        fields[2]: fields
        for line in out.splitlines()
        if line.startswith(DATABASE) and (fields := line.split())
    }
    assert set(rows) == {"form", "script", "paced"}
    for mode in ("form", "script"):
        assert rows[mode][1] == "2" and rows[mode][-1] == "0"  # 2 players, 0 errors
    assert f"database check ({DATABASE}):" in out and out.rstrip().endswith("OK")


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

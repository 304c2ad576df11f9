"""bench/round_cpu.py (bench/page_cpu.py merged into it): every request of a set it plays is put
under its kind, and its help says what it measures, both views and the merge."""

from __future__ import annotations

import subprocess
import sys

from bench.round_cpu import KINDS, ROUTES, kind_of


def test_each_request_of_the_protocol_has_its_kind():
    requests = [
        ("GET", "/", "home"),
        ("POST", "/play", "start"),
        ("GET", "/play/round/12", "round page"),
        ("POST", "/play/round/12/next", "reveal"),
        ("POST", "/play/round/12/answer", "answer"),
        ("POST", "/sets/3/next", "next text"),
        ("GET", "/sets/3", "summary"),
    ]
    for method, path, kind in requests:
        assert kind_of(method, path) == kind, path
    # The per-request table and the per-page table cover the same requests.
    assert {kind for _, _, kind in requests} == set(ROUTES) == {name for name, *_ in KINDS}
    # Anything else is kept apart under its own name, not counted with a kind.
    assert kind_of("GET", "/play/round/12?flag=1") == "GET /play/round/12?flag=1"
    assert kind_of("GET", "/play") == "GET /play"
    assert kind_of("GET", "/play/round/12/next") == "GET /play/round/12/next"


def test_the_help_says_what_it_measures():
    shown = subprocess.run(
        [sys.executable, "bench/round_cpu.py", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for option in ("--baseline-ref", "--ref", "--sets", "--compress", "--pages", "--no-seed"):
        assert option in shown, option
    for option in ("--profile", "--cprofile", "ROUNDCPU_CPROFILE"):
        assert option in shown, option
    assert "process_time" in shown and "page_cpu.py" in shown and "3da502d" in shown

"""bench/page_cpu.py: every request of a set it plays is put under its route."""

from __future__ import annotations

import subprocess
import sys

from bench.page_cpu import ROUTES, route_of


def test_each_request_of_the_protocol_has_its_route():
    requests = [
        ("GET", "/", "home"),
        ("POST", "/play", "start"),
        ("GET", "/play/round/12", "round page"),
        ("POST", "/play/round/12/next", "reveal"),
        ("POST", "/play/round/12/answer", "answer"),
        ("POST", "/sets/3/next", "next text"),
        ("GET", "/sets/3", "summary"),
    ]
    for method, path, route in requests:
        assert route_of(method, path) == route, path
    assert {route for _, _, route in requests} == set(ROUTES)
    # Anything else is kept apart under its own name, not counted with a route.
    assert route_of("GET", "/play/round/12?flag=1") == "GET /play/round/12?flag=1"


def test_the_help_says_what_it_measures():
    shown = subprocess.run(
        [sys.executable, "bench/page_cpu.py", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--ref" in shown and "process_time" in shown

"""GUNICORN_REUSE_PORT=1: each worker listens on a socket of its own, and all of them serve; by
default they share one socket."""

from __future__ import annotations

import subprocess
import urllib.request

import pytest

from tests.gunicorn_server import wait_until


def listening_sockets(port: int) -> int:
    """How many sockets listen on 127.0.0.1:port (ss from iproute2)."""
    listed = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    return len(listed.splitlines())


@pytest.mark.parametrize(
    ("env", "sockets"),
    [
        ({}, 1),
        ({"GUNICORN_REUSE_PORT": "1"}, 2),
        ({"GUNICORN_WORKER_CLASS": "sync"}, 1),
        ({"GUNICORN_WORKER_CLASS": "sync", "GUNICORN_REUSE_PORT": "1"}, 2),
    ],
    ids=["default", "turned-on", "sync", "sync-turned-on"],
)
def test_a_socket_per_worker_only_when_asked_and_every_worker_serves(serve, env, sockets):
    server = serve(workers=2, env=env)
    assert listening_sockets(server.port) == sockets
    # Each request on a connection of its own: the kernel (or the accept race) picks the worker.
    for _ in range(40):
        with urllib.request.urlopen(server.url + "/healthz", timeout=10) as response:
            assert response.status == 200

    # A worker logs a request once its response is sent: the last lines may come a moment later.
    def all_logged():
        served = [entry for entry in server.served() if entry.target == "/healthz"]
        return served if len(served) == 40 else None

    served = wait_until(all_logged, 10, "not every request was logged")
    assert all(entry.status == 200 for entry in served)
    if sockets == 2:
        # Forty connections hashed over two sockets: both workers get some.
        assert {entry.pid for entry in served} == set(server.worker_pids())

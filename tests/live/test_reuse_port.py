"""GUNICORN_REUSE_PORT=1: each worker listens on a socket of its own, and all of them serve."""

from __future__ import annotations

import subprocess
import urllib.request

import pytest


def listening_sockets(port: int) -> int:
    """How many sockets listen on 127.0.0.1:port (ss from iproute2)."""
    listed = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    return len(listed.splitlines())


@pytest.mark.parametrize(("setting", "sockets"), [(None, 1), ("1", 2)], ids=["shared", "reuse"])
def test_a_socket_per_worker_only_when_asked_and_every_worker_serves(serve, setting, sockets):
    server = serve(workers=2, env={"GUNICORN_REUSE_PORT": setting} if setting else {})
    assert listening_sockets(server.port) == sockets
    # Each request on a connection of its own: the kernel (or the accept race) picks the worker.
    for _ in range(40):
        with urllib.request.urlopen(server.url + "/healthz", timeout=10) as response:
            assert response.status == 200
    served = [entry for entry in server.served() if entry.target == "/healthz"]
    assert len(served) == 40 and all(entry.status == 200 for entry in served)
    if setting:
        # Forty connections hashed over two sockets: both workers get some.
        assert {entry.pid for entry in served} == set(server.worker_pids())

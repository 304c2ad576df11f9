"""A listening socket per worker (SO_REUSEPORT): when gunicorn.conf.py gives one, that every
worker serves, and what becomes of the connections waiting on a worker's socket when it dies."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from tests.gunicorn_server import migrate_req_held_at, wait_until


def listening_sockets(port: int) -> int:
    """How many sockets listen on 127.0.0.1:port (ss from iproute2)."""
    listed = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    return len(listed.splitlines())


AUTO = {"GUNICORN_REUSE_PORT": ""}  # unset: gunicorn.conf.py decides
SYNC = {"GUNICORN_WORKER_CLASS": "sync"}
# Read by gunicorn as its command line, which wins over gunicorn.conf.py's settings.
SYNC_ON_COMMAND_LINE = {"GUNICORN_CMD_ARGS": "--worker-class sync --threads 1"}
REUSE_PORT_ON_COMMAND_LINE = {"GUNICORN_CMD_ARGS": "--reuse-port"}


@pytest.mark.parametrize(
    ("env", "migrates", "sockets"),
    [
        (AUTO, True, 2),
        (AUTO, False, 1),
        ({**AUTO, **SYNC}, True, 1),
        ({"GUNICORN_REUSE_PORT": "0"}, True, 1),
        ({"GUNICORN_REUSE_PORT": "1"}, False, 2),
        ({"GUNICORN_REUSE_PORT": "1", **SYNC}, False, 2),
        ({**AUTO, **SYNC_ON_COMMAND_LINE}, True, 1),
        ({"GUNICORN_REUSE_PORT": "0", **REUSE_PORT_ON_COMMAND_LINE}, False, 2),
    ],
    ids=[
        "threads-kernel-migrates",
        "threads",
        "sync",
        "turned-off",
        "turned-on",
        "sync-turned-on",
        "sync-on-command-line",
        "reuse-port-on-command-line",
    ],
)
def test_a_socket_per_worker_where_the_kernel_migrates_and_every_worker_serves(
    serve, env, migrates, sockets
):
    with migrate_req_held_at(migrates):
        server = serve(workers=2, env=env)
        assert listening_sockets(server.port) == sockets
        # Each request on a connection of its own: the kernel (or the accept race) picks the
        # worker.
        for _ in range(40):
            with urllib.request.urlopen(server.url + "/healthz", timeout=10) as response:
                assert response.status == 200
        log = server.log_path.read_text()
    assert ("Listening on a socket per worker" in log) == (sockets == 2), log
    assert ("Listening on a socket per worker: --reuse-port given" in log) == (
        "--reuse-port" in env.get("GUNICORN_CMD_ARGS", "")
    ), log
    # Asked for without the kernel's migration: a warning says what a worker's death costs.
    assert ("A socket per worker without net.ipv4.tcp_migrate_req=1" in log) == (
        sockets == 2 and not migrates
    ), log

    # A worker logs a request once its response is sent: the last lines may come a moment later.
    def all_logged():
        served = [entry for entry in server.served() if entry.target == "/healthz"]
        return served if len(served) == 40 else None

    served = wait_until(all_logged, 10, "not every request was logged")
    assert all(entry.status == 200 for entry in served)
    if sockets == 2:
        # Forty connections hashed over two sockets: both workers get some.
        assert {entry.pid for entry in served} == set(server.worker_pids())


def _collect(pending: set[socket.socket], answers: dict, seconds: float) -> None:
    """Read the responses as they come, each socket's into `answers` (None where the connection
    was reset), closing each socket at its end, for up to `seconds` or until none is pending.
    Nothing blocks on one socket: after `Connection: close`, gunicorn's worker waits for the
    client to close its end before it goes on with other connections."""
    deadline = time.monotonic() + seconds
    while pending and time.monotonic() < deadline:
        readable, _, _ = select.select(list(pending), [], [], 0.2)
        for sock in readable:
            try:
                chunk = sock.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                answers[sock] = None
            else:
                answers[sock] = (answers.get(sock) or b"") + chunk
                if chunk:
                    continue
            sock.close()
            pending.discard(sock)


@pytest.mark.parametrize("migrates", [True, False], ids=["kernel-migrates", "kernel-resets"])
def test_a_dead_workers_waiting_connections_go_to_the_others_only_where_the_kernel_migrates(
    serve, migrates
):
    """With a socket per worker, connections the kernel has queued on a worker's socket but the
    worker has not accepted yet are reset when it dies, unless net.ipv4.tcp_migrate_req hands
    them to the other sockets: the reason gunicorn.conf.py turns the sockets on only then."""
    with migrate_req_held_at(migrates):
        server = serve(workers=2, env={"GUNICORN_REUSE_PORT": "1"})
        request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        request += "Connection: close\r\n\r\n"
        victim = server.worker_pids()[0]
        os.kill(victim, signal.SIGSTOP)  # alive, its socket open, accepting nothing
        clients: set[socket.socket] = set()
        answers: dict[socket.socket, bytes | None] = {}
        try:
            for _ in range(40):
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                sock.sendall(request.encode())
                clients.add(sock)
            # The other worker answers the connections on its socket; the rest wait.
            waiting = set(clients)
            _collect(waiting, answers, 5)
            assert waiting, "every connection went to the worker still running"
            assert answers, "no connection went to the running worker"
            server.kill_worker(victim)
        finally:
            os.kill(victim, signal.SIGCONT)  # in case the kill did not happen
        pending = set(waiting)
        _collect(pending, answers, 30)
        for sock in pending:
            sock.close()

    assert not pending, f"{len(pending)} connections neither answered nor reset"
    answered = [answer for answer in answers.values() if answer is not None]
    assert all(answer.startswith(b"HTTP/1.1 200") for answer in answered), answered
    reset = {sock for sock, answer in answers.items() if answer is None}
    if migrates:
        assert not reset, f"{len(reset)} of the {len(waiting)} waiting connections were reset"
    else:
        assert reset and reset <= waiting, (len(reset), len(waiting))


@pytest.mark.parametrize("each", ["1", "0"], ids=["socket-per-worker", "shared-socket"])
def test_a_reload_keeps_the_sockets_and_the_new_workers_serve(serve, each):
    """SIGHUP reads gunicorn.conf.py afresh and replaces every worker. The new workers listen as
    the old ones did: with a socket per worker they make their own again (before on_reload, they
    looked for the master's shared socket, of which there is none, and the site went dark)."""
    server = serve(workers=2, env={"GUNICORN_REUSE_PORT": each})
    sockets = listening_sockets(server.port)
    assert sockets == (2 if each == "1" else 1)
    old = set(server.worker_pids())
    server.process.send_signal(signal.SIGHUP)
    new = set(server.wait_for_workers(without=old))
    wait_until(lambda: listening_sockets(server.port) == sockets, 30, "sockets not restored")
    for _ in range(40):
        with urllib.request.urlopen(server.url + "/healthz", timeout=10) as response:
            assert response.status == 200

    def all_logged():
        served = [e for e in server.served() if e.target == "/healthz" and e.pid in new]
        return served if len(served) == 40 else None

    served = wait_until(all_logged, 10, "the new workers did not serve every request")
    if each == "1":
        assert {entry.pid for entry in served} == new

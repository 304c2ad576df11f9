"""Threaded workers take a new connection only while one of their threads is free
(app/serving.py, gunicorn.conf.py's default), so that connections go where there is room."""

from __future__ import annotations

import http.client
import runpy
import socket

import pytest

from app import PROJECT_ROOT
from tests.gunicorn_server import ONE_THREAD, wait_until


def kept_alive_healthz(port: int) -> http.client.HTTPConnection:
    """A new connection that asks for /healthz and stays open, as a browser's does."""
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    client.request("GET", "/healthz")
    reply = client.getresponse()
    assert reply.status == 200
    reply.read()
    return client


def finish(sock: socket.socket) -> bytes:
    """Send the end of a held request's headers; the whole reply."""
    with sock:
        sock.sendall(b"\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def test_the_default_threaded_worker_accepts_only_with_a_thread_free(monkeypatch):
    for name in ("GUNICORN_WORKER_CLASS", "GUNICORN_IDLE_ACCEPT"):
        monkeypatch.delenv(name, raising=False)
    assert runpy.run_path(str(PROJECT_ROOT / "gunicorn.conf.py"))["worker_class"] == (
        "app.serving.IdleAcceptThreadWorker"
    )
    monkeypatch.setenv("GUNICORN_IDLE_ACCEPT", "0")
    assert runpy.run_path(str(PROJECT_ROOT / "gunicorn.conf.py"))["worker_class"] == "gthread"
    monkeypatch.setenv("GUNICORN_WORKER_CLASS", "sync")
    monkeypatch.delenv("GUNICORN_IDLE_ACCEPT")
    assert runpy.run_path(str(PROJECT_ROOT / "gunicorn.conf.py"))["worker_class"] == "sync"


@pytest.mark.parametrize("threads", [1, 2])
def test_a_worker_whose_threads_are_all_busy_takes_no_new_connection(serve, threads):
    server = serve(workers=2, env={"GUNICORN_THREADS": str(threads)})
    first, second = sorted(server.worker_pids())
    for busy, free in ((first, second), (second, first)):
        # Every thread of `busy` reading a request that has not all arrived.
        held: list[socket.socket] = []
        while len(held) < threads:
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n")
            port = sock.getsockname()[1]
            accepted_by = wait_until(lambda port=port: server.worker_serving(port), 10, "never")
            if accepted_by == busy:
                held.append(sock)
            else:
                finish(sock)  # the other worker's: let it go, try again
        # gunicorn's own gthread worker would also take some of these and keep them waiting
        # behind the held requests; here every one goes to the worker with a thread free.
        others = [kept_alive_healthz(server.port) for _ in range(8)]
        try:
            for client in others:
                assert server.worker_serving(client.sock.getsockname()[1]) == free
        finally:
            for sock in held:
                assert finish(sock).startswith(b"HTTP/1.1 200 ")
            for client in others:
                client.close()


def test_one_thread_workers_can_be_routed_to(serve):
    # What tests/live/test_abuse.py and test_faults.py rely on for ONE_THREAD servers.
    server = serve(workers=3, env=ONE_THREAD)
    for pid in server.worker_pids():
        with server.only_worker(pid):
            clients = [kept_alive_healthz(server.port) for _ in range(3)]
            assert {server.worker_serving(c.sock.getsockname()[1]) for c in clients} == {pid}
            for client in clients:
                client.close()

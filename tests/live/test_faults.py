"""Faults under a real gunicorn: a worker killed mid-load, the database cut off and restored."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.gunicorn_server import SYNC_WORKERS, migrate_req_held_at, wait_until
from tests.live.invariants import check_database, check_seen_rounds
from tests.live.player import ConnectionLost, PlayedRound, Player

LOAD_PLAYERS = 8
# Rounds the players finish before the kills (so the site is under load) and after them.
ROUNDS_BETWEEN = 4
DEADLINE = 60.0


class Load:
    """Players who keep playing rounds (retrying broken requests) until told to stop."""

    def __init__(self, url: str, players: int):
        self.url = url
        self.stop = threading.Event()
        self.players = [Player(url) for _ in range(players)]
        self.played: list[PlayedRound] = []
        # When each round was finished, to tell that the site kept serving after a kill.
        self.finished_at: list[float] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(players)
        self._futures = []

    def _play(self, index: int) -> None:
        rng = random.Random(index)
        player = self.players[index]
        while not self.stop.is_set():
            reveal_to = rng.randint(1, 10)
            done = player.play_round(
                reveal_to,
                "human" if reveal_to == 10 else "machine",
                [rng.choice(["grammar", "repetition", "generic"])],
                f"load {index}",
                retry=True,
            )
            with self._lock:
                self.played.append(done)
                self.finished_at.append(time.monotonic())

    def __enter__(self) -> Load:
        self._futures = [self._pool.submit(self._play, i) for i in range(len(self.players))]
        return self

    def finished_since(self, moment: float) -> int:
        with self._lock:
            return sum(at > moment for at in self.finished_at)

    def wait_for_rounds(self, count: int, since: float = 0.0) -> None:
        wait_until(
            lambda: self._failed() or self.finished_since(since) >= count,
            DEADLINE,
            f"players finished fewer than {count} rounds",
        )
        self._failed()

    def _failed(self) -> bool:
        for future in self._futures:
            if future.done():
                future.result()  # re-raises a player's failure here
        return False

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self._pool.shutdown(wait=True)
        for future in self._futures:
            if exc[0] is None:
                future.result()

    @property
    def errors(self) -> list[ConnectionLost]:
        return [error for player in self.players for error in player.errors]


@contextlib.contextmanager
def cpu_hog(seconds: float):
    """Keep every core busy (one spinning process each) for at most `seconds`, as on a shared
    CI machine; the processes are stopped on the way out."""
    spin = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _busy_worker(server) -> int | None:
    """A worker holding a client connection right now: most likely in the middle of a request."""
    return next((pid for pid, ports in server.connections().items() if ports), None)


@pytest.mark.parametrize("server", ["sync", "gthread", "gevent", "gthread-socket-each"])
def test_sigkill_worker_mid_load_loses_no_data_and_players_continue(app, serve, server):
    """With any worker class no round is lost or stored twice and play goes on. A sync worker
    holds one request, so only that one dies; a threaded one (the default) or a gevent one takes
    down every request and kept-alive connection it held, each of which its player retries.
    With a listening socket per worker, the connections waiting on a killed worker's socket go
    to the others (net.ipv4.tcp_migrate_req, without which gunicorn.conf.py keeps one socket):
    no more is lost than with the shared socket."""
    worker_class, _, sockets = server.partition("-")
    with contextlib.ExitStack() as stack:
        env = {"GUNICORN_WORKER_CLASS": worker_class}
        if sockets:
            stack.enter_context(migrate_req_held_at(True))
            env["GUNICORN_REUSE_PORT"] = "1"
        _kill_workers_under_load(app, serve(workers=3, env=env), worker_class)


def _kill_workers_under_load(app, gunicorn, worker_class: str) -> None:
    victim = Player(gunicorn.url)
    page = victim.start()
    page = victim.reveal(page)
    assert page.revealed == 2

    # Beside a process spinning on every core, as on a shared CI machine.
    with cpu_hog(3 * DEADLINE), Load(gunicorn.url, LOAD_PLAYERS) as load:
        load.wait_for_rounds(ROUNDS_BETWEEN)

        # 1. The victim's "next sentence" request is in flight (its last byte held back) on a
        #    worker, which is killed: exactly that request dies, nobody else's.
        stalled = victim.send_partial(
            f"/play/round/{page.round_id}/next", {"seen": str(page.revealed)}
        )
        with stalled:
            port = stalled.getsockname()[1]
            holder = wait_until(
                lambda: gunicorn.worker_serving(port), DEADLINE, "no worker took the request"
            )
            first_kill = time.monotonic()
            gunicorn.kill_worker(holder)
            stalled.settimeout(DEADLINE)
            try:
                stalled.sendall(b"x")
                answer = stalled.recv(1024)
            except OSError:
                answer = b""
            assert answer == b"", f"the killed worker answered: {answer[:200]!r}"

        # 2. Another worker is killed while it holds a player's request, mid-load.
        busy = wait_until(lambda: _busy_worker(gunicorn), DEADLINE, "no busy worker seen")
        second_kill = time.monotonic()
        gunicorn.kill_worker(busy)

        # gunicorn replaces both workers, and the site keeps serving the players.
        replaced = gunicorn.wait_for_workers(without={holder, busy}, timeout=DEADLINE)
        load.wait_for_rounds(ROUNDS_BETWEEN, since=time.monotonic())

    if worker_class == "sync":
        # Only a request in flight on the second killed worker may have died, and was retried.
        assert len(load.errors) <= 1, load.errors
        for lost in load.errors:
            assert lost.started <= second_kill <= lost.ended, lost
    else:
        # What the killed workers held: requests in flight and idle kept-alive connections, at
        # most one of each player's per kill; nothing failed before the first kill.
        assert len(load.errors) <= 2 * LOAD_PLAYERS, load.errors
        for lost in load.errors:
            assert lost.ended >= first_kill, lost
    assert len(replaced) == 3 and gunicorn.process.poll() is None
    log = gunicorn.log_path.read_text()
    assert all(f"Worker (pid:{pid}) was sent SIGKILL" in log for pid in (holder, busy))

    # The victim picks up their own round where the server has it: /play/continue leads back
    # to it, still at sentence 2, and they finish it.
    resumed = victim.resume(None)
    assert resumed is not None and resumed.round_id == page.round_id
    assert resumed.revealed == 2 and not resumed.answered
    finished = victim.play_round(5, "machine", ["generic"], "after the crash")
    assert finished.round_id == page.round_id and finished.revealed == 5

    stored = check_database(app)
    check_seen_rounds(stored, [*load.played, finished])
    for player in load.players:
        for round_id, landed in player.resumed:
            # /play/continue leads back to the round that was being played, or home when the
            # request cut off was the answer and it had been stored.
            assert landed == f"/play/round/{round_id}" or (
                landed == "/" and stored[round_id].guess is not None
            )


class Forwarder:
    """A TCP forwarder to PostgreSQL that can be cut (connections dropped, new ones refused)."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._open = False
        self._lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        """Listen again (on the same port) and forward new connections."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener, self._open = listener, True
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut() shut the listener down
            try:
                upstream = socket.create_connection(self._upstream(), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            pair = (client, upstream)
            with self._lock:
                if self._open:
                    self._pairs.add(pair)
            if pair not in self._pairs:
                self._drop(pair)
                continue
            for source, sink in (pair, pair[::-1]):
                threading.Thread(target=self._pump, args=(source, sink, pair), daemon=True).start()

    def _upstream(self) -> tuple[str, int]:
        """Where the next connection goes."""
        return self.target

    def _pump(self, source: socket.socket, sink: socket.socket, pair) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        self._drop(pair)

    def _drop(self, pair) -> None:
        with self._lock:
            self._pairs.discard(pair)
        for sock in pair:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def cut(self) -> None:
        """Refuse new connections and break every open one."""
        with self._lock:
            self._open = False
            listener, pairs = self._listener, list(self._pairs)
        # shutdown() wakes the thread blocked in accept(); close() alone would leave the socket
        # listening until that accept() returned.
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for pair in pairs:
            self._drop(pair)

    def close(self) -> None:
        if self._open:
            self.cut()


def test_database_cut_off_gives_503_and_the_same_server_recovers(app, demo_db, serve):
    if not demo_db.startswith("postgresql"):
        pytest.skip(
            "SQLite is a file each worker opens itself: there is no connection to cut. "
            "tests/test_health.py covers an unusable SQLite database in-process."
        )
    from sqlalchemy.engine import make_url

    url = make_url(demo_db)
    forwarder = Forwarder((url.host or "127.0.0.1", url.port or 5432))
    try:
        # Every pooled connection counts as used a moment ago, whatever the clock says on a busy
        # machine: only the check of the connection's socket (app/database.py) stands between a
        # connection that died in the outage and a player's request.
        server = serve(
            workers=2,
            database_url=url.set(port=forwarder.port).render_as_string(False),
            env={**SYNC_WORKERS, "DATABASE_PING_AFTER_IDLE_S": "3600"},
        )
        master, workers = server.process.pid, server.worker_pids()
        first, second = workers
        player = Player(server.url)
        # Both workers hold a pooled connection to the database.
        with server.only_worker(first):
            page = player.reveal(player.start())
        assert page.revealed == 2
        with server.only_worker(second):
            assert player.get("/").status == 200

        with cpu_hog(DEADLINE):
            forwarder.cut()
            # Only the first worker hears of the outage; the second keeps its dead connection.
            with server.only_worker(first):
                for _ in range(3):
                    home = player.get("/")
                    assert home.status == 503
                    assert "cannot reach its database" in home.text
                    assert home.headers["Retry-After"] == "30"
                    assert player.get("/readyz").status == 503
                    assert player.get("/healthz").status == 200
                    cut_off = player.post(f"/play/round/{page.round_id}/next", {"seen": "2"})
                    assert cut_off.status == 503 and "cannot reach its database" in cut_off.text

            forwarder.restore()
            # From the first request on, every request is served: the second worker's pooled
            # connection died in the outage, and is replaced before it can fail a request.
            for worker in (second, first):
                with server.only_worker(worker):
                    assert player.get("/readyz").status == 200
                    assert player.get("/").status == 200
            for _ in range(4):
                assert player.get("/readyz").status == 200
                assert player.get("/").status == 200
            # The same master and workers (no restart) serve again, and the round goes on.
            finished = player.play_round(4, "machine", ["grammar"], "after the outage")
        assert finished.round_id == page.round_id and finished.revealed == 4
        assert server.process.pid == master and server.worker_pids() == workers
        check_seen_rounds(check_database(app), [finished])
        # No request failed after the database came back.
        served = server.served()
        back = max(i for i, s in enumerate(served) if s.status == 503)
        assert [s for s in served[back + 1 :] if s.status >= 500] == []
    finally:
        forwarder.close()

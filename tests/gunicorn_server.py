"""Run the site under gunicorn (the production server and `gunicorn.conf.py`) in a subprocess.

Shared by the fault and abuse tests in `tests/live/` and by `bench/web_load.py`. Besides starting
and stopping, it looks at the workers from outside (Linux /proc): their pids, the connections each
holds (`connections`, `worker_serving`), which worker answered each request (`served`, with
`access_log=True`), and it can route the next requests to one worker (`only_worker`).
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app import PROJECT_ROOT
from app.config import MIGRATE_REQUESTS

# gunicorn's default access-log line plus the pid of the worker that served the request.
ACCESS_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" worker=%(p)s'
ACCESS_RE = re.compile(
    r'"(?P<method>[A-Z]+) (?P<target>\S+) HTTP/[\d.]+" (?P<status>\d{3}) .* '
    r"worker=<(?P<pid>\d+)>$"
)


# gunicorn.conf.py's default is threaded workers; `only_worker` needs sync workers, each of which
# serves one connection at a time: a server started for it sets this in its environment.
SYNC_WORKERS = {"GUNICORN_WORKER_CLASS": "sync"}


@contextmanager
def migrate_req_held_at(on: bool):
    """Hold Linux's net.ipv4.tcp_migrate_req at `on` for the block, then restore it.

    gunicorn.conf.py gives each threaded worker a listening socket of its own only where the
    kernel hands a closing socket's waiting connections to the others. One test at a time holds
    the setting (a file lock, across pytest-xdist workers); where it cannot be written (not
    root, no such setting) and differs, the test is skipped.
    """
    import pytest

    with open(Path(tempfile.gettempdir()) / "roft-tcp-migrate-req.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wanted = "1" if on else "0"
        try:
            before = MIGRATE_REQUESTS.read_text().strip()
        except OSError:
            pytest.skip(f"{MIGRATE_REQUESTS} is missing (Linux 5.14 or later has it)")
        if before != wanted:
            try:
                MIGRATE_REQUESTS.write_text(wanted)
            except OSError as error:
                pytest.skip(f"cannot set {MIGRATE_REQUESTS} to {wanted}: {error}")
        try:
            yield
        finally:
            if before != wanted:
                MIGRATE_REQUESTS.write_text(before)


@dataclass(frozen=True)
class Served:
    """One access-log line: which worker answered which request, with what status."""

    method: str
    target: str
    status: int
    pid: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def children_of(pid: int) -> list[int]:
    """Process ids whose parent is `pid` (Linux /proc)."""
    found: set[int] = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found.update(int(child) for child in (task / "children").read_text().split())
        return sorted(found)
    except FileNotFoundError:
        pass  # a kernel without /proc/PID/task/TID/children: scan every process instead
    except OSError:
        return []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces; the parent id follows it.
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.add(int(entry.name))
    return sorted(found)


def _accepted_sockets(server_port: int) -> dict[int, int]:
    """Socket inode -> client port of the connections to 127.0.0.1:server_port taken by a process.

    A connection still waiting in the listen queue has no inode yet and is left out.
    """
    local = f"0100007F:{server_port:04X}"
    found = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[3] == "01" and int(fields[9]):
            found[int(fields[9])] = int(fields[2].split(":")[1], 16)
    return found


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def wait_until(condition, timeout: float, message: str, interval: float = 0.05):
    """Poll `condition()` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(message)
        time.sleep(interval)


class GunicornServer:
    """`with GunicornServer(database_url, tmp_dir) as server:` serves the site on `server.url`."""

    def __init__(
        self,
        database_url: str,
        work_dir: Path,
        *,
        workers: int = 2,
        env: dict[str, str] | None = None,
        startup_timeout: float = 60.0,
        app_module: str = "wsgi:app",
        access_log: bool = False,
        root: Path = PROJECT_ROOT,
        control_socket: bool = False,
    ) -> None:
        self.database_url = database_url
        self.work_dir = Path(work_dir)
        self.workers = workers
        self.extra_env = env or {}
        self.startup_timeout = startup_timeout
        self.app_module = app_module
        # gunicorn's own access log, each line naming the worker that served it (see `served`).
        self.access_log = access_log
        # The project tree to serve (its wsgi.py and gunicorn.conf.py), e.g. a worktree of an
        # earlier commit in bench/web_load.py.
        self.root = Path(root)
        # gunicorn's admin socket (gunicorn.conf.py gives each server its own path); off unless
        # a test asks for it: stopping it costs seconds at shutdown.
        self.control_socket = control_socket
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.work_dir / "gunicorn.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> GunicornServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "SECRET_KEY": os.environ.get("SECRET_KEY", "test-secret-key"),
            "CACHE_DIR": str(self.work_dir / "cache"),
            "GUNICORN_WORKERS": str(self.workers),
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("REDIS_URL", None)
        env.update(self.extra_env)
        log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--config",
                "gunicorn.conf.py",
                "--bind",
                f"127.0.0.1:{self.port}",
                *([] if self.control_socket else ["--no-control-socket"]),
                *(
                    ["--access-logfile", "-", "--access-logformat", ACCESS_LOG_FORMAT]
                    if self.access_log
                    else []
                ),
                self.app_module,
            ],
            cwd=self.root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self._log = log
        self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until /readyz answers 200 and every worker has booted."""
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as response:
                    if response.status == 200 and len(self.worker_pids()) == self.workers:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"gunicorn did not become ready:\n{self.log_tail()}")

    def worker_pids(self) -> list[int]:
        return children_of(self.process.pid) if self.process else []

    def kill_worker(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)

    def wait_for_workers(self, without: set[int] = frozenset(), timeout: float = 30.0) -> list[int]:
        """Wait until `self.workers` workers run, none of them in `without`; their pids."""

        def replaced():
            pids = self.worker_pids()
            return pids if len(pids) == self.workers and not set(pids) & set(without) else None

        return wait_until(replaced, timeout, f"workers were not replaced:\n{self.log_tail()}")

    def connections(self) -> dict[int, list[int]]:
        """Worker pid -> client ports of the connections it has accepted and not yet closed."""
        accepted = _accepted_sockets(self.port)
        return {
            pid: sorted(accepted[inode] for inode in _socket_inodes(pid) & accepted.keys())
            for pid in self.worker_pids()
        }

    def worker_serving(self, client_port: int) -> int | None:
        """The worker that accepted the client connection from local port `client_port`."""
        for pid, ports in self.connections().items():
            if client_port in ports:
                return pid
        return None

    @contextmanager
    def only_worker(self, pid: int, timeout: float = 30.0):
        """Route the next connections to worker `pid`: keep every other worker busy meanwhile.

        Each other sync worker is held reading a half-sent `GET /healthz`, which is completed
        (and answered) on the way out. Hold it well under gunicorn's worker timeout. A threaded
        worker would go on accepting connections: start the server with SYNC_WORKERS.
        """
        if self.extra_env.get("GUNICORN_WORKER_CLASS") != "sync":
            raise RuntimeError("only_worker needs sync workers: start the server with SYNC_WORKERS")
        held: dict[int, socket.socket] = {}

        def release(sock: socket.socket) -> None:
            with sock:
                sock.sendall(b"\r\n")
                while sock.recv(65536):
                    pass

        try:
            while set(held) != set(self.worker_pids()) - {pid}:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: held\r\nConnection: close\r\n")
                port = sock.getsockname()[1]
                worker = wait_until(
                    lambda port=port: self.worker_serving(port),
                    timeout,
                    f"no worker accepted a connection:\n{self.log_tail()}",
                    interval=0.005,
                )
                if worker == pid:
                    release(sock)
                else:
                    held[worker] = sock
            yield
        finally:
            for sock in held.values():
                release(sock)

    def served(self) -> list[Served]:
        """Every request in the access log so far, in the order the workers logged them.

        Needs `access_log=True`; a worker logs a request once it has sent the response.
        """
        if not self.log_path.exists():
            return []
        found = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            match = ACCESS_RE.search(line)
            if match:
                found.append(
                    Served(
                        match["method"], match["target"], int(match["status"]), int(match["pid"])
                    )
                )
        return found

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()
        self.process = None

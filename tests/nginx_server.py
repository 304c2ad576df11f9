"""nginx with `deploy/nginx.conf`, made local, in front of app servers on this machine.

Shared by `tests/live/test_two_servers.py` (the shipped config spreading a player's requests over
two servers) and `bench/web_load.py --proxy nginx` (the load measured behind the proxy). The
config file is the one `docker-compose.yml` mounts, with only what ties it to the compose network
replaced: its upstream servers (`web1:8000`, `web2:8000`) by the given local ports, its port by a
free one, its log and temporary paths by files under a work folder. `make test` installs nginx
(scripts/ensure-nginx.sh).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from app import PROJECT_ROOT
from tests.gunicorn_server import children_of, free_port, wait_until

DEPLOY_CONF = PROJECT_ROOT / "deploy" / "nginx.conf"
# `server web1:8000 max_fails=3 fail_timeout=10s;` in the upstream block: (indent, address, rest).
UPSTREAM_SERVER = re.compile(r"^([ \t]*)server (web\d+:8000)((?: [^;\n]*)?);[ \t]*\n", re.M)
LISTEN = "listen 8000;"
ACCESS_LOG = "access_log /dev/stdout roft;"


def nginx_binary() -> str | None:
    """The nginx executable: on PATH, or Debian's /usr/sbin (not on a normal user's PATH)."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def compose_servers(conf: str) -> list[str]:
    """The upstream servers the config names, in order (`web1:8000`, ...)."""
    return [address for _, address, _ in UPSTREAM_SERVER.findall(conf)]


def local_config(
    work_dir: Path, port: int, backends: list[int], source: Path = DEPLOY_CONF
) -> Path:
    """`source` (deploy/nginx.conf) with the compose servers replaced by one server line per
    local backend port (each with the first line's parameters), listening on 127.0.0.1:`port`,
    logging and buffering under `work_dir`; the path of the file written there."""
    conf = source.read_text()
    servers = UPSTREAM_SERVER.findall(conf)
    assert servers, f"no `server webN:8000` line in {source}"
    assert backends, "no backend to proxy to"
    indent, _, parameters = servers[0]
    lines = "".join(f"{indent}server 127.0.0.1:{p}{parameters};\n" for p in backends)
    placed = []

    def replace(match: re.Match) -> str:
        if placed:
            return ""
        placed.append(match)
        return lines

    conf = UPSTREAM_SERVER.sub(replace, conf)
    assert LISTEN in conf and ACCESS_LOG in conf, f"{source} no longer has {LISTEN} {ACCESS_LOG}"
    conf = conf.replace(LISTEN, f"listen 127.0.0.1:{port};")
    conf = conf.replace(ACCESS_LOG, f"access_log {work_dir}/access.log roft;")
    temp = "".join(
        f"\n    {kind}_temp_path {work_dir}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = conf.replace("http {", "http {" + temp, 1)
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / "nginx.conf"
    path.write_text(conf)
    return path


class NginxProxy:
    """`with NginxProxy(work_dir, [port_a, port_b]) as proxy:` serves on `proxy.url`.

    The master runs in the foreground (`daemon off`), so `process.pid` is the master and
    `pids()` adds its workers; `access_log` names the upstream of each request.
    """

    def __init__(
        self,
        work_dir: Path,
        backends: list[int],
        *,
        source: Path = DEPLOY_CONF,
        startup_timeout: float = 20.0,
    ) -> None:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed: run scripts/ensure-nginx.sh")
        self.binary = binary
        self.work_dir = Path(work_dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.conf = local_config(self.work_dir, self.port, backends, source)
        self.access_log = self.work_dir / "access.log"
        self.error_log = self.work_dir / "error.log"
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        main = f"daemon off; pid {self.work_dir}/nginx.pid;"
        if os.geteuid() == 0:
            main += " user root;"  # the workers must reach the temporary paths under work_dir
        # -e: the error log from the start (the default path is not writable without root).
        return [
            self.binary,
            *("-p", str(self.work_dir), "-c", str(self.conf), "-e", str(self.error_log)),
            *("-g", main),
        ]

    def check(self) -> None:
        checked = subprocess.run(
            [*self.command(), "-t"], capture_output=True, text=True, timeout=30
        )
        if checked.returncode:
            raise RuntimeError(f"nginx -t refused {self.conf}:\n{checked.stderr}")

    def start(self) -> None:
        self.check()
        self.process = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

        def up() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited:\n{self.error_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as response:
                    return response.status == 200
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False

        wait_until(up, self.startup_timeout, f"nginx did not start:\n{self.error_tail()}")

    def pids(self) -> list[int]:
        """The master and its worker processes."""
        if self.process is None:
            return []
        return [self.process.pid, *children_of(self.process.pid)]

    def upstreams(self) -> list[str]:
        """The upstream address of each logged request, in order."""
        if not self.access_log.exists():
            return []
        return re.findall(r"upstream=(\S+)", self.access_log.read_text(errors="replace"))

    def error_tail(self, lines: int = 20) -> str:
        if not self.error_log.exists():
            return ""
        return "\n".join(self.error_log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # fast shutdown
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> NginxProxy:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

"""gunicorn settings for `make run` and the Docker image (override with GUNICORN_* env vars)."""

import multiprocessing
import os
import re
import sys

# The app's own settings code, whichever directory gunicorn starts in (--chdir applies later).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from app.config import (
    gevent_sqlite_warning,
    kernel_migrates_requests,
    per_host_key_warning,
    shared_state_warning,
    socket_per_worker,
)

# Threaded workers that keep connections alive, one process per core (at least 2) with 4 threads
# each: measured against sync workers (5 and 9), gthread with 5 processes and gevent on SQLite
# and PostgreSQL, they used the least server CPU per round (gevent with 4 database connections
# per process the same on PostgreSQL) and had the shortest slowest rounds
# (docs/performance.md, "Server configuration"). Each thread may hold a database
# connection: workers x threads per host count against PostgreSQL's max_connections.
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gthread")
workers = int(os.environ.get("GUNICORN_WORKERS", min(max(multiprocessing.cpu_count(), 2), 8)))
# Threads per worker (gthread only: gunicorn turns a sync worker with threads into gthread) and
# how long an idle keep-alive connection stays open. Behind a proxy that keeps its connections to
# gunicorn, the proxy must close an idle one first, so keep this above its upstream idle timeout
# (deploy/nginx.conf: keepalive_timeout 4s): otherwise nginx may send a request down a connection
# gunicorn is closing at that moment, and it does not resend a POST (the player gets a 502).
threads = int(os.environ.get("GUNICORN_THREADS", "4" if worker_class == "gthread" else "1"))
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "5"))
# gevent only (GUNICORN_WORKER_CLASS=gevent): client connections, kept-alive ones included, each
# worker serves at once, a greenlet each. No faster than gthread here on either database
# (docs/performance.md), and on SQLite a request waiting for the write lock stops its whole
# process (a warning at start). A greenlet holds a pooled database connection while it works:
# at most 4 of them per process are in the database at once, as with gthread's threads, and the
# others wait for a connection. Answers update shared rows, and a greenlet holding such a row's
# lock while it waits for its turn in the process holds up every other answer: SQLAlchemy's
# default pool (5 + 10 overflow) was no better in the measurements, 16 + 16 worse.
worker_connections = int(os.environ.get("GUNICORN_WORKER_CONNECTIONS", "1000"))

# A listening socket per worker (SO_REUSEPORT) where Linux hands a closing socket's waiting
# connections to the others (net.ipv4.tcp_migrate_req=1, set in docker-compose.yml), one shared
# socket otherwise; GUNICORN_REUSE_PORT=1 or 0 decides instead. With the shared socket,
# kept-alive connections can pile up on one worker (64 players about 43 on one and 21 on the
# other), whose players wait twice as long: the slowest rounds at 64 players were 0.83-0.96x of
# 3da502d's with the shared socket and about 0.6x with a socket each. Without the kernel's
# migration a worker that dies also resets the connections waiting on its own socket, more
# requests lost than with the shared one (docs/performance.md, "Server configuration").
# Decided in on_starting, once gunicorn has applied its command line (-k, --reuse-port) too.
migrates_requests = kernel_migrates_requests()
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
# The app writes one JSON access line per request (with its request id) to stderr, so gunicorn's
# own access log is off unless GUNICORN_ACCESSLOG names a file ("-" for stdout).
accesslog = os.environ.get("GUNICORN_ACCESSLOG") or None
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms request_id=%({x-request-id}o)s'
errorlog = "-"
# Behind a reverse proxy, set FORWARDED_ALLOW_IPS to the proxy's address.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")


def control_socket_for(bind: list[str], default: str) -> str:
    """A control socket path of this server's own: gunicorn's default is one path per user
    (~/.gunicorn/gunicorn.ctl), so a second server on the host would take the first one's
    socket over. Named after the addresses it listens on, beside the default."""
    name = "_".join(re.sub(r"[^A-Za-z0-9.]+", "-", b).strip("-") for b in bind) or "default"
    return os.path.join(os.path.dirname(default), f"roft-{name}.ctl")


def _own_control_socket(server) -> None:
    """Give the server its own control socket unless one was chosen (--control-socket)."""
    from gunicorn.config import ControlSocket

    cfg = server.cfg
    if not cfg.control_socket_disable and cfg.control_socket == ControlSocket.default:
        cfg.set("control_socket", control_socket_for(cfg.bind, cfg.control_socket))
    server.roft_control_socket = cfg.control_socket  # for on_reload


def on_starting(server):
    """Settle what depends on the worker class as gunicorn resolved it (a `-k` on the command
    line or in GUNICORN_CMD_ARGS wins over this file) before the workers start, and warn about
    state that several workers or hosts would not share."""
    cfg = server.cfg
    _own_control_socket(server)
    if not cfg.control_socket_disable:
        server.log.info("Control socket (gunicornc -s PATH): %s", cfg.control_socket)
    if cfg.reuse_port:  # only --reuse-port sets it: this file leaves it to the lines below
        each, why = True, "--reuse-port given"
    else:
        each, why = socket_per_worker(
            os.environ.get("GUNICORN_REUSE_PORT"), cfg.worker_class_str, migrates_requests
        )
        cfg.set("reuse_port", each)
    server.roft_socket_per_worker = each  # for on_reload
    server.log.info(
        "Listening on %s: %s",
        "a socket per worker" if each else "one socket shared by the workers",
        why,
    )
    if each and not migrates_requests:
        server.log.warning(
            "A socket per worker without net.ipv4.tcp_migrate_req=1: a worker that dies also "
            "resets the connections waiting on its socket. Set the sysctl; see docs/operators.md."
        )
    if cfg.worker_class_str == "gevent":  # the workers, forked later, load the app with these
        os.environ.setdefault("DATABASE_POOL_SIZE", "4")
        os.environ.setdefault("DATABASE_MAX_OVERFLOW", "0")
    production = os.environ.get("ROFT_ENV", os.environ.get("FLASK_ENV", "")) == "production"
    for message in (
        shared_state_warning(cfg.workers, os.environ.get("REDIS_URL")),
        per_host_key_warning(production, os.environ.get("SECRET_KEY")),
        gevent_sqlite_warning(cfg.worker_class_str, os.environ.get("DATABASE_URL")),
    ):
        if message:
            server.log.warning(message)


def on_reload(server):
    """Keep the sockets the server started with through a reload (SIGHUP), its control socket's
    path included.

    A reload reads this file and the command line into a fresh configuration, whose reuse_port
    is only --reuse-port's: with a socket per worker, the new workers would otherwise listen on
    the master's shared sockets, of which there are none, and serve nothing.
    """
    server.cfg.set("reuse_port", server.roft_socket_per_worker)
    server.cfg.set("control_socket", server.roft_control_socket)


def post_worker_init(worker):
    """Refuse to serve from a gevent worker whose PostgreSQL driver would block all its greenlets.

    psycopg chooses how to wait for the server when it is first imported: cooperatively (through
    `select`) if gevent has patched the standard library by then, otherwise in C, which stops
    every greenlet of the process for each query. gunicorn patches in the worker before it loads
    the app, so psycopg must not be imported earlier: not here, and not with preload_app.
    """
    import sys

    monkey, waiting = sys.modules.get("gevent.monkey"), sys.modules.get("psycopg.waiting")
    if monkey is None or waiting is None or not monkey.is_module_patched("select"):
        return  # not a gevent worker, or not on PostgreSQL
    if waiting.wait is getattr(waiting, "wait_c", None):
        raise RuntimeError(
            "psycopg was imported before gevent patched the standard library (preload_app, or "
            "an import in gunicorn.conf.py): every query would block the whole worker. "
            "Turn preload_app off for gevent workers."
        )

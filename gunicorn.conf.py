"""gunicorn settings for `make run` and the Docker image (override with GUNICORN_* env vars)."""

import multiprocessing
import os

# Threaded workers that keep connections alive, one process per core (at least 2) with 4 threads
# each: measured against sync workers (5 and 9) and gthread with 5 processes on SQLite and
# PostgreSQL, they used the least server CPU per round and had the shortest slowest rounds
# (docs/BENCHMARKS.md, "Worker class and pool size"). Each thread may hold a database
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
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
# The app writes one JSON access line per request (with its request id) to stderr, so gunicorn's
# own access log is off unless GUNICORN_ACCESSLOG names a file ("-" for stdout).
accesslog = os.environ.get("GUNICORN_ACCESSLOG") or None
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms request_id=%({x-request-id}o)s'
errorlog = "-"
# Behind a reverse proxy, set FORWARDED_ALLOW_IPS to the proxy's address.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")


def on_starting(server):
    """Warn at start-up about state that several workers or hosts would not share."""
    from app.config import per_host_key_warning, shared_state_warning

    production = os.environ.get("ROFT_ENV", os.environ.get("FLASK_ENV", "")) == "production"
    for message in (
        shared_state_warning(server.cfg.workers, os.environ.get("REDIS_URL")),
        per_host_key_warning(production, os.environ.get("SECRET_KEY")),
    ):
        if message:
            server.log.warning(message)

"""gunicorn settings for `make run` and the Docker image (override with GUNICORN_* env vars)."""

import multiprocessing
import os

workers = int(os.environ.get("GUNICORN_WORKERS", min(2 * multiprocessing.cpu_count() + 1, 8)))
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "sync")
# Threads per worker ("gthread" only) and how long an idle keep-alive connection stays open.
threads = int(os.environ.get("GUNICORN_THREADS", "1"))
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "2"))
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

"""Micro benchmark: what the CSRF check, the body's encoding and the rate limiter add to a request.

    .venv/bin/python bench/request_overhead.py [--requests 400] [--repeats 7] [--redis URL]

Everything runs in this process through Flask's test client, on a SQLite file in a temporary
folder, so only the stack around a view is measured: the session cookie, Flask-Login, the CSRF
check, the body's parsing, the rate limiter, the security headers and the access line. A view
added for the benchmark (`POST /bench/echo`) reads one field of the body and the player's id and
answers a short text, as a reveal does before its SQL. A signed-in player sends each variant
--requests times in a row; the variants take turns --repeats times (A-B-C-..., then again), and
each variant's CPU time per request is the median of its turns, divided by the baseline's median
measured in the same run (the page's script before issue 23: a multipart body with the token).

Variants: the body multipart or url-encoded, the token in the body or in an X-CSRFToken header,
the CSRF check off (the cost of the check itself), the limiter off, and the limited start of play
(`POST /play`'s limits, on a view that does nothing else) for a signed-in player, who is exempt,
and for a visitor, who is counted, with and without the limiter's X-RateLimit-* headers. The
times are CPU time of this process (other work on a shared machine counts less than in wall
time). The rate limiter's storage calls per request are counted on the storage object (each is
a round trip with Redis: --redis redis://127.0.0.1:6379/15 measures with one; keys are prefixed
and expire).
"""

from __future__ import annotations

import argparse
import io
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flask_login import current_user  # noqa: E402
from werkzeug.datastructures import MultiDict  # noqa: E402
from werkzeug.test import EnvironBuilder  # noqa: E402

from app import create_app  # noqa: E402
from app.extensions import db, limiter  # noqa: E402

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
FETCH = {"X-Requested-With": "fetch"}
STORAGE_CALLS = (
    "incr",
    "get",
    "get_expiry",
    "check",
    "clear",
    "acquire_entry",
    "get_moving_window",
)


def build(folder: Path, redis: str | None, **overrides):
    """An app on a fresh SQLite file with the benchmark's views."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{folder / 'bench.sqlite3'}",
        "SECRET_KEY": "bench-secret-key",
        "RATELIMIT_STORAGE_URI": redis or "memory://",
        "RATELIMIT_KEY_PREFIX": "roft-bench-overhead",
        "CACHE_TYPE": "SimpleCache",
        "LOG_REQUESTS": True,
        "GUEST_RATE_LIMIT": "1000000 per minute",
        "GUEST_GLOBAL_RATE_LIMIT": "1000000 per minute",
        "PASSWORD_HASH_METHOD": "pbkdf2:sha256:2000",
    }
    config.update(overrides)
    app = create_app(config)
    # The access line goes to stderr in production; here it would swamp the output.
    app.logger.handlers[0].stream = open("/dev/null", "w")  # noqa: SIM115 (for the run)
    from app.game.guard_views import guest_limits

    def echo():
        from flask import request

        return f"{current_user.id if current_user.is_authenticated else 0}:{request.form['seen']}"

    app.add_url_rule("/bench/echo", "bench_echo", echo, methods=["POST"])
    app.add_url_rule("/bench/limited", "bench_limited", guest_limits(echo), methods=["POST"])
    with app.app_context():
        db.create_all()
    return app


def signed_in(app):
    """A test client with a guest signed in (one round started), and its CSRF token."""
    from tests import factories

    with app.app_context():
        for number in range(3):
            factories.example(boundary=3, passage=f"bench-{number}")
    client = app.test_client()
    token = CSRF.search(client.get("/login").get_data(as_text=True)).group(1)
    client.post("/play", data={"csrf_token": token, "category": "random"})
    page = client.get("/").get_data(as_text=True)
    return client, CSRF.search(page).group(1)


class StorageCounter:
    """Counts the calls the rate limiter makes on its storage."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.storage = limiter._storage
        for name in STORAGE_CALLS:
            method = getattr(self.storage, name, None)
            if method is not None:
                setattr(self.storage, name, self._counted(name, method))

    def _counted(self, name, method):
        def call(*args, **kwargs):
            self.calls[name] += 1
            return method(*args, **kwargs)

        return call

    def take(self) -> int:
        total = sum(self.calls.values())
        self.calls.clear()
        return total


def variants(token: str) -> dict[str, tuple[str, str, dict, bool, bool]]:
    """name -> (client, path, keyword arguments of its post, CSRF check on, limiter on)."""
    fields = MultiDict([("csrf_token", token), ("seen", "1")])
    bare = MultiDict([("seen", "1")])
    header = {**FETCH, "X-CSRFToken": token}
    multipart, urlencoded = "multipart/form-data", "application/x-www-form-urlencoded"
    as_multipart = {"data": fields, "content_type": multipart, "headers": FETCH}
    as_form = {"data": fields, "content_type": urlencoded, "headers": FETCH}
    return {
        "multipart, token in body (baseline)": ("player", "/bench/echo", as_multipart, True, True),
        "url-encoded, token in body": ("player", "/bench/echo", as_form, True, True),
        "url-encoded, token in X-CSRFToken": (
            "player",
            "/bench/echo",
            {"data": bare, "content_type": urlencoded, "headers": header},
            True,
            True,
        ),
        "multipart, CSRF check off": ("player", "/bench/echo", as_multipart, False, True),
        "url-encoded, CSRF check off": ("player", "/bench/echo", as_form, False, True),
        "url-encoded, limiter off": ("player", "/bench/echo", as_form, True, False),
        "limited view, signed in (exempt)": ("player", "/bench/limited", as_form, True, True),
        "limited view, signed in, limiter off": (
            "player",
            "/bench/limited",
            as_form,
            True,
            False,
        ),
        # A visitor has no session: the guest limits count them (CSRF off: no token to send).
        "limited view, visitor (counted), CSRF off": (
            "visitor",
            "/bench/limited",
            {"data": bare, "content_type": urlencoded},
            False,
            True,
        ),
        # The limiter's X-RateLimit-* headers, as before issue 23 (they read the window again).
        "limited view, visitor, CSRF off, headers on": (
            "visitor",
            "/bench/limited",
            {"data": bare, "content_type": urlencoded},
            False,
            True,
        ),
        "limited view, visitor, CSRF and limiter off": (
            "visitor",
            "/bench/limited",
            {"data": bare, "content_type": urlencoded},
            False,
            False,
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 2)[2].split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--redis", default=None, help="a Redis URL for the limiter's storage")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        app = build(Path(folder), args.redis)
        player, token = signed_in(app)
        clients = {"player": player, "visitor": app.test_client(use_cookies=False)}
        counter = StorageCounter()
        plan = variants(token)

        def send(name: str) -> int:
            client_name, path, kwargs, csrf_on, limiter_on = plan[name]
            app.config["WTF_CSRF_ENABLED"] = csrf_on
            limiter.enabled = limiter_on
            limiter._headers_enabled = name.endswith("headers on")
            return clients[client_name].post(path, **kwargs).status_code

        def environ_of(name: str) -> tuple[dict, bytes]:
            """The WSGI environ the client sends for a variant, with its cookies, built once:
            the timed loop calls the app itself, so encoding the body is not measured."""
            client_name, path, kwargs, _, _ = plan[name]
            builder = EnvironBuilder(
                path=path, method="POST", base_url="http://localhost", **kwargs
            )
            environ = builder.get_environ()
            builder.close()
            if client_name == "player":
                player._add_cookies_to_wsgi(environ)
            body = environ["wsgi.input"].read()
            return environ, body

        def call(environ: dict, body: bytes) -> str:
            fresh = dict(environ)
            fresh["wsgi.input"] = io.BytesIO(body)
            answered = []
            for _ in app(fresh, lambda status, headers, exc_info=None: answered.append(status)):
                pass
            return answered[0]

        for name in plan:  # warm-up, and a check of each
            if (status := send(name)) != 200:
                raise SystemExit(f"{name}: answered {status}")
            counter.take()
        environs = {name: environ_of(name) for name in plan}
        for name in plan:  # the prepared requests are answered as the client's were
            send(name)
            if not (status := call(*environs[name])).startswith("200"):
                raise SystemExit(f"{name}: the prepared request answered {status}")
            counter.take()
        cpu: dict[str, list[float]] = {name: [] for name in plan}
        calls: dict[str, float] = {}
        for _ in range(args.repeats):
            for name in plan:
                send(name)  # sets the switches; not timed
                counter.take()
                environ, body = environs[name]
                started = time.process_time()
                for _ in range(args.requests):
                    call(environ, body)
                cpu[name].append((time.process_time() - started) / args.requests)
                calls[name] = counter.take() / args.requests
        baseline = statistics.median(cpu[next(iter(plan))])
        print(
            f"{args.requests} requests x {args.repeats} turns per variant, CPU time of this "
            f"process; limiter storage: {args.redis or 'memory://'}"
        )
        print(f"{'variant':<46}{'CPU µs/request':>15}{'ratio':>8}{'storage calls':>15}")
        for name in plan:
            median = statistics.median(cpu[name])
            print(f"{name:<46}{median * 1e6:>15.0f}{median / baseline:>8.3f}{calls[name]:>15.1f}")
        with app.app_context():
            db.session.remove()
            db.engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

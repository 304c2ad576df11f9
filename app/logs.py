"""Structured logs: one JSON object per line, each tied to the request that caused it.

Every request gets an id, taken from a well-formed incoming `X-Request-ID` (set by a proxy or load
balancer) or made here, and echoed in the response's `X-Request-ID` header. The access line of a
request and everything logged while it runs carry that id, so one grep finds a request's story
across workers and hosts. Paths are logged without their query string: study links carry worker
ids there, and logs are not pseudonymised.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from datetime import UTC, datetime

from flask import Flask, g, has_request_context, request
from flask.logging import default_handler
from sqlalchemy import inspect

REQUEST_ID_HEADER = "X-Request-ID"
_WELL_FORMED_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def request_id_from(incoming: str | None) -> str:
    """The caller's id when it is short and plain, else a fresh random one."""
    if incoming and _WELL_FORMED_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


# `json.dumps(entry, default=str, ensure_ascii=False)`, with its encoder made once, not per line.
_ENCODE = json.JSONEncoder(default=str, ensure_ascii=False).encode

# The last second a line was written in, as ISO 8601 up to its seconds (threads share it).
_second: tuple[int, str] = (0, "")


def iso_time(created: float) -> str:
    """`datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")`, the same text,
    with the date and time of the second made once per second instead of once per line.

    `datetime.fromtimestamp` rounds the fraction to the nearest microsecond, half to even (a
    fraction that rounds up to a whole second moves to the next), and the milliseconds are the
    microseconds cut to three digits.
    """
    global _second
    whole = int(created)
    micro = round((created - whole) * 1_000_000)
    if micro >= 1_000_000:
        whole += 1
        micro -= 1_000_000
    second = _second
    if second[0] != whole or not second[1]:
        second = (whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
        _second = second
    return f"{second[1]}.{micro // 1000:03d}+00:00"


class JsonFormatter(logging.Formatter):
    """Render a record as one JSON object: time, level, logger, message and any `extra` fields."""

    _STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": iso_time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if has_request_context() and "request_id" in g:
            entry["request_id"] = g.request_id
        for key, value in vars(record).items():
            if key not in self._STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _ENCODE(entry)


def configure_logging(app: Flask) -> None:
    """Send the app's logs to stderr as JSON lines and log one access line per request."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    app.logger.removeHandler(default_handler)
    for existing in list(app.logger.handlers):
        if isinstance(existing.formatter, JsonFormatter):
            app.logger.removeHandler(existing)
    app.logger.addHandler(handler)
    app.logger.setLevel(app.config.get("LOG_LEVEL", "INFO"))
    app.logger.propagate = False
    access = app.config.get("LOG_REQUESTS", True)
    logger = app.logger

    @app.before_request
    def start_request() -> None:
        g.request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
        g.request_started = time.perf_counter()

    @app.after_request
    def finish_request(response):
        request_id = g.get("request_id") or request_id_from(None)
        response.headers[REQUEST_ID_HEADER] = request_id
        started = g.get("request_started")
        if access and started is not None and logger.isEnabledFor(logging.INFO):
            # Only a player this request already loaded, by its identity key: reading an
            # attribute after a commit would load the player again.
            state = inspect(g.get("_login_user"), raiseerr=False)
            player = state.identity[0] if state is not None and state.identity else None
            fields = {
                "method": request.method,
                "path": request.path,
                "endpoint": request.endpoint,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                "remote": request.remote_addr,
                "player": str(player) if player is not None else None,
            }
            # The record `logger.info("request", extra=fields)` makes, without its search of the
            # call stack for the caller's line (always this function; the lines do not show it).
            logger.handle(
                logger.makeRecord(
                    logger.name, logging.INFO, __file__, 0, "request", (), None,
                    "finish_request", fields,
                )
            )  # fmt: skip
        return response

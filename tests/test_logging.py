"""Structured logs: JSON lines, one access line per request, request ids end to end."""

from __future__ import annotations

import json

import pytest

from app.logs import request_id_from
from tests import factories
from tests.test_game_http import start


def log_lines(captured: str) -> list[dict]:
    return [json.loads(line) for line in captured.splitlines() if line.startswith("{")]


@pytest.mark.parametrize(
    ("incoming", "kept"),
    [("lb-7f3a.2_x", True), ("", False), (None, False), ("a" * 65, False), ("bad id;rm", False)],
)
def test_request_id_from_keeps_only_plain_short_ids(incoming, kept):
    made = request_id_from(incoming)
    assert (made == incoming) is kept
    assert 1 <= len(made) <= 64


def test_access_line_per_request_with_echoed_id_and_no_query(make_app, app, capsys):
    logged = make_app()  # built inside the test so its handler writes to the captured stderr
    client = logged.test_client()
    response = client.get("/leaderboard?PROLIFIC_PID=worker-secret", headers={"X-Request-ID": "r1"})
    assert response.headers["X-Request-ID"] == "r1"
    other = client.get("/healthz")
    assert other.headers["X-Request-ID"] not in ("r1", "")

    lines = [line for line in log_lines(capsys.readouterr().err) if line["message"] == "request"]
    assert [line["request_id"] for line in lines] == ["r1", other.headers["X-Request-ID"]]
    first = lines[0]
    assert first["path"] == "/leaderboard" and first["status"] == 200
    assert first["endpoint"] == "leaderboard.board" and first["method"] == "GET"
    assert first["duration_ms"] >= 0
    assert "worker-secret" not in json.dumps(lines)


def test_player_and_errors_are_tied_to_the_request(make_app, app, capsys):
    logged = make_app(TESTING=False)  # let the 500 page answer instead of raising into the test
    with logged.app_context():
        factories.example(boundary=3)

    @logged.get("/boom")
    def boom():
        raise RuntimeError("kaboom")

    client = logged.test_client()
    start(client)
    failed = client.get("/boom", headers={"X-Request-ID": "boom-1"})
    assert failed.status_code == 500 and failed.headers["X-Request-ID"] == "boom-1"

    lines = log_lines(capsys.readouterr().err)
    played = [line for line in lines if line.get("path") == "/play"]
    assert played and played[0]["player"] is not None and ":" not in played[0]["player"]
    error = next(line for line in lines if line["level"] == "error")
    assert error["request_id"] == "boom-1" and "kaboom" in error["exception"]

"""What several app processes must share: Redis for rate limits and caches, one SECRET_KEY.

The live proof is tests/live/test_two_servers.py; these are the configuration rules behind it.
"""

from __future__ import annotations

import multiprocessing
import socket
import stat
from pathlib import Path

import pytest

from app.config import (
    ConfigurationError,
    build_config,
    load_secret_key,
    per_host_key_warning,
    shared_state_warning,
)
from app.extensions import limiter
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import play_over_http


def test_several_workers_without_redis_are_warned_about():
    message = shared_state_warning(3, None)
    assert message is not None
    assert "3 workers without REDIS_URL" in message and "3 times" in message
    assert "docs/scaling.md" in message
    assert shared_state_warning(3, "") is not None


@pytest.mark.parametrize(
    ("workers", "redis_url"), [(1, None), (1, "redis://r:6379/0"), (8, "redis://r:6379/0")]
)
def test_one_worker_or_redis_needs_no_warning(workers, redis_url):
    assert shared_state_warning(workers, redis_url) is None


def test_production_without_a_shared_secret_key_is_warned_about():
    message = per_host_key_warning(True, None)
    assert message is not None and "Set the same SECRET_KEY on every host" in message
    assert per_host_key_warning(True, "") is not None
    assert per_host_key_warning(True, "a-key") is None
    assert per_host_key_warning(False, None) is None


def test_with_redis_url_limits_and_cache_go_to_redis(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("SECRET_KEY", "k")
    monkeypatch.setenv("REDIS_URL", "redis://cache.internal:6379/3")
    config = build_config(tmp_path)
    assert config["RATELIMIT_STORAGE_URI"] == "redis://cache.internal:6379/3"
    assert config["CACHE_TYPE"] == "app.shared_cache.TolerantRedisCache"
    assert config["CACHE_REDIS_URL"] == "redis://cache.internal:6379/3"


def test_without_redis_url_state_stays_on_the_host(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("SECRET_KEY", "k")
    monkeypatch.delenv("REDIS_URL", raising=False)
    config = build_config(tmp_path)
    assert config["RATELIMIT_STORAGE_URI"] == "memory://"
    assert config["CACHE_TYPE"] == "FileSystemCache"


def _key_of_worker(instance: str, start, results) -> None:
    start.wait()
    try:
        results.put(load_secret_key(Path(instance)))
    except Exception as error:  # reported to the test, which fails on it
        results.put(f"error: {error!r}")


def test_workers_starting_together_on_a_fresh_host_agree_on_one_whole_key(monkeypatch, tmp_path):
    """gunicorn's workers each build the app at once; before, one of them now and then failed to
    boot (FileExistsError) or could read a key file not yet written."""
    monkeypatch.delenv("SECRET_KEY", raising=False)
    fork = multiprocessing.get_context("fork")
    workers = 12
    for attempt in range(20):
        instance = tmp_path / f"instance-{attempt}"
        start, results = fork.Barrier(workers), fork.Queue()
        processes = [
            fork.Process(target=_key_of_worker, args=(str(instance), start, results))
            for _ in range(workers)
        ]
        for process in processes:
            process.start()
        keys = [results.get(timeout=60) for _ in processes]
        for process in processes:
            process.join(timeout=60)
        assert len(set(keys)) == 1, (attempt, set(keys))
        assert len(keys[0]) == 64 and int(keys[0], 16) >= 0
        assert (instance / "secret_key").read_text() == keys[0]
        assert stat.S_IMODE((instance / "secret_key").stat().st_mode) == 0o600
        assert [p.name for p in instance.iterdir()] == ["secret_key"]  # no temporary file left


def test_the_environment_key_wins_and_an_empty_key_file_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("SECRET_KEY", "from-the-environment")
    assert load_secret_key(tmp_path) == "from-the-environment"
    monkeypatch.delenv("SECRET_KEY")
    (tmp_path / "secret_key").write_text("\n")
    with pytest.raises(ConfigurationError, match="secret_key is empty"):
        load_secret_key(tmp_path)


@pytest.fixture
def redis_down_app(app_with, monkeypatch, tmp_path):
    """The app as production configures it for a REDIS_URL at which nothing answers."""
    with socket.socket() as probe:  # a port that was free a moment ago: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{port}/0")
    config = build_config(tmp_path)
    shared = {name: config[name] for name in config if name.startswith(("RATELIMIT_", "CACHE_"))}
    application = app_with(**shared, LOGIN_RATE_LIMIT="3 per minute")
    with application.app_context():
        for i in range(3):
            factories.example(boundary=3, passage=f"p{i}")
    yield application
    # The limiter is one object for every app of this test run: let the next ones start afresh.
    limiter._storage_dead = False


def test_the_site_keeps_serving_while_redis_is_unreachable(redis_down_app):
    """Rate limits and the board cache live in Redis; losing it must not fail the game."""
    client = redis_down_app.test_client()
    token = csrf_token(client, "/")
    # A new guest plays and answers a round (the answer invalidates cached boards).
    round_id = play_over_http(client, token, flag_at=2)
    assert client.get(f"/play/round/{round_id}").status_code == 200
    # The board is drawn from the database.
    assert client.get("/leaderboard").status_code == 200
    assert client.get("/leaderboard?by=points").status_code == 200
    # Login limits still hold, counted in this worker's memory meanwhile.
    other = redis_down_app.test_client()
    login_token = csrf_token(other, "/login")
    form = {"csrf_token": login_token, "username": "nobody", "password": "wrong-password"}
    statuses = [other.post("/login", data=form).status_code for _ in range(5)]
    assert statuses == [401, 401, 401, 429, 429]

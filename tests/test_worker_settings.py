"""Settings for gunicorn's workers: each process's database pool, the gevent warning, and whether
each worker listens on a socket of its own.

tests/live/test_gevent.py serves the site under gevent workers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import (
    build_config,
    gevent_sqlite_warning,
    kernel_migrates_requests,
    socket_per_worker,
)
from app.extensions import db


def test_the_environment_sizes_each_process_pool(monkeypatch, make_app):
    monkeypatch.setenv("DATABASE_POOL_SIZE", "4")
    monkeypatch.setenv("DATABASE_MAX_OVERFLOW", "0")
    monkeypatch.setenv("DATABASE_POOL_TIMEOUT", "7")
    with make_app().app_context():
        pool = db.engine.pool
        assert (pool.size(), pool._max_overflow, pool._timeout) == (4, 0, 7)


def test_without_the_environment_sqlalchemy_sizes_the_pool(monkeypatch, tmp_path, make_app):
    for name in ("DATABASE_POOL_SIZE", "DATABASE_MAX_OVERFLOW", "DATABASE_POOL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SECRET_KEY", "k")
    assert build_config(tmp_path)["SQLALCHEMY_ENGINE_OPTIONS"] == {}
    with make_app().app_context():
        pool = db.engine.pool
        assert (pool.size(), pool._max_overflow, pool._timeout) == (5, 10, 30)


@pytest.mark.parametrize(
    ("name", "value"),
    [("DATABASE_POOL_SIZE", "0"), ("DATABASE_MAX_OVERFLOW", "-1"), ("DATABASE_POOL_SIZE", "a")],
)
def test_a_pool_size_that_cannot_be_is_refused(monkeypatch, tmp_path: Path, name, value):
    monkeypatch.setenv("SECRET_KEY", "k")
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        build_config(tmp_path)


def test_gevent_on_sqlite_is_warned_about():
    for url in (None, "", "sqlite:////srv/roft.sqlite3"):
        message = gevent_sqlite_warning("gevent", url)
        assert message is not None and "holds up every request of its worker" in message
    assert gevent_sqlite_warning("gevent", "postgresql://db/roft") is None
    assert gevent_sqlite_warning("gthread", None) is None
    assert gevent_sqlite_warning("sync", "sqlite:////srv/roft.sqlite3") is None


@pytest.mark.parametrize(
    ("requested", "worker_class", "migrates", "chosen"),
    [
        (None, "gthread", True, True),
        ("", "gevent", True, True),
        (None, "gthread", False, False),
        (None, "sync", True, False),
        ("0", "gthread", True, False),
        ("1", "gthread", False, True),
        ("1", "sync", False, True),
    ],
)
def test_a_socket_per_worker_by_default_only_where_the_kernel_hands_on_waiting_connections(
    requested, worker_class, migrates, chosen
):
    reuse, reason = socket_per_worker(requested, worker_class, migrates)
    assert reuse is chosen
    if requested:
        assert reason == f"GUNICORN_REUSE_PORT={requested}"
    elif worker_class != "sync":
        assert ("tcp_migrate_req is on" in reason) is migrates


@pytest.mark.parametrize("requested", ["yes", "true", "2", " 1"])
def test_a_reuse_port_setting_that_is_not_0_or_1_is_refused(requested):
    with pytest.raises(ValueError, match="GUNICORN_REUSE_PORT must be 0 or 1"):
        socket_per_worker(requested, "gthread", True)


@pytest.mark.parametrize(
    ("content", "on"), [("1\n", True), ("0\n", False), ("2\n", True), ("", False), ("x", False)]
)
def test_the_kernel_setting_is_read_from_proc(tmp_path: Path, content, on):
    setting = tmp_path / "tcp_migrate_req"
    setting.write_text(content)
    assert kernel_migrates_requests(setting) is on
    assert kernel_migrates_requests(tmp_path / "missing") is False

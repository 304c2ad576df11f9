"""What several app processes must share: Redis for rate limits and caches, one SECRET_KEY.

The live proof is tests/live/test_two_servers.py; these are the configuration rules behind it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import ConfigurationError, build_config, check_production, shared_state_warning


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


def test_with_redis_url_limits_and_cache_go_to_redis(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("SECRET_KEY", "k")
    monkeypatch.setenv("REDIS_URL", "redis://cache.internal:6379/3")
    config = build_config(tmp_path)
    assert config["RATELIMIT_STORAGE_URI"] == "redis://cache.internal:6379/3"
    assert config["CACHE_TYPE"] == "RedisCache"
    assert config["CACHE_REDIS_URL"] == "redis://cache.internal:6379/3"


def test_without_redis_url_state_stays_on_the_host(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("SECRET_KEY", "k")
    monkeypatch.delenv("REDIS_URL", raising=False)
    config = build_config(tmp_path)
    assert config["RATELIMIT_STORAGE_URI"] == "memory://"
    assert config["CACHE_TYPE"] == "FileSystemCache"


def test_production_refuses_to_start_without_redis(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("SECRET_KEY", "k")
    monkeypatch.setenv("ROFT_ENV", "production")
    monkeypatch.setenv("TRUSTED_HOSTS", "roft.example.org")
    monkeypatch.delenv("REDIS_URL", raising=False)
    with pytest.raises(ConfigurationError, match="REDIS_URL"):
        check_production(build_config(tmp_path))
    monkeypatch.setenv("REDIS_URL", "redis://cache.internal:6379/0")
    check_production(build_config(tmp_path))

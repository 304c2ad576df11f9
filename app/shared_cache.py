"""The leaderboard cache in Redis, shared by every app server, which the site survives losing.

With `REDIS_URL` every server reads and invalidates the same cached boards (docs/scaling.md). If
Redis cannot be reached, a read counts as a miss and a write or an invalidation is skipped, with
a warning in the log: the boards are computed from the database instead of the page failing.
(The rate limits fall back to each worker's memory meanwhile, see app/config.py.)
A board cached before an outage and not invalidated during it can be shown for up to
`CACHE_DEFAULT_TIMEOUT` seconds once Redis is back.
"""

from __future__ import annotations

import logging
from typing import Any

from flask_caching.backends.rediscache import RedisCache
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


class TolerantRedisCache(RedisCache):
    """Flask-Caching's RedisCache, with Redis errors turned into misses and skipped writes."""

    def _unreachable(self, operation: str, error: RedisError) -> None:
        log.warning("cache %s skipped, Redis unreachable: %s", operation, error)

    def get(self, key: str) -> Any:
        try:
            return super().get(key)
        except RedisError as error:
            self._unreachable("get", error)
            return None

    def get_many(self, *keys: str) -> list[Any]:
        try:
            return super().get_many(*keys)
        except RedisError as error:
            self._unreachable("get_many", error)
            return [None] * len(keys)

    def has(self, key: str) -> bool:
        try:
            return super().has(key)
        except RedisError as error:
            self._unreachable("has", error)
            return False

    def set(self, key: str, value: Any, timeout: int | None = None) -> Any:
        try:
            return super().set(key, value, timeout)
        except RedisError as error:
            self._unreachable("set", error)
            return False

    def add(self, key: str, value: Any, timeout: int | None = None) -> Any:
        try:
            return super().add(key, value, timeout)
        except RedisError as error:
            self._unreachable("add", error)
            return False

    def set_many(self, mapping: dict[str, Any], timeout: int | None = None) -> list[Any]:
        try:
            return super().set_many(mapping, timeout)
        except RedisError as error:
            self._unreachable("set_many", error)
            return []

    def delete(self, key: str) -> bool:
        try:
            return super().delete(key)
        except RedisError as error:
            self._unreachable("delete", error)
            return False

    def delete_many(self, *keys: str) -> list[Any]:
        try:
            return super().delete_many(*keys)
        except RedisError as error:
            self._unreachable("delete_many", error)
            return []

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

    def _tolerant(self, operation: str, missed: Any, *args: Any) -> Any:
        """RedisCache's `operation` of `args`; `missed`, with a warning, when Redis fails."""
        try:
            return getattr(super(), operation)(*args)
        except RedisError as error:
            log.warning("cache %s skipped, Redis unreachable: %s", operation, error)
            return missed

    def get(self, key: str) -> Any:
        return self._tolerant("get", None, key)

    def get_many(self, *keys: str) -> list[Any]:
        return self._tolerant("get_many", [None] * len(keys), *keys)

    def has(self, key: str) -> bool:
        return self._tolerant("has", False, key)

    def set(self, key: str, value: Any, timeout: int | None = None) -> Any:
        return self._tolerant("set", False, key, value, timeout)

    def add(self, key: str, value: Any, timeout: int | None = None) -> Any:
        return self._tolerant("add", False, key, value, timeout)

    def set_many(self, mapping: dict[str, Any], timeout: int | None = None) -> list[Any]:
        return self._tolerant("set_many", [], mapping, timeout)

    def delete(self, key: str) -> bool:
        return self._tolerant("delete", False, key)

    def delete_many(self, *keys: str) -> list[Any]:
        return self._tolerant("delete_many", [], *keys)

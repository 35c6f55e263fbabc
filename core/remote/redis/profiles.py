"""What each Redis locking library writes (:class:`RedisProfile`: key patterns, prefixes,
signal lists) and the compare-and-delete script a release runs, for
:mod:`core.remote.redis.backend`.

Rules: docs/specs/distributed-locks.md, "Redis"; docs/remote.md, "Redis". No driver is imported
here.
"""

from __future__ import annotations

from dataclasses import dataclass

# KEYS[1] lock key, KEYS[2] signal list or "" ; ARGV[1] token seen, ARGV[2] signal expiry ms.
# Returns 1 when deleted, 0 when the key holds another value or is missing.
# ARGV[3]: "" to compare the whole value with ARGV[1]; else the value's length, ARGV[1] then
# being the SHA-1 hex of its first ARGV[4] bytes (a long value: long_token)
COMPARE_AND_DELETE = """
if ARGV[3] == '' then
    if redis.call('get', KEYS[1]) ~= ARGV[1] then
        return 0
    end
else
    if redis.call('type', KEYS[1]).ok ~= 'string'
            or redis.call('strlen', KEYS[1]) ~= tonumber(ARGV[3])
            or redis.sha1hex(redis.call('getrange', KEYS[1], 0, tonumber(ARGV[4]) - 1))
               ~= ARGV[1] then
        return 0
    end
end
if KEYS[2] ~= '' then
    redis.call('del', KEYS[2])
    redis.call('lpush', KEYS[2], 1)
    redis.call('pexpire', KEYS[2], ARGV[2])
end
return redis.call('del', KEYS[1])
"""


@dataclass(frozen=True, slots=True)
class RedisProfile:
    """What one locking library writes.

    Attributes:
        format: ``LockRecord.format`` of its locks (``redis-py``, ``python-redis-lock``).
        patterns: SCAN ``MATCH`` patterns of its lock keys.
        prefix: what the library puts before the lock's name (``lock:``), "" for none.
        signal_prefix: prefix of the list its waiters block on (``lock-signal:``), or "" when
            it has none; the list for lock ``<prefix><name>`` is ``<signal_prefix><name>``.
    """

    format: str
    patterns: tuple[str, ...]
    prefix: str = ""
    signal_prefix: str = ""

    def name_of(self, key: str) -> str:
        """The lock's name: ``key`` without :attr:`prefix`."""
        return key[len(self.prefix):] if self.prefix and key.startswith(self.prefix) else key

    def signal_key(self, key: str) -> str:
        """The signal list of lock ``key``, or "" when the library has none."""
        return self.signal_prefix + self.name_of(key) if self.signal_prefix else ""


def redis_py_profile(*patterns: str) -> RedisProfile:
    """redis-py's ``Lock`` (``redis.lock.Lock``): keys named exactly as the caller chose, so the
    patterns must be given (e.g. ``"deploy:*"``); its default token is ``uuid1().hex``."""
    return RedisProfile("redis-py", tuple(patterns))


PYTHON_REDIS_LOCK = RedisProfile("python-redis-lock", ("lock:*",), "lock:", "lock-signal:")
"""python-redis-lock: ``lock:<name>``, signal list ``lock-signal:<name>``, random token."""


__all__ = ["COMPARE_AND_DELETE", "PYTHON_REDIS_LOCK", "RedisProfile", "redis_py_profile"]

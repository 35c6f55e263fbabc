"""Locks held on servers, listed beside lock files: PostgreSQL advisory locks and the Liquibase
lock table (:mod:`core.remote.postgres.backend`), Redis keys written by redis-py's ``Lock`` and
python-redis-lock (:mod:`core.remote.redis.backend`), etcd's concurrency-API keys written by
``etcdctl lock`` (:mod:`core.remote.etcd.backend`). docs/remote.md describes the rules.

This package imports no database driver: ``import core.remote`` works without psycopg, redis
or etcd3gw; each backend module imports its own driver when it is imported.
"""

from __future__ import annotations

from core.remote.base import (
    ReleaseOutcome,
    RemoteError,
    RemoteErrorKind,
    RemoteSource,
    audit_remote,
)

__all__ = ["ReleaseOutcome", "RemoteError", "RemoteErrorKind", "RemoteSource", "audit_remote"]

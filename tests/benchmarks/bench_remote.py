"""Costs of listing locks on servers (docs/remote.md): Redis discovery (SCAN + pipelined GET and
PTTL + verdicts) of N lock keys among other keys, and one PostgreSQL poll (the pg_locks query +
verdicts) with 1,000 advisory locks held. Prints figures; asserts nothing about speed
(docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_remote.py [--redis-locks 1000] \\
        [--redis-other 100000] [--pg-locks 1000] [--rounds 7]

Starts a private redis-server and PostgreSQL cluster as tests/remote does
(tests/support/servers.py); a server whose binary or driver is missing is skipped with a line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.servers import start_pg, start_redis  # noqa: E402


def timed(fn: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def ms(values: list[float]) -> str:
    return (f"median {statistics.median(values) * 1e3:.2f} ms, "
            f"min {min(values) * 1e3:.2f}, max {max(values) * 1e3:.2f}")


def bench_redis(locks: int, other: int, rounds: int) -> None:
    try:
        import redis

        from core.remote.redis.backend import PYTHON_REDIS_LOCK, RedisSource, redis_py_profile
    except ImportError as exc:
        print(f"redis: skipped ({exc})")
        return
    try:
        server = start_redis(Path(tempfile.mkdtemp(prefix="lw-bench-redis-")))
    except BaseException as exc:  # pytest.skip outside pytest
        print(f"redis: skipped ({exc})")
        return
    try:
        r = redis.Redis(port=server.port)
        pipe = r.pipeline(transaction=False)
        for i in range(other):
            pipe.set(f"cache:{i}", "x" * 16, px=3_600_000)
            if i % 10_000 == 9_999:
                pipe.execute()
        for i in range(locks):
            if i % 2:
                pipe.set(f"lock:job-{i}", f"token-{i}", px=600_000)  # python-redis-lock
            else:
                pipe.set(f"deploy:{i}", f"{i:032x}")  # redis-py name, no TTL
        pipe.execute()
        with RedisSource("127.0.0.1", server.port,
                         profiles=(PYTHON_REDIS_LOCK, redis_py_profile("deploy:*"))) as src:
            found = len(src.list_locks())
            scan = timed(src.scan_keys, rounds)
            full = timed(src.list_locks, rounds)
        print(f"redis {found} lock keys among {r.dbsize()} keys (2 patterns, TCP loopback):")
        print(f"  SCAN only (COUNT 1000, TYPE string): {ms(scan)}")
        print(f"  list_locks (SCAN + GET/PTTL + verdicts): {ms(full)}"
              f" = {statistics.median(full) / max(found, 1) * 1e6:.1f} us/lock")
    finally:
        server.stop()


def bench_pg(locks: int, rounds: int) -> None:
    try:
        import psycopg

        from core.remote.postgres.backend import PostgresSource
    except ImportError as exc:
        print(f"postgres: skipped ({exc})")
        return
    try:
        server = start_pg()
    except BaseException as exc:  # pytest.skip outside pytest
        print(f"postgres: skipped ({exc})")
        return
    holders = []
    try:
        per = 100
        for start in range(0, locks, per):
            c = psycopg.connect(**server.conninfo(application_name=f"holder-{start}"),
                                autocommit=True)
            c.execute("SELECT count(pg_advisory_lock(g)) "
                      "FROM generate_series(%s::bigint, %s::bigint) g",
                      (start + 1, min(start + per, locks)))
            holders.append(c)
        with PostgresSource(server.sockdir, server.port, "postgres", user="lw") as src:
            found = len(src.list_locks())
            from core.remote.postgres import backend as pg

            query = timed(lambda: src._rows(pg.LOCKS_SQL), rounds)
            poll = timed(src.list_locks, rounds)
        print(f"postgres {found} advisory locks held by {len(holders)} sessions (unix socket):")
        print(f"  pg_locks query alone: {ms(query)}")
        print(f"  list_locks (query + verdicts + Liquibase check): {ms(poll)}"
              f" = {statistics.median(poll) / max(found, 1) * 1e6:.1f} us/lock")
    finally:
        for c in holders:
            c.close()
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-locks", type=int, default=1000)
    ap.add_argument("--redis-other", type=int, default=100_000)
    ap.add_argument("--pg-locks", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    bench_redis(args.redis_locks, args.redis_other, args.rounds)
    bench_pg(args.pg_locks, args.rounds)


if __name__ == "__main__":
    main()

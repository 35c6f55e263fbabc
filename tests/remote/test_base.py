"""The backend interface without servers: paths, foreign URLs, the missing-driver error, and
``import core.remote`` with neither psycopg nor redis installed (docs/remote.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from core import audit
from core.remote import RemoteError, RemoteErrorKind, audit_remote
from core.remote.base import url_host

ROOT = Path(__file__).resolve().parents[2]


def test_url_hosts() -> None:
    assert url_host("db.example") == "db.example"
    assert url_host("/run/postgresql") == "%2Frun%2Fpostgresql"
    assert url_host("::1") == "[::1]"


def test_backends_import_and_say_so_without_their_drivers() -> None:
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("psycopg", "redis", "psycopg_binary"):
                    raise ImportError("blocked for this test: " + name)
                return None
        sys.meta_path.insert(0, Block())
        import core.remote
        from core.remote.postgres.backend import PostgresSource
        from core.remote.redis.backend import RedisSource
        from core.remote import RemoteError, RemoteErrorKind
        for src in (PostgresSource("localhost", 1), RedisSource("localhost", 1)):
            try:
                src.list_locks()
            except RemoteError as exc:
                assert exc.kind is RemoteErrorKind.NO_DRIVER, exc.kind
                print(src.scheme, "lockwarden[" + ("postgres" if src.scheme == "postgres"
                                                   else "redis") + "]" in str(exc))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["postgres", "True", "redis", "True"]


def test_a_foreign_url_is_a_bad_key() -> None:
    from core.remote.redis.backend import RedisSource

    src = RedisSource("127.0.0.1", 6379)
    assert src.key_of("redis://127.0.0.1:6379/0#lock:a") == "lock:a"
    assert src.key_of("lock:a") == "lock:a"
    try:
        src.key_of("redis://other:6379/0#lock:a")
    except RemoteError as exc:
        assert exc.kind is RemoteErrorKind.BAD_KEY
    else:
        raise AssertionError("a URL of another server was accepted")


def test_audit_entries_carry_the_url_and_chain(own_audit_log: Path) -> None:
    url = "postgres://db:5432/shop#advisory/42"
    assert audit_remote(url, "force_release", details={"token": "1@x"}) == str(own_audit_log)
    audit_remote(url, "release_refused", result="refused")
    entries = audit.read(str(own_audit_log))
    assert [(e.lock_path, e.operation, e.result) for e in entries] == [
        (url, "force_release", "ok"), (url, "release_refused", "refused")]
    assert audit.verify(str(own_audit_log)).ok

"""Sources built from a real TOML file (``[[redis]]`` with ``password_env``) list the locks
of a real password-protected redis-server; a wrong password is ``auth_failed``
(docs/remote.md, "Configuration")."""

from __future__ import annotations

from pathlib import Path

import pytest

redis = pytest.importorskip("redis", reason="redis-py is not installed (pip install redis)")

from core import config  # noqa: E402
from core.remote import RemoteError, RemoteErrorKind  # noqa: E402
from core.remote.sources import sources_from_config  # noqa: E402
from tests.support.servers import start_redis  # noqa: E402

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes


def test_a_configured_redis_with_password_env(tmp_path: Path) -> None:
    server = start_redis(tmp_path / "redis", password="pw-7")
    try:
        client = redis.Redis(port=server.port, password="pw-7")
        assert client.lock("deploy:web", timeout=30).acquire(blocking=False)
        path = tmp_path / "config.toml"
        path.write_text(f'[[redis]]\nurl = "redis://127.0.0.1:{server.port}/0"\n'
                        'profiles = ["redis-py"]\npatterns = ["deploy:*"]\n'
                        'password_env = "LOCKWARDEN_REDIS_PW"\nstale_after = 60\n')
        cfg = config.load_strict(str(path))
        (src,), problems = sources_from_config(cfg, environ={"LOCKWARDEN_REDIS_PW": "pw-7"})
        assert problems == []
        with src:
            (st,) = src.list_locks()
        assert st.path == f"redis://127.0.0.1:{server.port}/0#deploy:web"
        assert st.policy is not None and st.policy.stale_after == 60
        (bad,), _ = sources_from_config(cfg, environ={"LOCKWARDEN_REDIS_PW": "wrong"})
        with pytest.raises(RemoteError) as err, bad:
            bad.list_locks()
        assert err.value.kind is RemoteErrorKind.AUTH_FAILED
        client.close()
    finally:
        server.stop()

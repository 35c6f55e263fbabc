"""Private lock servers for tests: a redis-server, an etcd and a PostgreSQL cluster on temp
directories and free loopback ports, started with the commands tested in
docs/specs/distributed-locks.md ("Starting real servers in tests and CI"). Each skips the
test, with the reason, when its binary is not installed."""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PG_PASSWORD = "lw-secret"
"""Password of the superuser ``lw`` over TCP (the unix socket trusts)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Return once something accepts on ``port`` (the server is up), or fail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.005)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


@dataclass
class RedisServer:
    port: int
    directory: Path
    proc: subprocess.Popen[bytes]
    password: str | None
    startup_s: float

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_redis(directory: Path, *, password: str | None = None) -> RedisServer:
    """``redis-server --port P --bind 127.0.0.1 --save '' --appendonly no --dir D``."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
           "--dir", str(directory), "--daemonize", "no", "--logfile", str(directory / "log")]
    if password:
        cmd += ["--requirepass", password]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
    _wait_port(port, proc)
    return RedisServer(port, directory, proc, password, time.monotonic() - t0)


@dataclass
class PgServer:
    port: int
    sockdir: str
    data: str
    runas: list[str]
    pg_ctl: str
    startup_s: float

    def conninfo(self, **over: Any) -> dict[str, Any]:
        kw: dict[str, Any] = {"host": self.sockdir, "port": self.port, "user": "lw",
                                 "dbname": "postgres"}
        kw.update(over)
        return kw

    def stop(self) -> None:
        subprocess.run([*self.runas, self.pg_ctl, "-D", self.data, "-m", "immediate", "-w",
                        "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.sockdir, ignore_errors=True)


def start_pg() -> PgServer:
    """initdb + ``pg_ctl -w start`` as user ``postgres`` when root (initdb refuses root; else
    as the second test account, ``lwtest2``), on a temp directory it owns, a free port on
    127.0.0.1 (password over TCP, trust on the socket)."""
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                  key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("/")[-3])])
    if not bins:
        pytest.skip("PostgreSQL server is not installed (Debian: apt-get install postgresql)")
    bindir = os.path.dirname(bins[-1])
    initdb, pg_ctl = os.path.join(bindir, "initdb"), os.path.join(bindir, "pg_ctl")
    d = tempfile.mkdtemp(prefix="lw-pg-")
    runas: list[str] = []
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")  # comes with the Debian package
        except KeyError:  # else the test account of tests/adversarial (created when missing)
            from tests.support.second_user import USER2, second_user

            second_user()
            pw = pwd.getpwnam(USER2)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        runas = ["runuser", "-u", pw.pw_name, "--"]
    pwfile = os.path.join(d, "pw")
    with open(pwfile, "w") as f:
        f.write(PG_PASSWORD + "\n")
    if runas:
        os.chown(pwfile, pw.pw_uid, -1)
    port = free_port()
    data = os.path.join(d, "data")
    t0 = time.monotonic()
    r = subprocess.run([*runas, initdb, "-D", data, "-U", "lw", "--auth-local=trust",
                        "--auth-host=scram-sha-256", f"--pwfile={pwfile}", "--no-sync",
                        "-E", "UTF8", "--locale=C.UTF-8"], capture_output=True, timeout=120)
    if r.returncode:
        raise RuntimeError(r.stdout.decode() + r.stderr.decode())
    opts = (f"-k {d} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off")
    r = subprocess.run([*runas, pg_ctl, "-D", data, "-l", os.path.join(d, "pg.log"), "-w",
                        "-o", opts, "start"], capture_output=True, timeout=120)
    if r.returncode:
        raise RuntimeError(r.stdout.decode() + r.stderr.decode())
    return PgServer(port, d, data, runas, pg_ctl, time.monotonic() - t0)


@dataclass
class EtcdServer:
    port: int
    directory: Path
    proc: subprocess.Popen[bytes]
    startup_s: float

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def etcdctl(self, *args: str) -> list[str]:
        """An ``etcdctl`` command line for this server (API v3)."""
        exe = shutil.which("etcdctl")
        if exe is None:
            pytest.skip("etcdctl is not installed (Debian: apt-get install etcd-client)")
        return [exe, f"--endpoints=127.0.0.1:{self.port}", *args]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_etcd(directory: Path) -> EtcdServer:
    """``etcd --data-dir D --listen-client-urls http://127.0.0.1:P ... --heartbeat-interval 10
    --election-timeout 100`` (docs/specs/distributed-locks.md, "Starting real servers in tests
    and CI"); ready when its client port accepts and ``/health`` says true."""
    exe = shutil.which("etcd")
    if exe is None:
        pytest.skip("etcd is not installed (Debian: apt-get install etcd-server etcd-client)")
    directory.mkdir(parents=True, exist_ok=True)
    port, peer = free_port(), free_port()
    client_url, peer_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{peer}"
    cmd = [exe, "--name", "t", "--data-dir", str(directory / "data"),
           "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
           "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
           "--initial-cluster", f"t={peer_url}", "--heartbeat-interval", "10",
           "--election-timeout", "100", "--log-level", "error", "--logger", "zap"]
    t0 = time.monotonic()
    with open(directory / "log", "wb") as logf:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
    _wait_port(port, proc)
    import urllib.request

    deadline = time.monotonic() + 10
    while True:  # the port accepts before the member has elected itself leader
        try:
            with urllib.request.urlopen(client_url + "/health", timeout=1) as resp:
                if b'"true"' in resp.read():
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("etcd did not become healthy in 10 s")
        time.sleep(0.005)
    return EtcdServer(port, directory, proc, time.monotonic() - t0)

"""Who holds a lock taken from the command line (core/cli/caller.py ``caller_pid``,
``releasing_pid``; docs/cli.md, "Who holds a lock taken from the command line").

README's first example -- ``try b.lock --tag nightly && make && release b.lock`` -- run by real
shells that ``exec`` their last command (bash, zsh, busybox sh: ``release`` then *is* the shell
that ``try`` recorded), with ``env``, ``nice``, ``timeout``, ``sudo`` and ``xargs`` in between
(wrappers that fork the command and exit with it are not the caller), from Makefile recipes and
from Python's ``subprocess`` (with and without ``shell=True``). Each run must exit 0 with the
lock released, and the lock must show its holder alive in the middle. Then the negative: a
sibling -- another script whose ancestry does not include the holder -- is refused whatever runs
it, and the holder still releases.

Everything runs for real: ``lockwarden`` is a shim in a temporary ``bin`` that ``exec``s
``python -m core`` of this checkout (so ``sudo``, which resets the environment, runs the same
code), and each shell is the system's own. A cell whose tool is missing is skipped (zsh and
busybox come from ``packaging/linux-sysdeps.sh``; ``sudo`` must work without a password).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.cli.caller import one_command

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX shells and wrappers"),
]

ALIVE = "lockwarden status \"$L\" --json | grep -q '\"liveness\": \"alive\"'"
"""The work between ``try`` and ``release``: the lock is there and its holder is alive."""

SHELLS = {
    "bash": ["bash", "-c"],
    "dash": ["dash", "-c"],
    "zsh": ["zsh", "-c"],
    "busybox-sh": ["busybox", "sh", "-c"],
}

BETWEEN = {
    "none": "",
    "env": "env ",
    "nice": "nice -n 1 ",
    "timeout": "timeout 60 ",
    "busybox-timeout": "busybox timeout 60 ",  # an applet run by busybox's own name
    "sudo": 'sudo -n "$LW" ',  # sudo resets PATH: the shim by its absolute path
    "xargs": None,  # the path comes on stdin
}


def _sudo_works() -> bool:
    if shutil.which("sudo") is None:
        return False
    try:
        return subprocess.run(["sudo", "-n", "true"], capture_output=True, timeout=30,
                              check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


SUDO = _sudo_works()


@pytest.fixture
def shim(tmp_path: Path) -> Path:
    """A ``bin`` directory whose ``lockwarden`` execs ``python -m core`` of this checkout (the
    same process: no extra ancestor), with the paths written in, so ``sudo`` runs it too."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    lw = bindir / "lockwarden"
    lw.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m core "$@"\n')
    lw.chmod(0o755)
    return bindir


def _env(shim: Path, lock: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    return {**env, "PATH": f"{shim}{os.pathsep}{env.get('PATH', '')}", "L": str(lock),
            "LW": str(shim / "lockwarden")}


def _need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (packaging/linux-sysdeps.sh installs it)")


def _chain(between: str) -> str:
    """README's example with ``between`` in front of both lockwarden commands."""
    if BETWEEN[between] is None:  # xargs
        return (f'echo "$L" | xargs lockwarden try --tag nightly && {ALIVE} && '
                'echo "$L" | xargs lockwarden release')
    w = BETWEEN[between]
    lw = w if between == "sudo" else f"{w}lockwarden "
    return f'{lw}try "$L" --tag nightly && {ALIVE} && {lw}release "$L"'


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
                          check=False)


def _released(out: subprocess.CompletedProcess[str], lock: Path) -> None:
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert "not released" not in out.stderr, out.stderr
    assert "released" in out.stdout, out.stdout
    assert not lock.exists()


@pytest.mark.parametrize("between", list(BETWEEN))
@pytest.mark.parametrize("shell", list(SHELLS))
def test_first_example_releases_under_every_shell(
    shell: str, between: str, shim: Path, lockdir: Path
) -> None:
    argv = SHELLS[shell]
    _need(argv[0], *(["xargs"] if between == "xargs" else []),
          *(["busybox"] if between.startswith("busybox") else []))
    if between == "sudo" and not SUDO:
        pytest.skip("sudo does not run without a password here")
    lock = lockdir / "b.lock"
    out = _run([*argv, _chain(between)], _env(shim, lock), lockdir)
    _released(out, lock)


MAKEFILES = {
    # one recipe line, run by make's /bin/sh (dash on Debian: it forks even its last command)
    "sh-one-line": f"all:\n\tlockwarden try \"$(L)\" --tag nightly && {ALIVE} && "
                   "lockwarden release \"$(L)\"\n",
    # the same under bash, which execs the last command of the line
    "bash-one-line": "SHELL := /bin/bash\n"
                     f"all:\n\tlockwarden try \"$(L)\" --tag nightly && {ALIVE} && "
                     "lockwarden release \"$(L)\"\n",
    # a line per command, each run by its own `sh -c` (a redirection needs a shell): the shell
    # is only a wrapper of its one command, make is the caller
    "lines-redirected": "all:\n\tlockwarden try \"$(L)\" --tag nightly >/dev/null\n"
                        f"\t{ALIVE}\n\tlockwarden release \"$(L)\" >/dev/null\n",
    # a line per command, run by make itself, with timeout in between
    "lines-timeout": "all:\n\ttimeout 60 lockwarden try $(L) --tag nightly\n"
                     f"\t{ALIVE}\n\ttimeout 60 lockwarden release $(L)\n",
}


@pytest.mark.parametrize("makefile", list(MAKEFILES))
def test_first_example_in_a_makefile_recipe(makefile: str, shim: Path, lockdir: Path) -> None:
    _need("make", "bash")
    lock = lockdir / "b.lock"
    (lockdir / "Makefile").write_text(MAKEFILES[makefile])
    out = _run(["make", "-s", f"L={lock}"], _env(shim, lock), lockdir)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert "not released" not in out.stderr
    assert not lock.exists()


PYTHON_CELLS = {
    # the holder is this Python process: it runs each command itself
    "subprocess": """
        lw = ["lockwarden"]
        run(lw + ["try", L, "--tag", "nightly"])
        alive()
        run(lw + ["release", L])
    """,
    "subprocess-timeout": """
        lw = ["timeout", "60", "lockwarden"]
        run(lw + ["try", L, "--tag", "nightly"])
        alive()
        run(lw + ["release", L])
    """,
    "subprocess-env-nice": """
        run(["env", "nice", "-n", "1", "lockwarden", "try", L, "--tag", "nightly"])
        alive()
        run(["nice", "-n", "1", "env", "lockwarden", "release", L])
    """,
    # one /bin/sh -c per command: the shell is only a wrapper of that command
    "shell-per-command": """
        run(f"lockwarden try {q(L)} --tag nightly", shell=True)
        alive()
        run(f"lockwarden release {q(L)}", shell=True)
    """,
    # README's chain as one string, by /bin/sh and by bash (which execs the release)
    "shell-chain": """
        run(CHAIN, shell=True)
    """,
    "shell-chain-bash": """
        run(CHAIN, shell=True, executable="/bin/bash")
    """,
}

PYTHON_PRELUDE = """
import json, os, shlex, subprocess, sys
L = os.environ["L"]
q = shlex.quote

def run(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    sys.stdout.write(out.stdout)
    sys.stderr.write(out.stderr)
    if out.returncode != 0:
        sys.exit(f"{cmd!r} exited {out.returncode}")

CHAIN = os.environ["CHAIN"]


def alive():
    out = subprocess.run(["lockwarden", "status", L, "--json"], capture_output=True, text=True)
    st = json.loads(out.stdout)
    if st["liveness"] != "alive" or st["pid"] != os.getpid():
        sys.exit(f"not held by this process ({os.getpid()}): {st}")
"""


@pytest.mark.parametrize("cell", list(PYTHON_CELLS))
def test_first_example_from_python_subprocess(cell: str, shim: Path, lockdir: Path) -> None:
    _need("bash")
    lock = lockdir / "b.lock"
    script = PYTHON_PRELUDE + textwrap.dedent(PYTHON_CELLS[cell])
    env = {**_env(shim, lock), "CHAIN": _chain("none")}
    out = _run([sys.executable, "-c", script], env, lockdir)
    _released(out, lock)


# ------------------------------------------------------------------------------- the negative

SIBLINGS = {
    "bash-exec": ["bash", "-c", 'lockwarden release "$L"'],
    "dash": ["dash", "-c", 'lockwarden release "$L"'],
    "dash-chain": ["dash", "-c", 'true && lockwarden release "$L"; exit $?'],
    "zsh": ["zsh", "-c", 'true && lockwarden release "$L"'],
    "busybox-sh": ["busybox", "sh", "-c", 'true && lockwarden release "$L"'],
    "timeout": ["timeout", "60", "lockwarden", "release", "$L"],
    "xargs": ["sh", "-c", 'echo "$L" | xargs lockwarden release'],
    "sudo": ["sudo", "-n", "$LW", "release", "$L"],
    "python": [sys.executable, "-c",
               "import os, subprocess, sys; "
               "sys.exit(subprocess.run(['lockwarden', 'release', os.environ['L']]).returncode)"],
}


def test_another_script_cannot_release(shim: Path, lockdir: Path) -> None:
    """The holder -- a bash script that took the lock and works on -- is not an ancestor of
    any of the siblings this test starts: each is refused (exit 1, "not released"), the lock
    is untouched, and the holder's own release still succeeds."""
    _need("bash")
    lock = lockdir / "b.lock"
    env = _env(shim, lock)
    holder = subprocess.Popen(
        ["bash", "-c", 'lockwarden try "$L" --tag nightly && echo "holder=$$" && read _ && '
                       'lockwarden release "$L"'],
        env=env, cwd=lockdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        first = holder.stdout.readline()
        assert first.startswith("acquired"), first
        holder_pid = int(holder.stdout.readline().split("=")[1])
        before = lock.read_bytes()
        tried = 0
        for name, argv in SIBLINGS.items():
            if shutil.which(argv[0]) is None or (name == "sudo" and not SUDO):
                continue
            argv = [env[a[1:]] if a.startswith("$") else a for a in argv]
            out = _run(argv, env, lockdir)
            # xargs says 123 when its command exited 1 to 125
            assert out.returncode == (123 if name == "xargs" else 1), (name, out.stdout,
                                                                        out.stderr)
            assert "not released" in out.stderr, (name, out.stderr)
            assert lock.read_bytes() == before, name
            tried += 1
        assert tried >= 5
        st = json.loads(_run(["lockwarden", "status", str(lock), "--json"], env,
                             lockdir).stdout)
        assert st["pid"] == holder_pid and st["liveness"] == "alive"
        rest, err = holder.communicate("go\n", timeout=120)
        assert holder.returncode == 0, err
        assert "released" in rest and not lock.exists()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


@pytest.mark.parametrize(("script", "one"), [
    ("lockwarden try x", True),
    ("lockwarden try x >/dev/null 2>&1", True),
    ("X=1 lockwarden try 'a b'", True),
    ("a && b", False),
    ("a; b", False),
    ("a | b", False),
    ("a &", False),
    ("a\nb", False),
    ("if a; then b; fi", False),
    ("{ a; }", False),
    ("(a)", False),
    ("echo $(a)", False),
    ("echo `a`", False),
    ("echo 'unclosed", False),
])
def test_one_command(script: str, one: bool) -> None:
    """A shell whose ``-c`` text is one simple command runs it and exits with it (a wrapper);
    anything else may go on after it, so it is a caller."""
    assert one_command(script) is one

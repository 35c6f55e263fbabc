"""Every shell example of README.md's "Command line" block and of docs/cli.md, run as printed.

The examples are read from the markdown itself (fenced ``sh`` blocks, and the ``$ lockwarden``
lines of the output samples), so an example that changes is tested as it then reads; one that
no rule below knows fails the test with its text, to be given a rule. Each runs twice: as a
script (``bash FILE``: the shell stays the caller, as when typed into a terminal) and through
``bash -c '...'`` (which execs the last command: ssh, ``docker exec``, CI steps), each time in
a fresh sandbox, with the real ``lockwarden`` console script of this virtualenv on ``PATH``.

The sandbox: a temporary directory is the working directory, ``HOME`` (``~/proj``,
``~/.cache/uv/.lock``) and the XDG directories; the absolute paths of the examples
(``/tmp``, ``/run/lock``, ``/var/lib/dpkg``) are rewritten into it -- the only change made to
an example's text. ``make``, ``rsync``, ``./deploy.sh``, ``./nightly.sh`` and
``./long-job.sh`` are stand-ins that record the locks they see (``lockwarden list --json``)
and their parent's PID, so a test can say the lock was held, alive, by the right process while
the command ran. Other holders are real processes (a ``core.Lock`` holder, one SIGKILLed for a
stale lock, ``flock(1)`` for a kernel lock). Lock servers' URLs are run against no server: they
must fail cleanly (exit 3), and are skipped where something listens at the address.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"README.md": "## Command line", "docs/cli.md": None}
"""Files read, with the one section read (None: the whole file)."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell examples"),
]

HOLDER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from core.engine.lock import Lock
Lock(sys.argv[1], tag="another holder").acquire(timeout=30)
print("held", flush=True)
sys.stdin.read()
"""

STAND_IN = """#!/bin/sh
# a stand-in for {name}: records the locks it sees and its parent (the lock's holder)
lockwarden list $E2E_DIRS --json > "$E2E_LOG/{name}.$$.json"
echo "$PPID" > "$E2E_LOG/{name}.$$.ppid"
"""


@dataclass
class Example:
    """One example: its text as printed (one line, or a block run as one script), where."""

    source: str
    text: str

    def __str__(self) -> str:
        return f"{self.source}: {self.text}"


def _examples() -> list[Example]:
    out: list[Example] = []
    for name, section in SOURCES.items():
        text = (ROOT / name).read_text(encoding="utf-8")
        if section is not None:
            start = text.index(section)
            end = text.find("\n## ", start + len(section))
            text = text[start:end if end >= 0 else None]
        for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            lines = [ln for ln in body.splitlines() if ln.strip()]
            if lang == "sh":
                if any("|| exit" in ln for ln in lines):  # a script: its lines share a shell
                    out.append(Example(name, "\n".join(lines)))
                else:
                    out.extend(Example(name, ln) for ln in lines)
            elif not lang:  # an output sample: its "$ lockwarden ..." command lines
                out.extend(Example(name, ln[2:]) for ln in lines
                           if ln.startswith("$ lockwarden "))
    return out


EXAMPLES = _examples()


# ------------------------------------------------------------------------------ the sandbox


@dataclass
class Sandbox:
    root: Path
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for d in ("work", "home/proj", "tmp/demo", "run/lock", "var/lib/dpkg", "bin", "log",
                  "home/.cache/uv", "xdg"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        for name in ("make", "rsync"):
            self._stand_in(self.root / "bin" / name, name)
        for name in ("deploy.sh", "nightly.sh", "long-job.sh"):
            self._stand_in(self.cwd / name, name)

    @property
    def cwd(self) -> Path:
        return self.root / "work"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def _stand_in(self, path: Path, name: str) -> None:
        path.write_text(STAND_IN.format(name=name))
        path.chmod(0o755)

    def env(self) -> dict[str, str]:
        venv_bin = Path(sys.executable).parent
        env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        env.update(
            PATH=os.pathsep.join([str(self.root / "bin"), str(venv_bin), env.get("PATH", "")]),
            HOME=str(self.home), E2E_LOG=str(self.root / "log"), PGPW="not-a-password",
            E2E_DIRS=f"{self.cwd} {self.root / 'tmp'}",
            **{f"XDG_{k}_HOME": str(self.root / "xdg" / k.lower())
               for k in ("CONFIG", "STATE", "DATA", "CACHE")})
        return env

    def map(self, text: str) -> str:
        """The example's absolute paths, rewritten into the sandbox."""
        return re.sub(r"(?<![\w.~/-])/(tmp|run/lock|var/lib/dpkg)(?=[/\s\"']|$)",
                      lambda m: f"{self.root}/{m.group(1)}", text)

    def path(self, word: str) -> Path:
        """A path word of the (mapped) example as the shell sees it."""
        p = Path(os.path.expanduser(word.replace("~", str(self.home), 1))
                 if word.startswith("~") else word)
        return p if p.is_absolute() else self.cwd / p

    # holders, real processes
    def holder(self, lock: Path) -> subprocess.Popen[str]:
        p = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), str(ROOT)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        assert p.stdout is not None and p.stdout.readline() == "held\n"
        return p

    def stale(self, lock: Path) -> None:
        p = self.holder(lock)
        p.kill()
        p.wait()

    def flock_holder(self, lock: Path) -> subprocess.Popen[str]:
        p = subprocess.Popen(["flock", "-x", str(lock), "sh", "-c", "echo held; exec cat"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        assert p.stdout is not None and p.stdout.readline() == "held\n"
        return p

    def seen(self, name: str) -> list[tuple[int, list[dict[str, Any]]]]:
        """What the stand-in ``name`` recorded: (its parent's PID, the locks it listed)."""
        out = []
        for ppid in (self.root / "log").glob(f"{name}.*.ppid"):
            listed = json.loads(ppid.with_suffix(".json").read_text())
            out.append((int(ppid.read_text()), listed))
        return out

    def audit(self, lock: Path) -> list[dict[str, Any]]:
        log = lock.parent / ".lock_audit.log"
        if not log.exists():
            return []
        return [e for e in map(json.loads, log.read_text().splitlines())
                if e.get("lockPath") == str(lock)]

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    if shutil.which("lockwarden", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("no lockwarden console script beside this Python: pip install -e .")
    box = Sandbox(tmp_path)
    try:
        yield box
    finally:
        box.close()


# ------------------------------------------------------------------------------ the rules


@dataclass
class Run:
    code: int
    out: str
    err: str


def _words(line: str) -> list[str]:
    return shlex.split(line, comments=True)


def _operand(words: list[str]) -> str:
    """The first operand after ``lockwarden VERB`` (the lock or directory)."""
    i = words.index("lockwarden") + 2
    return next(w for w in words[i:] if not w.startswith("-"))


def _held_by_parent(box: Sandbox, name: str, lock: Path) -> None:
    """The stand-in ``name`` ran and saw ``lock`` held, alive, by its parent."""
    seen = box.seen(name)
    assert seen, f"{name} did not run"
    for ppid, listed in seen:
        mine = [e for e in listed if e.get("path") == str(lock)]
        assert mine, (name, listed)
        assert mine[0]["state"] == "held" and mine[0]["liveness"] == "alive", mine[0]
        assert mine[0]["pid"] == ppid, (mine[0], ppid)


Rule = Callable[[Sandbox, str], Callable[[Run], None]]
"""A rule prepares the sandbox for a (mapped) example and returns the check of its run."""


def rule_try_make_release(box: Sandbox, line: str) -> Callable[[Run], None]:
    lock = box.path(_operand(_words(line)))

    def check(run: Run) -> None:
        assert run.code == 0, run
        _held_by_parent(box, "make", lock)
        assert not lock.exists()
        assert [e["operation"] for e in box.audit(lock)] == ["acquire", "release"]
    return check


def rule_script_with_release(box: Sandbox, text: str) -> Callable[[Run], None]:
    lock = box.path(_operand(_words(text.splitlines()[0])))
    cmd = next(w for ln in text.splitlines() for w in _words(ln)[:1] if w.startswith("./"))

    def check(run: Run) -> None:
        assert run.code == 0, run
        _held_by_parent(box, cmd[2:], lock)
        assert not lock.exists()
    return check


def rule_run(box: Sandbox, line: str) -> Callable[[Run], None]:
    words = _words(line)
    lock = box.path(_operand(words))
    cmd = words[words.index("--") + 1]

    def check(run: Run) -> None:
        assert run.code == 0, run
        _held_by_parent(box, Path(cmd).name, lock)
        assert not lock.exists()
    return check


def rule_status(box: Sandbox, line: str) -> Callable[[Run], None]:
    lock = box.path(_operand(_words(line)))
    holder = box.holder(lock)

    def check(run: Run) -> None:
        assert run.code == 1, run  # held (as sema)
        if "--json" in line:
            st = json.loads(run.out)
            assert st["locked"] is True and st["state"] == "held" and st["pid"] == holder.pid
        else:
            assert run.out.startswith("locked: true\n") and "state: held" in run.out, run
    return check


def rule_list(box: Sandbox, line: str) -> Callable[[Run], None]:
    lock = box.path(_operand(_words(line))) / "deploy.lock"
    box.holder(lock)

    def check(run: Run) -> None:
        assert run.code == 0, run
        assert str(lock) in run.out and "held" in run.out, run
    return check


def rule_config_problems(box: Sandbox, line: str) -> Callable[[Run], None]:
    words = _words(line)
    directory = box.path(_operand(words))
    directory.mkdir(parents=True, exist_ok=True)
    config = box.cwd / words[words.index("--config") + 1]
    config.write_text(f'[[watch]]\npath = "{directory}"\n\n[[watch]]\npath = "/elsewhere"\n'
                      'stale_after = "abc"\n\n[[wacth]]\npath = "/x"\n')

    def check(run: Run) -> None:  # each problem once on stderr, then the listing as usual
        assert run.code == 0, run
        assert run.err.count("must be a finite positive number") == 1, run
        assert run.err.count("unknown table `wacth` (ignored; did you mean `watch`?)") == 1, run
        assert config.read_text().count("[[wacth]]") == 1  # the file is left as it is
    return check


def rule_reclaim(box: Sandbox, line: str) -> Callable[[Run], None]:
    lock = box.path(_operand(_words(line)))
    box.stale(lock)
    before = lock.read_bytes()

    def check(run: Run) -> None:
        assert run.code == 0 and "reclaimed" in run.out, run
        assert lock.exists() and lock.read_bytes() != before
        assert "reclaim" in [e["operation"] for e in box.audit(lock)]
    return check


def rule_force_release(box: Sandbox, line: str) -> Callable[[Run], None]:
    lock = box.path(_operand(_words(line)))
    holder = box.holder(lock)
    reason = _words(line)[_words(line).index("--reason") + 1]

    def check(run: Run) -> None:
        assert run.code == 0 and "released" in run.out, run
        assert not lock.exists()
        forced = [e for e in box.audit(lock) if e["operation"] == "force_release"]
        assert forced and forced[-1]["details"]["reason"] == reason
        assert forced[-1]["details"]["displaced"]["pid"] == holder.pid
    return check


def rule_audit(box: Sandbox, line: str) -> Callable[[Run], None]:
    target = box.path(_operand(_words(line)))
    lock = target if target.suffix == ".lock" else target / "deploy.lock"
    box.holder(lock).kill()  # an acquire in the log (and a stale lock)

    def check(run: Run) -> None:
        assert run.code == 0, run
        if "--json" in line:
            entries = [json.loads(ln) for ln in run.out.splitlines()] if \
                not run.out.startswith("[") else json.loads(run.out)
            assert any(e["operation"] == "acquire" for e in entries), run
        elif "--verify" not in line:
            assert "acquire" in run.out, run
    return check


def rule_own_log(box: Sandbox, line: str) -> Callable[[Run], None]:
    """``audit ~/.local/state/lockwarden/log``: the per-user log where ``XDG_STATE_HOME`` is
    not set (the example's own words), holding an entry the engine wrote there."""
    state = box.home / ".local" / "state"
    lock = box.cwd / "own.lock"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from core import audit; "
            "w = audit.append(sys.argv[2], 'acquire', user_log=True); assert w.fallback, w")
    env = {**box.env(), "XDG_STATE_HOME": str(state)}
    subprocess.run([sys.executable, "-c", code, str(ROOT), str(lock)], env=env, check=True,
                   timeout=60)

    def check(run: Run) -> None:
        assert run.code == 0, run
        assert "acquire" in run.out and str(lock) in run.out, run
    return check


def rule_kill_holder(box: Sandbox, line: str) -> Callable[[Run], None]:
    if shutil.which("flock") is None:
        pytest.skip("flock(1) is needed for a kernel lock's holder")
    lock = box.path(_operand(_words(line)))
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = box.flock_holder(lock)

    def check(run: Run) -> None:
        if "--yes" in line:
            assert run.code == 0, run
            assert holder.wait(timeout=30) is not None  # it got SIGTERM and ended
        else:  # no terminal to ask on: refused, nothing sent
            assert run.code == 2 and "--yes" in run.err, run
            assert holder.poll() is None
    return check


def rule_who(box: Sandbox, line: str) -> Callable[[Run], None]:
    """``who FILE`` / ``who FOLDER``: a real flock(1) holder uses it (for a folder, a file
    beneath it): exit 1, and the holder's PID named."""
    if shutil.which("flock") is None:
        pytest.skip("flock(1) is needed for a process using the file")
    if "jq" in line and shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    target = box.path(_operand(_words(line)))
    inside = target if "." in target.name else target / "in-use.txt"
    inside.parent.mkdir(parents=True, exist_ok=True)
    holder = box.flock_holder(inside)

    def check(run: Run) -> None:
        if "jq" in line:  # the pipeline's status is jq's
            assert run.code == 0, run
        else:
            assert run.code == 1, run
        assert str(holder.pid) in run.out.split() or any(
            str(p.pid) in run.out.split() for p in psutil.Process(holder.pid).children()), run
    return check


def rule_server(box: Sandbox, line: str) -> Callable[[Run], None]:
    for word in _words(line):
        if "://" in word:
            u = urlsplit(word.split("#")[0])
            try:
                with socket.create_connection((u.hostname or "", u.port or 0), timeout=1):
                    pytest.skip(f"something listens at {u.hostname}:{u.port}")
            except OSError:
                pass

    def check(run: Run) -> None:
        assert run.code == 3, run  # no server: "no connection", one line each
        assert "Traceback" not in run.err and "no connection" in run.err, run
    return check


def _dirty_swap(box: Sandbox, line: str) -> Path:
    """A real Vim swap with unsaved changes of a dead Vim (tests/data/devtools/vim), at the
    example's path."""
    swap = box.path(_operand(_words(line)))
    shutil.copyfile(ROOT / "tests" / "data" / "devtools" / "vim" / "dead-dirty.notes.txt.swp",
                    swap)
    return swap


def rule_discard_unsaved(box: Sandbox, line: str) -> Callable[[Run], None]:
    swap = _dirty_swap(box, line)

    def check(run: Run) -> None:
        assert run.code == 0 and "released" in run.out and "trash" in run.out, run
        assert not swap.exists()
        kept = list((box.root / "xdg" / "data" / "Trash" / "files").iterdir())
        assert [k.name for k in kept] == [swap.name]  # kept, not deleted
    return check


def rule_refuse_unsaved(box: Sandbox, line: str) -> Callable[[Run], None]:
    swap = _dirty_swap(box, line)
    before = swap.read_bytes()

    def check(run: Run) -> None:
        assert run.code == 1 and "vim -r" in run.err, run
        assert swap.read_bytes() == before
    return check


def rule_wait_notify(box: Sandbox, line: str) -> Callable[[Run], None]:
    lock = box.path(_operand(_words(line)))
    lock.parent.mkdir(parents=True, exist_ok=True)  # free: the wait ends at once

    def check(run: Run) -> None:
        assert run.code == 0 and "Traceback" not in run.err, run
    return check


def rule_history(box: Sandbox, line: str) -> Callable[[Run], None]:
    if "jq" in line and shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    box.path(_operand(_words(line))).mkdir(parents=True, exist_ok=True)

    def check(run: Run) -> None:  # nothing recorded yet in the sandbox: said, not an error
        assert run.code == 0 and "Traceback" not in run.err, run
    return check


RULES: list[tuple[str, Rule]] = [
    (r"://", rule_server),
    (r"^lockwarden try .* && make && lockwarden release ", rule_try_make_release),
    (r"^lockwarden try [^\n]*\|\| exit 1.*\n\./\S+.*\nlockwarden release ",
     rule_script_with_release),
    (r"^lockwarden run \S+ .*-- \S+", rule_run),
    (r"^lockwarden status ", rule_status),
    (r"^lockwarden list \S+ --config ", rule_config_problems),
    (r"^lockwarden list ", rule_list),
    (r"^lockwarden reclaim ", rule_reclaim),
    (r"^lockwarden release \S+ --force --reason ", rule_force_release),
    (r"^lockwarden audit ~/\.local/state/lockwarden/log", rule_own_log),
    (r"^lockwarden audit ", rule_audit),
    (r"^lockwarden kill-holder ", rule_kill_holder),
    (r"^lockwarden who ", rule_who),
    (r"^lockwarden release --force \S+\.swp --discard-unsaved ", rule_discard_unsaved),
    (r"^lockwarden release --force \S+\.swp$", rule_refuse_unsaved),
    (r"^lockwarden wait \S+ --notify", rule_wait_notify),
    (r"^lockwarden (history|stats) ", rule_history),
]
"""The first rule whose pattern matches the example (``re.S``) prepares and checks it;
``watch`` runs until it is stopped and is handled apart (:func:`_run_watch`)."""


# ------------------------------------------------------------------------------ running


def _argv(mode: str, text: str, box: Sandbox) -> list[str]:
    if mode == "bash -c":
        return ["bash", "-c", text]
    script = box.root / "example.sh"
    script.write_text(text + "\n")
    return ["bash", str(script)]


def _run(mode: str, text: str, box: Sandbox) -> Run:
    out = subprocess.run(_argv(mode, text, box), cwd=box.cwd, env=box.env(),
                         capture_output=True, text=True, timeout=120, check=False)
    return Run(out.returncode, out.stdout, out.stderr)


def _run_watch(mode: str, text: str, box: Sandbox) -> Run:
    """Start a ``watch`` example, wait for its first line (for a ``jq`` filter of ``added``
    events: make new locks until one comes through), stop ``lockwarden watch`` with SIGTERM as
    docs/cli.md says, and return how the whole command line ended."""
    shell = subprocess.Popen(_argv(mode, text, box), cwd=box.cwd, env=box.env(), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    try:
        assert shell.stdout is not None
        words = _words(text)
        first_dir = box.path(_operand(words))
        deadline = time.monotonic() + 60
        made = 0
        while not select.select([shell.stdout], [], [], 0.3)[0]:
            assert time.monotonic() < deadline and shell.poll() is None, shell.stderr
            if "jq" in text:  # only "added" lines come through: add a lock
                made += 1
                (first_dir / f"new-{made}.lock").write_text(
                    f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
        first = shell.stdout.readline()
        assert first.strip(), shell.stderr
        if "jq" in text:
            assert json.loads(first)["event"] == "added"
        watcher = next(p for p in [psutil.Process(shell.pid),
                                   *psutil.Process(shell.pid).children(recursive=True)]
                       if "watch" in p.cmdline() and any("lockwarden" in w or "core" in w
                                                         for w in p.cmdline()))
        watcher.send_signal(signal.SIGTERM)
        out, err = shell.communicate(timeout=60)
        return Run(shell.returncode, first + out, err)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()


def test_the_examples_are_found() -> None:
    """The parser finds README's first example and docs/cli.md's blocks (an empty list would
    make the test below vacuous)."""
    texts = [e.text for e in EXAMPLES]
    assert "lockwarden try build.lock --tag nightly && make && lockwarden release build.lock" \
        in texts
    assert sum(e.source == "README.md" for e in EXAMPLES) >= 8
    assert sum(e.source == "docs/cli.md" for e in EXAMPLES) >= 15
    assert any("|| exit 1" in t and "\n" in t for t in texts)


@pytest.mark.parametrize("mode", ["script", "bash -c"])
@pytest.mark.parametrize("example", EXAMPLES, ids=[str(e)[:90] for e in EXAMPLES])
def test_example_as_printed(example: Example, mode: str, sandbox: Sandbox) -> None:
    text = sandbox.map(example.text)
    if re.match(r"lockwarden watch ", text):
        if "jq" in text and shutil.which("jq") is None:
            pytest.skip("jq is not installed")
        run = _run_watch(mode, text, sandbox)
        assert run.code == 0, run
        return
    rule = next((r for pattern, r in RULES if re.search(pattern, text, re.S | re.M)), None)
    assert rule is not None, f"no rule knows this example; add one: {example}"
    check = rule(sandbox, text)
    check(_run(mode, text, sandbox))

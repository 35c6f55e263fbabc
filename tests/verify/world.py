"""One checked schedule's world: the lock directory as it starts (a seed), the processes the
scheduler forked (:mod:`tests.verify.actors`), the steps they take when told, crashes, and the
invariants checked after every step (docs/engine.md, "Every interleaving checked").

Invariants:

- ``two_holders``: never two processes in the critical section at once when one of them is
  the engine's, or both follow a protocol that alone never lets two in
  (:data:`tests.verify.actors.SOUND_ALONE`) -- so the engine made it possible;
- ``holder_displaced``: the file a process in the critical section holds stays at the lock's
  path, and a lock record stays a record (emptied in place, the lock is gone as surely),
  unless a forced release (or a peer whose protocol replaces held locks: semats) did it;
- ``content_lost``: a file that is not a lock (the ``text`` seed) is at the path at the end or
  in this user's trash or quarantine;
- ``audit``: the directory's audit log verifies, and every acquisition the engine completed
  has its entry.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.verify import actors

SEEDS = ("free", "stale", "live", "empty", "text")
"""What is at the lock's path when a schedule starts: nothing; a lock whose holder is dead;
one whose holder lives (a process of the checker's); an empty file (filelock's); a file
that is not a lock."""

TEXT = b"notes that are not a lock\n"

BLOCKED_AFTER = 0.3
"""Seconds a process told to go may take to reach its next step before it counts as blocked
in the kernel (an ``open`` waiting on a lease another, stopped process holds)."""


@contextlib.contextmanager
def forking() -> Iterator[None]:
    """Hold the checker's fork lock (an ``flock`` every checker process shares): a PID given
    again through ``ns_last_pid`` must not go to another worker's ``fork`` meanwhile."""
    fd = os.open(os.path.join(tempfile.gettempdir(), "lockwarden-verify-forks.lock"),
                 os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@dataclass
class Proc:
    """A forked process of the schedule: its operation, where it stopped, what it holds."""

    index: int
    op: str
    pid: int
    sock: socket.socket
    buf: bytes = b""
    pending: tuple[str, str] | None = None  # the step it stopped before
    result: str | None = None  # how it ended ("D ...")
    crashed: bool = False
    blocked: bool = False  # in the kernel (not at a step) when told to go
    holds: int | None = None  # the inode it holds in the critical section
    content: bool = False  # that file had bytes when it entered (a record, not an empty file)
    forced: bool = False  # its lock was force-released (it may not know yet)
    was_forced: bool = False  # forced at some time: a peer's release then may remove anything
    waited: bool = False  # its pending step is a retry of a busy kernel lock

    @property
    def stopped(self) -> bool:
        return not self.crashed and self.result is None and not self.blocked

    @property
    def engine(self) -> bool:
        return self.op in actors.ENGINE_OPS


@dataclass
class Violation:
    """An invariant broken: its name and the words that say how."""

    invariant: str
    words: str


@dataclass
class Shared:
    """What every schedule of a run shares: the checker's root directory, a dead PID and a
    live holder process for the ``stale`` and ``live`` seeds."""

    root: str
    dead_pid: int
    live_pid: int
    count: int = 0
    reusers: list[int] = field(default_factory=list)

    @classmethod
    def make(cls, root: str) -> Shared:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        parent = os.getpid()
        live = os.fork()
        if live == 0:  # lives as long as the process that made it
            while os.getppid() == parent:
                time.sleep(0.2)
            os._exit(0)
        return cls(root, pid, live)

    def take_pid(self, pid: int) -> bool:
        """Give the dead ``pid`` to a new process (a PID reused: Linux's ``ns_last_pid``,
        root only; the next ``fork`` gets the number after it). The process sleeps until the
        schedule's end (:meth:`end_reusers`). False when the number went to another process
        first or cannot be chosen here."""
        parent = os.getpid()
        with forking():
            try:
                with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                    f.write(str(pid - 1))
            except OSError:
                return False
            child = os.fork()
        if child == 0:  # pragma: no cover - the new holder of the number
            while os.getppid() == parent:
                time.sleep(0.2)
            os._exit(0)
        self.reusers.append(child)
        return child == pid

    def end_reusers(self) -> None:
        for pid in self.reusers:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.reusers.clear()

    def close(self) -> None:
        self.end_reusers()
        try:
            os.kill(self.live_pid, signal.SIGKILL)
            os.waitpid(self.live_pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


@dataclass
class World:
    """One execution: seed the directory, fork the processes, step them as told."""

    shared: Shared
    seed: str
    ops: tuple[str, ...]
    procs: list[Proc] = field(default_factory=list)
    dir: str = ""
    path: str = ""
    seed_ino: int | None = None  # the live seed's held inode (a holder outside the schedule)
    seed_forced: bool = False
    reuse: bool | str = False  # crashes may give the PID to a new process ("only": always)
    reused: list[int] = field(default_factory=lambda: [0, 0])  # [not given, given] again
    trace: list[str] = field(default_factory=list)
    _late: list[Violation] = field(default_factory=list)
    _pending: dict[int, int] = field(default_factory=dict)  # displaced holder -> engine mover
    limits: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.shared.count += 1
        self.dir = os.path.join(self.shared.root, f"s{self.shared.count}")
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "x.lock")
        if self.seed != "free":
            body = {"stale": actors._sema_text(self.shared.dead_pid, age=7200),
                    "live": actors._sema_text(self.shared.live_pid),
                    "empty": b"", "text": TEXT}[self.seed]
            with open(self.path, "wb") as f:
                f.write(body)
            if self.seed == "stale":  # old enough for every policy
                os.utime(self.path, (time.time() - 7200, time.time() - 7200))
            if self.seed == "live":
                self.seed_ino = os.lstat(self.path).st_ino
        for i, op in enumerate(self.ops):
            parent, child = socket.socketpair()
            with forking():
                pid = os.fork()
            if pid == 0:  # pragma: no cover - the forked process
                parent.close()
                actors.run(op, self.path, child, temps_visible="clean" in self.ops)
            child.close()
            self.procs.append(Proc(i, op, pid, parent))
        for p in self.procs:
            self._settle(p, BLOCKED_AFTER * 5)

    # -- reading what a process says ---------------------------------------------------------
    def _line(self, p: Proc, timeout: float) -> str | None:
        while b"\n" not in p.buf:
            r, _, _ = select.select([p.sock], [], [], timeout)
            if not r:
                return None
            chunk = p.sock.recv(65536)
            if not chunk:
                return "D error:gone"
            p.buf += chunk
        line, p.buf = p.buf.split(b"\n", 1)
        return line.decode("utf-8", "surrogateescape")

    def _settle(self, p: Proc, timeout: float) -> list[str]:
        """Read ``p``'s events until it stops at a step or ends; returns them. A process that
        says nothing within ``timeout`` is blocked in the kernel."""
        events: list[str] = []
        while True:
            line = self._line(p, timeout)
            if line is None:
                p.blocked = True
                return events
            p.blocked = False
            kind, _, rest = line.partition(" ")
            if kind == "S":
                step, _, subject = rest.partition("\t")
                p.pending = (step, subject)
                p.waited = step == "wait"
                return events
            if kind == "E":
                events.append(f"E {rest}")
                self._enter(p, int(rest))
            elif kind == "X":
                p.holds = None
                p.forced = False
            elif kind == "D":
                p.result = rest
                p.pending = None
                p.holds = None
                self._reap(p)
                return events

    def _reap(self, p: Proc) -> None:
        try:
            os.waitpid(p.pid, 0)
        except ChildProcessError:
            pass
        p.sock.close()

    # -- the scheduler's moves ----------------------------------------------------------------
    def choices(self, last: int | None, preemptions_left: int, crashes_left: int
                ) -> list[tuple[str, int]]:
        """The moves possible now, the one that continues ``last`` first: ``("go", i)`` lets
        process ``i`` take its pending step; ``("crash", i)`` kills it before it. A move to
        another process while ``last`` could go on is a preemption; a process that waits
        on a busy kernel lock goes again only after another process moved. A switch away
        from a process about to take a step in its critical section is not a preemption."""
        ready = [p for p in self.procs if p.stopped and not p.waited]
        if not ready:
            ready = [p for p in self.procs if p.stopped]  # all wait: each may look again
        out: list[tuple[str, int]] = []
        cur = self.procs[last] if last is not None else None
        if cur is not None and cur in ready:
            out.append(("go", cur.index))
            # a process in its critical section may stay there any time: a switch there is
            # free, as at a wait
            if preemptions_left > 0 or (cur.pending is not None and cur.pending[0] == "cs"):
                out += [("go", p.index) for p in ready if p is not cur]
        else:
            out += [("go", p.index) for p in ready]
        if crashes_left > 0:
            kinds = ("reuse",) if self.reuse == "only" else (
                ("crash", "reuse") if self.reuse else ("crash",))
            out += [(k, p.index) for p in self.procs if p.stopped for k in kinds]
        return out

    def in_cs(self, i: int) -> bool:
        """Process ``i`` is stopped before a step in its critical section."""
        p = self.procs[i]
        return p.pending is not None and p.pending[0] == "cs"

    def move(self, move: tuple[str, int]) -> list[Violation]:
        """Make ``move``, then check the invariants; returns what broke."""
        what, i = move
        p = self.procs[i]
        before = self._at_path()
        if what in ("crash", "reuse"):
            said = (f"P{i} {p.op}: CRASH before {p.pending[0] if p.pending else '?'}"
                    f" {self._short(p.pending[1] if p.pending else '')}")
            os.kill(p.pid, signal.SIGKILL)
            self._reap(p)
            p.crashed, p.holds, p.pending = True, None, None
            if what == "reuse":
                taken = self.shared.take_pid(p.pid)
                said += (f"; PID {p.pid} now a new process's" if taken else
                         f"; PID {p.pid} could not be given again (taken meanwhile)")
                self.reused[taken] += 1
            self.trace.append(said)
            return self._settle_pending(self._now()[0])
        assert p.pending is not None
        step = p.pending
        for q in self.procs:
            if q is not p:
                q.waited = False
        p.sock.sendall(b"g")
        events = self._settle(p, BLOCKED_AFTER)
        for q in self.procs:  # a process blocked in the kernel may have been let go
            if q.blocked and q is not p:
                events += self._settle(q, 0.05)
        after = self._at_path()
        self.trace.append(f"P{i} {p.op}: {step[0]} {self._short(step[1])}"
                          + (f" -> {' '.join(events)}" if events else "")
                          + (f" [{p.result}]" if p.result else "")
                          + ("" if after == before else f"  path: {before} -> {after}"))
        return self._check(p)

    def finish(self) -> list[Violation]:
        """Let every process run to its end (no more choices), kill what is blocked, check
        the final state, remove the directory."""
        for p in self.procs:
            if p.blocked:
                self._settle(p, BLOCKED_AFTER)
            if p.stopped or p.blocked:
                os.kill(p.pid, signal.SIGKILL)
                self._reap(p)
                p.crashed = True
        found = self._final()
        self.shared.end_reusers()
        shutil.rmtree(self.dir, ignore_errors=True)
        return found

    # -- invariants ---------------------------------------------------------------------------
    def _at_path(self) -> str:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return "-"
        return f"ino {st.st_ino} {st.st_size}B"

    def _now(self) -> tuple[int | None, int]:
        """The inode at the lock's path and its size (``None, 0``: nothing there)."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None, 0
        return st.st_ino, st.st_size

    def _short(self, subject: str) -> str:
        return subject.replace(self.dir + os.sep, "").replace(self.shared.root, "~")

    def _enter(self, p: Proc, ino: int) -> None:
        """``p`` says it holds the file ``ino``: a file already gone from the path was taken
        from it before it knew -- by a forced release or a peer that replaces held locks
        (excused), else by the engine (a violation, reported by the next check)."""
        p.holds = ino
        p.forced = False
        now, size = self._now()
        p.content = now == ino and size > 0 and p.op not in actors.LOCK_THE_INODE
        # the engine's lock always has a record: found empty, another process emptied it
        # (a peer that truncates what it opens may: its protocol, not the engine's doing)
        truncators = any(q.op in actors.TRUNCATES for q in self.procs)
        if now != ino or (p.engine and size == 0 and not truncators):
            if any(q.op == "force" or q.op in actors.REPLACES_HELD for q in self.procs):
                p.forced = p.was_forced = True
            else:
                how = (f"had left the path ({now})" if now != ino
                       else "had been emptied in place")
                self._late.append(Violation("holder_displaced", f"P{p.index} ({p.op}) holds "
                                            f"inode {ino}, which {how} before it knew"))

    def _excused(self, mover: Proc) -> bool:
        """A holder displaced by ``mover``'s step is not the engine's doing: a forced release
        (what force is for), a peer whose protocol replaces held locks, or any peer's step
        once such a peer or a forced release is in the schedule (a peer then releases by
        unlinking whatever is at the path: its own protocol's hazard after a break)."""
        if mover.op == "force" or mover.op in actors.REPLACES_HELD:
            return True
        return not mover.engine and any(
            q.op == "force" or q.op in actors.REPLACES_HELD for q in self.procs)

    def _check(self, mover: Proc) -> list[Violation]:
        found, self._late = self._late, []
        now, size = self._now()
        holders = [q for q in self.procs if q.holds is not None and not q.forced]
        for q in holders:
            if q is mover and q.holds != now and now is not None:
                q.holds = now  # its own refresh exchanged a renewed file in
            elif q.holds == now and q.content and size == 0 and q is not mover:
                # its record emptied in place: no put-back undoes that
                if mover.op in actors.TRUNCATES:
                    q.content = False  # it still holds the inode: two_holders still checks
                elif self._excused(mover):
                    q.forced = q.was_forced = True
                else:
                    found.append(Violation("holder_displaced", f"P{q.index} ({q.op})'s lock "
                                           f"(inode {q.holds}) was emptied in place by "
                                           f"P{mover.index} ({mover.op})"))
            elif q.holds != now and q is not mover and q.index not in self._pending:
                if self._excused(mover):
                    q.forced = q.was_forced = True
                elif mover.engine:  # it may put it back before its operation ends
                    self._pending[q.index] = mover.index
                else:
                    found.append(Violation("holder_displaced", f"P{q.index} ({q.op}) holds "
                                           f"inode {q.holds} but the path now has {now} after "
                                           f"P{mover.index} ({mover.op})'s step"))
        if (self.seed_ino is not None and not self.seed_forced and now != self.seed_ino
                and -1 not in self._pending):
            if self._excused(mover):
                self.seed_forced = True
            elif mover.engine:
                self._pending[-1] = mover.index
            else:
                found.append(Violation("holder_displaced", f"the live holder's lock (inode "
                                       f"{self.seed_ino}) was removed or replaced by "
                                       f"P{mover.index} ({mover.op})"))
        elif (self.seed_ino is not None and not self.seed_forced and now == self.seed_ino
              and size == 0 and mover.op not in actors.TRUNCATES):
            # the live holder's record emptied in place
            if self._excused(mover):
                self.seed_forced = True
            else:
                found.append(Violation("holder_displaced", f"the live holder's lock (inode "
                                       f"{self.seed_ino}) was emptied in place by "
                                       f"P{mover.index} ({mover.op})"))
        found += self._settle_pending(now)
        inside = [q for q in self.procs if q.holds is not None and not q.forced]
        live_seed = self.seed_ino is not None and not self.seed_forced
        if mover in inside and (len(inside) > 1 or live_seed):
            others = [q for q in inside if q is not mover]
            blame = mover.engine or any(q.engine for q in others) or live_seed or all(
                q.op in actors.SOUND_ALONE for q in inside)
            if blame:
                names = ", ".join(f"P{q.index} ({q.op})" for q in inside)
                found.append(Violation("two_holders", f"{names} are in the critical section "
                                       "at once" + (" with the live holder" if live_seed
                                                    else "")))
        return found

    def _settle_pending(self, now: int | None) -> list[Violation]:
        """Displacements an engine operation made and may still undo (a take-over exchanges
        the judged file out, then back when it is not the file judged): cleared once the
        holder's file is at the path again; a violation when the operation ended without
        putting it back; a known limit when the process crashed in between (docs/engine.md,
        "Every interleaving checked")."""
        found: list[Violation] = []
        for held, by in list(self._pending.items()):
            ino = self.seed_ino if held == -1 else self.procs[held].holds
            mover = self.procs[by]
            holder = "the live holder" if held == -1 else f"P{held} ({self.procs[held].op})"
            if ino == now or (held != -1 and self.procs[held].holds is None):
                del self._pending[held]
            elif mover.crashed:
                del self._pending[held]
                self.limits.append(f"P{by} ({mover.op}) crashed between moving {holder}'s "
                                   "file out and putting it back")
                if held == -1:
                    self.seed_forced = True
                else:
                    self.procs[held].forced = True
            elif mover.result is not None:
                del self._pending[held]
                found.append(Violation("holder_displaced", f"{holder}'s file (inode {ino}) "
                                       f"left the path for good after P{by} ({mover.op})"))
        return found

    def _final(self) -> list[Violation]:
        found: list[Violation] = []
        try:
            now: int | None = os.lstat(self.path).st_ino
        except FileNotFoundError:
            now = None
        found += self._settle_pending(now)
        for p in self.procs:
            if p.result and p.result.startswith("error:"):
                found.append(Violation("error", f"P{p.index} ({p.op}) ended with {p.result}"))
        if self.seed == "text" and not self._text_kept():
            found.append(Violation("content_lost", "the file that is not a lock is neither at "
                                   "its path nor in the trash or quarantine"))
        found += self._audit()
        return found

    def _text_kept(self) -> bool:
        try:
            with open(self.path, "rb") as f:
                if f.read() == TEXT:
                    return True
        except OSError:
            pass
        home = os.environ.get("XDG_DATA_HOME", "")
        for d, _dirs, files in os.walk(home):
            for n in files:
                try:
                    with open(os.path.join(d, n), "rb") as f:
                        if f.read() == TEXT:
                            return True
                except OSError:
                    continue
        return False

    def _audit(self) -> list[Violation]:
        from core import audit

        log = os.path.join(self.dir, ".lock_audit.log")
        if not os.path.exists(log):
            return []
        v = audit.verify(log)
        found = [] if v.ok else [Violation("audit", f"the audit log does not verify: {v}")]
        entries = audit.read(log)
        for p in self.procs:
            if p.engine and p.result == "released":
                ops = {e.operation for e in entries if e.pid == p.pid}
                if not ops & {"acquire", "reclaim"} or "release" not in ops:
                    found.append(Violation("audit", f"P{p.index} ({p.op}) acquired and "
                                           f"released, the log has {sorted(map(str, ops))}"))
        return found

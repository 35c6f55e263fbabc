"""core.holder: the one holder describer, with control characters escaped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.codes import Code
from core.holder import describe_holder, holder_name
from core.reasons import Reason
from core.record import Liveness, LockRecord, LockStatus, State

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _status(state: State, **kw: object) -> LockStatus:
    rec = LockRecord(path="/l/a.lock", format="sema", pid=4242, host="build-7",
                     acquired_at=NOW - timedelta(seconds=192), **kw)  # type: ignore[arg-type]
    return LockStatus("/l/a.lock", state, liveness=Liveness.ALIVE, record=rec, checked_at=NOW,
                      reasons=(Reason.of(Code.HOLDER_ALIVE, pid=4242),))


def test_phrases() -> None:
    held = _status(State.HELD, tag="deploy")
    assert describe_holder(held) == "held by pid 4242 on build-7 (alive) for 3m 12s, tag 'deploy'"
    assert describe_holder(held, path=True, reasons=True) == (
        "/l/a.lock: held by pid 4242 on build-7 (alive) for 3m 12s, tag 'deploy' "
        "(PID 4242 is alive)")
    stale = _status(State.STALE)
    assert describe_holder(stale) == "stale, holder pid 4242 on build-7 (alive), 3m 12s old"
    assert describe_holder(LockStatus("/l/b.lock", State.FREE)) == "free"


def test_control_characters_are_escaped() -> None:
    evil = _status(State.HELD, tag="x\n\x1b[31mred", holder="me\rthere")
    text = describe_holder(evil, path=True)
    assert "\n" not in text and "\x1b" not in text and "\r" not in text
    assert "\\x1b[31mred" in text and "me\\rthere" in holder_name(evil.record)


def test_a_holder_name_that_says_its_pid_is_not_repeated() -> None:
    from core.record import LockRecord

    rec = LockRecord(path="/l/t.lock", format="task-mcp", holder="pid-4242@build-7", pid=4242,
                     host="build-7")
    assert holder_name(rec) == "pid-4242@build-7"
    other = LockRecord(path="/l/t.lock", format="task-mcp", holder="ci-42424", pid=4242)
    assert holder_name(other) == "ci-42424 pid 4242"

"""The history's vocabulary (docs/history.md, "What is recorded", "Events"): state names are
the verdicts' own, what counts as the same holder, the event of each change, durations."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.history import model
from core.history.model import Observation, event_between, observation_of
from core.record import Evidence, Liveness, LockRecord, LockStatus, State
from core.text import parse_duration


def test_state_names_are_the_verdicts() -> None:
    verdicts = (State.FREE, State.HELD, State.STALE, State.EXPIRED, State.WRITING,
                State.UNREADABLE)
    names = (model.FREE, model.HELD, model.STALE, model.EXPIRED, model.WRITING, model.UNREADABLE)
    assert names == tuple(s.value for s in verdicts)


def status(state: State, pid: int, *, token: str = "t1", renewed: int = 0) -> LockStatus:
    now = datetime(2026, 11, 26, tzinfo=UTC)
    rec = LockRecord(path="/l/a.lock", format="sema", pid=pid, host="h", acquired_at=now,
                     token=token, renewed_at=datetime(2026, 11, 26, 0, renewed, tzinfo=UTC))
    return LockStatus(path="/l/a.lock", state=state, liveness=Liveness.ALIVE, record=rec,
                      evidence=Evidence(pid=pid, process_name="make"))


def test_a_refresh_is_not_a_transition_a_new_holder_is() -> None:
    a = observation_of(status(State.HELD, 7), 1.0)
    refreshed = observation_of(status(State.HELD, 7, renewed=5), 2.0)
    other = observation_of(status(State.HELD, 8, token="t2"), 3.0)
    assert a.ident == refreshed.ident and a.ident != other.ident
    assert a.process == "make" and a.pid == 7 and a.host == "h"


@pytest.mark.parametrize(("prev", "same", "new", "event"), [
    (None, False, "held", "acquired"),
    ("free", False, "held", "acquired"),
    ("held", False, "held", "holder_changed"),
    ("held", True, "stale", "stale"),
    ("held", True, "expired", "expired"),
    ("stale", False, "held", "reclaimed"),
    ("expired", True, "held", "renewed"),
    ("held", True, "free", "released"),
    ("stale", True, "free", "cleared"),
    ("held", True, "unreadable", "unreadable"),
])
def test_events(prev: str | None, same: bool, new: str, event: str) -> None:
    obs = Observation(lock="/l/a.lock", t=1.0, state=new, ident="k")
    assert event_between(prev, "k" if same else "other", obs) == event


def test_durations() -> None:
    assert parse_duration("30d") == 30 * 86400 and parse_duration("90m") == 5400
    assert parse_duration("2w") == 14 * 86400 and parse_duration(45) == 45.0
    for bad in ("soon", "0", "-1d", "101y", True, "1e400"):
        with pytest.raises(ValueError):
            parse_duration(bad)

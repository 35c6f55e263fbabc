"""core.kernel.windows: the parts of the Restart Manager wrapper that run without Windows (the
structure layouts of RestartManager.h, FILETIME to Unix seconds, the session and ERROR_MORE_DATA
retry logic). The wrapper itself has not run on Windows (docs/specs/devtool-locks.md §2.6,
"Windows")."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.kernel import windows as kw
from core.kernel.windows import (
    ERROR_MORE_DATA,
    FILETIME,
    RM_PROCESS_INFO,
    RM_UNIQUE_PROCESS,
    FileUser,
    filetime_to_unix,
    rm_query,
)


def test_structure_layouts_match_the_sdk() -> None:
    """Natural alignment of 4: FILETIME 8, RM_UNIQUE_PROCESS 4 + 8, RM_PROCESS_INFO
    12 + 2*256 + 2*64 + 4*4 = 668."""
    assert ctypes.sizeof(FILETIME) == 8
    assert ctypes.sizeof(RM_UNIQUE_PROCESS) == 12
    assert RM_UNIQUE_PROCESS.ProcessStartTime.offset == 4
    assert ctypes.sizeof(RM_PROCESS_INFO) == 4 + 8 + 2 * 256 + 2 * 64 + 4 + 4 + 4 + 4 == 668
    assert ctypes.alignment(RM_PROCESS_INFO) == 4
    offsets = {name: getattr(RM_PROCESS_INFO, name).offset for name, *_ in
               RM_PROCESS_INFO._fields_}
    assert offsets == {"Process": 0, "strAppName": 12, "strServiceShortName": 12 + 512,
                       "ApplicationType": 652, "AppStatus": 656, "TSSessionId": 660,
                       "bRestartable": 664}


def test_filetime_to_unix_seconds_utc() -> None:
    assert filetime_to_unix(0, 0) == -11_644_473_600
    ticks = 116_444_736_000_000_000  # 1970-01-01T00:00:00Z in 100 ns since 1601
    assert filetime_to_unix(ticks & 0xFFFFFFFF, ticks >> 32) == 0
    when = datetime(2026, 11, 25, 13, 0, 0, 500_000, tzinfo=UTC)
    ticks = int((when.timestamp() + 11_644_473_600) * 10_000_000)
    assert filetime_to_unix(ticks & 0xFFFFFFFF, ticks >> 32) == pytest.approx(
        when.timestamp(), abs=1e-6)


def test_process_info_decoded() -> None:
    info = RM_PROCESS_INFO()
    info.Process.dwProcessId = 4242
    ticks = (1_700_000_000 + 11_644_473_600) * 10_000_000
    info.Process.ProcessStartTime.dwLowDateTime = ticks & 0xFFFFFFFF
    info.Process.ProcessStartTime.dwHighDateTime = ticks >> 32
    name = "Terraform ✓ 𝄞"  # a character outside the BMP takes a surrogate pair
    units = name.encode("utf-16-le")
    for i in range(0, len(units), 2):
        info.strAppName[i // 2] = int.from_bytes(units[i:i + 2], "little")
    info.ApplicationType = 5
    assert FileUser.from_info(info) == FileUser(4242, 1_700_000_000.0, name, "", 5)


class FakeSession:
    """The four Restart Manager calls as plain functions that record what was asked: list
    sizes that grow between calls, as when processes open the file in between."""

    def __init__(self, sizes: list[int], *, start_rc: int = 0, register_rc: int = 0,
                 fail_rc: int | None = None) -> None:
        self.sizes = sizes
        self.start_rc, self.register_rc, self.fail_rc = start_rc, register_rc, fail_rc
        self.asked: list[int] = []
        self.registered: list[Sequence[str]] = []
        self.ended: list[int] = []

    def start(self) -> tuple[int, int]:
        return self.start_rc, 7

    def register(self, handle: int, paths: Sequence[str]) -> int:
        assert handle == 7
        self.registered.append(paths)
        return self.register_rc

    def get_list(self, handle: int, capacity: int) -> tuple[int, int, list[int]]:
        self.asked.append(capacity)
        if self.fail_rc is not None:
            return self.fail_rc, 0, []
        size = self.sizes[min(len(self.asked) - 1, len(self.sizes) - 1)]
        if capacity < size:
            return ERROR_MORE_DATA, size, []
        return 0, size, list(range(size))

    def end(self, handle: int) -> None:
        self.ended.append(handle)

    def run(self, tries: int = 5) -> list[int]:
        return rm_query(["C:\\x.lock"], start=self.start, register=self.register,
                        get_list=self.get_list, end=self.end, tries=tries)


def test_retry_on_more_data() -> None:
    s = FakeSession([0])
    assert s.run() == [] and s.asked == [0] and s.ended == [7]
    s = FakeSession([2, 3, 3])
    assert s.run() == [0, 1, 2]
    assert s.asked == [0, 2, 3] and s.ended == [7] and s.registered == [["C:\\x.lock"]]


def test_errors_end_the_session() -> None:
    s = FakeSession([1, 2, 3, 4, 5, 6])
    with pytest.raises(OSError, match="234"):
        s.run(tries=3)
    assert s.asked == [0, 1, 2] and s.ended == [7]
    s = FakeSession([1], fail_rc=5)  # ERROR_ACCESS_DENIED, e.g. a directory
    with pytest.raises(OSError, match="RmGetList failed with Windows error 5"):
        s.run()
    assert s.ended == [7]
    s = FakeSession([1], register_rc=87)
    with pytest.raises(OSError, match="RmRegisterResources"):
        s.run()
    assert s.asked == [] and s.ended == [7]
    s = FakeSession([1], start_rc=121)
    with pytest.raises(OSError, match="RmStartSession"):
        s.run()
    assert s.ended == []


@pytest.mark.skipif(sys.platform == "win32", reason="the refusal outside Windows")
def test_elsewhere_a_clear_refusal() -> None:
    with pytest.raises(NotImplementedError, match="only on Windows"):
        kw.processes_using(__file__)


def test_status_asks_the_restart_manager_only_on_windows(tmp_path: Path) -> None:
    from core.cli.status import open_by_windows

    f = tmp_path / "x.lock"
    f.write_text("")
    assert open_by_windows(str(f)) == []  # not Windows: nothing asked, nothing said
    assert open_by_windows(str(tmp_path)) == []

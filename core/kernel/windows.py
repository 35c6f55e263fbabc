"""Who has a file open on Windows: the Restart Manager (``rstrtmgr.dll``) through ctypes
(docs/specs/devtool-locks.md, "Windows").

:func:`processes_using` lists the processes that have one file **open** (PID, start time,
application name); :func:`rm_query` is its session and retry logic, taking the four calls
(``RmStartSession``, ``RmRegisterResources``, ``RmGetList``, ``RmEndSession``) as parameters.
``RmRegisterResources`` writes to the registry, so this is for a user's question about one file
(``lockwarden status PATH``, the detail pane), **never a poll loop**. Why the Restart Manager,
and what is tested without Windows: docs/formats.md, "Where there is no /proc/locks".

**This module has not run on Windows.** The ctypes structures are defined on every platform;
the DLL is loaded lazily and only on ``win32``; elsewhere :func:`processes_using` raises
``NotImplementedError``.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

ERROR_SUCCESS = 0
ERROR_MORE_DATA = 234
"""``RmGetList``: the array was too small; ``pnProcInfoNeeded`` says how many entries."""
CCH_RM_SESSION_KEY = 32
CCH_RM_MAX_APP_NAME = 255
CCH_RM_MAX_SVC_NAME = 63

FILETIME_UNIX_OFFSET_S = 11_644_473_600
"""Seconds from 1601-01-01 (the ``FILETIME`` epoch) to 1970-01-01, both UTC."""

_WCHAR = ctypes.c_uint16  # Windows WCHAR is 2 bytes; ctypes.c_wchar is 4 on Linux


class FILETIME(ctypes.Structure):
    """``FILETIME``: 100-ns intervals since 1601-01-01 UTC, as two 32-bit halves."""

    _fields_ = [("dwLowDateTime", ctypes.c_uint32), ("dwHighDateTime", ctypes.c_uint32)]


class RM_UNIQUE_PROCESS(ctypes.Structure):
    """``RM_UNIQUE_PROCESS``: a PID and the process's start time (guards against PID reuse)."""

    _fields_ = [("dwProcessId", ctypes.c_uint32), ("ProcessStartTime", FILETIME)]


class RM_PROCESS_INFO(ctypes.Structure):
    """``RM_PROCESS_INFO`` (``RestartManager.h``): 4 + 8 + 2*256 + 2*64 + 4*4 = 668 bytes,
    4-byte aligned. The strings are ``WCHAR`` arrays, declared as 16-bit integers so the
    layout is the same on every platform (:func:`wchars` decodes them)."""

    _fields_ = [
        ("Process", RM_UNIQUE_PROCESS),
        ("strAppName", _WCHAR * (CCH_RM_MAX_APP_NAME + 1)),
        ("strServiceShortName", _WCHAR * (CCH_RM_MAX_SVC_NAME + 1)),
        ("ApplicationType", ctypes.c_int32),  # RM_APP_TYPE, an enum
        ("AppStatus", ctypes.c_uint32),
        ("TSSessionId", ctypes.c_uint32),
        ("bRestartable", ctypes.c_int32),  # BOOL
    ]


def filetime_to_unix(low: int, high: int) -> float:
    """A ``FILETIME`` (its two 32-bit halves) as Unix seconds, UTC. Pure."""
    return ((high << 32) | low) / 10_000_000 - FILETIME_UNIX_OFFSET_S


def wchars(array: Any) -> str:
    """The text of a NUL-terminated ``WCHAR`` array (UTF-16LE; a bad surrogate becomes
    U+FFFD). Never raises."""
    raw = bytes(array)
    text = raw.decode("utf-16-le", errors="replace")
    return text.split("\0", 1)[0]


@dataclass(frozen=True, slots=True)
class FileUser:
    """A process that has a file open (one ``RM_PROCESS_INFO``).

    Attributes:
        pid: the process ID.
        start_time: the process's start, Unix seconds UTC (with ``pid``, a unique name).
        app_name: ``strAppName`` (a display name, e.g. "Microsoft Word").
        service: ``strServiceShortName`` for a service, else ``""``.
        app_type: ``RM_APP_TYPE`` (1 main window, 2 other window, 3 service, 4 Explorer,
            5 console, 6 critical, 1000 unknown).
    """

    pid: int
    start_time: float
    app_name: str
    service: str
    app_type: int

    @classmethod
    def from_info(cls, info: RM_PROCESS_INFO) -> FileUser:
        """From an ``RM_PROCESS_INFO``. Never raises."""
        ft = info.Process.ProcessStartTime
        return cls(pid=int(info.Process.dwProcessId),
                   start_time=filetime_to_unix(ft.dwLowDateTime, ft.dwHighDateTime),
                   app_name=wchars(info.strAppName), service=wchars(info.strServiceShortName),
                   app_type=int(info.ApplicationType))


T = TypeVar("T")


def rm_query(paths: Sequence[str], *, start: Callable[[], tuple[int, int]],
             register: Callable[[int, Sequence[str]], int],
             get_list: Callable[[int, int], tuple[int, int, Sequence[T]]],
             end: Callable[[int], object], tries: int = 5) -> list[T]:
    """One Restart Manager session over ``paths``: the session and retry logic, with the API
    calls as parameters (so it runs without Windows).

    Args:
        start: ``RmStartSession`` -> ``(error, handle)``.
        register: ``RmRegisterResources(handle, paths)`` -> error.
        get_list: ``RmGetList(handle, capacity)`` -> ``(error, needed, entries)``; the first
            call asks with capacity 0; on ``ERROR_MORE_DATA`` (234: processes opened the file
            in between) it asks again with ``needed``, at most ``tries`` times in all.
        end: ``RmEndSession(handle)``, always called once the session started.

    Returns:
        The entries of the successful ``RmGetList``.

    Raises:
        OSError: a call returned another error, or ``ERROR_MORE_DATA`` persisted (its
            ``winerror``-style code is in the message and ``errno`` is left 0).
    """
    rc, handle = start()
    if rc != ERROR_SUCCESS:
        raise OSError(0, f"RmStartSession failed with Windows error {rc}")
    try:
        rc = register(handle, paths)
        if rc != ERROR_SUCCESS:
            raise OSError(0, f"RmRegisterResources failed with Windows error {rc}")
        capacity = 0
        for _ in range(max(tries, 1)):
            rc, needed, entries = get_list(handle, capacity)
            if rc == ERROR_SUCCESS:
                return list(entries)
            if rc != ERROR_MORE_DATA:
                raise OSError(0, f"RmGetList failed with Windows error {rc}")
            capacity = max(needed, capacity + 1)
        raise OSError(0, f"RmGetList still wanted more room after {tries} tries "
                         f"(error {ERROR_MORE_DATA})")
    finally:
        end(handle)


_LIB: Any = None


def _library() -> Any:
    """``rstrtmgr.dll`` with the four functions typed; loaded once, on Windows only."""
    global _LIB
    if sys.platform != "win32":
        raise NotImplementedError("the Restart Manager (rstrtmgr.dll) exists only on Windows")
    if _LIB is None:
        lib = ctypes.WinDLL("rstrtmgr.dll")
        u32, p = ctypes.c_uint32, ctypes.POINTER
        lib.RmStartSession.argtypes = [p(u32), u32, ctypes.c_wchar_p]
        lib.RmRegisterResources.argtypes = [u32, ctypes.c_uint, p(ctypes.c_wchar_p),
                                            ctypes.c_uint, p(RM_UNIQUE_PROCESS), ctypes.c_uint,
                                            p(ctypes.c_wchar_p)]
        lib.RmGetList.argtypes = [u32, p(ctypes.c_uint), p(ctypes.c_uint), p(RM_PROCESS_INFO),
                                  p(u32)]
        lib.RmEndSession.argtypes = [u32]
        for fn in (lib.RmStartSession, lib.RmRegisterResources, lib.RmGetList,
                   lib.RmEndSession):
            fn.restype = u32
        _LIB = lib
    return _LIB


def processes_using(path: str) -> list[FileUser]:
    """The processes that have ``path`` open, by the Restart Manager: PID, start time (Unix
    seconds UTC) and application name. On demand only (``RmRegisterResources`` writes to the
    registry; docs/specs/devtool-locks.md §2.6 "Windows"). Having the file open is not the same as
    holding its lock.

    Raises:
        NotImplementedError: not Windows.
        OSError: ``rstrtmgr.dll`` cannot be loaded, or a call failed (a directory gives
            ``ERROR_ACCESS_DENIED``, 5; more than 64 sessions of this user).
    """
    lib = _library()
    full = os.path.abspath(path)

    def start() -> tuple[int, int]:
        handle = ctypes.c_uint32(0)
        key = ctypes.create_unicode_buffer(CCH_RM_SESSION_KEY + 1)
        return int(lib.RmStartSession(ctypes.byref(handle), 0, key)), handle.value

    def register(handle: int, names: Sequence[str]) -> int:
        array = (ctypes.c_wchar_p * len(names))(*names)
        return int(lib.RmRegisterResources(handle, len(names), array, 0, None, 0, None))

    def get_list(handle: int, capacity: int) -> tuple[int, int, list[FileUser]]:
        needed, count = ctypes.c_uint(0), ctypes.c_uint(capacity)
        buf = (RM_PROCESS_INFO * max(capacity, 1))()
        reasons = ctypes.c_uint32(0)
        rc = int(lib.RmGetList(handle, ctypes.byref(needed), ctypes.byref(count),
                               buf if capacity else None, ctypes.byref(reasons)))
        users = [FileUser.from_info(buf[i]) for i in range(count.value)] if rc == 0 else []
        return rc, int(needed.value), users

    return rm_query([full], start=start, register=register, get_list=get_list,
                    end=lambda handle: lib.RmEndSession(handle))

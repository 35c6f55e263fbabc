"""Terraform's local-backend lock info (format ``terraform-lock-info``):
``.<statefile>.lock.info`` beside the state file, e.g. ``.terraform.tfstate.lock.info``.

Rules from ``docs/specs/devtool-locks.md`` (§2.5 "Terraform local backend",
``internal/states/statemgr/locker.go``): JSON ``ID``, ``Operation``, ``Info``, ``Who``
(``user@hostname``), ``Version``, ``Created`` (RFC 3339, UTC, up to 9 fractional digits),
``Path``. It is **only a label**: the lock itself is a POSIX write lock (fcntl) on the state
file, so liveness comes from the kernel (:mod:`core.kernel.locks`), and a label without a kernel
lock is leftover metadata.
"""

from __future__ import annotations

import os
from typing import Any

from core.errors import ParseError
from core.formats._common import (
    a_type,
    decode_text,
    load_json_object,
    parse_time,
    raw_text,
    require_str,
    sanitize,
)
from core.record import LockRecord

FORMAT = "terraform-lock-info"
KEYS = ("ID", "Operation", "Who", "Created")
"""The keys that make a JSON object a Terraform lock info (for detection)."""
SUFFIX = ".lock.info"


def state_path(path: str) -> str:
    """The state file a lock info labels: ``<dir>/.terraform.tfstate.lock.info`` ->
    ``<dir>/terraform.tfstate`` (Terraform's ``lockInfoPath`` adds a dot and the suffix)."""
    head, name = os.path.split(path)
    if name.endswith(SUFFIX):
        name = name[: -len(SUFFIX)]
    if name.startswith("."):
        name = name[1:]
    return os.path.join(head, name)


def from_object(obj: dict[str, Any], data: bytes, path: str) -> LockRecord:
    """The record of a decoded lock info object (see :func:`parse`)."""
    lock_id = require_str(obj, "ID", "Terraform lock info")
    operation = require_str(obj, "Operation", "Terraform lock info")
    who = require_str(obj, "Who", "Terraform lock info")
    created = parse_time(require_str(obj, "Created", "Terraform lock info"), "Created")
    extra: dict[str, str] = {}
    for key in ("Info", "Version", "Path"):
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise ParseError(f"Terraform lock info field {key!r} is {a_type(value)}, "
                             "not a string")
        extra[key] = sanitize(value or "")
    user, _, host = who.rpartition("@")
    info = extra["Info"]
    meta: dict[str, object] = {"id": sanitize(lock_id), "operation": sanitize(operation),
                               "info": info, "version": extra["Version"],
                               "state_path": extra["Path"], "who": sanitize(who)}
    if path:
        meta["state_file"] = state_path(path)
    return LockRecord(path=path, format=FORMAT, holder=sanitize(user or who),
                      host=sanitize(host) or None, acquired_at=created,
                      tag=info or sanitize(operation), metadata=meta, raw=raw_text(data))


def parse(data: bytes, path: str = "") -> LockRecord:
    """A ``.lock.info`` file: ``holder`` = the user of ``Who``, ``host`` its host,
    ``acquired_at`` = ``Created``, ``tag`` = ``Info`` or else ``Operation``; ``metadata``:
    ``id``, ``operation``, ``info``, ``version``, ``state_path`` (``Path``), ``who``,
    ``state_file`` (the state file beside it, from ``path``). No PID: the kernel lock on the
    state file names the holder.

    Raises:
        ParseError: not a JSON object, a missing ``ID``/``Operation``/``Who``/``Created``, a
            field of the wrong type, or a ``Created`` that is not an RFC 3339 time.
    """
    return from_object(load_json_object(decode_text(data), "Terraform lock info"), data, path)

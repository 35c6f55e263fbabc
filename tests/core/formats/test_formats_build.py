"""What Lockwarden writes, per format (``core.formats.build``; docs/formats.md, "What Lockwarden
writes"): each writable format's builder, chosen through the registry, returns the bytes the
engine publishes and the record a reader parses back from them."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime

import pytest

from core import formats
from core.formats import Holder, Reclaimed, WriteRequest, taskmcp
from core.record import WRITABLE_FORMATS

T0 = datetime(2026, 3, 1, 12, 0, 5, 123456, tzinfo=UTC)
TOKEN = "ab" * 16
HOST = socket.gethostname()  # task-mcp's metadata.hostname is always this host's name
HOLDER = Holder(pid=4242, host=HOST, start=1700000000.25, proc="boot-1:12345")


def request(**more: object) -> WriteRequest:
    fields: dict[str, object] = {"path": "/tmp/x.lock", "holder": HOLDER, "token": TOKEN,
                                 "at": T0, "tag": "deploy", "ttl": 60.0}
    fields.update(more)
    return WriteRequest(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", WRITABLE_FORMATS)
def test_every_writable_format_builds_what_it_parses_back(fmt: str) -> None:
    built = formats.build(fmt, request())
    back = formats.parse(built.data, "/tmp/x.lock")
    assert back.format == fmt
    assert back.token == TOKEN and back.pid == HOLDER.pid and back.host == HOLDER.host
    assert back.proc == HOLDER.proc and back.start == pytest.approx(HOLDER.start)
    assert built.record.token == TOKEN and built.record.format == fmt


def test_sema_writes_the_specs_keys_first_then_ours() -> None:
    data = formats.build("sema", request(tag="a\nb=c")).data.decode()
    keys = [line.split("=", 1)[0] for line in data.splitlines()]
    assert keys == ["pid", "timestamp", "tag", "host", "start", "proc", "token", "ttl"]
    assert "tag=a b=c\n" in data  # a tag cannot inject a line
    built = formats.build("sema", request())
    assert built.record.raw == built.data.decode()


def test_taskmcp_writes_the_reclaim_it_is_told_about_and_needs_a_lease() -> None:
    plain = json.loads(formats.build("task-mcp", request()).data)
    assert plain["owner"] == f"pid-4242@{HOST}" and plain["ttl"] == 60
    assert "reclaimed_from" not in plain and isinstance(plain["since"], int)
    note = Reclaimed(holder="pid-1@elsewhere", reason="HOLDER_DEAD")
    built = formats.build("task-mcp", request(reclaimed=note))
    obj = json.loads(built.data)
    assert built.mode == 0o600
    # metadata: only the fields Task MCP's validator allows; ours at the top level
    assert set(obj["metadata"]) <= set(taskmcp.ALLOWED_METADATA)
    assert list(obj)[-2:] == ["reclaimed_from", "reclaimed_reason"]
    assert (obj["reclaimed_from"], obj["reclaimed_reason"]) == ("pid-1@elsewhere", "HOLDER_DEAD")
    meta = obj["metadata"]
    assert (meta["environment"], meta["purpose"]) == ("local", "interactive")
    with pytest.raises(ValueError, match="ttl"):
        formats.build("task-mcp", request(ttl=None))


def test_formats_without_reclaim_fields_ignore_the_note() -> None:
    note = Reclaimed(holder="x", reason="FORCE")
    for fmt in ("sema", "af-ledger"):
        noted = formats.build(fmt, request(reclaimed=note))
        assert noted.data == formats.build(fmt, request()).data


def test_af_ledger_names_the_agent_by_tag_or_by_holder() -> None:
    assert json.loads(formats.build("af-ledger", request()).data)["agent_id"] == "deploy"
    anon = json.loads(formats.build("af-ledger", request(tag=None)).data)
    assert anon["agent_id"] == f"lockwarden-pid-4242@{HOST}"
    assert "ttl" not in anon  # af has no lease


@pytest.mark.parametrize("fmt", ["af-claim", "pidfile", "nonsense"])
def test_build_refuses_formats_lockwarden_does_not_write(fmt: str) -> None:
    with pytest.raises(ValueError, match="cannot write"):
        formats.build(fmt, request())


def test_default_ttl_is_the_task_mcp_lease_only() -> None:
    assert formats.default_ttl("task-mcp") == 3600.0
    assert formats.default_ttl("sema") is None and formats.default_ttl("af-ledger") is None

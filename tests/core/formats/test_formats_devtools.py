"""Developer tools' marker locks (docs/specs/devtool-locks.md) parsed from the real files the
research captured (tests/data/devtools/, copied from the fixtures of that research): exact
fields, detection by path or block 0 id, and the Emacs symlink read without following it."""

from __future__ import annotations

import os
import struct
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core import formats
from core.errors import ParseError
from core.formats import emacs, git, libreoffice, softfilelock, terraform, vimswap

DATA = Path(__file__).parents[2] / "data" / "devtools"


def _read(rel: str) -> bytes:
    return (DATA / rel).read_bytes()


def test_vim_dead_dirty_swap_fields() -> None:
    rec = formats.parse(_read("vim/dead-dirty.notes.txt.swp"), "/home/dev/src/.notes.txt.swp")
    assert rec.format == "vim-swap"
    assert (rec.pid, rec.holder, rec.host, rec.tag) == (7868, "root", "vm",
                                                       "/home/dev/src/notes.txt")
    m = rec.metadata
    assert m["dirty"] is True and m["flags"] == 0x0D and m["page_size"] == 4096
    assert m["version"] == "VIM 9.0" and m["fileencoding"] == "utf-8"
    assert m["same_dir"] is True and m["encrypted"] is None and m["compatible"] is True
    assert m["file_mtime"] == 1795461705 and m["inode"] == 2158201
    assert rec.acquired_at is None


def test_vim_live_clean_swap_and_detection_by_magic() -> None:
    data = _read("vim/live-clean.notes.txt.swp")
    assert formats.detect(data) == "vim-swap"  # no path: block 0 id
    rec = formats.parse(data, "/tmp/whatever")
    assert rec.metadata["dirty"] is False and rec.pid == 7868
    assert vimswap.is_swap_name(".notes.txt.swp") and vimswap.is_swap_name(".a.swo")
    assert vimswap.is_swap_name(".a.saa") and not vimswap.is_swap_name("a.swp")
    assert not vimswap.is_swap_name(".a.swq")


def test_vim_block0_offsets_are_little_endian_and_encrypted_ids() -> None:
    block = bytearray(_read("vim/dead-dirty.notes.txt.swp")[:1024])
    block[1:2] = b"d"
    struct.pack_into("<I", block, 24, 0)
    block[1007] = 0
    rec = vimswap.parse(bytes(block), "/x/.f.swp")
    assert rec.metadata["encrypted"] == "blowfish2" and rec.pid is None
    assert rec.metadata["dirty"] is False
    with pytest.raises(ParseError, match="1008"):
        vimswap.parse(bytes(block[:1000]))
    with pytest.raises(ParseError, match="block 0"):
        vimswap.parse(b"xx" + bytes(block[2:]))


def test_vim_read_block0(tmp_path: Path) -> None:
    swap = tmp_path / ".big.swp"
    swap.write_bytes(_read("vim/dead-dirty.notes.txt.swp") + b"\0" * 100_000)
    assert len(vimswap.read_block0(str(swap))) == vimswap.BLOCK0_SIZE
    link = tmp_path / ".link.swp"
    link.symlink_to(swap)
    with pytest.raises(OSError):
        vimswap.read_block0(str(link))


def test_emacs_symlink_and_regular_variant(tmp_path: Path) -> None:
    target = _read("emacs/.#draft.txt")
    assert target == b"root@vm.19661"
    link = tmp_path / ".#draft.txt"
    os.symlink(target, link)  # a dangling symlink, as Emacs makes it
    rec = emacs.parse_path(str(link))
    assert rec.format == "emacs-lock"
    assert (rec.holder, rec.host, rec.pid, rec.tag) == ("root", "vm", 19661, "draft.txt")
    assert rec.metadata == {"boot": None, "file": "draft.txt", "symlink": True}
    regular = tmp_path / ".#notes.org"
    regular.write_bytes(_read("emacs/lockfile-regular-variant.txt"))
    rec2 = emacs.parse_path(str(regular))
    assert rec2.pid == 19661 and rec2.metadata["symlink"] is False
    assert formats.parse(target, str(regular)).format == "emacs-lock"


def test_emacs_boot_time_and_last_at_and_dot() -> None:
    rec = emacs.parse(_read("emacs/example-with-boottime.txt"), "/d/.#f")
    assert (rec.holder, rec.host, rec.pid) == ("alice", "laptop", 4242)
    assert rec.metadata["boot"] == 1795461432
    odd = emacs.parse("a@b@host.example.org.77\uf022123".encode(), "/d/.#g")
    assert (odd.holder, odd.host, odd.pid, odd.metadata["boot"]) == (
        "a@b", "host.example.org", 77, 123)
    for bad in (b"nohost", b"u@host", b"u@host.x", b"@h.1", b"u@h.0", b"u@h.1:x"):
        with pytest.raises(ParseError):
            emacs.parse(bad, "/d/.#f")
    assert not emacs.is_lock_name(".#-emacs1a2b3c") and emacs.is_lock_name(".#a")


def test_libreoffice_lock_fields() -> None:
    rec = formats.parse(_read("libreoffice/.~lock.report.odt#"), "/docs/.~lock.report.odt#")
    assert rec.format == "libreoffice-lock"
    assert (rec.holder, rec.host, rec.pid, rec.tag) == ("root", "vm", None, "report.odt")
    assert rec.metadata == {"name": "", "user": "root", "time": "23.11.2026 19:26",
                            "profile": "file:///home/dev/.config/libreoffice/4",
                            "document": "report.odt"}
    expected = datetime(2026, 11, 23, 19, 26).astimezone().astimezone(UTC)
    assert rec.acquired_at == expected


def test_libreoffice_escapes_and_errors() -> None:
    rec = libreoffice.parse(b"Ann\\, B,ann,box,01.02.2026 03:04,file:///p\\;q;", "/d/.~lock.a#")
    assert rec.holder == "Ann, B" and rec.metadata["profile"] == "file:///p;q"
    with pytest.raises(ParseError, match="';'"):
        libreoffice.parse(b",root,vm,23.11.2026 19:26,file:///x", "/d/.~lock.a#")
    with pytest.raises(ParseError, match="5 fields"):
        libreoffice.parse(b"a,b;", "/d/.~lock.a#")
    assert libreoffice.parse(b",u,h,99.99.2026 99:99,p;").acquired_at is None


def test_terraform_lock_info_fields() -> None:
    data = _read("terraform/.terraform.tfstate.lock.info")
    assert formats.detect(data) == "terraform-lock-info"
    rec = formats.parse(data, "/infra/.terraform.tfstate.lock.info")
    assert (rec.holder, rec.host, rec.pid, rec.tag) == ("root", "vm", None, "OperationTypeApply")
    assert rec.acquired_at == datetime(2026, 11, 23, 19, 26, 45, 742983, tzinfo=UTC)
    assert rec.metadata == {"id": "5753c047-3f16-87da-3d3a-07a08bf3eb1f",
                            "operation": "OperationTypeApply", "info": "", "version": "1.0.3",
                            "state_path": "terraform.tfstate", "who": "root@vm",
                            "state_file": "/infra/terraform.tfstate"}
    assert terraform.state_path("/i/.prod.tfstate.lock.info") == "/i/prod.tfstate"
    with pytest.raises(ParseError, match="Created"):
        terraform.parse(b'{"ID":"x","Operation":"o","Who":"u@h","Created":"soon"}')


def test_softfilelock_marker() -> None:
    rec = formats.parse(_read("python-filelock/softfilelock-dead-holder.lock"), "/d/s.lock")
    assert rec.format == "softfilelock"
    assert (rec.pid, rec.host) == (27798, "vm")
    assert rec.metadata["start_token"] == 2126526056642952492376318429406165070424449136334836181531
    assert softfilelock.parse(b"12\nbox\n").metadata["start_token"] is None
    token = softfilelock.start_token(os.getpid())
    assert token is not None and softfilelock.same_start(token, token)
    assert softfilelock.same_start(token, token % 2**64)


def test_git_locks_by_path() -> None:
    idx = formats.parse(_read("git/index.lock.dead-git-commit"), "/src/repo/.git/index.lock")
    assert (idx.format, idx.tag, idx.pid) == ("git-lock", "index", None)
    assert idx.metadata == {"content": "index", "size": 129, "gitdir": "/src/repo/.git",
                            "target": "index"}
    head = formats.parse(_read("git/HEAD.lock.dead-git-commit"), "/src/repo/.git/HEAD.lock")
    assert (head.tag, head.metadata["content"], head.metadata["size"]) == ("HEAD", "empty", 0)
    ref = formats.parse(_read("git/refs-heads-main.lock.dead-git-commit"),
                        "/src/repo/.git/refs/heads/main.lock")
    assert ref.tag == "refs/heads/main"
    assert ref.metadata["new_value"] == "1583a000f7d1f1cc7027fb46923f25037bcce791"
    wt = "/src/repo/.git/worktrees/feature/index.lock"
    assert git.gitdir_of(wt) == "/src/repo/.git/worktrees/feature"
    assert git.lock_target(wt) == "index"
    assert git.lock_target("/srv/bare.git/packed-refs.lock") == "packed-refs"
    assert git.lock_target("/src/repo/.git/objects/maintenance.lock") == "objects/maintenance"
    assert git.lock_target("/src/repo/index.lock") is None  # not in a git directory
    assert git.lock_target("/src/repo/.git/objects/pack/x.lock") is None
    # a sema lock named config.lock outside .git stays sema
    assert formats.detect(b"pid=1\ntimestamp=5\n", "/d/config.lock") == "sema"
    # git's config text inside .git is a git lock, never "sema"
    assert formats.detect(b"[core]\n\tbare = false\n", "/r/.git/config.lock") == "git-lock"


def test_git_pid_companion(tmp_path: Path) -> None:
    gitdir = tmp_path / ".git"
    gitdir.mkdir()
    (gitdir / "index.lock").write_bytes(b"")
    assert git.companion_pid(str(gitdir / "index.lock")) is None
    (gitdir / "index~pid.lock").write_bytes(b"pid 4242\n")
    assert git.companion_pid(str(gitdir / "index.lock")) == 4242
    rec = formats.parse(b"pid 4242\n", str(gitdir / "index~pid.lock"))
    assert (rec.format, rec.pid, rec.tag) == ("git-lock", 4242, "index")


def test_git_gc_pid() -> None:
    rec = formats.parse(_read("git/gc.pid.dead-git-gc"), "/src/repo/.git/gc.pid")
    assert (rec.format, rec.pid, rec.host) == ("git-gc", 19342, "vm")
    assert formats.parse(b"1 otherhost\n", "/r/.git/gc.pid").host == "otherhost"
    for bad in (b"", b"x vm", b"0 vm", b"12", b"1 a b"):
        with pytest.raises(ParseError):
            formats.parse(bad, "/r/.git/gc.pid")
    assert formats.detect(b"4242\n", "/d/gc.pid") == "pidfile"  # not in a git directory


def test_libreoffice_profile_lock() -> None:
    data = _read("libreoffice/profile-dot-lock.txt")
    assert formats.detect(data) == "libreoffice-profile"  # by content: [Lockdata]
    rec = formats.parse(data, "/home/dev/.config/libreoffice/4/.lock")
    assert (rec.holder, rec.host, rec.pid) == ("root", "vm", None)
    assert rec.metadata == {"user": "root", "host": "vm",
                            "stamp": "7C7090A3C3B6914D926FF86C69E606EF",
                            "time": "Mon Nov 23 19:26:05 2026", "ipc_server": "true",
                            "profile": "file:///home/dev/.config/libreoffice/4"}
    assert rec.acquired_at == datetime(2026, 11, 23, 19, 26, 5).astimezone().astimezone(UTC)
    with pytest.raises(ParseError, match="User and a Host"):
        libreoffice.parse_profile(b"[Lockdata]\r\nUser=\r\n")
    with pytest.raises(ParseError):
        formats.parse(b"[1, 2]")  # a JSON array is still not a lock

"""The built-in verbs of ``lockwarden`` (docs/cli.md, "Verbs"): what each one takes (its
options, every number bounded by :mod:`core.cli.args`), its ``--help`` example, and the
module that runs it, imported only when the verb runs (docs/cli.md, "Start-up time"):

- :mod:`core.cli.locks`: ``try``, ``acquire``, ``release``, ``reclaim``;
- :mod:`core.cli.status`: ``status``, ``wait``; :mod:`core.cli.listing`: ``list``;
- :mod:`core.cli.run`, :mod:`core.cli.audit`, :mod:`core.cli.clean`, :mod:`core.cli.watch`;
- :mod:`core.cli.kill`: ``kill-holder``; :mod:`core.cli.who`: ``who``;
- :mod:`core.cli.history`: ``history``, ``stats``;
- :mod:`core.cli.remote`: ``list``, ``status``, ``release``, ``reclaim`` of a server lock's URL.

:mod:`core.cli.main` builds the parser from :data:`BUILTIN_VERBS` plus the verbs a caller adds
(the app's ``gui``). At load time this module imports only the standard library,
:mod:`core.cli.args`, :mod:`core.cli.common` and :mod:`core.defaults`.
"""

from __future__ import annotations

import argparse

from core.cli import args as cli_args
from core.cli.common import EXIT_USAGE, CliError, Out, Verb, check_lock_path
from core.defaults import DEFAULT_STALE_AFTER

_FORMATS = ("sema", "task-mcp", "af-ledger")


def _add_path(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=cli_args.path, metavar="PATH")


def _add_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=cli_args.TIMEOUT, metavar="S",
                   help="give up after S seconds (exit 1; at most one year); "
                   "default: wait forever")


def _add_stale_after(p: argparse.ArgumentParser, *, configured: bool = False) -> None:
    """--stale-after (default None: :func:`core.cli.common.stale_policy` uses 3600 s); with
    ``configured``, also --config: the configured directory's policy applies unless
    --stale-after is given (:func:`core.cli.common.cli_policies`)."""
    default = ("the policy of the configured directory the lock is in, else "
               f"{DEFAULT_STALE_AFTER:g}" if configured else f"{DEFAULT_STALE_AFTER:g}")
    p.add_argument(
        "--stale-after", type=cli_args.STALE_AFTER, default=None, metavar="S",
        help="age in seconds after which another tool's lock with a dead holder is stale "
        f"(default: {default}, as in the sema spec)",
    )
    if configured:
        p.add_argument("--config", type=cli_args.path, metavar="PATH",
                       help="configuration file whose watched directories' stale policies "
                       "apply, and whose [fleet] judges other hosts' locks (default: "
                       "$LOCKWARDEN_CONFIG, else the app's)")


def _add_write_opts(p: argparse.ArgumentParser, *, ttl_help: str) -> None:
    """--tag, --ttl, --format: what a verb that writes a lock records."""
    p.add_argument("--tag", type=cli_args.tag, metavar="T",
                   help="human description stored in the lock (at most 4096 bytes)")
    p.add_argument("--ttl", type=cli_args.TTL, metavar="S", help=ttl_help)
    p.add_argument("--format", choices=_FORMATS, default="sema",
                   help="lock file format to write (default sema)")
    p.add_argument("--durable", action="store_true",
                   help="fsync the lock file, its directory and the audit entry (slower; a "
                        "lock never needs to survive a power loss, see docs/architecture.md)")


def _add_lock_opts(p: argparse.ArgumentParser) -> None:
    """Options of try/acquire/reclaim: --tag, --ttl, --format, --pid, --stale-after."""
    _add_write_opts(p, ttl_help="lease length in seconds, 1 s to one year (the lock expires "
                    "after it unless refreshed)")
    p.add_argument("--pid", type=cli_args.pid, metavar="N",
                   help="holder PID to record (default: the calling process, i.e. the shell; "
                        "sudo, timeout, xargs... in between are skipped)")
    _add_stale_after(p)


def _add_force(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--force", action="store_true", help=f"{what} (recorded in the audit log)")
    p.add_argument("--reason", metavar="T", help="why (recorded in the audit log)")


def _add_config(p: argparse.ArgumentParser) -> None:
    """--config FILE: the configuration whose [fleet] judges other hosts' locks."""
    p.add_argument("--config", type=cli_args.path, metavar="FILE",
                   help="configuration file (default: the per-user one, or "
                   "$LOCKWARDEN_CONFIG); its [fleet] judges locks of other hosts")


def _add_dirs(p: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """DIR... of list/watch, with -r, --pattern, --stale-after."""
    p.add_argument("dirs", type=cli_args.path, nargs="*" if optional else "+", metavar="DIR")
    p.add_argument("-r", "--recursive", action="store_true", help="descend into subdirectories")
    p.add_argument("--pattern", action="append", metavar="GLOB",
                   help="file name pattern (repeatable; default *.lock *.pid *-lock); with "
                   "a redis:// URL: SCAN pattern of redis-py's keys")
    p.add_argument("--project", action="store_true",
                   help="each DIR is a tree of repositories: list developer tools' locks (git, "
                   "Vim, Emacs, LibreOffice, Terraform) recursively, git's only inside .git, "
                   "never entering node_modules, .venv, target, build outputs or caches")
    _add_stale_after(p, configured=True)


def _add_server_opts(p: argparse.ArgumentParser, *, patterns: bool = False) -> None:
    """Options for a ``postgres://``, ``redis://`` or ``etcd://`` URL (docs/cli.md, "Locks on
    servers"): --profile, --password-env (and --pattern for a verb that lacks it)."""
    p.add_argument("--profile", action="append", choices=("python-redis-lock", "redis-py"),
                   metavar="LIB",
                   help="Redis URL: a library whose keys to read, python-redis-lock or "
                   "redis-py (repeatable; default python-redis-lock, plus redis-py when "
                   "--pattern is given)")
    if patterns:
        p.add_argument("--pattern", action="append", metavar="GLOB",
                       help="Redis URL: SCAN pattern of redis-py's keys (repeatable)")
    p.add_argument("--password-env", metavar="NAME",
                   help="server URL: read the password from environment variable NAME")
    p.add_argument("--deadline", type=cli_args.DEADLINE, metavar="S",
                   help="server URL: seconds one operation on the server may take in all, "
                   "connection included (default 10)")


def _args_try(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    _add_lock_opts(p)


def _args_acquire(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    _add_timeout(p)
    _add_lock_opts(p)


def _args_release(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    _add_force(p, "remove the lock whoever holds it")
    p.add_argument("--discard-unsaved", action="store_true",
                   help="with --force: also a file holding unsaved editor changes (a Vim swap); "
                        "it goes to the trash")
    p.add_argument("--pid", type=cli_args.pid, metavar="N",
                   help="holder PID to release for (default: the holder the lock names when it is "
                        "this process or one that runs it, else the calling process)")
    _add_stale_after(p)
    _add_server_opts(p, patterns=True)


def _args_status(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    _add_stale_after(p, configured=True)
    _add_server_opts(p, patterns=True)


def _args_wait(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    _add_timeout(p)
    _add_stale_after(p)
    p.add_argument("--notify", action="store_true",
                   help="show a desktop notification when the lock is free (notify-send; "
                   "printed when it is not installed)")


def _args_reclaim(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    _add_force(p, "take the lock even if its holder is alive")
    _add_lock_opts(p)
    _add_server_opts(p, patterns=True)


def _args_list(p: argparse.ArgumentParser) -> None:
    _add_dirs(p, optional=True)
    _add_server_opts(p)
    p.add_argument("--fleet", action="store_true",
                   help="every host's published locks, from the [fleet] database of --config "
                   "(docs/fleet.md)")


def _args_agent(p: argparse.ArgumentParser) -> None:
    _add_config(p)


def _binding(text: str) -> tuple[str, str]:
    """``HOST=ROLE`` of ``fleet init --bind``."""
    host, eq, role = text.partition("=")
    if not eq or not host.strip() or not role.strip() or not text.isprintable():
        raise argparse.ArgumentTypeError(f"expected HOST=ROLE, not {text!r}")
    return host.strip(), role.strip()


def _args_fleet(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("init",),
                   help="init: create or migrate the fleet's tables, grant the roles and bind "
                   "host names to roles (run by the database's owner; docs/fleet.md)")
    _add_config(p)
    p.add_argument("--dsn", metavar="URL",
                   help="the database as its owner (default: [fleet] dsn of --config); the "
                   "password from [fleet]'s password_env or keyring, else libpq's PGPASSWORD "
                   "or ~/.pgpass, never in the URL")
    p.add_argument("--bind", type=_binding, action="append", default=[], metavar="HOST=ROLE",
                   help="host name HOST is published by role ROLE only (repeatable)")
    p.add_argument("--unbind", action="append", default=[], metavar="HOST",
                   help="no role may publish host name HOST any more (repeatable)")
    p.add_argument("--viewer", action="append", default=[], metavar="ROLE",
                   help="role ROLE may read the fleet (repeatable)")




def _args_run(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    p.add_argument("--timeout", type=cli_args.TIMEOUT, metavar="S",
                   help="wait at most S seconds for the lock (0: do not wait; at most one "
                   "year); default: forever")
    _add_write_opts(p, ttl_help="lease length in seconds, 1 s to one year; refreshed "
                    "automatically while CMD runs")
    _add_stale_after(p)
    p.add_argument("cmd", nargs="*", metavar="CMD", help="command and arguments, after --")


def _args_audit(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=cli_args.path, nargs="?", default=".", metavar="PATH|DIR",
                   help="log file, lock file or directory (default: current directory)")
    p.add_argument("--tail", type=cli_args.count, metavar="N", help="only the last N entries")
    p.add_argument("--verify", action="store_true",
                   help="check the hash chain (exit 1 if a line was edited, removed or moved)")


def _args_clean(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=cli_args.path, metavar="DIR")
    p.add_argument("--dry-run", action="store_true", help="only print what would be removed")
    p.add_argument("--min-age", type=cli_args.MIN_AGE, default=10.0, metavar="S",
                   help="leave temp files younger than S seconds alone (default 10)")


def _args_watch(p: argparse.ArgumentParser) -> None:
    _add_dirs(p)
    _add_server_opts(p)
    p.add_argument("--max-watches", type=cli_args.count, metavar="N",
                   help="with --project: watch at most N directories with inotify and walk "
                   "the rest every 5 s (default: half of fs.inotify.max_user_watches)")
    p.add_argument("--no-history", action="store_true",
                   help="do not record the changes in the history (docs/history.md)")


def _args_history(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=cli_args.path, metavar="PATH|DIR|URL",
                   help="a lock (it need not exist any more), a directory (every lock in it "
                   "and below) or a lock server's URL")
    p.add_argument("--since", metavar="SPAN",
                   help="only what was seen in the last SPAN (e.g. 90m, 12h, 1d, 2w); "
                   "default: everything kept")


def _args_stats(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=cli_args.path, metavar="DIR|PATH|URL",
                   help="a directory (every lock in it and below), a lock or a server URL")
    p.add_argument("--since", metavar="SPAN",
                   help="the window: the last SPAN (e.g. 12h, 1d, 2w; default 7d)")


# handlers: each imports its module when its verb runs (start-up cost)


def _server_url(text: str) -> bool:
    """A PATH naming a lock server: :mod:`core.cli.remote` (and the URL's backend) is
    imported only for an argument holding ``://``."""
    if "://" not in text:
        return False
    from core.cli.remote import is_remote

    return is_remote(text)


def _run_try(args: argparse.Namespace, out: Out) -> int:
    from core.cli.locks import cmd_try

    return cmd_try(args, out)


def _run_acquire(args: argparse.Namespace, out: Out) -> int:
    from core.cli.locks import cmd_acquire

    return cmd_acquire(args, out)


def _run_release(args: argparse.Namespace, out: Out) -> int:
    if _server_url(args.path):
        from core.cli.remote import cmd_remote_release

        return cmd_remote_release(args, out)
    from core.cli.locks import cmd_release

    return cmd_release(args, out)


def _run_reclaim(args: argparse.Namespace, out: Out) -> int:
    if _server_url(args.path):
        from core.cli.remote import cmd_remote_reclaim

        return cmd_remote_reclaim(args, out)
    from core.cli.locks import cmd_reclaim

    return cmd_reclaim(args, out)


def _run_status(args: argparse.Namespace, out: Out) -> int:
    if _server_url(args.path):
        from core.cli.remote import cmd_remote_status

        return cmd_remote_status(args, out)
    from core.cli.status import cmd_status

    return cmd_status(args, out)


def _run_wait(args: argparse.Namespace, out: Out) -> int:
    from core.cli.status import cmd_wait

    return cmd_wait(args, out)


def _run_list(args: argparse.Namespace, out: Out) -> int:
    if args.fleet:
        if args.dirs:
            raise CliError("list: --fleet lists every host's locks: name no DIR", EXIT_USAGE)
        from core.cli.fleet import cmd_list_fleet

        return cmd_list_fleet(args, out)
    if not args.dirs:
        raise CliError("list: name at least one DIR (or --fleet)", EXIT_USAGE)
    if any(_server_url(d) for d in args.dirs):
        from core.cli.remote import cmd_remote_list

        return cmd_remote_list(args, out)
    from core.cli.listing import cmd_list

    return cmd_list(args, out)


def _run_agent(args: argparse.Namespace, out: Out) -> int:
    from core.cli.fleet import cmd_agent

    return cmd_agent(args, out)


def _run_fleet(args: argparse.Namespace, out: Out) -> int:
    from core.cli.fleet import cmd_fleet_init

    return cmd_fleet_init(args, out)


def _run_run(args: argparse.Namespace, out: Out) -> int:
    """``run PATH [--timeout S] [--ttl S] -- CMD ARGS...``: see :mod:`core.cli.run`."""
    from core.cli.run import run

    check_lock_path(args.path, must_be_file=True)
    if not args.cmd:
        raise CliError("run: no command given (usage: lockwarden run PATH -- CMD ARGS...)",
                       EXIT_USAGE)
    return run(args, out)


def _run_audit(args: argparse.Namespace, out: Out) -> int:
    from core.cli.audit import cmd_audit

    return cmd_audit(args, out)


def _args_kill_holder(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    p.add_argument("--reason", metavar="T", help="why (goes into the audit log)")
    p.add_argument("--yes", action="store_true",
                   help="do not ask for confirmation (needed when stdin is not a terminal)")


def _run_kill_holder(args: argparse.Namespace, out: Out) -> int:
    from core.cli.kill import cmd_kill_holder

    return cmd_kill_holder(args, out)


def _args_who(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", type=cli_args.path, metavar="PATH",
                   help="files or folders (a folder: everything beneath it)")


def _run_who(args: argparse.Namespace, out: Out) -> int:
    from core.cli.who import cmd_who

    return cmd_who(args, out)


def _run_clean(args: argparse.Namespace, out: Out) -> int:
    from core.cli.clean import cmd_clean

    return cmd_clean(args, out)


def _run_watch(args: argparse.Namespace, out: Out) -> int:
    if any(_server_url(d) for d in args.dirs):
        from core.cli.remote import cmd_remote_watch

        return cmd_remote_watch(args, out)
    from core.cli.watch import cmd_watch

    return cmd_watch(args, out)


def _run_history(args: argparse.Namespace, out: Out) -> int:
    from core.cli.history import cmd_history

    return cmd_history(args, out)


def _run_stats(args: argparse.Namespace, out: Out) -> int:
    from core.cli.history import cmd_stats

    return cmd_stats(args, out)


BUILTIN_VERBS: tuple[Verb, ...] = (
    Verb("try", "acquire a lock without waiting (reclaims a stale one)", """example:
  lockwarden try build.lock --tag nightly && make && lockwarden release build.lock
  (exit 0 acquired, 1 held; the lock records the calling shell's PID)""",
         _args_try, _run_try, aliases=("try-acquire",), via="cli"),
    Verb("acquire", "wait until the lock is acquired", """example:
  lockwarden acquire /tmp/deploy.lock --timeout 30 --tag deploy || exit 1
  ./deploy.sh; lockwarden release /tmp/deploy.lock""", _args_acquire, _run_acquire, via="cli"),
    Verb("release", "release a lock (only the holder's, unless --force)", """examples:
  lockwarden release build.lock                 # only the holder that took it
  lockwarden release build.lock --force --reason "holder hung"   # anyone's, audited""",
         _args_release, _run_release, via="cli"),
    Verb("status", "show who holds a lock (exit 0 free, 1 held)", """examples:
  lockwarden status /tmp/deploy.lock            # exit 0 free, 1 held
  lockwarden status /tmp/deploy.lock --json | jq .pid""", _args_status, _run_status),
    Verb("wait", "wait until a lock is free", """example:
  lockwarden wait /tmp/deploy.lock --timeout 60 && echo "deploy finished\"
  lockwarden wait ~/build/.cache.lock --notify &   # a desktop notification when it is free""",
         _args_wait, _run_wait),
    Verb("list", "list every lock file in directories, with its verdict", """examples:
  lockwarden list /tmp /run/lock
  lockwarden list ~/proj --recursive --json | jq '.[] | select(.state == "stale")'
  lockwarden list ~/src --project              # git index.lock, swap files... in every repo""",
         _args_list, _run_list),
    Verb("reclaim", "break a stale lock and take it (a live one only with --force)", """examples:
  lockwarden reclaim /tmp/deploy.lock           # only if its holder is dead (stale)
  lockwarden reclaim /tmp/deploy.lock --force --reason "operator decision\"""",
         _args_reclaim, _run_reclaim, via="cli"),
    Verb("run", "hold a lock while a command runs (like flock(1))", """examples:
  lockwarden run /tmp/backup.lock -- rsync -a src/ dst/
  lockwarden run /tmp/backup.lock --timeout 0 --ttl 60 -- ./nightly.sh
  (exit code is the command's; 1 if the lock could not be had)""",
         _args_run, _run_run, json=False, via="cli"),
    Verb("audit", "show the audit log of a directory or lock; --verify checks the chain",
         """examples:
  lockwarden audit /tmp --tail 20
  lockwarden audit /tmp/deploy.lock --json
  lockwarden audit /tmp --verify                # exit 1 if the chain is broken""",
         _args_audit, _run_audit),
    Verb("kill-holder", "end the process that holds a kernel lock (flock/fcntl) on a file",
         """example:
  lockwarden kill-holder ~/.cache/uv/.lock --reason "uv hung for an hour"
  (asks first; SIGTERM to the PID the kernel names; audited; exit 0 signalled, 1 refused)""",
         _args_kill_holder, _run_kill_holder, via="cli"),
    Verb("who", "show every process using a file or folder (open, mapped, locked, cwd)",
         """examples:
  lockwarden who ~/Downloads/report.pdf         # exit 0 nothing uses it, 1 something does
  lockwarden who /media/usb --json | jq '.processes[].pid'   # what keeps a mount busy""",
         _args_who, _run_who),
    Verb("clean", "remove temp files Lockwarden's engine left behind (never others')",
         """example:
  lockwarden clean /tmp --dry-run               # list Lockwarden's leftover temp files
  lockwarden clean /tmp""", _args_clean, _run_clean),
    Verb("watch", "print the locks in directories, then every change, until interrupted",
         """examples:
  lockwarden watch /tmp /run/lock
  lockwarden watch ~/proj --recursive --json | while read -r line; do ...; done
  lockwarden watch redis://127.0.0.1:6379/0 --json   # a lock server, listed every 5 s
  (changes are recorded in the history unless --no-history)""",
         _args_watch, _run_watch, via="cli"),
    Verb("history", "who held a lock, when and for how long (what the recorders saw)",
         """examples:
  lockwarden history /tmp/deploy.lock --since 1d
  lockwarden history /tmp --json | jq 'select(.event == "reclaimed")'
  (recorded by the app and `lockwarden watch`; oldest first)""",
         _args_history, _run_history),
    Verb("stats", "contention figures of a directory's locks: time held, longest hold...",
         """examples:
  lockwarden stats /tmp                         # the last 7 days
  lockwarden stats ~/build --since 1d --json""", _args_stats, _run_stats),
    Verb("agent", "publish this host's locks to the [fleet] database until interrupted",
         """examples:
  lockwarden agent                              # the per-user configuration's [fleet]
  lockwarden agent --config /etc/lockwarden.toml
  lockwarden list --fleet                       # every host's published locks""",
         _args_agent, _run_agent, json=False, via="cli"),
    Verb("fleet", "set the [fleet] database up: tables, grants, host names bound to roles",
         """examples (as the database's owner, once, and again to bind more hosts):
  lockwarden fleet init --bind build-7=lw_build7 --bind build-8=lw_build8 --viewer lw_viewer
  lockwarden fleet init --dsn postgresql://lw_owner@db.example/lockwarden --unbind old-host""",
         _args_fleet, _run_fleet),
)
"""The engine's verbs, in ``lockwarden --help`` order (docs/cli.md, "Verbs")."""

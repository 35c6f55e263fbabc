"""``lockwarden wait PATH --notify``: one desktop notification when the wait is over
(docs/cli.md, "``wait --notify``").

The notification is sent with ``notify-send`` (libnotify; freedesktop.org notifications on
Linux and the BSDs) when it is on ``PATH``. Without it, or when it fails (no notification
daemon, no session bus), the message is printed instead and a note says why: the user is never
left believing a notification was shown.
"""

from __future__ import annotations

import shutil
import subprocess

NOTIFY_SEND = "notify-send"
"""The program used for desktop notifications."""

NOTIFY_TIMEOUT_S = 10.0
"""Seconds ``notify-send`` may take before it counts as failed."""


def desktop_notify(title: str, body: str) -> str | None:
    """Show a desktop notification ``title``/``body`` (plain text) with ``notify-send``.

    Returns:
        ``None`` when it was sent; otherwise why not, in words (``notify-send`` missing, or
        its exit status and message). Never raises.
    """
    exe = shutil.which(NOTIFY_SEND)
    if exe is None:
        return f"{NOTIFY_SEND} is not installed (libnotify-bin)"
    try:
        done = subprocess.run([exe, "--app-name=Lockwarden", "--", title, body],
                              capture_output=True, text=True, timeout=NOTIFY_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{NOTIFY_SEND} failed: {exc}"
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        return f"{NOTIFY_SEND} failed (exit {done.returncode})" + (
            f": {detail[-1]}" if detail else "")
    return None

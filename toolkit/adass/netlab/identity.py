"""Who a PID is now: its start time and command line, and signals sent only to the process recorded.

A PID alone names whichever process holds it today. The lab records each process's start time (clock
ticks since boot, ``/proc/PID/stat`` field 22, fixed for the process's life and kept across ``exec``)
and its command line when it starts it, and signals a PID only while both still match.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Seen", "seen", "send_signal", "start_ticks"]


@dataclass(frozen=True)
class Seen:
    """What ``/proc`` says of a PID now."""

    started: int  # clock ticks after boot
    command: tuple[str, ...]  # empty for a zombie or a kernel thread
    zombie: bool


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command name (field 2) sits in parentheses and may hold spaces or ')': fields 3.. follow the last ')'
    return text[text.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks after boot, or None when no process has that PID."""
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[22 - 3])


def seen(pid: int) -> Seen | None:
    """The process at ``pid`` now, or None when there is none."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    command = tuple(part.decode(errors="replace") for part in raw.split(b"\0")[:-1])
    return Seen(int(fields[22 - 3]), command, fields[0] in ("Z", "X"))


def send_signal(pid: int, sig: int, is_ours: Callable[[Seen | None], bool]) -> bool:
    """Send ``sig`` to ``pid`` if ``is_ours(seen(pid))`` holds; return whether it was sent.

    The PID is pinned with a pidfd before the check, so the process checked is the process signalled
    even if the PID is freed and reused in between. Where pidfds are missing (Linux before 5.3) the
    check and ``kill`` are as close together as they can be.
    """
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:  # no pidfd_open: an older kernel
        handle = None
    try:
        if not is_ours(seen(pid)):
            return False
        with contextlib.suppress(ProcessLookupError):
            if handle is None:
                os.kill(pid, sig)
            else:
                signal.pidfd_send_signal(handle, sig)
        return True
    finally:
        if handle is not None:
            os.close(handle)

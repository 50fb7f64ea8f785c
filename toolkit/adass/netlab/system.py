"""What the network lab needs from the system (root, iproute2) and how it runs ``ip`` and ``tc``.

Every failure becomes a :class:`LabError` whose message is one line, so the command can print it and
exit with status 2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["LabError", "require_tools", "sh", "warn"]

TOOLS = ("ip", "tc")


class LabError(RuntimeError):
    """The lab cannot be built, used or taken down; the message is one line."""


def require_tools() -> None:
    """Fail with one line unless this process is root and ``ip`` and ``tc`` (iproute2) are on the path.

    Raises
    ------
    LabError
        Naming what is missing.
    """
    if os.geteuid() != 0:
        raise LabError("the network lab needs root (network namespaces, veth pairs and tc); run it as root")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise LabError(f"the network lab needs iproute2 ({' and '.join(missing)} not found on PATH)")


def sh(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
    """Run one ``ip``/``tc`` command; with ``check``, a failure raises LabError with the command and its stderr.

    Parameters
    ----------
    argv : sequence of str
        The command and its arguments (never through a shell).
    check : bool
        Raise on a non-zero exit status (teardown passes False: things may already be gone).
    """
    done = subprocess.run(list(argv), capture_output=True, text=True)
    if check and done.returncode != 0:
        detail = " ".join((done.stderr or done.stdout).split()) or f"exit status {done.returncode}"
        raise LabError(f"{' '.join(argv)}: {detail}")
    return done


def warn(text: str) -> None:
    """Say on stderr, in one line, that something was left alone and why (the command goes on)."""
    print(f"adass netlab: warning: {text}", file=sys.stderr, flush=True)

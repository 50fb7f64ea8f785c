"""The lab's state file: its namespaces, addresses, rate and the processes started in it.

``up`` writes the file before it creates anything, so ``down`` can always find what to remove, even
after a failed ``up``. Files live in one folder per machine (``state_dir``), one ``NAME.json`` per lab.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .system import LabError

__all__ = ["Host", "LabState", "Process", "default_state_dir", "find_state", "subnet_for"]

STATE_DIR_ENV = "ADASS_NETLAB_DIR"


def default_state_dir() -> Path:
    """``$ADASS_NETLAB_DIR`` if set, else ``<tempdir>/adass-netlab``."""
    return Path(os.environ.get(STATE_DIR_ENV) or Path(tempfile.gettempdir()) / "adass-netlab")


def subnet_for(name: str) -> str:
    """The lab's private /24, ``10.77.X.0/24`` with X from a stable hash of the name.

    The addresses exist only inside the lab's own namespaces, so two labs never clash even on the
    same X; distinct X only keeps their logs apart to a reader.

    >>> subnet_for("demo")
    '10.77.160.0/24'
    """
    return f"10.77.{zlib.crc32(name.encode()) % 256}.0/24"


@dataclass
class Host:
    """One lab host: a network namespace holding ``eth0`` with one address on the lab's bridge."""

    index: int
    netns: str
    address: str
    port: str  # the veth end on the switch's bridge


@dataclass
class Process:
    """A process the lab started (scheduler or worker); ``started`` guards against a reused PID."""

    role: str
    host: int
    pid: int
    started: float
    log: str


@dataclass
class LabState:
    """Everything ``down`` and ``status`` need to know about one lab."""

    name: str
    switch: str  # namespace holding the bridge; the root namespace's routing is never touched
    subnet: str
    rate_bps: float
    hosts: list[Host] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)
    scheduler: str = ""
    path: str = ""

    def save(self) -> None:
        """Write the file atomically (temp file + rename)."""
        path = Path(self.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({k: v for k, v in asdict(self).items() if k != "path"}, indent=1))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> LabState:
        raw = json.loads(Path(path).read_text())
        hosts = [Host(**h) for h in raw.pop("hosts")]
        processes = [Process(**p) for p in raw.pop("processes")]
        return cls(**raw, hosts=hosts, processes=processes, path=str(path))

    @property
    def logs_dir(self) -> Path:
        """Where the lab's processes write their logs (removed with the lab)."""
        return Path(self.path).with_suffix(".logs")

    def remove(self) -> None:
        """Delete the state file and the logs."""
        shutil.rmtree(self.logs_dir, ignore_errors=True)
        Path(self.path).unlink(missing_ok=True)

    def host(self, index: int) -> Host:
        if not 0 <= index < len(self.hosts):
            raise LabError(
                f"--host: {index} is not allowed; lab {self.name} has hosts 0..{len(self.hosts) - 1}"
            )
        return self.hosts[index]


def find_state(state_dir: Path, name: str | None) -> LabState:
    """The state of lab ``name``, or of the only lab in ``state_dir`` when no name is given.

    Raises
    ------
    LabError
        No such lab, or several labs and no name.
    """
    if name:
        path = Path(state_dir) / f"{name}.json"
        if not path.exists():
            raise LabError(f"--name: no lab {name!r} in {state_dir} (start one with: adass netlab up)")
        return LabState.load(path)
    found = sorted(Path(state_dir).glob("*.json")) if Path(state_dir).is_dir() else []
    if len(found) != 1:
        names = ", ".join(p.stem for p in found) or "none"
        raise LabError(f"--name: {len(found)} labs in {state_dir} ({names}); name one with --name")
    return LabState.load(found[0])

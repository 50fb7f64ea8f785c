"""The lab's state file: its namespaces, addresses, rate and the processes started in it.

``up`` writes the file before it creates anything, so ``down`` can always find what to remove, even
after a failed ``up``. Files live in a private folder of the user's (``state_dir``, checked at each
use by :mod:`adass.netlab.private`), one ``NAME.json`` per lab.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .private import default_state_dir, listing, read_file, remove_file, remove_folder, write_file
from .system import LabError

__all__ = [
    "NAME", "Host", "LabState", "Process", "default_state_dir", "find_state", "namespace_prefix", "subnet_for",
]  # fmt: skip

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,23}")


def namespace_prefix(name: str) -> str:
    """The prefix of every namespace of lab ``name``: ``adass-NAME`` (then ``-sw``, ``-h0``, ...)."""
    return f"adass-{name}"


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
    """A process the lab started (scheduler or worker).

    ``started`` (clock ticks after boot) and ``command`` (its command line once running) tell this
    process from any other that later holds the same PID; ``launch``, where not empty, is what ran in
    the namespace first and then executed ``command`` (a worker's private ``/tmp`` is mounted by it).
    """

    role: str
    host: int
    pid: int
    started: int
    log: str
    command: list[str] = field(default_factory=list)
    launch: list[str] = field(default_factory=list)


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
    prefix: str = ""  # of all the lab's namespaces: ``down`` deletes no namespace without it

    def save(self) -> None:
        """Write the file atomically (a fresh temp file, synced, renamed over it) in its private folder."""
        text = json.dumps({k: v for k, v in asdict(self).items() if k != "path"}, indent=1)
        write_file(Path(self.path), text.encode())

    @classmethod
    def load(cls, path: Path) -> LabState:
        """Read a state file from its private folder; refuse one whose namespaces are not its lab's.

        Raises
        ------
        LabError
            The folder or file fails its checks, the file cannot be parsed, or it names a namespace
            outside the lab's own names.
        """
        try:
            raw = json.loads(read_file(Path(path)))
            # a file written before the prefix was recorded: its names get the same check below
            raw.setdefault("prefix", namespace_prefix(str(raw.get("name"))))
            hosts = [Host(**h) for h in raw.pop("hosts")]
            processes = [Process(**p) for p in raw.pop("processes")]
            state = cls(**raw, hosts=hosts, processes=processes, path=str(path))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise LabError(f"{path} is not a lab state file ({type(err).__name__}: {err})") from None
        foreign = state.foreign_namespaces()
        if foreign:
            raise LabError(
                f"{path} names namespaces not of lab {state.name} (its own are {namespace_prefix(state.name)}-*): "
                f"{', '.join(foreign)}; remove the file, and any such namespaces by hand"
            )
        return state

    def namespaces(self) -> list[str]:
        """The switch's namespace and the hosts', in that order."""
        return [self.switch, *(h.netns for h in self.hosts)]

    def foreign_namespaces(self) -> list[str]:
        """The namespaces this state names that are not this lab's own names (none for a sound state).

        A lab's namespaces are ``adass-NAME-sw`` and ``adass-NAME-hI`` for host I, with the prefix the
        state recorded when it was planned; anything else (another lab's or the machine's own) is never
        entered, signalled or deleted.
        """
        prefix = namespace_prefix(self.name)
        if not NAME.fullmatch(str(self.name)) or self.prefix != prefix:
            return self.namespaces()
        own = [f"{prefix}-sw", *(f"{prefix}-h{i}" for i in range(len(self.hosts)))]
        named = self.namespaces()
        bad_index = [h.netns for i, h in enumerate(self.hosts) if h.index != i]
        return [ns for ns, mine in zip(named, own, strict=True) if ns != mine] + bad_index

    @property
    def logs_dir(self) -> Path:
        """Where the lab's processes write their logs (removed with the lab)."""
        return Path(self.path).with_suffix(".logs")

    def remove(self) -> None:
        """Delete the logs and the state file."""
        remove_folder(self.logs_dir)
        remove_file(Path(self.path))

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
        No such lab, several labs and no name, or the folder or file fails its checks.
    """
    found = listing(Path(state_dir), ".json")
    if name:
        if f"{name}.json" not in found:
            raise LabError(f"--name: no lab {name!r} in {state_dir} (start one with: adass netlab up)")
        return LabState.load(Path(state_dir) / f"{name}.json")
    if len(found) != 1:
        names = ", ".join(Path(p).stem for p in found) or "none"
        raise LabError(f"--name: {len(found)} labs in {state_dir} ({names}); name one with --name")
    return LabState.load(Path(state_dir) / found[0])

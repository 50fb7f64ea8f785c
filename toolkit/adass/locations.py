"""Where files live: plain paths and fsspec URLs (``file://``, ``http(s)://``, ``s3://``, ``gs://``, ...).

Dataset files and checkpoints go through :class:`Location`, so that a cluster reads and writes them
where they are, not on a shared folder by assumption. A protocol whose package is missing is refused
in one line that names the URL and the package to install.

>>> str(Location.of("file:///tmp/runs").join("checkpoints", "latest.json"))
'file:///tmp/runs/checkpoints/latest.json'
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import IO, Any

import fsspec
from fsspec.registry import known_implementations

from .metrics import atomic_write_bytes
from .options import SpecError

__all__ = ["OBJECT_STORES", "Location", "LocationError", "check_location", "is_url"]

#: protocols whose stores have no rename: a file is whole once written (one PUT), so a pointer
#: that must move at once is written last instead of renamed into place
OBJECT_STORES = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "r2", "http", "https"}
)
# protocols served by fsspec itself whose driver needs a package of its own
_NEEDS = {"http": "aiohttp", "https": "aiohttp", "sftp": "paramiko", "ssh": "paramiko"}


class LocationError(SpecError):
    """A URL this process cannot use: an unknown protocol, or one whose package is not installed."""


def is_url(text: str) -> bool:
    """Whether ``text`` names a protocol (``s3://bucket/x``) rather than a plain path."""
    return "://" in str(text)


def _package(protocol: str) -> str:
    known = known_implementations[protocol]
    return _NEEDS.get(protocol) or known["class"].split(".")[0]


def check_location(text: str) -> str:
    """``text`` when it is a path or a URL whose protocol this process can use; LocationError in one
    line otherwise (naming the URL and the package to install)."""
    if not is_url(text):
        return text
    protocol = str(text).split("://", 1)[0].lower()
    if protocol not in known_implementations:
        raise LocationError(f"{text!r}: unknown protocol {protocol}://; give a path, or a URL such as "
                            "file://, http(s)://, s3://, gs://")  # fmt: skip
    try:
        fsspec.get_filesystem_class(protocol)
        if protocol in _NEEDS:
            __import__(_NEEDS[protocol])
    except ImportError:
        package = _package(protocol)
        raise LocationError(f"{text!r} needs the package {package}; pip install {package}") from None
    return text


class Location:
    """A file or folder named by a path or a URL, with the file system that holds it.

    Parameters
    ----------
    text : str
        A plain path (``~`` expanded) or an fsspec URL; ``str(location)`` gives it back.
    """

    def __init__(self, text: str | os.PathLike, fs: Any = None, path: str | None = None) -> None:
        self.text = str(text) if is_url(str(text)) else str(Path(text).expanduser())
        if fs is None:
            fs, path = fsspec.core.url_to_fs(check_location(self.text))
        self.fs, self.path = fs, path

    @classmethod
    def of(cls, text: str | os.PathLike | Location) -> Location:
        return text if isinstance(text, Location) else cls(text)

    @property
    def protocol(self) -> str:
        return self.text.split("://", 1)[0].lower() if is_url(self.text) else "file"

    @property
    def local(self) -> Path | None:
        """The plain path of a location on this machine's file system, else None."""
        return Path(self.path) if self.protocol == "file" else None

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        text, path = self.text.rstrip("/"), self.path.rstrip("/")
        return Location(text.rsplit("/", 1)[0], self.fs, path.rsplit("/", 1)[0])

    def join(self, *names: str) -> Location:
        text, path = self.text.rstrip("/"), self.path.rstrip("/")
        for name in names:
            text, path = f"{text}/{name}", f"{path}/{name}"
        return Location(text, self.fs, path)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Location({self.text!r})"

    def __truediv__(self, name: str) -> Location:
        return self.join(name)

    # -- reading ------------------------------------------------------------------------------
    def exists(self) -> bool:
        return bool(self.fs.exists(self.path))

    def is_dir(self) -> bool:
        return bool(self.fs.isdir(self.path))

    def is_file(self) -> bool:
        return bool(self.fs.isfile(self.path))

    def size(self) -> int:
        return int(self.fs.size(self.path))

    def open(self, mode: str = "rb", **kwargs: Any) -> IO:
        """The file opened through its file system (``compression="gzip"`` reads a packed one)."""
        return fsspec.open(self.path if self.protocol == "file" else self.text, mode, **kwargs).open()

    def read_bytes(self) -> bytes:
        return bytes(self.fs.cat_file(self.path))

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def names(self, pattern: str = "*") -> list[str]:
        """Names of the entries of this folder that match ``pattern`` (none when it is not there)."""
        return sorted(
            p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.glob(f"{self.path.rstrip('/')}/{pattern}")
        )

    # -- writing ------------------------------------------------------------------------------
    def make_dirs(self) -> None:
        self.fs.makedirs(self.path, exist_ok=True)

    def remove(self, recursive: bool = False) -> None:
        """Remove this file (or folder with ``recursive``); nothing when it is not there."""
        if self.exists():
            self.fs.rm(self.path, recursive=recursive)

    def write_bytes(self, data: bytes) -> None:
        """Write ``data`` so that a reader sees the old file or the new one, never part of one.

        On this machine and on file systems with a rename: a temp file beside it, then one rename.
        On object stores (no rename): one upload, which the store makes visible whole.
        """
        if self.local is not None:
            atomic_write_bytes(self.local, data)
        elif self.protocol in OBJECT_STORES:
            self.fs.pipe_file(self.path, data)
        else:
            temp = f"{self.path}.{uuid.uuid4().hex}.tmp"
            self.fs.pipe_file(temp, data)
            self.fs.mv(temp, self.path)

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode())

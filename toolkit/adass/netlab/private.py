"""The lab's private folders and the files in them: owner and mode checked at each use, no symlink followed.

The lab runs as root, so a folder another user could write to would let that user point root's
writes at any file, or plant a state file that names their choice of processes and namespaces. Each
operation opens the folder itself without following a symlink, checks that this user owns it and that
no one else may enter it, and then works on names relative to that open folder, so the folder checked
is the folder used. Files are opened with ``O_NOFOLLOW`` and written by atomic replacement.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .system import LabError

__all__ = [
    "STATE_DIR_ENV", "default_state_dir", "exists", "listing", "make_private", "open_log", "private_folder", "read_file",
    "remove_file", "remove_folder", "write_file",
]  # fmt: skip

STATE_DIR_ENV = "ADASS_NETLAB_DIR"
OPTION = "--state-dir"
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


def default_state_dir() -> Path:
    """Where this user's labs keep their state unless ``--state-dir`` says otherwise.

    ``$ADASS_NETLAB_DIR`` if set; else ``$XDG_RUNTIME_DIR/adass-netlab`` when that folder is this user's
    own; else ``<tempdir>/adass-netlab-<uid>``. Nothing is created here: each use checks (and
    ``up`` creates) the folder.
    """
    given = os.environ.get(STATE_DIR_ENV)
    if given:
        return Path(given)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        try:
            info = os.lstat(runtime)
        except OSError:
            info = None
        # under sudo the variable may still name the invoking user's folder: only our own counts
        if info and stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
            return Path(runtime) / "adass-netlab"
    return Path(tempfile.gettempdir()) / f"adass-netlab-{os.geteuid()}"


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _refuse(folder: Path, problem: str, remedy: str) -> LabError:
    return LabError(f"{OPTION}: {folder} {problem}; {remedy}")


def _check(folder: Path, info: os.stat_result) -> None:
    """Refuse a folder that is not a directory, not ours, or open to group or others."""
    other = f"or pass a folder of your own with {OPTION}"
    if stat.S_ISLNK(info.st_mode):
        raise _refuse(folder, "is a symbolic link, which the lab does not follow", f"remove it {other}")
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(folder, "is not a folder", f"remove it {other}")
    if info.st_uid != os.geteuid():
        owner = f"is owned by {_user(info.st_uid)}, not by {_user(os.geteuid())} who runs the lab"
        raise _refuse(folder, owner, f"remove it {other}")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise _refuse(
            folder, f"has mode {mode:04o}, which lets other users in", f"run chmod 700 {folder} {other}"
        )


@contextlib.contextmanager
def private_folder(folder: Path, create: bool = False) -> Iterator[int]:
    """Open ``folder`` after checking it; yield its file descriptor for ``dir_fd`` operations.

    Parameters
    ----------
    folder : Path
        The folder; never followed if it is a symbolic link.
    create : bool
        Create it (mode 0700; missing parents with the default mode) when it does not exist.

    Raises
    ------
    LabError
        In one line, naming the folder, what is wrong with it and what to do: it is missing (and
        ``create`` is false), a symbolic link, not a folder, owned by another user, or open to group
        or others.
    """
    folder = Path(folder)
    if create:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)  # a folder that was there already is checked below like any other
    try:
        _check(folder, os.lstat(folder))
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise LabError(f"{OPTION}: {folder} does not exist (start a lab with: adass netlab up)") from None
    except OSError as err:
        raise LabError(f"{OPTION}: {folder} cannot be opened: {err.strerror}") from None
    try:
        _check(folder, os.fstat(fd))  # the folder opened, whatever happened to the name since the lstat
        yield fd
    finally:
        os.close(fd)


def make_private(folder: Path) -> None:
    """Create ``folder`` (mode 0700) unless it exists, and check it as :func:`private_folder` does."""
    with private_folder(folder, create=True):
        pass


def _regular(path: Path, fd: int) -> None:
    """Refuse a file that is not a plain file of ours with a single link (a hard link to another file)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_nlink != 1:
        raise LabError(f"{path} is not a plain file of yours; remove it and try again")


def _open(path: Path, folder_fd: int, flags: int, mode: int = 0o600) -> int:
    try:
        return os.open(path.name, flags | _FILE_FLAGS, mode, dir_fd=folder_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise LabError(f"{path} is a symbolic link, which the lab does not follow; remove it") from None
        raise LabError(f"{path}: {err.strerror}") from None


def write_file(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: a fresh ``.tmp`` file beside it, synced, then renamed.

    The temporary file is created with ``O_EXCL`` and mode 0600 after removing any stale one, so a
    symbolic link in its place is never written through; the rename replaces a link at ``path`` itself,
    never its target.
    """
    path = Path(path)
    tmp = path.with_suffix(".tmp")
    with private_folder(path.parent) as folder:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp.name, dir_fd=folder)
        fd = _open(tmp, folder, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp.name, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        os.fsync(folder)  # the rename itself survives a crash


def read_file(path: Path) -> bytes:
    """The bytes of a plain file of ours in a private folder."""
    path = Path(path)
    with private_folder(path.parent) as folder:
        fd = _open(path, folder, os.O_RDONLY)
        try:
            _regular(path, fd)
            with os.fdopen(fd, "rb", closefd=False) as f:
                return f.read()
        finally:
            os.close(fd)


def open_log(path: Path) -> int:
    """A log file for writing, emptied, in a private folder created if needed; the caller closes it."""
    path = Path(path)
    with private_folder(path.parent, create=True) as folder:
        fd = _open(path, folder, os.O_WRONLY | os.O_CREAT)
        try:
            _regular(path, fd)
            os.ftruncate(fd, 0)  # only after the checks: never empty a file that is not the log's
        except BaseException:
            os.close(fd)
            raise
        return fd


def exists(path: Path) -> bool:
    """Whether ``path`` names anything (a link included) in its private folder; False without the folder."""
    path = Path(path)
    if not os.path.lexists(path.parent):
        return False
    with private_folder(path.parent) as folder:
        try:
            os.stat(path.name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return False
    return True


def listing(folder: Path, suffix: str) -> list[str]:
    """Names in a private folder ending with ``suffix``, sorted; empty when the folder does not exist."""
    if not os.path.lexists(folder):
        return []
    with private_folder(folder) as fd:
        return sorted(name for name in os.listdir(fd) if name.endswith(suffix))


def remove_file(path: Path) -> None:
    """Delete ``path`` (a link itself, never its target) from its private folder, if there."""
    path = Path(path)
    if not os.path.lexists(path.parent):
        return
    with private_folder(path.parent) as folder, contextlib.suppress(FileNotFoundError):
        os.unlink(path.name, dir_fd=folder)


def remove_folder(path: Path) -> None:
    """Delete a private folder of plain files (the logs) and what is in it, if there."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    with private_folder(path) as folder:
        for name in os.listdir(folder):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=folder)  # unlink never follows a link
    with private_folder(path.parent) as parent:
        os.rmdir(path.name, dir_fd=parent)

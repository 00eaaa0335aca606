"""A user's file, read and rewritten safely: only regular text files are read (never a blocking read of a
FIFO), and a rewrite is all or nothing, lands on the file a link names, and keeps its mode, owner and
hard links."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import stat
import tempfile
from pathlib import Path

TEMP_SUFFIX = ".apply-edit.tmp"
# `.<file name>.<host>-<pid>.<random>.apply-edit.tmp`: who owns a temp file, so a later apply can tell a
# killed one's leftover (owner gone) from a live one's.
_TEMP = re.compile(r"^\..+\.(?P<host>[^./]+)-(?P<pid>\d+)\.[^./]+" + re.escape(TEMP_SUFFIX) + "$")


class FileChangedError(RuntimeError):
    """The file changed on disk while it was being rewritten."""


class RestoreFailed(RuntimeError):
    """A write through a hard-linked file failed and so did putting its original back: the message says
    where the copy of the original is."""


class NotTextFile(ValueError):
    """What a path names is not a regular UTF-8 text file (missing, a directory, a FIFO, binary...)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def read_user_text(path: Path, what: str = "file") -> str:
    """The text of the regular UTF-8 file `path` names (through symlinks), line endings kept exactly.

    Anything else is a `NotTextFile` saying what it is, at once: the file is opened non-blocking and
    checked before it is read, so a FIFO never blocks; a NUL byte means binary."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        if os.path.islink(path):
            raise NotTextFile(f"{what} {path} is a symlink to {os.readlink(path)}, which does not exist") from None
        raise NotTextFile(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise NotTextFile(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise NotTextFile(f"{what} {path} is a directory")
        raise NotTextFile(f"{what} {path} is {_kind(mode)}, not a regular file")
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    if b"\0" in data:
        raise NotTextFile(f"{what} {path} is binary (it holds NUL bytes), not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotTextFile(f"{what} {path} is not UTF-8 text") from None


def is_read_only(path: Path) -> bool:
    """No write bit set on the file `path` names: editors refuse to write it unless forced, and so do we,
    whoever runs the command (root may write anything, but the bits say the owner wants it left alone)."""
    return not os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def fingerprint(path: Path) -> tuple[int, str]:
    """(mtime in ns, sha256 of the bytes): enough to notice a concurrent change."""
    data = path.read_bytes()
    return path.stat().st_mtime_ns, hashlib.sha256(data).hexdigest()


def _umask() -> int:
    """The process umask. Read from /proc where it can be: setting it to read it back races other threads."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def host_name() -> str:
    """This host, as temp file names carry it (letters, digits and underscores)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_stale_temps(directory: Path) -> list[Path]:
    """Removes the temp files that apply-edit processes of this host left in `directory` when they were
    killed between writing and renaming (their owner is gone); returns them. Others' are left alone: a
    live process, or another host sharing the directory, may still be writing theirs."""
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    host = host_name()
    for entry in entries:
        match = _TEMP.match(entry.name)
        if not match or match["host"] != host or _alive(int(match["pid"])):
            continue
        try:
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:  # gone already, or not ours to remove
            pass
    return removed


def write_atomic(path: Path, text: str, expect: tuple[int, str] | None = None) -> None:
    """Replace the file `path` names with `text` (UTF-8, line endings as given), all or nothing.

    A symlink is followed: its target is rewritten and the link stays a link. A file is normally replaced
    by a temp file in its directory, written, fsynced, given the original's mode and (where this process
    may set them) owner and group, and renamed over it; a new file gets what open() would give it (0o666
    less the umask, not mkstemp's 0o600). A file with other hard links is rewritten through its inode
    instead, so that every name sees the edit (`_write_through`). On any failure the original is left as
    it was. With `expect`, refuse if the file's fingerprint no longer matches (someone else changed it
    meanwhile). Leftovers of killed writers in the directory are removed first (`remove_stale_temps`).
    """
    path = Path(os.path.realpath(path))
    remove_stale_temps(path.parent)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and st.st_nlink > 1:
        _check_unchanged(path, expect)
        _write_through(path, text.encode("utf-8"))
        return
    tmp = _durable_copy_beside(path, text.encode("utf-8"), TEMP_SUFFIX)
    try:
        if st is not None:
            _keep_owner(tmp, st)
        os.chmod(tmp, st.st_mode & 0o7777 if st is not None else 0o666 & ~_umask())
        _check_unchanged(path, expect)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _sync_directory(path.parent)


def _check_unchanged(path: Path, expect: tuple[int, str] | None) -> None:
    if expect is None:
        return
    try:
        now = fingerprint(path)
    except FileNotFoundError:
        raise FileChangedError(f"{path} was removed during the rewrite; nothing was written") from None
    if now != expect:
        raise FileChangedError(f"{path} changed on disk during the rewrite; nothing was written")


def _keep_owner(tmp: str, st: os.stat_result) -> None:
    """The temp file takes the original's owner and group, or its group alone (a member may set that), or
    neither: a user rewriting a file they may write but do not own ends up owning it, as with any editor."""
    for uid in (st.st_uid, -1):
        try:
            os.chown(tmp, uid, st.st_gid)
            return
        except OSError:
            continue


def _write_through(path: Path, data: bytes) -> None:
    """Rewrite a hard-linked file in place, through its inode, so that every name sees the edit.

    The original's bytes are first copied beside it (`.<name>.<host>-<pid>.apply-edit.orig`, fsynced), and
    that copy is removed only once the new bytes are durable: a crash mid-write leaves it there to restore
    from. A write that fails puts the original's bytes back."""
    original = path.read_bytes()
    backup = _durable_copy_beside(path, original, ".apply-edit.orig")
    _sync_directory(path.parent)
    try:
        _overwrite(path, data)
    except BaseException:
        try:
            _overwrite(path, original)
        except OSError as exc:
            raise RestoreFailed(f"{path} could not be rewritten nor restored ({exc.strerror or exc}); "
                                f"its original is in {backup}") from None
        os.unlink(backup)
        raise
    os.unlink(backup)


def _durable_copy_beside(path: Path, data: bytes, suffix: str) -> str:
    """A new file in `path`'s directory (`.<name>.<host>-<pid>.<random><suffix>`: whose it is, for
    `remove_stale_temps`) holding `data`, fsynced; its name. Nothing is left behind if writing it fails."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{host_name()}-{os.getpid()}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        os.unlink(name)
        raise
    return name


def _overwrite(path: Path, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate()
        f.flush()
        os.fsync(f.fileno())


def _sync_directory(directory: Path) -> None:
    """Make a rename or new entry durable. Best effort: the file is already replaced, so a failure here must
    not be reported as "nothing was written" (and some filesystems refuse to fsync a directory at all)."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass

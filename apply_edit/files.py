"""Writing a user's file safely: all or nothing, never half-written."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import tempfile
from pathlib import Path

TEMP_SUFFIX = ".apply-edit.tmp"
# `.<file name>.<host>-<pid>.<random>.apply-edit.tmp`: who owns a temp file, so a later apply can tell a
# killed one's leftover (owner gone) from a live one's.
_TEMP = re.compile(r"^\..+\.(?P<host>[^./]+)-(?P<pid>\d+)\.[^./]+" + re.escape(TEMP_SUFFIX) + "$")


class FileChangedError(RuntimeError):
    """The file changed on disk while it was being rewritten."""


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
    """Replace `path` with `text` (UTF-8, line endings as given) atomically.

    A temp file in the same directory is written, fsynced, given the original's mode (a new file gets
    what open() would give it: 0o666 less the umask, not mkstemp's 0o600), and renamed over the
    original; on any failure it is removed and the original is untouched. With `expect`, refuse if the
    file's fingerprint no longer matches (someone else changed it meanwhile). Leftovers of killed writers
    in the directory are removed first (`remove_stale_temps`).
    """
    path = Path(path)
    remove_stale_temps(path.parent)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{host_name()}-{os.getpid()}.",
                               suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if expect is not None:
            try:
                now = fingerprint(path)
            except FileNotFoundError:
                raise FileChangedError(f"{path} was removed during the rewrite; nothing was written") from None
            if now != expect:
                raise FileChangedError(f"{path} changed on disk during the rewrite; nothing was written")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    # Make the rename itself durable. Best effort: the file is already replaced, so a failure here must not
    # be reported as "nothing was written" (and some filesystems refuse to fsync a directory at all).
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass

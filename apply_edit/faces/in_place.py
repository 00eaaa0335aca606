"""`apply -i`: whether a result may replace the user's file, and the write. Kept out of the command line so
that the one place that overwrites a user's file says all its rules: a read-only file is not written, nor a
result that fails the checks (unless forced), a file changed on disk since it was read is left to whoever
changed it, and every refusal or failure is one line saying that the file is unchanged. What the file is
(a symlink's target, every name of a hard link, its mode and owner) is `files.write_atomic`'s job."""

from __future__ import annotations

from pathlib import Path

from ..judging.checks import problems
from ..files.user_files import FileChangedError, RestoreFailed, is_read_only, write_atomic


class NotWritten(Exception):
    """The file was left as it was; the message says why, in one line."""


def check_writable(path: Path, *, force: bool) -> None:
    """Refuse a read-only file before any work is done on it, unless `force` (as an editor's `:w!`)."""
    if not force and is_read_only(path):
        raise NotWritten(f"not writing {path}: it is read-only; the file is unchanged (--force writes it anyway)")


def commit_in_place(path: Path, original: str, update: str, text: str, language: str, expect: tuple[int, str],
                    *, judged: bool, force: bool) -> bool:
    """Replace `path`, read as `original` with fingerprint `expect` (`files.fingerprint`), by `text`; False
    when `text` is the original (nothing to write). A judged answer (the pipeline's, here or on a server)
    has passed the checks already; any other must pass them here, unless `force`."""
    if text == original:
        return False
    check_writable(path, force=force)
    refusal = None if force or judged else "; ".join(problems(original, update, text, language))
    if refusal:
        raise NotWritten(f"not writing {path}: {refusal}; the file is unchanged (--force writes it anyway)")
    try:
        write_atomic(path, text, expect=expect)
    except (FileChangedError, RestoreFailed) as exc:
        raise NotWritten(str(exc)) from exc
    except OSError as exc:
        raise NotWritten(f"could not write {path}: {exc.strerror or exc}; the file is unchanged") from exc
    return True

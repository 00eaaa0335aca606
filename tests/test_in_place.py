"""`apply -i`'s commit without a model: an unjudged result that fails the checks is not written unless forced,
a file changed since it was read is left alone, and every failure is one line saying the file is unchanged."""

import errno
import os

import pytest

from apply_edit.files.user_files import fingerprint
from apply_edit.faces.in_place import NotWritten, commit_in_place

ORIGINAL = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
UPDATE = "def f():\n    return 10\n# ... existing code ...\n"
EDITED = "def f():\n    return 10\n\n\ndef g():\n    return 2\n"
TRUNCATED = "def f():\n    return 10\n"  # drops g, which the snippet's marker keeps


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "app.py"
    path.write_text(ORIGINAL)
    return path


def commit(target, text, judged=False, force=False):
    return commit_in_place(target, ORIGINAL, UPDATE, text, "python", fingerprint(target), judged=judged, force=force)


def test_a_result_that_passes_the_checks_is_written(target):
    assert commit(target, EDITED) is True
    assert target.read_text() == EDITED


def test_an_unjudged_result_that_fails_the_checks_is_not_written_unless_forced(target):
    with pytest.raises(NotWritten) as refused:
        commit(target, TRUNCATED)
    # The checks' own reasons: the marker keeps g, and the result drops it.
    assert str(refused.value).startswith(f"not writing {target}: it deletes 3 line(s) the snippet keeps under a marker")
    assert "; it drops " in str(refused.value)
    assert str(refused.value).endswith("; the file is unchanged (--force writes it anyway)")
    assert target.read_text() == ORIGINAL
    assert commit(target, TRUNCATED, force=True) is True
    assert target.read_text() == TRUNCATED


def test_a_judged_result_is_not_checked_again(target):
    assert commit(target, TRUNCATED, judged=True) is True
    assert target.read_text() == TRUNCATED


def test_the_original_unchanged_is_not_written(target):
    before = fingerprint(target)
    assert commit(target, ORIGINAL) is False
    assert fingerprint(target) == before


def test_a_file_changed_since_it_was_read_is_left_to_the_other_writer(target):
    read = fingerprint(target)
    target.write_text("# theirs\n" + ORIGINAL)
    with pytest.raises(NotWritten) as refused:
        commit_in_place(target, ORIGINAL, UPDATE, EDITED, "python", read, judged=False, force=False)
    assert str(refused.value) == f"{target} changed on disk during the rewrite; nothing was written"
    assert target.read_text() == "# theirs\n" + ORIGINAL


def test_a_failed_write_says_why_and_that_the_file_is_unchanged(target, monkeypatch):
    def read_only(src, dst):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "replace", read_only)
    with pytest.raises(NotWritten) as refused:
        commit(target, EDITED)
    assert str(refused.value) == f"could not write {target}: Read-only file system; the file is unchanged"
    assert target.read_text() == ORIGINAL

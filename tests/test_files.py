"""files/user_files.py: a file is replaced atomically or not at all, keeps its mode, and is left to another writer
that changed it meanwhile."""

import os
import signal
import stat
import subprocess
import sys

import pytest

from apply_edit.files.user_files import FileChangedError, fingerprint, host_name, write_atomic


def test_write_atomic_keeps_mode_and_leaves_no_temp(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("old\n")
    os.chmod(f, 0o750)
    write_atomic(f, "new\r\nline\n")
    assert f.read_bytes() == b"new\r\nline\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_write_atomic_gives_a_new_file_the_mode_open_would(tmp_path, umask):
    old = os.umask(umask)
    try:
        (tmp_path / "plain.json").write_text("{}\n")
        write_atomic(tmp_path / "new.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o666 & ~umask
    assert (tmp_path / "new.json").stat().st_mode == (tmp_path / "plain.json").stat().st_mode


def test_write_atomic_refuses_when_the_file_changed_meanwhile(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("old\n")
    before = fingerprint(f)
    f.write_text("someone else\n")
    with pytest.raises(FileChangedError):
        write_atomic(f, "new\n", expect=before)
    assert f.read_text() == "someone else\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_a_writer_killed_before_its_rename_leaves_a_temp_file_the_next_write_removes(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("old\n")
    # A writer SIGKILLed between writing its temp file and the rename (os.replace is where it dies).
    writer = subprocess.Popen([sys.executable, "-c", (
        "import os, signal, sys\n"
        "from apply_edit.files import user_files as files\n"
        "files.os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        "files.write_atomic(files.Path(sys.argv[1]), 'new\\n')\n"), str(f)])
    assert writer.wait(timeout=60) == -signal.SIGKILL
    left = [p.name for p in tmp_path.iterdir() if p.name.endswith(".apply-edit.tmp")]
    assert len(left) == 1 and f"-{writer.pid}." in left[0] and f.read_text() == "old\n"  # it says who owns it
    live = tmp_path / f".b.py.{host_name()}-{os.getpid()}.x1y2z3.apply-edit.tmp"  # a live writer's: kept
    live.write_text("half")
    write_atomic(tmp_path / "b.py", "b\n")  # the next write in that directory
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.py", "b.py", live.name])
    assert f.read_text() == "old\n"


def test_write_atomic_failure_leaves_original(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_text("old\n")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_atomic(f, "new\n")
    assert f.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]

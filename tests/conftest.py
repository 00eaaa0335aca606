"""What several test modules share: fixtures, small helpers, a server in a child process, toy models.
Test modules import these by name (`from conftest import ...`) and never import each other."""

import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

FIXTURES = Path(__file__).parent.parent / "fixtures"
EXE = str(Path(sys.executable).parent / "apply-edit")  # the console script, as a user runs it
TEST_MODEL = "smollm2-135m"  # the small real model the service and fault tests run on


def wait_until(cond, seconds: float = 30.0, step: float = 0.01) -> bool:
    """Poll cond until it holds (True) or `seconds` pass (False)."""
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def drain(call):
    """Read a gRPC call to its end; its final status code."""
    import grpc

    try:
        for _ in call:
            pass
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (servers started by the tests bind it)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def long_apply():
    """An apply the small model streams for many seconds (one token per verify pass): time to cut it."""
    from apply_edit.request.runs import ApplyOptions

    return ApplyOptions(method="plain", max_new_tokens=1000)


def apply_call(channel, request, options, timeout=None):
    """The bare gRPC call (no `RemoteRun` around it), for a test to read, cancel or let time out."""
    from apply_edit.faces.service.client import request_message
    from apply_edit.v1 import apply_edit_pb2_grpc as pb_grpc

    return pb_grpc.ApplyEditStub(channel).Apply(request_message(request, options), timeout=timeout)


def server_env() -> dict:
    # One torch thread unless told otherwise: with two threads on this 2-core machine, anything else running
    # (the test's own clients, a parallel job) makes every op's thread barrier wait for a descheduled thread;
    # measured here: 1.1 s per plain token with 2 threads under load, 0.1 s with 1.
    return dict(os.environ, APPLY_EDIT_THREADS=os.environ.get("APPLY_EDIT_THREADS", "1"))


class ServerProcess:
    """`apply-edit serve` as a child process (so that it can be killed and its RSS is its own)."""

    def __init__(self, log_dir: Path, *extra: str, env: dict | None = None):
        from apply_edit.faces.service.client import connect

        self.port, self.metrics_port = free_port(), free_port()
        self.log_path = log_dir / f"server-{self.port}.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen([EXE, "serve", "--model", TEST_MODEL, "--dtype", "fp32", "--port", str(self.port),
                                      "--metrics-port", str(self.metrics_port), *extra],
                                     stdout=self._log, stderr=subprocess.STDOUT, env={**server_env(), **(env or {})})
        self.address = f"127.0.0.1:{self.port}"
        try:
            self.channel = connect(self.address, wait_s=300)
        except Exception:
            self.stop()
            raise AssertionError(f"server did not come up: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def rss_mib(self) -> float:
        return rss_mib(self.proc.pid)

    def metrics(self) -> str:
        return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()

    def requests(self, status: str) -> float:
        """apply_edit_requests_total for one final status, summed over the other labels."""
        return sum(float(v) for labels, v in re.findall(r"^apply_edit_requests_total\{([^}]*)\} (\S+)$",
                                                        self.metrics(), re.M) if f'status="{status}"' in labels)

    def health(self) -> int:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        stub = health_pb2_grpc.HealthStub(self.channel)
        return stub.Check(health_pb2.HealthCheckRequest(service="apply_edit.v1.ApplyEdit"), timeout=10).status

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._log.close()


def http_server(target, load=True, **kw):
    """An in-process ApplyServer on smollm2-135m (`target`) with the HTTP face, both on free ports."""
    from apply_edit.faces.service.server import ApplyServer

    server = ApplyServer("smollm2-135m", port=0, http_port=0, log=lambda *_: None, **kw)
    server.start()
    if load:
        server.load_model(target)
    return server


def long_chat(max_tokens=400) -> dict:
    """A streamed chat the small model answers one token per verify pass for many passes: time to cut it."""
    return {"model": "auto", "messages": [{"role": "user", "content": "Count from 1 to 1000, one per line."}],
            "max_tokens": max_tokens, "stream": True}


EOS = 256  # ByteTokenizer's end of turn


class ByteTokenizer:
    """One token per UTF-8 byte, and an end-of-turn token; no chat template (plain prompt text)."""

    eos_token_id = EOS
    chat_template = None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode())

    def __call__(self, text: str, add_special_tokens: bool = False, return_offsets_mapping: bool = False) -> dict:
        """transformers' call: ids, and each token's span of characters."""
        spans = [(i, i + 1) for i, ch in enumerate(text) for _ in ch.encode()]
        return {"input_ids": self.encode(text), "offset_mapping": spans}

    def decode(self, ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool = False) -> str:
        return bytes(i for i in ids if i < EOS).decode("utf-8", "replace")


def random_model(seed: int, vocab: int, context: int = 3, sharp: float = 1.0):
    """A FunctionModel: a deterministic pseudo-random next-token distribution of the last `context` tokens."""
    from apply_edit.models import FunctionModel

    def fn(seq):
        rng = random.Random(hash((seed, tuple(seq[-context:]))))
        weights = [rng.random() ** sharp for _ in range(vocab)]
        total = sum(weights)
        return [w / total for w in weights]

    return FunctionModel(fn)


def oracle(target_tokens, prompt_len):
    """A proposer that knows the plain output (the ceiling)."""

    def propose(seq, k):
        done = len(seq) - prompt_len
        return target_tokens[done:done + k]

    return propose


# Provisioning without the download and the conversion (tests/test_provisioning.py, in-process and in the
# child processes it starts with this folder as their working directory).

def fake_gguf(source, work, log):
    gguf = work / source.gguf_name
    gguf.write_bytes(b"GGUF")
    return gguf


def fake_convert(gguf, out, log):
    """A tiny entry that loads as safetensors; its config names the process that built it."""
    import torch
    from safetensors.torch import save_file

    out.mkdir()
    save_file({"w": torch.zeros(4)}, out / "model.safetensors")
    (out / "config.json").write_text(json.dumps({"built_by": os.getpid()}))


@pytest.fixture(scope="module")
def fuzz_examples(request) -> int:
    """The fuzz tests' size (tests/test_fuzz.py, tests/test_http_faults.py): each runs its share of it."""
    n = request.config.getoption("--fuzz-examples")
    if n is None:
        n = int(os.environ.get("APPLY_EDIT_FUZZ_EXAMPLES", 200))
    assert n > 0, "--fuzz-examples must be positive"
    return n


# CI: the same examples every run, so a failure is reproducible and never a fluke of the draw.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_addoption(parser):
    # tests/test_fuzz.py, tests/test_http_faults.py: how many random examples the fuzz tests run (their docstrings
    # have the numbers).
    parser.addoption("--fuzz-examples", type=int, default=None,
                     help="fuzz size for tests/test_fuzz.py and tests/test_http_faults.py (default 200, env "
                          "APPLY_EDIT_FUZZ_EXAMPLES; the full run is 10000)")
    # tests/test_faults.py and tests/test_soak.py: CI sizes by default; the long runs are these options.
    parser.addoption("--faults", type=int, default=int(os.environ.get("APPLY_EDIT_FAULTS", 30)),
                     help="faults injected in a row against one server, gRPC and HTTP (default 30: every kind twice "
                          "or more; env APPLY_EDIT_FAULTS)")
    parser.addoption("--soak-seconds", type=float, default=float(os.environ.get("APPLY_EDIT_SOAK_SECONDS", 30)),
                     help="how long the soak test keeps 8 streams busy (default 30, env APPLY_EDIT_SOAK_SECONDS)")
    parser.addoption("--soak-max-new-tokens", type=int,
                     default=int(os.environ.get("APPLY_EDIT_SOAK_MAX_NEW_TOKENS", 48)),
                     help="tokens each soak request may write (default 48; 0: the whole file)")


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: keeps a server busy for --soak-seconds (tests/test_soak.py)")


def run_hypothesis(n: int, strategy, check) -> None:
    """Run `check(example)` on n examples of `strategy` (the count is known only at run time)."""
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def fuzz(example):
        check(example)

    fuzz()

import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).parent))  # test modules share helpers (e.g. random_model)

FIXTURES = Path(__file__).parent.parent / "fixtures"


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


def http_server(target, load=True, **kw):
    """An in-process ApplyServer on smollm2-135m (`target`) with the HTTP face, both on free ports."""
    from apply_edit.service.server import ApplyServer

    server = ApplyServer("smollm2-135m", port=0, http_port=0, log=lambda *_: None, **kw)
    server.start()
    if load:
        server.load_model(target)
    return server


def long_chat(max_tokens=400) -> dict:
    """A streamed chat the small model answers one token per verify pass for many passes: time to cut it."""
    return {"model": "auto", "messages": [{"role": "user", "content": "Count from 1 to 1000, one per line."}],
            "max_tokens": max_tokens, "stream": True}


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
    parser.addoption("--faults", type=int, default=int(os.environ.get("APPLY_EDIT_FAULTS", 50)),
                     help="faults injected in a row against one server, gRPC and HTTP (default 50, env "
                          "APPLY_EDIT_FAULTS)")
    parser.addoption("--soak-seconds", type=float, default=float(os.environ.get("APPLY_EDIT_SOAK_SECONDS", 45)),
                     help="how long the soak test keeps 8 streams busy (default 45, env APPLY_EDIT_SOAK_SECONDS)")
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

import os
import sys
import time
from pathlib import Path

from hypothesis import settings

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

# CI: the same examples every run, so a failure is reproducible and never a fluke of the draw.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_addoption(parser):
    # tests/test_fuzz.py: how many random examples each fuzz test runs (its docstring has the numbers).
    parser.addoption("--fuzz-examples", type=int, default=None,
                     help="examples per fuzz test in tests/test_fuzz.py (default 200; the full run is 10000)")
    # tests/test_faults.py and tests/test_soak.py: CI sizes by default; the long runs are these options.
    parser.addoption("--faults", type=int, default=int(os.environ.get("APPLY_EDIT_FAULTS", 50)),
                     help="faults injected in a row against one server (default 50, env APPLY_EDIT_FAULTS)")
    parser.addoption("--soak-seconds", type=float, default=float(os.environ.get("APPLY_EDIT_SOAK_SECONDS", 45)),
                     help="how long the soak test keeps 8 streams busy (default 45, env APPLY_EDIT_SOAK_SECONDS)")
    parser.addoption("--soak-max-new-tokens", type=int,
                     default=int(os.environ.get("APPLY_EDIT_SOAK_MAX_NEW_TOKENS", 48)),
                     help="tokens each soak request may write (default 48; 0: the whole file)")


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: keeps a server busy for --soak-seconds (tests/test_soak.py)")

"""Faults on the real small model (smollm2-135m, fp32): a server killed mid-rewrite, clients that cancel, time
out or vanish, disks that fail, files changed underfoot, bad requests, a model that throws. Whatever happens,
a user's file is either exactly as it was or exactly the complete result, no temp file is left behind, the
CLI says why in one line, and the server stops the abandoned work, gives its memory back and goes on serving.
"""

from __future__ import annotations

import errno
import os
import pty
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import pytest
import torch
from grpc_health.v1 import health_pb2, health_pb2_grpc

from apply_edit.faces import cli
from apply_edit.request.runs import ApplyOptions
from apply_edit.faces.cases import EditCase, load_case
from apply_edit.models.transformers_target import TransformersTarget
from apply_edit.faces.service.client import RemoteRun, request_message
from apply_edit.faces.service.server import ApplyServer
from apply_edit.v1 import apply_edit_pb2 as pb
from apply_edit.v1 import apply_edit_pb2_grpc as pb_grpc
from conftest import EXE, FIXTURES, TEST_MODEL, ServerProcess, apply_call, drain, long_apply, server_env, wait_until

pytestmark = pytest.mark.model

# The smallest fixture (763 prompt tokens on this model): every request pays its prefill, so it sets the pace.
CASE = load_case(FIXTURES / "ts_small_file_whole_rewrite")
# A tiny edit (244 prompt tokens against the fixture's 763) for the fault run, where prefill time adds up over
# the faults; the model rambles on after it (over 1000 tokens), so its streams are long enough to cut.
TINY = EditCase("greet", Path("greet.py"), 'def greet(name):\n    return "Hello, " + name\n\n\nprint(greet("world"))\n',
                'def greet(name):\n    return f"Hello, {name}!"\n\n# ... existing code ...\n', expected="")
LONG = long_apply()
# What the in-place applies write: short, so each costs about one prefill; with --force the guard lets the
# cut-short file through, which is all these tests need (a known complete result to compare with).
WRITE_TOKENS = 12


def temp_files(directory: Path) -> list[str]:
    """Leftovers of files.write_atomic (mkstemp prefix f".{name}.", suffix ".apply-edit.tmp")."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".apply-edit.tmp"))


def copy_case(directory: Path, case: EditCase = CASE) -> tuple[Path, Path]:
    """The case's original as `directory/app.<ext>` (alone in that folder) and its snippet next to the folder."""
    target = directory / f"app{case.path.suffix}"
    target.write_bytes(case.original.encode())
    snippets = directory.parent / f"{directory.name}-snippets"
    snippets.mkdir(exist_ok=True)
    update = snippets / f"update{case.path.suffix}"
    update.write_bytes(case.update.encode())
    return target, update


# -- 1. the server dies while the CLI rewrites a file through it ----------------------------------------------


class TtyStderr:
    """Run a command with stderr on a pseudo-terminal (so the CLI draws its progress bar), collecting it."""

    def __init__(self, argv, **kw):
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, stderr=slave, stdin=subprocess.DEVNULL, **kw)
        os.close(slave)
        self.master, self.data = master, bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            self.data += chunk

    def text(self) -> str:
        return bytes(self.data).decode(errors="replace")

    def finish(self, timeout: float) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        os.close(self.master)
        return rc


def progress_tokens(text: str) -> int:
    """Tokens shown by the latest progress bar redraw (`[###   ]  12% 40 tokens  9.1 tok/s`), 0 if none yet."""
    counts = re.findall(r"\] +\d+% (\d+) tokens", text)
    return int(counts[-1]) if counts else 0


def test_server_killed_mid_rewrite_leaves_the_file_whole(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    target, update = copy_case(work)
    before = target.read_bytes()
    server = ServerProcess(tmp_path)
    try:
        out = (tmp_path / "stdout").open("wb")
        cli_run = TtyStderr([EXE, "apply", str(target), "--update", str(update), "-i", "--force",
                             "--server", server.address, "--method", LONG.method,
                             "--max-new-tokens", str(LONG.max_new_tokens)], stdout=out)
        try:
            assert wait_until(lambda: progress_tokens(cli_run.text()) > 0 or cli_run.proc.poll() is not None,
                              seconds=240), cli_run.text()
            assert cli_run.proc.poll() is None, f"the apply ended before the kill: {cli_run.text()}"
            streamed = progress_tokens(cli_run.text())
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(timeout=30)
            rc = cli_run.finish(timeout=60)
        finally:
            if cli_run.proc.poll() is None:
                cli_run.proc.kill()
            out.close()
    finally:
        server.stop()
    assert streamed > 0 and rc == 1, cli_run.text()
    assert target.read_bytes() == before
    assert sorted(p.name for p in work.iterdir()) == [target.name]  # no temp file either
    reason = the_reason(cli_run.text())
    assert reason.startswith("apply-edit: error: server ") and "unchanged" in reason, reason
    assert "UNAVAILABLE" in reason
    print(f"\nafter {streamed} tokens streamed, the server killed: {reason}")
    assert (tmp_path / "stdout").read_bytes() == b""  # no diff: nothing was written


def the_reason(text: str) -> str:
    """The one line besides the progress bar (redrawn in place with \\r) on a failed in-place apply's terminal."""
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    reasons = [line for line in lines if not line.lstrip("\r").startswith("[")]
    assert len(reasons) == 1, text
    return reasons[0]


def test_a_stopped_server_is_noticed_and_the_file_left_whole(tmp_path):
    """A server that is alive but does not answer (SIGSTOP: its kernel still ACKs TCP) must not hang the CLI
    mid-stream: a keepalive ping goes unanswered (here every 2 s; by default 20 s, then 10 s for the answer)."""
    work = tmp_path / "work"
    work.mkdir()
    target, update = copy_case(work)
    before = target.read_bytes()
    server = ServerProcess(tmp_path)
    try:
        cli_run = TtyStderr([EXE, "apply", str(target), "--update", str(update), "-i", "--force",
                             "--server", server.address, "--method", LONG.method,
                             "--max-new-tokens", str(LONG.max_new_tokens)],
                            stdout=subprocess.DEVNULL, env={**os.environ, "APPLY_EDIT_KEEPALIVE_S": "2"})
        try:
            assert wait_until(lambda: progress_tokens(cli_run.text()) > 0 or cli_run.proc.poll() is not None,
                              seconds=240), cli_run.text()
            assert cli_run.proc.poll() is None, f"the apply ended before the stop: {cli_run.text()}"
            os.kill(server.proc.pid, signal.SIGSTOP)
            stopped = time.perf_counter()
            rc = cli_run.finish(timeout=30)  # before keepalive: it waited forever
            waited = time.perf_counter() - stopped
        finally:
            if cli_run.proc.poll() is None:
                cli_run.proc.kill()
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()
    reason = the_reason(cli_run.text())
    print(f"\nthe server stopped; the CLI ended {waited:.1f}s later: {reason}")
    assert rc == 1 and reason.startswith("apply-edit: error: server ") and "unchanged" in reason, reason
    assert "UNAVAILABLE" in reason and "no answer to keepalive pings" in reason, reason
    assert target.read_bytes() == before
    assert sorted(p.name for p in work.iterdir()) == [target.name]  # no temp file either


# -- 2. abandoned requests stop within about a verify pass, and the memory comes back --------------------------

# A client that streams one request (read from stdin) and prints each response's token count; the test
# kills it with SIGKILL, so the server sees the connection drop without a cancel.
CLIENT = """
import sys, grpc
from apply_edit.v1 import apply_edit_pb2 as pb, apply_edit_pb2_grpc as pb_grpc
request = pb.ApplyRequest.FromString(sys.stdin.buffer.read())
for response in pb_grpc.ApplyEditStub(grpc.insecure_channel(sys.argv[1])).Apply(request):
    print(response.tokens, flush=True)
"""


def start_vanishing_client(address: str, request, options) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, address], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdin.write(request_message(request, options).SerializeToString())
    proc.stdin.close()
    return proc


def stream_then(call, stop_after: int, pieces: list | None = None) -> tuple[int, list[float]]:
    """Read responses until `stop_after` text pieces arrived (into `pieces`); also the gaps between them after
    the first, each one verify pass."""
    pieces = [] if pieces is None else pieces
    times = []
    for response in call:
        if response.text:
            times.append(time.perf_counter())
            pieces.append(response.text)
            if len(pieces) >= stop_after:
                break
    return len(pieces), [b - a for a, b in zip(times, times[1:])]


def test_abandoned_requests_stop_within_a_verify_pass_and_free_memory(tmp_path):
    server = ServerProcess(tmp_path)
    try:
        # The model's own path: its TTFT sets the deadline below (a sound merge would answer at once).
        warm = RemoteRun(server.channel, CASE.request(), ApplyOptions(max_new_tokens=32, pipeline="model"))
        warm.result()
        call = apply_call(server.channel, CASE.request(), LONG)  # the path under test, once before measuring
        stream_then(call, 3)
        call.cancel()
        assert wait_until(lambda: server.requests("CANCELLED") == 1)
        rss = {"before": server.rss_mib(), "during": 0.0}
        stop_s: dict[str, list[float]] = {}
        pass_s: list[float] = []
        for _ in range(2):
            for kind in ("cancel", "deadline", "disconnect"):
                cancelled = server.requests("CANCELLED")
                if kind == "cancel":
                    call = apply_call(server.channel, CASE.request(), LONG)
                    _, gaps = stream_then(call, 4)
                    pass_s += gaps
                    rss["during"] = max(rss["during"], server.rss_mib())
                    t0 = time.perf_counter()
                    call.cancel()
                elif kind == "deadline":  # it expires mid-stream: well after the first text is due
                    timeout = 2 * warm.stats.ttft_s + 1.0
                    t0, pieces = time.perf_counter() + timeout, []
                    with pytest.raises(grpc.RpcError) as err:
                        stream_then(apply_call(server.channel, CASE.request(), LONG, timeout=timeout), 10**6,
                                    pieces)
                    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and pieces
                else:
                    client = start_vanishing_client(server.address, CASE.request(), LONG)
                    for _ in range(4):
                        assert client.stdout.readline(), "the client's stream ended early"
                    rss["during"] = max(rss["during"], server.rss_mib())
                    t0 = time.perf_counter()
                    client.kill()
                    client.wait()
                assert wait_until(lambda: server.requests("CANCELLED") > cancelled, seconds=60, step=0.005)
                stop_s.setdefault(kind, []).append(time.perf_counter() - t0)
        rss["after the faults"] = server.rss_mib()
        normal = RemoteRun(server.channel, CASE.request(), ApplyOptions(max_new_tokens=32, pipeline="model"))
        assert normal.result() == warm.text  # served, and just as before
        rss["after a normal request"] = server.rss_mib()
    finally:
        server.stop()
    one_pass = sorted(pass_s)[len(pass_s) // 2]
    print(f"\nverify pass (plain) median {one_pass * 1000:.0f} ms; time to stop: "
          + "; ".join(f"{k} {', '.join(f'{s * 1000:.0f}' for s in v)} ms" for k, v in stop_s.items())
          + "\nserver RSS MiB: " + ", ".join(f"{k} {v:.1f}" for k, v in rss.items()))
    # Stopped once the current verify pass is done: measured 14-20 ms (cancel, disconnect) and 99-122 ms after the
    # deadline, against a median plain verify pass of 79 ms; runs under heavier load: up to 130 ms (pass 117 ms).
    for kind, times in stop_s.items():
        assert max(times) < 2 * one_pass + 0.3, (kind, times)
    # Measured here: before 913.8 MiB, during 991.0, after the six abandoned requests 918.4, after a normal one
    # 918.5 (+4.7). One of these requests' KV caches is ~37 MB (30 layers x 2 x 3 heads x 64 x 4 B = 46 kB a
    # token, ~800 tokens): keeping even one abandoned request's cache would fail this.
    assert rss["after a normal request"] - rss["before"] < 32


# -- 3. the disk fails or the file changes while the CLI rewrites it ---------------------------------------------


@pytest.fixture(scope="module")
def local_server():
    """One in-process server for the file faults and the fault run (its model can be made to throw)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(int(server_env()["APPLY_EDIT_THREADS"]))  # see server_env
    target = TransformersTarget.load(TEST_MODEL, dtype="fp32", log=lambda *_: None)
    server = ApplyServer(TEST_MODEL, port=0, max_request_bytes=200_000, log=lambda *_: None)
    server.start()
    server.load_model(target)
    server.target, server.address = target, f"127.0.0.1:{server.port}"
    yield server
    server.stop(0)
    torch.set_num_threads(threads)


def apply_in_place(server, target: Path, update: Path, *extra: str) -> int:
    # `verify`: the model reads the sound merge too, so faults in its passes have passes to hit (the
    # default `checked` pipeline answers a sound merge without the model).
    return cli.main(["apply", str(target), "--update", str(update), "-i", "--force", "--server", server.address,
                     "--max-new-tokens", str(WRITE_TOKENS), "--pipeline", "verify", *extra])


@pytest.fixture(scope="module")
def complete_result(local_server, tmp_path_factory) -> bytes:
    """What an undisturbed in-place apply of CASE writes (greedy: the same every time)."""
    target, update = copy_case(tmp_path_factory.mktemp("reference"))
    assert apply_in_place(local_server, target, update) == 0
    result = target.read_bytes()
    assert result != CASE.path.read_bytes()
    return result


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("apply-edit: error: "), err
    return lines[0]


def leaked_fds() -> list[str]:
    """Descriptors of this process still open on a temp file or on /dev/full (the CLI's gRPC sockets aside)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if name.endswith(".apply-edit.tmp") or ".apply-edit.tmp " in name or name == "/dev/full":
            found.append(name)
    return found


def oserror(code: int, filename=None) -> OSError:
    return OSError(code, os.strerror(code), filename)


def inject_disk_fault(monkeypatch, fault: str) -> None:
    """Make files.write_atomic meet `fault` at the layer it uses (tempfile.mkstemp, the temp file's writes, fsync)."""
    real_mkstemp, real_fsync = tempfile.mkstemp, os.fsync
    if fault == "ENOSPC on write":  # a real one from the kernel: the temp file's descriptor writes to /dev/full
        def mkstemp(*args, **kw):
            fd, name = real_mkstemp(*args, **kw)
            full = os.open("/dev/full", os.O_WRONLY)
            os.dup2(full, fd)
            os.close(full)
            return fd, name

        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    elif fault == "ENOSPC on fsync":
        monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(oserror(errno.ENOSPC)))
    elif fault in ("EROFS", "EACCES"):  # a read-only filesystem / a directory we may not write (we run as root)
        def refuse(*args, dir=None, **kw):
            raise oserror(getattr(errno, fault), str(dir))

        monkeypatch.setattr(tempfile, "mkstemp", refuse)
    elif fault == "EIO on chmod":
        monkeypatch.setattr(os, "chmod", lambda *a, **kw: (_ for _ in ()).throw(oserror(errno.EIO)))
    elif fault == "directory fsync refused":  # after the rename: the file IS written
        def fsync(fd):
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                raise oserror(errno.EINVAL)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
    else:
        raise ValueError(fault)


def change_underfoot(monkeypatch, target: Path, how: str) -> bytes | None:
    """On the first progress update (mid-stream), someone else changes `target`; returns what they left there."""
    other = {"edited": b"// edited elsewhere meanwhile\n" + target.read_bytes(),
             "same size and mtime": target.read_bytes().replace(b"e", b"E", 1),
             "touched": target.read_bytes(), "removed": None}[how]
    real_update, done = cli.Progress.update, []

    def update(self, chars, tokens):
        if not done:
            done.append(True)
            stat = target.stat()
            if how == "removed":
                target.unlink()
            elif how == "touched":
                os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
            else:
                target.write_bytes(other)
                if how == "same size and mtime":
                    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        real_update(self, chars, tokens)

    monkeypatch.setattr(cli.Progress, "update", update)
    return other


DISK_FAULTS = ["ENOSPC on write", "ENOSPC on fsync", "EROFS", "EACCES", "EIO on chmod"]
MESSAGES = {"ENOSPC on write": "No space left on device", "ENOSPC on fsync": "No space left on device",
            "EROFS": "Read-only file system", "EACCES": "Permission denied", "EIO on chmod": "Input/output error"}


@pytest.mark.parametrize("fault", DISK_FAULTS)
def test_disk_fault_writes_nothing_and_says_why(local_server, complete_result, tmp_path, monkeypatch, capsys, fault):
    target, update = copy_case(tmp_path)
    before = target.read_bytes()
    inject_disk_fault(monkeypatch, fault)
    assert apply_in_place(local_server, target, update) == 1
    monkeypatch.undo()
    reason = one_line_error(capsys)
    assert f"could not write {target}: {MESSAGES[fault]}; the file is unchanged" in reason
    assert target.read_bytes() == before
    assert temp_files(tmp_path) == [] and leaked_fds() == []


def test_directory_fsync_failure_after_the_rename_is_not_reported_as_unchanged(local_server, complete_result,
                                                                               tmp_path, monkeypatch, capsys):
    target, update = copy_case(tmp_path)
    inject_disk_fault(monkeypatch, "directory fsync refused")
    assert apply_in_place(local_server, target, update) == 0
    assert target.read_bytes() == complete_result and temp_files(tmp_path) == []
    assert "wrote " in capsys.readouterr().err


@pytest.mark.parametrize("how", ["edited", "same size and mtime", "touched", "removed"])
def test_file_changed_during_the_rewrite_is_left_to_the_other_writer(local_server, tmp_path, monkeypatch, capsys,
                                                                     how):
    target, update = copy_case(tmp_path)
    theirs = change_underfoot(monkeypatch, target, how)
    assert apply_in_place(local_server, target, update) == 1
    reason = one_line_error(capsys)
    gone = "was removed" if how == "removed" else "changed on disk"
    assert f"apply-edit: error: {target} {gone} during the rewrite; nothing was written" == reason
    if theirs is None:
        assert not target.exists()
    else:
        assert target.read_bytes() == theirs
    assert temp_files(tmp_path) == []


# -- 4. many faults in a row against one server ------------------------------------------------------------------


class FaultRun:
    """Injects one fault of a kind at a time and checks its outcome; files live in `root/<n>/` one per fault."""

    KINDS = ["cancel", "cancel while queued", "deadline", "disconnect", "disk full", "read-only", "changed file",
             "cli deadline", "malformed", "over-size", "model raises"]

    def __init__(self, server, root: Path, monkeypatch, capsys, rng: random.Random):
        self.server, self.root = server, root
        self.monkeypatch, self.capsys, self.rng = monkeypatch, capsys, rng
        self.channel = grpc.insecure_channel(server.address)
        self.files: list[tuple[Path, set[bytes]]] = []  # every target file and what it may hold
        self.armed = 0  # the model raises on the armed-th forward pass from now (0: never)
        self.passes = 0  # forward passes so far
        real_logits = server.target.logits

        def logits(prefix, block):
            self.passes += 1
            if self.armed:
                self.armed -= 1
                if not self.armed:
                    raise RuntimeError("injected fault: the forward pass failed")
            return real_logits(prefix, block)

        monkeypatch.setattr(server.target, "logits", logits)
        (root / "reference").mkdir()
        target, update = copy_case(root / "reference", TINY)
        server.model.applier.cost_curve()  # measured once, through logits: not part of the count below
        self.passes = 0
        assert apply_in_place(server, target, update) == 0  # what an undisturbed apply writes (greedy: always)
        self.apply_passes = self.passes  # and how many forward passes it takes (greedy: always the same)
        capsys.readouterr()
        self.result = target.read_bytes()
        assert self.result != TINY.original.encode()

    def new_file(self, n: int) -> tuple[Path, Path]:
        folder = self.root / f"{n:03d}"
        folder.mkdir()
        target, update = copy_case(folder, TINY)
        self.files.append((target, {target.read_bytes(), self.result}))
        return target, update

    def settled(self) -> bool:
        return self.server.model.idle() and self.server.target._cache is None

    def inject(self, n: int, kind: str) -> str:
        """Run fault number n; returns what happened, in a few words."""
        return getattr(self, "_" + kind.replace(" ", "_").replace("-", "_"))(n)

    def _expect(self, code, call) -> str:
        with pytest.raises(grpc.RpcError) as err:
            for _ in call:
                pass
        assert err.value.code() == code, err.value.details()
        return f"{code.name}: {err.value.details()[:60]}"

    def _cancel(self, n):
        call = apply_call(self.channel, TINY.request(), LONG)
        pieces, _ = stream_then(call, self.rng.randint(1, 4))
        call.cancel()
        return f"cancelled after {pieces} pieces"

    def _cancel_while_queued(self, n):
        running = apply_call(self.channel, TINY.request(), LONG)
        next(running)  # it holds the model now
        queued = apply_call(self.channel, TINY.request(), LONG)
        codes = []
        waiter = threading.Thread(target=lambda: codes.append(drain(queued)))
        waiter.start()
        assert wait_until(lambda: self.server.model.in_flight == 2)
        queued.cancel()
        assert wait_until(lambda: self.server.model.in_flight == 1)  # it left the queue without the model
        waiter.join(timeout=30)
        assert codes == [grpc.StatusCode.CANCELLED]
        running.cancel()
        return "queued request cancelled, then the running one"

    def _deadline(self, n):
        timeout = self.rng.uniform(0.2, 3.0)
        return self._expect(grpc.StatusCode.DEADLINE_EXCEEDED,
                            apply_call(self.channel, TINY.request(), LONG, timeout=timeout))

    def _disconnect(self, n):
        client = start_vanishing_client(self.server.address, TINY.request(), LONG)
        lines = self.rng.randint(1, 3)
        for _ in range(lines):
            assert client.stdout.readline(), "the client's stream ended early"
        client.kill()
        client.wait()
        return f"client killed after {lines} responses"

    def _in_place(self, n, fault, *extra) -> tuple[int, Path, bytes]:
        target, update = self.new_file(n)
        before = target.read_bytes()
        with self.monkeypatch.context() as mp:
            if fault:
                inject_disk_fault(mp, fault)
            rc = apply_in_place(self.server, target, update, *extra)
        return rc, target, before

    def _file_fault(self, n, fault) -> str:
        rc, target, before = self._in_place(n, fault)
        reason = one_line_error(self.capsys)
        assert rc == 1 and "could not write" in reason and MESSAGES[fault] in reason, reason
        assert target.read_bytes() == before
        return reason[-60:]

    def _disk_full(self, n):
        return self._file_fault(n, self.rng.choice(["ENOSPC on write", "ENOSPC on fsync"]))

    def _read_only(self, n):
        return self._file_fault(n, self.rng.choice(["EROFS", "EACCES"]))

    def _changed_file(self, n):
        how = self.rng.choice(["edited", "same size and mtime", "touched", "removed"])
        target, update = self.new_file(n)
        with self.monkeypatch.context() as mp:
            theirs = change_underfoot(mp, target, how)
            rc = apply_in_place(self.server, target, update)
        self.files[-1] = (target, {theirs})  # the other writer's content, or no file if they removed it
        reason = one_line_error(self.capsys)
        assert rc == 1 and "during the rewrite; nothing was written" in reason, reason
        return f"{how}: refused"

    def _cli_deadline(self, n):
        timeout = self.rng.uniform(0.3, 2.5)
        rc, target, before = self._in_place(n, None, "--timeout", f"{timeout:.2f}")
        if rc == 0:  # the deadline was long enough: then the file is the complete result
            self.capsys.readouterr()
            assert target.read_bytes() == self.result
            return f"--timeout {timeout:.1f}: completed"
        reason = one_line_error(self.capsys)
        assert "DEADLINE_EXCEEDED" in reason and "the file is unchanged" in reason, reason
        assert target.read_bytes() == before
        return f"--timeout {timeout:.1f}: {reason[-50:]}"

    def _malformed(self, n):
        raw = self.rng.choice([
            b"\x0a\x03\xff\xfe\xfd\x12\x01x",  # original = 3 bytes that are not UTF-8
            b"\x0a\x40short",  # a length that runs past the end
            bytes(self.rng.randrange(256) for _ in range(64)),  # noise
            pb.ApplyRequest(original="x = 1\n", update="").SerializeToString(),
            pb.ApplyRequest(original="x = 1\n", update="x = 2\n",
                            options=pb.ApplyOptions(method="beam")).SerializeToString(),
            pb.ApplyRequest(original="x = 1\n", update="x = 2\n",
                            options=pb.ApplyOptions(k_max=10_000, temperature=-1)).SerializeToString(),
        ])
        call = self.channel.unary_stream("/apply_edit.v1.ApplyEdit/Apply", request_serializer=lambda b: b,
                                         response_deserializer=pb.ApplyResponse.FromString)
        return self._expect(grpc.StatusCode.INVALID_ARGUMENT, call(raw))

    def _over_size(self, n):
        big = load_case(FIXTURES / "py_large_module_edit")
        variant = self.rng.choice(["bytes", "message", "context"])
        if variant == "bytes":  # over the server's request limit (200 kB here)
            request = pb.ApplyRequest(original="x" * 250_000, update="y")
            return self._expect(grpc.StatusCode.INVALID_ARGUMENT, pb_grpc.ApplyEditStub(self.channel).Apply(request))
        if variant == "message":  # over gRPC's own message limit, refused before our code sees it
            request = pb.ApplyRequest(original="x" * 1_600_000, update="y")
            return self._expect(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                pb_grpc.ApplyEditStub(self.channel).Apply(request))
        request = pb.ApplyRequest(original=big.original * 2, update=big.update, path="big.py",  # ~15k tokens
                                  options=pb.ApplyOptions(pipeline="model"))  # the merge alone needs no context
        return self._expect(grpc.StatusCode.INVALID_ARGUMENT, pb_grpc.ApplyEditStub(self.channel).Apply(request))

    def _model_raises(self, n):
        self.armed = self.rng.randint(1, self.apply_passes)  # 1: in the prefill; later: mid-stream
        at = self.armed
        rc, target, before = self._in_place(n, None)
        self.armed = 0
        reason = one_line_error(self.capsys)
        assert rc == 1 and "INTERNAL" in reason and "injected fault" in reason and "unchanged" in reason, reason
        assert target.read_bytes() == before
        return f"raised in pass {at}"

    def normal_apply(self, n) -> None:
        target, update = self.new_file(n)
        assert apply_in_place(self.server, target, update) == 0
        self.capsys.readouterr()
        assert target.read_bytes() == self.result


def test_many_faults_in_a_row_corrupt_nothing_and_the_server_stays_up(local_server, tmp_path, monkeypatch, capsys,
                                                                      request):
    count = request.config.getoption("--faults")
    rng = random.Random(20240607)
    kinds = [FaultRun.KINDS[i % len(FaultRun.KINDS)] for i in range(count)]
    rng.shuffle(kinds)
    run = FaultRun(local_server, tmp_path, monkeypatch, capsys, rng)
    log, start = [], time.perf_counter()
    for n, kind in enumerate(kinds):
        t0 = time.perf_counter()
        what = run.inject(n, kind)
        assert wait_until(run.settled, seconds=60), f"fault {n} ({kind}): the server did not let go of the request"
        log.append(f"{n:3d} {kind:20s} {time.perf_counter() - t0:5.1f}s  {what}")
        if n % 10 == 9:
            run.normal_apply(10_000 + n)  # between faults, an ordinary apply writes exactly the result
    with capsys.disabled():
        print(f"\n{count} faults in {time.perf_counter() - start:.0f}s:\n" + "\n".join(log))
    for target, allowed in run.files:
        assert (target.read_bytes() if target.exists() else None) in allowed, target
        assert temp_files(target.parent) == [], target.parent
    health = health_pb2_grpc.HealthStub(run.channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    run.normal_apply(99_999)
    run.channel.close()

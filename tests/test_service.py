"""The gRPC service on the real small model (smollm2-135m), in-process on loopback."""

import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from apply_edit.request.apply import Applier
from apply_edit.request.runs import ApplyOptions, ApplyRequest
from apply_edit.faces.cases import load_case
from apply_edit.models.transformers_target import TransformersTarget
from apply_edit.faces.service.client import RemoteError, RemoteRun, connect
from apply_edit.faces.service.server import ApplyServer
from apply_edit.v1 import apply_edit_pb2 as pb
from apply_edit.v1 import apply_edit_pb2_grpc as pb_grpc
from conftest import FIXTURES, apply_call, drain, free_port, wait_until

pytestmark = pytest.mark.model
ROOT = Path(__file__).parent.parent
CASE = load_case(FIXTURES / "py_add_method")
SHORT = ApplyOptions(max_new_tokens=60, pipeline="model")  # the service's mechanics, not the judge


@pytest.fixture(scope="module")
def target():
    return TransformersTarget.load("smollm2-135m")


def make_server(target, **kw):
    server = ApplyServer("smollm2-135m", port=0, log=lambda *_: None, **kw)
    server.start()
    server.load_model(target)
    return server


@pytest.fixture(scope="module")
def server(target):
    metrics_port = free_port()
    server = make_server(target, metrics_port=metrics_port, max_request_bytes=200_000)
    server.metrics_port = metrics_port
    yield server
    server.stop(0)


@pytest.fixture
def channel(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield ch


def test_health_goes_not_serving_serving_not_serving(target):
    server = ApplyServer("smollm2-135m", port=0, log=lambda *_: None)
    port = server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        health = health_pb2_grpc.HealthStub(ch)
        check = lambda: health.Check(health_pb2.HealthCheckRequest(service="apply_edit.v1.ApplyEdit")).status
        assert check() == health_pb2.HealthCheckResponse.NOT_SERVING
        with pytest.raises(grpc.RpcError) as err:  # requests before the model is ready: UNAVAILABLE
            list(apply_call(ch, CASE.request(), SHORT))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        server.load_model(target)
        assert check() == health_pb2.HealthCheckResponse.SERVING
        server.health.enter_graceful_shutdown()
        assert check() == health_pb2.HealthCheckResponse.NOT_SERVING
    server.stop(0)


def test_reflection_lists_the_services(channel):
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    names = {s.name for r in responses for s in r.list_services_response.service}
    assert {"apply_edit.v1.ApplyEdit", "grpc.health.v1.Health"} <= names


def test_stream_concatenates_to_the_local_result_and_ends_with_stats(channel, target):
    local_run = Applier(target).stream(CASE.request(), SHORT)
    local = local_run.result()
    responses = list(apply_call(channel, CASE.request(), SHORT))
    assert len(responses) > 2
    assert "".join(r.text for r in responses) == local
    assert [r.HasField("stats") for r in responses] == [False] * (len(responses) - 1) + [True]
    tokens = [r.tokens for r in responses]
    assert tokens == sorted(tokens)  # progress only grows
    stats = responses[-1].stats
    assert stats.new_tokens == local_run.stats.decode.new_tokens and stats.target_passes >= 1
    assert stats.model == "smollm2-135m"


def test_cancel_stops_decoding_and_frees_the_cache(channel, server, target):
    call = apply_call(channel, CASE.request(), ApplyOptions(method="plain", max_new_tokens=2000))
    next(call)
    call.cancel()
    assert wait_until(lambda: target._cache is None and server.model.idle(), seconds=10)
    after = list(apply_call(channel, CASE.request(), SHORT))  # the server goes on serving
    assert after[-1].HasField("stats")


def test_deadline_stops_decoding(channel, server, target):
    with pytest.raises(grpc.RpcError) as err:
        list(apply_call(channel, CASE.request(), ApplyOptions(method="plain", max_new_tokens=2000), timeout=1.5))
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert wait_until(lambda: target._cache is None and server.model.idle(), seconds=10)


def test_queue_full_is_refused_with_a_retry_hint(target):
    server = make_server(target, max_queue=1)
    busy = ApplyOptions(method="plain", max_new_tokens=2000)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            running = apply_call(ch, CASE.request(), busy)
            next(running)  # holds the model
            queued = apply_call(ch, CASE.request(), busy)
            threading.Thread(target=drain, args=(queued,), daemon=True).start()
            assert wait_until(lambda: server.model.in_flight == 2, seconds=10)
            with pytest.raises(grpc.RpcError) as err:
                list(apply_call(ch, CASE.request(), SHORT))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert int(dict(err.value.trailing_metadata())["retry-after-ms"]) > 0
            running.cancel()
            queued.cancel()
            assert wait_until(lambda: server.model.idle(), seconds=60)  # the module's target, shared
    finally:
        server.stop(0)


def test_a_sound_merge_does_not_wait_behind_the_model(target):
    """The default answers a merge that passes the checks without the model: it is not queued behind a
    request the model is decoding."""
    server = make_server(target)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            running = apply_call(ch, CASE.request(), ApplyOptions(method="plain", max_new_tokens=2000))
            next(running)  # holds the model
            t0 = time.perf_counter()
            answer = RemoteRun(ch, CASE.request(), ApplyOptions())
            assert answer.result() == CASE.expected and answer.stats.path == "merge"
            assert answer.stats.decode.target_passes == 0 and server.model._model.locked()  # the other still decodes
            print(f"\nsound merge answered in {time.perf_counter() - t0:.3f} s while the model was busy")
            running.cancel()
            # This server shares the module's target: let go of it before the next test uses it.
            assert wait_until(lambda: server.model.idle(), seconds=60)
    finally:
        server.stop(0)


@pytest.mark.parametrize("fields, options, message", [
    (dict(original="", update=""), {}, "both empty"),
    (dict(original="x = 1\n", update=""), {}, "update is empty"),
    (dict(original="x = 1\n", update="x = 2\n"), dict(model="gpt-17"), "unknown model"),
    (dict(original="x = 1\n", update="x = 2\n"), dict(method="beam"), "unknown method"),
    (dict(original="x = 1\n", update="x = 2\n"), dict(temperature=-1.0), "temperature"),
    (dict(original="x = 1\n", update="x = 2\n"), dict(k_max=10_000), "k must be"),
    (dict(original="x = 1\n", update="x = 2\n"), dict(drafting="psychic"), "unknown drafting"),
    (dict(original="x = 1\n", update="x = 2\n"),
     dict(acceptance=pb.ACCEPTANCE_MODE_TYPICAL, temperature=0.7), "typical acceptance is greedy only"),
    (dict(original="x = 1\n", update="x = 2\n"), dict(max_new_tokens=10_000_000, pipeline="model"), "too long"),
    (dict(original="x" * 300_000, update="x"), {}, "at most 200000 bytes"),
])
def test_bad_input_is_invalid_argument_with_a_message(channel, fields, options, message):
    request = pb.ApplyRequest(**fields, options=pb.ApplyOptions(**options))
    with pytest.raises(grpc.RpcError) as err:
        list(pb_grpc.ApplyEditStub(channel).Apply(request))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in err.value.details()


def test_non_utf8_request_is_invalid_argument(channel):
    # protobuf clients refuse to send invalid UTF-8 in a string field; send the raw bytes ourselves.
    raw = b"\x0a\x03\xff\xfe\xfd\x12\x01x"  # field 1 (original) = 3 invalid bytes, field 2 = "x"
    call = channel.unary_stream("/apply_edit.v1.ApplyEdit/Apply", request_serializer=lambda b: b,
                                response_deserializer=pb.ApplyResponse.FromString)
    with pytest.raises(grpc.RpcError) as err:
        list(call(raw))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "UTF-8" in err.value.details()


def test_metrics_endpoint(channel, server):
    list(apply_call(channel, CASE.request(), SHORT))
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
    assert 'apply_edit_requests_total{language="python",size="small",status="OK"}' in text
    assert 'apply_edit_answers_total{path="unjudged"}' in text  # SHORT asks for the model's own output
    for name in ("apply_edit_ttft_seconds", "apply_edit_ttlt_seconds", "apply_edit_tokens_per_target_pass",
                 "apply_edit_acceptance_rate", "apply_edit_queue_depth"):
        assert name in text


def test_remote_run_matches_local_and_refuses_partial_streams(server, target):
    channel = connect(f"127.0.0.1:{server.port}", wait_s=30)
    run = RemoteRun(channel, CASE.request(), SHORT)
    assert run.result() == Applier(target).stream(CASE.request(), SHORT).result()
    assert run.stats.decode.target_passes > 0
    cut = RemoteRun(channel, CASE.request(), ApplyOptions(method="plain", max_new_tokens=2000), timeout=1.0)
    with pytest.raises(RemoteError, match="DEADLINE_EXCEEDED"):
        cut.result()


def test_cli_apply_through_the_server_in_place(server, tmp_path):
    f = tmp_path / "cache.py"
    f.write_text(CASE.original)
    exe = Path(sys.executable).parent / "apply-edit"
    # 60 tokens cut the model short; the default writes the sound merge all the same (the same way twice).
    args = [str(exe), "apply", str(f), "--update", str(CASE.path.parent / "update.py"), "-i", "--max-new-tokens", "60",
            "--force"]
    remote = subprocess.run(args + ["--server", f"127.0.0.1:{server.port}"], capture_output=True, text=True, timeout=300)
    assert remote.returncode == 0, remote.stderr
    remote_text = f.read_text()
    f.write_text(CASE.original)
    local = subprocess.run(args + ["--model", "smollm2-135m"], capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    assert f.read_text() == remote_text == CASE.expected and remote.stdout == local.stdout  # same file, same diff
    assert [p.name for p in tmp_path.iterdir()] == ["cache.py"]


def test_the_default_pipeline_over_grpc_reports_its_path_and_refuses_with_failed_precondition(server, target):
    """The judged default through the service: the sound merge comes back with its path in the stats;
    an apply with no sound result ends FAILED_PRECONDITION with the reason, and the client raises."""
    from apply_edit.judging.decide import ApplyRefused

    channel = connect(f"127.0.0.1:{server.port}")
    remote = RemoteRun(channel, CASE.request(), ApplyOptions())
    assert remote.result() == CASE.expected and remote.stats.path == "merge"
    local = Applier(target).stream(CASE.request(), ApplyOptions())
    assert local.result() == remote.text and local.stats.path == remote.stats.path
    nothing = load_case(FIXTURES / "py_instruction_only")
    nothing.instruction = "Remove every function from this module."
    code = drain(apply_call(channel, nothing.request(), ApplyOptions(max_new_tokens=30)))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(ApplyRefused, match="no sound result"):
        RemoteRun(channel, nothing.request(), ApplyOptions(max_new_tokens=30)).result()
    channel.close()


def test_cli_apply_to_a_dead_server_leaves_the_file(tmp_path):
    f = tmp_path / "a.py"
    f.write_text(CASE.original)
    exe = Path(sys.executable).parent / "apply-edit"
    done = subprocess.run([str(exe), "apply", str(f), "--update", str(CASE.path.parent / "update.py"), "-i",
                           "--server", f"127.0.0.1:{free_port()}", "--timeout", "5"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0 and "UNAVAILABLE" in done.stderr and "unchanged" in done.stderr
    assert f.read_text() == CASE.original


@pytest.fixture
def small_edit(tmp_path):
    """A short file and snippet, so that clients without a token limit finish quickly."""
    original, update = tmp_path / "greet.py", tmp_path / "update.py"
    original.write_text('def greet(name):\n    return "Hello, " + name\n\n\nprint(greet("world"))\n')
    update.write_text('def greet(name):\n    return f"Hello, {name}!"\n\n# ... existing code ...\n')
    return str(original), str(update)


def test_python_example_client(server, small_edit):
    done = subprocess.run([sys.executable, str(ROOT / "proto/examples/client.py"), f"127.0.0.1:{server.port}",
                           *small_edit],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "passes" in done.stderr and done.stdout.strip()


NODE_DIR = ROOT / "tests" / "node"


@pytest.fixture(scope="module")
def node_modules():
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.fail("node and npm are needed for the interop test (the CI machine has them)")
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").exists():
        subprocess.run(["npm", "ci", "--silent", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, timeout=600)
    return NODE_DIR


def test_node_client_streams_the_same_text(server, node_modules, small_edit):
    """What a VS Code extension does: @grpc/grpc-js + @grpc/proto-loader, loading only the .proto."""
    env = dict(os.environ, NODE_MODULES_FROM=str(node_modules / "package.json"))
    done = subprocess.run(["node", str(ROOT / "proto/examples/client.mjs"), f"127.0.0.1:{server.port}", *small_edit],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    cli = subprocess.run([str(Path(sys.executable).parent / "apply-edit"), "apply", small_edit[0], "--update",
                          small_edit[1], "--server", f"127.0.0.1:{server.port}"],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert done.stdout == cli.stdout and done.stdout.strip()
    assert "passes" in done.stderr


def test_sigterm_drains_in_flight_requests_and_refuses_new_ones(small_edit):
    port = free_port()
    exe = Path(sys.executable).parent / "apply-edit"
    proc = subprocess.Popen([str(exe), "serve", "--model", "smollm2-135m", "--port", str(port)],
                            stderr=subprocess.PIPE, text=True)
    try:
        channel = connect(f"127.0.0.1:{port}", wait_s=120)
        in_flight = apply_call(channel, CASE.request(), ApplyOptions(method="plain", max_new_tokens=40))
        first = next(in_flight)
        proc.send_signal(15)
        rest = list(in_flight)  # the request already running completes
        # Completed, not cut: a drained request ends with its stats (40 tokens, or fewer if the model stops).
        assert rest[-1].HasField("stats") and 0 < rest[-1].stats.new_tokens <= 40
        assert rest[-1].tokens == rest[-1].stats.new_tokens
        assert first.text + "".join(r.text for r in rest)
        assert proc.wait(timeout=60) == 0
        assert "draining" in proc.stderr.read()
        with pytest.raises(grpc.RpcError) as err:  # and nothing new is taken
            list(apply_call(channel, CASE.request(), SHORT))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        proc.kill()


def test_sigterm_delivered_to_a_worker_thread_still_drains_and_stops(target):
    """The kernel may hand a process's signal to any thread; Python handles it only when the main thread runs
    Python again, so `wait` must wake on its own (issue 42: a server stayed up 9 minutes after SIGTERM)."""
    import signal

    heard = []
    server = ApplyServer("smollm2-135m", port=0, log=lambda msg: heard.append((time.monotonic(), msg)))
    server.start()
    server.load_model(target)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    watchdog = threading.Timer(30, server.stop, kwargs={"grace": 0})  # a failure must not hang the suite
    try:
        server.stop_on_signals()
        channel = connect(f"127.0.0.1:{server.port}", wait_s=30)
        in_flight = apply_call(channel, CASE.request(), ApplyOptions(method="plain", max_new_tokens=40))
        first = next(in_flight)
        rest = []
        reader = threading.Thread(target=lambda: rest.extend(in_flight))
        reader.start()
        worker = next(t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor"))
        sent = time.monotonic()
        threading.Timer(0.2, signal.pthread_kill, args=(worker.ident, signal.SIGTERM)).start()
        watchdog.start()
        server.wait()  # the main thread waits as `serve` does
        reader.join(timeout=30)
        assert watchdog.is_alive(), "SIGTERM to a worker thread was not heard: the watchdog stopped the server"
        when = next(t for t, msg in heard if msg.startswith("signal"))
        assert when - sent < 1.5  # 0.2 s before the kill, then at most one poll
        # Drained, not cut: the request in flight ends with its stats.
        assert rest and rest[-1].HasField("stats") and rest[-1].tokens == rest[-1].stats.new_tokens
        assert first.text + "".join(r.text for r in rest)
    finally:
        watchdog.cancel()
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        server.stop(0)


def test_warm_reads_a_file_ahead_so_its_apply_prefills_only_the_rest(server, channel):
    from apply_edit.faces.service.client import warm

    case = load_case(FIXTURES / "go_add_struct_method")
    options = ApplyOptions(max_new_tokens=8, pipeline="model")
    shared = server.model.applier.plan(case.request(), options).shared  # system and file: ~800 tokens
    assert shared > 512
    store = server.model.applier.target.prefix_cache
    store.clear()
    cold = RemoteRun(channel, case.request(), options)
    cold_text = cold.result()
    assert cold.stats.decode.prompt_cached == 0
    store.clear()
    assert warm(channel, case.request()).tokens_held == shared  # all of it, not whole chunks only
    assert warm(channel, case.request()).tokens_held == shared  # already held: kept, not read twice
    again = RemoteRun(channel, case.request(), options)
    assert again.result() == cold_text and again.stats.decode.prompt_cached == shared
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
    assert 'apply_edit_warmups_total{status="OK"} 2.0' in metrics
    assert "apply_edit_prefix_cache_hits" in metrics


def test_warm_says_why_it_cannot():
    from apply_edit.faces.service.client import warm

    server = make_server(TransformersTarget.load("smollm2-135m"), prefix_cache_bytes=0)  # its own target: store off
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            with pytest.raises(RemoteError, match="FAILED_PRECONDITION: this model keeps no prompt prefixes"):
                warm(ch, CASE.request())
            with pytest.raises(RemoteError, match="INVALID_ARGUMENT: original is empty"):
                warm(ch, ApplyRequest("  \n", ""))
    finally:
        server.stop(0)


def test_replicas_behind_one_address_share_the_requests(tmp_path):
    """A replica keeps no state beyond a request, so one channel may name several (gRPC's `ipv4:a,b`):
    the client spreads its requests over them in turn. The load run counts every answer, a refusal too."""
    from conftest import ServerProcess
    from apply_edit.faces.service.load import load_summary, run_load

    cases = [CASE] * 3 + [load_case(FIXTURES / "py_instruction_only")]  # the merge alone refuses the last
    replicas = [ServerProcess(tmp_path) for _ in range(2)]
    try:
        channel = connect("ipv4:" + ",".join(r.address for r in replicas), wait_s=60)
        records, wall = run_load(channel, cases, ApplyOptions(pipeline="merge"), concurrency=2)
        served = [r.requests("OK") + r.requests("FAILED_PRECONDITION") for r in replicas]
    finally:
        for r in replicas:
            r.stop()
    answers = sorted((r.exact, r.refused, r.error) for r in records)
    assert answers == [(False, True, None)] + [(True, False, None)] * 3
    assert sum(served) == 4 and min(served) >= 1  # in turn over the replicas ready at each call
    assert "errors 0, the expected file 3, refused 1" in load_summary(records, wall, 2)

"""Load on the real small model (smollm2-135m, fp32): 8 concurrent streams of fixture applies against one server on
loopback for --soak-seconds (CI: 30 s; a long soak: `pytest tests/test_soak.py -s --soak-seconds 1800
--soak-max-new-tokens 0`), and requests beyond the server's capacity refused at once, never left hanging.
"""

from __future__ import annotations

import os
import re
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2

from apply_edit.request.runs import ApplyOptions
from apply_edit.faces.bench import Record
from apply_edit.faces.cases import load_case
from apply_edit.faces.service.load import load_summary
from conftest import FIXTURES, ServerProcess, apply_call, drain, long_apply, wait_until

pytestmark = [pytest.mark.model, pytest.mark.soak]

STREAMS = 8
STORE_MIB = 64
# Small fixtures (2-3 kB originals, 763 to ~1.7k prompt tokens) of four languages, so that a short soak still
# completes a number of requests.
CASES = [load_case(FIXTURES / name) for name in ("ts_small_file_whole_rewrite", "go_add_struct_method",
                                                 "js_edit_first_lines", "py_edit_first_lines")]


def test_eight_streams_for_the_soak_time_without_errors_or_growth(tmp_path, request):
    seconds = request.config.getoption("--soak-seconds")
    # The model's own output: a load test of the service, not of the judge (whose refusals of a cut-short
    # apply on a case with an unsound merge would count as errors here).
    options = ApplyOptions(max_new_tokens=request.config.getoption("--soak-max-new-tokens") or None, pipeline="model")
    # --max-queue 8: one running + 8 waiting, so 8 streams always fit (a 9th would be refused by design).
    # A prefix store smaller than the four cases' prompts need (~1k tokens of 46 KB each, fp32): it fills and
    # evicts during the soak, and must stay within its bound.
    server = ServerProcess(tmp_path, "--max-queue", str(STREAMS), "--prefix-cache-mb", str(STORE_MIB))
    try:
        # The start RSS: idle after one request, the same one as before the end RSS.
        assert drain(apply_call(server.channel, CASES[-1].request(), options)) == grpc.StatusCode.OK
        rss = [server.rss_mib()]
        records: list[Record] = []
        cut: list[str] = []
        in_flight: dict[int, grpc.Future] = {}
        stopped: list[bool] = []
        lock = threading.Lock()
        end = time.perf_counter() + seconds

        def stream(i: int) -> None:
            """Apply case after case until the end of the soak; the request in flight then is cancelled."""
            n = i
            while time.perf_counter() < end:
                case = CASES[n % len(CASES)]
                n += STREAMS
                t0, text, tokens, stats, error = time.perf_counter(), "", 0, None, None
                with lock:
                    if stopped:
                        return
                    in_flight[i] = call = apply_call(server.channel, case.request(), options)
                try:
                    for response in call:
                        if response.text and not text:
                            ttft = time.perf_counter() - t0
                        text += response.text
                        tokens = response.tokens
                        if response.HasField("stats"):
                            stats = response.stats
                except grpc.RpcError as exc:
                    if exc.code() == grpc.StatusCode.CANCELLED and stopped:  # cancelled by us, at the end
                        cut.append(case.name)
                        return
                    error = f"{exc.code().name}: {exc.details()}"
                if stats is None and not error:
                    error = "the stream ended without stats"
                with lock:
                    records.append(Record(case.name, options.method, time.perf_counter() - t0, ttft if text else 0.0,
                                          stats.target_passes if stats else 0, tokens, text, text == case.expected,
                                          error=error))

        start = time.perf_counter()
        threads = [threading.Thread(target=stream, args=(i,)) for i in range(STREAMS)]
        for t in threads:
            t.start()
        while time.perf_counter() < end:
            time.sleep(1.0)
            rss.append(server.rss_mib())
        with lock:
            stopped.append(True)
            for call in in_flight.values():
                call.cancel()
        for t in threads:
            t.join(timeout=60)
        wall = time.perf_counter() - start
        assert wait_until(lambda: "apply_edit_queue_depth 0.0" in server.metrics())
        health = server.health()
        assert drain(apply_call(server.channel, CASES[-1].request(), options)) == grpc.StatusCode.OK
        rss.append(server.rss_mib())  # idle again, after the same request as the start
        # Which prompts the soak's streams found stored depends on their timing (four cases' prompts overflow
        # the store); the same request again, with nothing between, must start from the one just stored.
        hits = store_metrics(server)["hits"]
        assert drain(apply_call(server.channel, CASES[-1].request(), options)) == grpc.StatusCode.OK
        store = store_metrics(server)
    finally:
        server.stop()
    print(f"\nsoak: {STREAMS} streams for {seconds:.0f}s, max_new_tokens {options.max_new_tokens or 'whole file'}; "
          f"{len(cut)} requests still in flight at the end were cancelled\n{load_summary(records, wall, STREAMS)}\n"
          f"server RSS MiB: start {rss[0]:.1f}, end {rss[-1]:.1f}, min {min(rss):.1f}, max {max(rss):.1f}")
    if os.environ.get("APPLY_EDIT_SOAK_RSS"):
        print("RSS samples (MiB, one a second):", " ".join(f"{r:.0f}" for r in rss))
    assert [r.error for r in records if r.error] == []
    assert records and all(r.new_tokens > 0 for r in records)
    assert len(records) + len(cut) >= STREAMS  # every stream was served
    assert health == health_pb2.HealthCheckResponse.SERVING
    # Measured here (45-150 s, 48 tokens a request, 2 cores shared with other jobs): idle RSS 911-921 MiB at the
    # start and at the end (-4 MiB over 45 s); in between it swings by up to 310 MiB with the request running
    # (prefill activations and KV cache of a 1.7k-token prompt), with no trend over 150 s. Before the servicer
    # ran all model work on one thread and trimmed malloc after each request, the same soak went 1263 -> 1874 MiB
    # in 40 s (each gRPC worker thread's malloc arena kept a request's peak).
    # The prefix store adds up to its bound: it held one prompt at the start and may be full at the end.
    assert store["hits"] == hits + 1 and 0 < store["bytes"] <= STORE_MIB << 20, store
    assert rss[-1] - rss[0] < 64 + STORE_MIB and max(rss) - rss[0] < 512 + STORE_MIB


def store_metrics(server: ServerProcess) -> dict[str, float]:
    return {name: float(value) for name, value in
            re.findall(r"^apply_edit_prefix_cache_(\w+) (\S+)$", server.metrics(), re.M)}


def test_requests_beyond_capacity_are_refused_at_once(tmp_path):
    """--max-queue 1: one request runs, one waits; of 6 simultaneous streams the other 4 get RESOURCE_EXHAUSTED."""
    server = ServerProcess(tmp_path, "--max-queue", "1")
    case = CASES[0]
    outcomes: list[tuple[grpc.StatusCode, float, dict]] = []
    calls = []
    lock = threading.Lock()

    def stream() -> None:
        t0 = time.perf_counter()
        call = apply_call(server.channel, case.request(), long_apply())
        with lock:
            calls.append(call)
        try:
            for _ in call:
                pass
            code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            code = exc.code()
        with lock:
            outcomes.append((code, time.perf_counter() - t0, dict(call.trailing_metadata() or ())))

    try:
        threads = [threading.Thread(target=stream) for _ in range(6)]
        for t in threads:
            t.start()
        assert wait_until(lambda: len(outcomes) >= 4, seconds=30), outcomes
        time.sleep(1.0)  # nothing else is refused: the two admitted are still streaming
        refused = [o for o in outcomes if o[0] == grpc.StatusCode.RESOURCE_EXHAUSTED]
        print(f"\nrefused {len(refused)} of 6 in " + ", ".join(f"{o[1] * 1000:.0f}" for o in refused) + " ms")
        assert len(outcomes) == 4 and len(refused) == 4, outcomes
        assert all(seconds < 2.0 for _, seconds, _ in refused), refused
        assert all(int(meta["retry-after-ms"]) > 0 for _, _, meta in refused)
        for call in calls:
            call.cancel()
        for t in threads:
            t.join(timeout=30)
        assert [o[0] for o in outcomes[4:]] == [grpc.StatusCode.CANCELLED] * 2
        assert wait_until(lambda: server.requests("CANCELLED") == 2)  # the server let go of both
        assert drain(apply_call(server.channel, case.request(), ApplyOptions(max_new_tokens=8))) == \
            grpc.StatusCode.OK  # and the server takes the next one
    finally:
        server.stop()

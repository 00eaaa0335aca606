"""Client side of the service: the same streaming run as a local apply, served by `apply-edit serve`."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ...request.runs import ApplyOptions, ApplyRequest, ApplyStats
from ...judging.decide import ApplyRefused
from ...v1 import apply_edit_pb2 as pb
from ...v1 import apply_edit_pb2_grpc as pb_grpc
from .security import channel_credentials

MiB = 1 << 20


def keepalive_options() -> list[tuple[str, int]]:
    """HTTP/2 keepalive, the same on both ends: a ping after 20 s with nothing received, the connection dropped
    when one goes unanswered for 10 s. A stopped (SIGSTOP) or wedged peer's kernel still ACKs TCP, so nothing
    else tells it from a long prefill. APPLY_EDIT_KEEPALIVE_S (the 20 s) is for tests only."""
    ping_ms = int(float(os.environ.get("APPLY_EDIT_KEEPALIVE_S", 20)) * 1000)
    return [("grpc.keepalive_time_ms", ping_ms), ("grpc.keepalive_timeout_ms", ping_ms // 2),
            # How long grpcio 1.85 really waits for the ack (default 60 s), whatever keepalive_timeout_ms says (traced).
            ("grpc.http2.ping_timeout_ms", ping_ms // 2),
            ("grpc.keepalive_permit_without_calls", 1),
            # Client only: it sends nothing after its request, and by default would ping twice, then rarely if ever.
            ("grpc.http2.max_pings_without_data", 0),
            # Server only: accept a ping every ping_ms/2 while it sends nothing (a queued request, a long prefill);
            # by default (one per 5 minutes, 2 strikes) the 4th such ping, at 80 s, ends the call: too_many_pings.
            ("grpc.http2.min_ping_interval_without_data_ms", ping_ms // 2)]


def default_deadline_s(request: ApplyRequest) -> float:
    """The deadline `apply --server` gives a request without --timeout: long enough for any healthy apply on a
    2-core CPU, so that only a server that never finishes meets it.

    60 + n/50 + n/4 seconds for n = (bytes of original, update and instruction) / 2. n is more than the
    prompt's tokens (~2.2 bytes each in the fixtures) and about twice the tokens to write (the original's,
    ~4.4 bytes each); the default model on fp32 reads ~75 prompt tokens/s (n/50 allows 50) and writes 5-10
    tokens/s plain (n/4 allows ~2 per written token). The minute is for queueing behind a short request.
    The slowest apply measured (19.7 kB in 1,124 s) gets 2,700 s.
    """
    n = len((request.original + request.update + request.instruction).encode()) / 2
    return 60 + n / 50 + n / 4


class RemoteError(RuntimeError):
    """The server refused or broke off the request; the message names the status and the reason."""


def request_message(request: ApplyRequest, options: ApplyOptions) -> pb.ApplyRequest:
    opts = pb.ApplyOptions(method=options.method, max_new_tokens=options.max_new_tokens or 0, k_max=options.k,
                           drafting=options.drafting, pipeline=options.pipeline)
    if options.acceptance == "typical":
        opts.acceptance = pb.ACCEPTANCE_MODE_TYPICAL
        opts.typical_threshold = options.typical_threshold
    if options.temperature:
        opts.temperature = options.temperature
    if options.top_p < 1.0:
        opts.top_p = options.top_p
    if options.seed is not None:
        opts.seed = options.seed
    return pb.ApplyRequest(original=request.original, update=request.update, instruction=request.instruction,
                           language=request.language, path=request.path, options=opts)


def connect(address: str, wait_s: float = 0.0, tls: bool = False, tls_ca: str | Path | None = None,
            token: str | None = None, max_message_bytes: int = 64 * MiB) -> grpc.Channel:
    """A channel to `address` (TLS with `tls`/`tls_ca`, a bearer token with `token`); with wait_s, block
    until the server's health says SERVING. Messages above max_message_bytes fail with RESOURCE_EXHAUSTED.
    An address naming several replicas ('ipv4:10.0.0.1:50051,10.0.0.2:50051', or a DNS name with several
    records) spreads the requests over them in turn: a replica keeps no state beyond a request."""
    options = [("grpc.max_receive_message_length", max_message_bytes), ("grpc.max_send_message_length", max_message_bytes),
               ("grpc.lb_policy_name", "round_robin"), *keepalive_options()]
    credentials = channel_credentials(address, tls, tls_ca, token)
    channel = (grpc.secure_channel(address, credentials, options=options) if credentials
               else grpc.insecure_channel(address, options=options))
    if wait_s > 0:
        deadline = time.monotonic() + wait_s
        health = health_pb2_grpc.HealthStub(channel)
        last = "not serving yet"
        while True:
            try:
                status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
                if status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except grpc.RpcError as exc:  # e.g. not listening yet, or a TLS handshake that cannot succeed
                last = f"{exc.code().name}: {exc.details()}"
            if time.monotonic() > deadline:
                raise RemoteError(f"server {address} was not serving within {wait_s:.0f}s ({last})")
            time.sleep(0.5)
    return channel


def warm(channel: grpc.Channel, request: ApplyRequest, timeout: float | None = None) -> pb.WarmResponse:
    """Have the server read this file ahead of its edits (the Warm RPC): the next apply to it prefills only
    the snippet and what follows. RemoteError when the server refuses (e.g. it keeps no prefixes)."""
    message = pb.WarmRequest(original=request.original, language=request.language, path=request.path)
    try:
        return pb_grpc.ApplyEditStub(channel).Warm(message, timeout=timeout)
    except grpc.RpcError as exc:
        raise RemoteError(f"{exc.code().name}: {exc.details()}") from None


class RemoteRun:
    """Like `ApplyRun`, over gRPC: iterate for text pieces; `.text` and `.stats` are complete afterwards.

    The run only counts as complete when the final response (with stats) arrived: a stream that breaks
    off earlier raises RemoteError, so no caller ever takes a partial file for a whole one.
    """

    def __init__(self, channel: grpc.Channel, request: ApplyRequest, options: ApplyOptions,
                 timeout: float | None = None):
        self._call = pb_grpc.ApplyEditStub(channel).Apply(request_message(request, options), timeout=timeout)
        self.timeout = timeout
        self.text = ""
        self.stats = ApplyStats(method=options.method)
        self._start = time.perf_counter()

    def __iter__(self) -> Iterator[str]:
        complete = False
        try:
            for response in self._call:
                self.stats.decode.new_tokens = response.tokens
                if response.text:
                    if not self.text:
                        self.stats.ttft_s = time.perf_counter() - self._start
                    self.text += response.text
                    yield response.text
                if response.HasField("stats"):
                    self._take(response.stats)
                    complete = True
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                raise ApplyRefused(exc.details()) from None
            raise RemoteError(f"{exc.code().name}: {exc.details()}{self._why(exc.code(), exc.details())}") from None
        if not complete:
            raise RemoteError("the server ended the stream before the file was complete")
        self.stats.total_s = time.perf_counter() - self._start

    def _why(self, code: grpc.StatusCode, details: str) -> str:
        """What a status means for the user, where gRPC's own words do not say it."""
        if code == grpc.StatusCode.UNAVAILABLE and ("ping timeout" in details or "keepalive" in details):
            return " (no answer to keepalive pings: the server, or this client, was stopped or hung)"
        if code == grpc.StatusCode.UNAVAILABLE and self.text:
            return " (the server went away mid-stream)"
        if code == grpc.StatusCode.DEADLINE_EXCEEDED and self.timeout:
            return f" (the server did not finish within the {self.timeout:.1f}s deadline)"
        return ""

    def _take(self, s: pb.Stats) -> None:
        """The server's counts; times stay the client's own (they include the network and the queue)."""
        st, engine = self.stats, self.stats.decode
        engine.target_passes, engine.new_tokens = s.target_passes, s.new_tokens
        engine.drafted_tokens, engine.accepted_tokens = s.drafted_tokens, s.accepted_tokens
        engine.prompt_cached = s.prompt_tokens_cached
        st.prompt_tokens, st.method = s.prompt_tokens, s.method
        st.path, st.disagreement_line = s.path, s.disagreement_line
        st.regions_written, st.verdicts = list(s.regions_written), list(s.verdicts)

    def result(self) -> str:
        for _ in self:
            pass
        return self.text

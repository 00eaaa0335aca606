"""Client side of the service: the same streaming run as a local apply, served by `apply-edit serve`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..apply import ApplyOptions, ApplyRequest, ApplyStats
from ..decide import ApplyRefused
from ..v1 import apply_edit_pb2 as pb
from ..v1 import apply_edit_pb2_grpc as pb_grpc
from .security import channel_credentials

MiB = 1 << 20


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
    until the server's health says SERVING. Messages above max_message_bytes fail with RESOURCE_EXHAUSTED."""
    limits = [("grpc.max_receive_message_length", max_message_bytes), ("grpc.max_send_message_length", max_message_bytes)]
    credentials = channel_credentials(address, tls, tls_ca, token)
    channel = (grpc.secure_channel(address, credentials, options=limits) if credentials
               else grpc.insecure_channel(address, options=limits))
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


class RemoteRun:
    """Like `ApplyRun`, over gRPC: iterate for text pieces; `.text` and `.stats` are complete afterwards.

    The run only counts as complete when the final response (with stats) arrived: a stream that breaks
    off earlier raises RemoteError, so no caller ever takes a partial file for a whole one.
    """

    def __init__(self, channel: grpc.Channel, request: ApplyRequest, options: ApplyOptions,
                 timeout: float | None = None):
        self._call = pb_grpc.ApplyEditStub(channel).Apply(request_message(request, options), timeout=timeout)
        self.text = ""
        self.stats = ApplyStats(method=options.method)
        self._start = time.perf_counter()

    def __iter__(self) -> Iterator[str]:
        complete = False
        try:
            for response in self._call:
                self.stats.new_tokens = response.tokens
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
            gone = " (the server went away mid-stream)" if self.text and exc.code() == grpc.StatusCode.UNAVAILABLE else ""
            raise RemoteError(f"{exc.code().name}: {exc.details()}{gone}") from None
        if not complete:
            raise RemoteError("the server ended the stream before the file was complete")
        self.stats.total_s = time.perf_counter() - self._start

    def _take(self, s: pb.Stats) -> None:
        """The server's counts; times stay the client's own (they include the network and the queue)."""
        st = self.stats
        st.target_passes, st.new_tokens = s.target_passes, s.new_tokens
        st.drafted_tokens, st.accepted_tokens = s.drafted_tokens, s.accepted_tokens
        st.prompt_tokens, st.method = s.prompt_tokens, s.method
        st.path, st.disagreement_line = s.path, s.disagreement_line

    def result(self) -> str:
        for _ in self:
            pass
        return self.text

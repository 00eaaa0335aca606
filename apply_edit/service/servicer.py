"""The ApplyEdit servicer: validate a request, wait for the model in a bounded queue, stream the file."""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import grpc
from google.protobuf.message import DecodeError

from ..apply import METHODS, Applier, ApplyError, ApplyOptions, ApplyRequest, ApplyStats
from ..decide import ApplyRefused
from ..prompting import LANGUAGES, language_of
from ..v1 import apply_edit_pb2 as pb
from .metrics import Metrics, size_class

SERVICE = "apply_edit.v1.ApplyEdit"


class BadMessage:
    """Stands in for a request that could not be parsed (e.g. string fields that are not UTF-8)."""

    def __init__(self, reason: str):
        self.reason = reason


def parse_request(data: bytes):
    try:
        return pb.ApplyRequest.FromString(data)
    except DecodeError as exc:
        return BadMessage(str(exc))


class Invalid(Exception):
    """A request the service refuses with INVALID_ARGUMENT; the message says what to fix."""


def to_apply(msg: pb.ApplyRequest, model_name: str, max_request_bytes: int, default_k: int):
    """Proto request → (ApplyRequest, ApplyOptions), or Invalid with a message that says what to fix."""
    size = sum(len(s.encode("utf-8", "surrogatepass")) for s in (msg.original, msg.update, msg.instruction))
    if size > max_request_bytes:
        raise Invalid(f"request is {size} bytes; this server accepts at most {max_request_bytes} bytes of "
                      f"original + update + instruction")
    # Only known language names go on (unknown ones: the path's extension decides). regions.parser_for caches
    # a parser per name without bound, so free-form names (up to ~1 MB each, outside max_request_bytes)
    # would pin memory per request.
    language = msg.language.lower() if msg.language.lower() in KNOWN_LANGUAGES else ""
    request = ApplyRequest(msg.original, msg.update, msg.instruction, language, msg.path)
    try:
        request.validate()
    except ApplyError as exc:
        raise Invalid(str(exc))
    if not msg.update.strip() and not msg.instruction.strip():
        raise Invalid("update is empty; send the edit snippet (or at least an instruction)")
    o = msg.options
    if o.model and o.model != model_name:
        raise Invalid(f"unknown model {o.model!r}: this server serves {model_name!r} (or leave options.model empty)")
    method = o.method or "spec"
    if method not in METHODS:
        raise Invalid(f"unknown method {o.method!r}; use one of {', '.join(METHODS)}")
    for name in ("temperature", "top_p", "typical_threshold"):  # NaN passes every range check below
        if o.HasField(name) and not math.isfinite(getattr(o, name)):
            raise Invalid(f"options.{name} must be a finite number, got {getattr(o, name)}")
    options = ApplyOptions(
        method=method,
        k=o.k_max if o.HasField("k_max") else default_k,
        max_new_tokens=o.max_new_tokens or None,
        temperature=o.temperature if o.HasField("temperature") else 0.0,
        top_p=o.top_p if o.HasField("top_p") else 1.0,
        seed=o.seed if o.HasField("seed") else None,
        drafting=o.drafting or "merge",
        acceptance="typical" if o.acceptance == pb.ACCEPTANCE_MODE_TYPICAL else "exact",
        typical_threshold=o.typical_threshold if o.HasField("typical_threshold") else ApplyOptions.typical_threshold,
        pipeline=o.pipeline or ApplyOptions.pipeline,
    )
    try:
        options.validate()
    except ApplyError as exc:
        raise Invalid(str(exc))
    return request, options


KNOWN_LANGUAGES = frozenset(LANGUAGES.values())


def language_label(msg: pb.ApplyRequest) -> str:
    """A metrics label from a bounded set: requests must not be able to create label values at will."""
    language = (msg.language or language_of(msg.path)).lower()
    return language if language in KNOWN_LANGUAGES else "other" if language else "unknown"


def stats_message(stats: ApplyStats, model_name: str) -> pb.Stats:
    return pb.Stats(target_passes=stats.target_passes, new_tokens=stats.new_tokens,
                    drafted_tokens=stats.drafted_tokens, accepted_tokens=stats.accepted_tokens,
                    tokens_per_pass=stats.tokens_per_pass, ttft_s=stats.ttft_s, total_s=stats.total_s,
                    prompt_tokens=stats.prompt_tokens, method=stats.method, model=model_name, path=stats.path,
                    disagreement_line=stats.disagreement_line)


class ApplyEditServicer:
    """One model, used by one request at a time; up to `max_queue` more wait, the rest are turned away."""

    def __init__(self, model_name: str, metrics: Metrics, max_queue: int = 8, default_k: int = ApplyOptions.k,
                 max_request_bytes: int = 4 << 20):
        self.model_name = model_name
        self.metrics = metrics
        self.max_queue = max_queue
        self.default_k = default_k
        self.max_request_bytes = max_request_bytes
        self.applier: Applier | None = None  # set once the model is loaded
        self._model = threading.Lock()
        self._admit = threading.Lock()
        self._in_flight = 0  # running + waiting
        self._mean_s = 5.0  # running mean request time, for the retry hint
        # The model's work for every request runs on this one thread, the gRPC worker only relays the pieces.
        # glibc keeps freed memory in per-thread arenas: run on whichever worker, each request's peak (KV cache,
        # prefill activations) stayed behind once per worker thread; measured, 12 requests on 12 threads of a
        # pool took the RSS from 1.0 to 1.6 GB, on one thread it stayed at 0.92-1.03 GB.
        self._model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="apply-edit-model")

    def handler(self) -> grpc.GenericRpcHandler:
        method = grpc.unary_stream_rpc_method_handler(
            self.Apply, request_deserializer=parse_request, response_serializer=pb.ApplyResponse.SerializeToString)
        return grpc.method_handlers_generic_handler(SERVICE, {"Apply": method})

    def Apply(self, msg, context: grpc.ServicerContext):
        if isinstance(msg, BadMessage):
            self.metrics.requests.labels("INVALID_ARGUMENT", "unknown", "unknown").inc()
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"request is not a valid ApplyRequest (string fields must be UTF-8): {msg.reason}")
        labels = (language_label(msg), size_class(msg.original))
        status = "OK"
        try:
            yield from self._apply(msg, context, labels)
        except Invalid as exc:
            status = "INVALID_ARGUMENT"
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except ApplyRefused as exc:
            status = "FAILED_PRECONDITION"
            self.metrics.paths.labels("refused").inc()
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except _Refused as exc:
            status = exc.code.name
            context.set_trailing_metadata(exc.metadata)
            context.abort(exc.code, exc.message)
        except _ClientGone:
            status = "CANCELLED"
        except Exception as exc:  # never let one request take the server down
            status = "INTERNAL"
            context.abort(grpc.StatusCode.INTERNAL, f"apply failed: {type(exc).__name__}: {exc}")
        finally:
            if status == "OK" and not context.is_active():
                status = "CANCELLED"
            self.metrics.requests.labels(status, *labels).inc()

    def _apply(self, msg, context, labels):
        applier = self.applier
        if applier is None:
            raise _Refused(grpc.StatusCode.UNAVAILABLE, "the model is still loading; retry shortly")
        request, options = to_apply(msg, self.model_name, self.max_request_bytes, self.default_k)
        with self._admission():
            self._wait_for_model(context)
            try:
                try:
                    run = self._on_model(applier.stream, request, options)
                except ApplyError as exc:
                    raise Invalid(str(exc))
                context.add_callback(run.cancel)  # client cancel / deadline: stop after the current verify pass
                pieces = iter(run)
                try:
                    while (piece := self._on_model(next, pieces, _END)) is not _END:
                        yield pb.ApplyResponse(text=piece, tokens=run.stats.new_tokens)
                    if not run.cancelled:
                        stats = run.stats
                        yield pb.ApplyResponse(tokens=stats.new_tokens, stats=stats_message(stats, self.model_name))
                        self._observe(stats, labels)
                finally:
                    self._on_model(_close, pieces, run)  # frees the request's KV cache, also when the client went away
            finally:
                self._model.release()

    def _on_model(self, fn, *args):
        """fn(*args) on the model thread; its result, or its exception raised here."""
        return self._model_thread.submit(fn, *args).result()

    def _observe(self, stats: ApplyStats, labels) -> None:
        m = self.metrics
        m.paths.labels(stats.path or "unjudged").inc()
        m.ttft.labels(*labels).observe(stats.ttft_s)
        m.ttlt.labels(*labels).observe(stats.total_s)
        m.tokens_per_pass.labels(*labels).observe(stats.tokens_per_pass)
        if stats.drafted_tokens:
            m.acceptance.labels(*labels).observe(stats.acceptance_rate)
        self._mean_s = 0.8 * self._mean_s + 0.2 * stats.total_s

    def _wait_for_model(self, context) -> None:
        self.metrics.queue_depth.inc()
        try:
            while not self._model.acquire(timeout=0.05):
                if not context.is_active():
                    raise _ClientGone()
        finally:
            self.metrics.queue_depth.dec()

    @contextmanager
    def _admission(self):
        """A place among the running and queued requests, or RESOURCE_EXHAUSTED with a retry hint."""
        with self._admit:
            if self._in_flight >= 1 + self.max_queue:
                wait_ms = int(self._mean_s * self._in_flight * 1000)
                raise _Refused(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"server busy: {self._in_flight} requests running or queued; "
                               f"retry in about {wait_ms / 1000:.0f}s", (("retry-after-ms", str(wait_ms)),))
            self._in_flight += 1
        try:
            yield
        finally:
            with self._admit:
                self._in_flight -= 1


_END = object()


def _libc_malloc_trim():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


_MALLOC_TRIM = _libc_malloc_trim()


def _close(pieces, run) -> None:
    """End a request on the model thread, and hand the memory it freed back to the system (glibc keeps freed
    memory for reuse otherwise, so the RSS of an idle server would depend on which request came last)."""
    pieces.close()
    run.close()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)  # ~10 ms


class _Refused(Exception):
    def __init__(self, code: grpc.StatusCode, message: str, metadata=()):
        self.code, self.message, self.metadata = code, message, metadata


class _ClientGone(Exception):
    """The client went away while the request was waiting; nothing to answer."""

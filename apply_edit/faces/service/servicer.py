"""The ApplyEdit gRPC servicer: validate a request, run it on the model service (core.py), stream the file."""

from __future__ import annotations

import math
from contextlib import contextmanager

import grpc
from google.protobuf.message import DecodeError

from ...request.runs import METHODS, ApplyError, ApplyOptions, ApplyRequest, ApplyStats, NoPrefixStore, merge_answer
from ...judging.decide import ApplyRefused
from ...code.languages import KNOWN_LANGUAGES, language_of
from ...judging.prompting import text_bytes
from ...models.target import TargetTimeout, TargetUnavailable
from ...v1 import apply_edit_pb2 as pb
from .core import Busy, ClientGone, ModelService, NotReady
from .metrics import size_class

SERVICE = "apply_edit.v1.ApplyEdit"


class BadMessage:
    """Stands in for a request that could not be parsed (e.g. string fields that are not UTF-8)."""

    def __init__(self, reason: str):
        self.reason = reason


def parser(message_class):
    """A request deserializer that hands a message which cannot be parsed to the method as a BadMessage."""
    def parse(data: bytes):
        try:
            return message_class.FromString(data)
        except DecodeError as exc:
            return BadMessage(str(exc))

    return parse


parse_request = parser(pb.ApplyRequest)


class Invalid(Exception):
    """A request the service refuses with INVALID_ARGUMENT; the message says what to fix."""


def known_language(name: str) -> str:
    """A request's language name if the table knows it, else "" (the path's extension decides). Free-form names
    (up to ~1 MB each, outside max_request_bytes) must not reach per-name caches (parsers) or labels."""
    return name.lower() if name.lower() in KNOWN_LANGUAGES else ""


def check_model(given: str, served: str, field: str) -> None:
    if given and given != served:
        raise Invalid(f"unknown model {given!r}: this server serves {served!r} (or leave {field} empty)")


def to_apply(msg: pb.ApplyRequest, model_name: str, max_request_bytes: int, default_k: int):
    """Proto request → (ApplyRequest, ApplyOptions), or Invalid with a message that says what to fix."""
    size = text_bytes(msg.original, msg.update, msg.instruction)
    if size > max_request_bytes:
        raise Invalid(f"request is {size} bytes; this server accepts at most {max_request_bytes} bytes of "
                      f"original + update + instruction")
    request = ApplyRequest(msg.original, msg.update, msg.instruction, known_language(msg.language), msg.path)
    try:
        request.validate()
    except ApplyError as exc:
        raise Invalid(str(exc))
    if not msg.update.strip() and not msg.instruction.strip():
        raise Invalid("update is empty; send the edit snippet (or at least an instruction)")
    o = msg.options
    check_model(o.model, model_name, "options.model")
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


def language_label(msg: pb.ApplyRequest) -> str:
    """A metrics label from a bounded set: requests must not be able to create label values at will."""
    language = (msg.language or language_of(msg.path)).lower()
    return language if language in KNOWN_LANGUAGES else "other" if language else "unknown"


def stats_message(stats: ApplyStats, model_name: str) -> pb.Stats:
    engine = stats.decode
    return pb.Stats(prompt_tokens_cached=engine.prompt_cached, target_passes=engine.target_passes, new_tokens=engine.new_tokens,
                    drafted_tokens=engine.drafted_tokens, accepted_tokens=engine.accepted_tokens,
                    tokens_per_pass=engine.tokens_per_pass, ttft_s=stats.ttft_s, total_s=stats.total_s,
                    prompt_tokens=stats.prompt_tokens, method=stats.method, model=model_name, path=stats.path,
                    disagreement_line=stats.disagreement_line, regions_written=stats.regions_written,
                    verdicts=stats.verdicts)


class ApplyEditServicer:
    """The gRPC face of the model service: proto in, streamed proto out, errors as gRPC status codes."""

    def __init__(self, service: ModelService, default_k: int = ApplyOptions.k, max_request_bytes: int = 4 << 20):
        self.service = service
        self.metrics = service.metrics
        self.default_k = default_k
        self.max_request_bytes = max_request_bytes

    def handler(self) -> grpc.GenericRpcHandler:
        apply = grpc.unary_stream_rpc_method_handler(
            self.Apply, request_deserializer=parse_request, response_serializer=pb.ApplyResponse.SerializeToString)
        warm = grpc.unary_unary_rpc_method_handler(
            self.Warm, request_deserializer=parser(pb.WarmRequest), response_serializer=pb.WarmResponse.SerializeToString)
        return grpc.method_handlers_generic_handler(SERVICE, {"Apply": apply, "Warm": warm})

    @contextmanager
    def _status(self, msg, context: grpc.ServicerContext, counter, what: str):
        """Maps what a call raises to its gRPC status, and counts the call by status on `counter`."""
        if isinstance(msg, BadMessage):
            counter("INVALID_ARGUMENT")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"request is not a valid {what} (string fields must be UTF-8): {msg.reason}")
        status = "OK"
        try:
            yield
        except Invalid as exc:
            status = "INVALID_ARGUMENT"
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except ApplyRefused as exc:
            status = "FAILED_PRECONDITION"
            self.metrics.paths.labels("refused").inc()
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except NotReady as exc:
            status = "UNAVAILABLE"
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except Busy as exc:
            status = "RESOURCE_EXHAUSTED"
            context.set_trailing_metadata((("retry-after-ms", str(exc.retry_after_ms)),))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except ClientGone:
            status = "CANCELLED"
        except TargetTimeout as exc:
            status = "DEADLINE_EXCEEDED"
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, str(exc))
        except TargetUnavailable as exc:
            status = "UNAVAILABLE"
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except Exception as exc:  # never let one request take the server down
            status = "INTERNAL"
            context.abort(grpc.StatusCode.INTERNAL, f"{what.removesuffix('Request')} failed: {type(exc).__name__}: {exc}")
        finally:
            if status == "OK" and not context.is_active():
                status = "CANCELLED"
            counter(status)

    def Apply(self, msg, context: grpc.ServicerContext):
        labels = ("unknown", "unknown") if isinstance(msg, BadMessage) else (language_label(msg), size_class(msg.original))
        with self._status(msg, context, lambda status: self.metrics.requests.labels(status, *labels).inc(),
                          "ApplyRequest"):
            yield from self._apply(msg, context, labels)

    def Warm(self, msg, context: grpc.ServicerContext) -> pb.WarmResponse:
        with self._status(msg, context, lambda status: self.metrics.warmups.labels(status).inc(), "WarmRequest"):
            return self._warm(msg, context)

    def _warm(self, msg: pb.WarmRequest, context) -> pb.WarmResponse:
        service = self.service
        service.check_ready()
        size = text_bytes(msg.original)
        if size > self.max_request_bytes:
            raise Invalid(f"original is {size} bytes; this server accepts at most {self.max_request_bytes}")
        if not msg.original.strip():
            raise Invalid("original is empty; send the file to read ahead")
        check_model(msg.model, service.model_name, "model")
        request = ApplyRequest(msg.original, "", "", known_language(msg.language), msg.path)
        try:
            held, seconds = service.warm(request, context.is_active)
        except NoPrefixStore as exc:
            raise ApplyRefused(str(exc))
        except ApplyError as exc:  # e.g. a file longer than the model's context
            raise Invalid(str(exc))
        return pb.WarmResponse(tokens_held=held, seconds=seconds)

    def _apply(self, msg, context, labels):
        service = self.service
        service.check_ready()
        request, options = to_apply(msg, service.model_name, self.max_request_bytes, self.default_k)
        with service.admitted():
            runs = []

            def invalid_as_status(fn, *args):
                try:
                    return fn(*args)
                except ApplyError as exc:
                    raise Invalid(str(exc))

            def start(applier):
                return invalid_as_status(applier.stream, request, options)

            def answer_now():
                return invalid_as_status(merge_answer, request, options)

            def on_run(run):
                runs.append(run)
                context.add_callback(run.cancel)  # client cancel / deadline: stop after the current pass

            for piece in service.pieces(start, on_run, context.is_active, answer_now):
                yield pb.ApplyResponse(text=piece, tokens=runs[0].stats.decode.new_tokens)
            run = runs[0]
            if not run.cancelled:
                yield pb.ApplyResponse(tokens=run.stats.decode.new_tokens, stats=stats_message(run.stats, service.model_name))
                service.observe(run.stats, labels)

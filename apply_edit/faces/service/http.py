"""The OpenAI-compatible HTTP face (FastAPI): what Continue, avante.nvim, Morph and Relace clients speak.

Routes (one model, the same queue, limits, token and metrics as the gRPC face; `core.ModelService`):

- `POST /v1/chat/completions` (and `/v1/apply/chat/completions`, Relace's OpenAI-style path): a user
  message in Morph's tagged shape (`<instruction(s)>`, `<code>`, `<update>`; string or content parts) is
  an apply, answered with the merged file through the default judged pipeline. Any other chat is a chat
  completion on the model's chat template; a `prediction` ({"type": "content", "content": ...}) is then
  the draft the model verifies (OpenAI's Predicted Outputs), with `accepted_prediction_tokens` and
  `rejected_prediction_tokens` in `usage.completion_tokens_details`. `stream: true` answers with SSE
  chunks as the text is verified, then `data: [DONE]`; `stream_options.include_usage` adds the usage chunk.
- `POST /v1/code/apply`: Relace's REST shape, `{initialCode, editSnippet, instruction?, stream?}` ->
  `{mergedCode, usage}`; streamed as SSE `data: {"chunk": ...}` events, then a usage event and `[DONE]`.
- `GET /v1/models`, `GET /health` (200 serving, 503 loading or draining).

Errors come in OpenAI's shape `{"error": {"message", "type", "param", "code"}}`: 400 bad input, 401 token,
404 unknown model, 413 too large, 422 no sound result (the apply was refused: nothing to write), 429 queue
full (with Retry-After), 503 loading or draining, 504 the server's deadline. A refusal or deadline after a
stream has started arrives as a last SSE event `data: {"error": {...}}`, which the openai SDKs raise as an
APIError: a client must discard the partial text then, as it would on a dropped connection. A client that
disconnects cancels decoding within one verify pass (or one chunk of the prompt).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import threading
import time
import uuid
from typing import Any, AsyncIterator, Callable, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from ...request.apply import Applier
from ...request.runs import ApplyError, ApplyOptions, ApplyRequest, ApplyRun, NoPrefixStore, merge_answer
from ...request.chat import ChatOptions, stream_chat
from ...judging.decide import ApplyRefused
from ...code.languages import KNOWN_LANGUAGES
from ...judging.prompting import text_bytes
from ...models.target import TargetTimeout, TargetUnavailable
from ...code.regions import language_for
from .core import Busy, ClientGone, ModelService, NotReady
from .metrics import size_class

class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


Content = str | list[ContentPart]


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: Content | None = None


class Prediction(BaseModel):
    type: Literal["content"]
    content: Content


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """OpenAI's chat completion request; fields this server does not use are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    n: int | None = Field(default=None, ge=1, le=1)
    stop: str | list[str] | None = None
    prediction: Prediction | None = None
    # Not OpenAI's: where the file lives (its language decides the merge's structure and the checks).
    path: str | None = None
    language: str | None = None


class RelaceRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    initialCode: str
    editSnippet: str
    instruction: str | None = None
    stream: bool = False
    model: str | None = None
    path: str | None = None
    language: str | None = None


class WarmRequest(BaseModel):
    """Not Relace's: a file to read ahead of its edits (the gRPC face's Warm)."""

    model_config = ConfigDict(extra="allow")
    initialCode: str
    model: str | None = None
    path: str | None = None
    language: str | None = None


class HttpError(Exception):
    def __init__(self, status: int, message: str, kind: str, code: str | None = None, param: str | None = None,
                 headers: dict | None = None, metric: str = "INVALID_ARGUMENT"):
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param
        self.headers, self.metric = headers or {}, metric

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def _bad(message: str, param: str | None = None) -> HttpError:
    return HttpError(400, message, "invalid_request_error", "invalid_request", param)


def _text(content) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(part.text or "" for part in content if part.type == "text")


def _tagged(text: str, name: str, start: int = 0, end: int | None = None) -> tuple[str, int, int] | None:
    """The text between <name> and the last </name> (up to `end`), with its span; one newline right after
    the opening tag is the layout's, not the file's."""
    opening = text.find(f"<{name}>", start, end)
    if opening < 0:
        return None
    body = opening + len(name) + 2
    closing = text.rfind(f"</{name}>", body, end)
    if closing < 0:
        return None
    inner = text[body:closing]
    return (inner[1:] if inner.startswith("\n") else inner), opening, closing + len(name) + 3


def parse_apply_message(text: str) -> tuple[str, str, str] | None:
    """(instruction, code, update) from Morph's / Relace's tagged message, or None when it is not one.
    The file may itself contain the tags' text: `<update>` is the last one, `</code>` the last before it."""
    update = _tagged(text, "update", text.rfind("<update>"))
    if update is None:
        return None
    code = _tagged(text, "code", 0, update[1])
    if code is None:
        return None
    instruction = ""
    for name in ("instruction", "instructions"):
        found = _tagged(text, name, 0, code[1])
        if found is not None:
            instruction = found[0].strip()
            break
    return instruction, code[0], update[0]


def _language(path: str | None, language: str | None, original: str, update: str) -> str:
    if language and language.lower() in KNOWN_LANGUAGES:
        return language.lower()
    return language_for(path, original or update)


def _usage(run: ApplyRun, prediction: bool = False) -> dict:
    s, engine = run.stats, run.stats.decode
    usage = {"prompt_tokens": s.prompt_tokens, "completion_tokens": engine.new_tokens,
             "total_tokens": s.prompt_tokens + engine.new_tokens,
             "prompt_tokens_details": {"cached_tokens": engine.prompt_cached}}
    if prediction:
        usage["completion_tokens_details"] = {
            "accepted_prediction_tokens": engine.accepted_tokens,
            "rejected_prediction_tokens": engine.drafted_tokens - engine.accepted_tokens}
    return usage


class _Job:
    """What one HTTP request asks of the model: how to start the run, and how to label and report it."""

    def __init__(self, start: Callable[[Applier], ApplyRun], labels: tuple[str, str], is_apply: bool,
                 prediction: bool = False, answer_now: Callable[[], ApplyRun | None] = lambda: None):
        self.start, self.labels, self.is_apply, self.prediction = start, labels, is_apply, prediction
        self.answer_now = answer_now  # a run that needs no model, or None (`ModelService.pieces`)
        self.run: ApplyRun | None = None


def create_app(service: ModelService, *, model_names: tuple[str, ...], token: str | None = None,
               max_request_bytes: int = 4 << 20, default_k: int = ApplyOptions.k,
               timeout_s: float | None = None, draining: Callable[[], bool] = lambda: False) -> FastAPI:
    """The FastAPI app of the HTTP face. `model_names`: what requests may call the model (the first is
    reported); `timeout_s`: the longest a request may take (504 after it), None for no limit."""
    app = FastAPI(title="apply_edit", version="1", docs_url=None, redoc_url=None)
    metrics = service.metrics
    expected = f"Bearer {token}".encode() if token else None

    def error_response(exc: HttpError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(HttpError)
    async def on_http_error(request: Request, exc: HttpError):
        metrics.requests.labels(exc.metric, "unknown", "unknown").inc()
        return error_response(exc)

    @app.exception_handler(HTTPException)
    async def on_framework_error(request: Request, exc: HTTPException):
        """FastAPI's own refusals, in OpenAI's shape too: a body it cannot parse (invalid UTF-8, nesting past the
        recursion limit, an integer of thousands of digits; the cause says which), an unknown route or method."""
        message = f"{exc.detail}: {exc.__cause__}" if exc.__cause__ else str(exc.detail)
        return await on_http_error(request, HttpError(exc.status_code, message, "invalid_request_error",
                                                      headers=exc.headers))

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or None
        message = f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg", "invalid request"))
        if first.get("type") == "json_invalid":
            message = "the body is not valid JSON"
        metrics.requests.labels("INVALID_ARGUMENT", "unknown", "unknown").inc()
        return error_response(_bad(message, where))

    @app.middleware("http")
    async def guard(request: Request, call_next):
        """The token (all but /health), and the body size, before any body is parsed."""
        if expected is not None and request.url.path != "/health":
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), expected):
                reason = ("missing bearer token: this server needs 'Authorization: Bearer <token>'" if not given
                          else "wrong bearer token")
                metrics.requests.labels("UNAUTHENTICATED", "unknown", "unknown").inc()
                return error_response(HttpError(401, reason, "invalid_request_error", "invalid_api_key"))
        if "transfer-encoding" in request.headers:  # chunked: no size to check before the body is read, all of it
            metrics.requests.labels("INVALID_ARGUMENT", "unknown", "unknown").inc()
            return error_response(HttpError(411, "send the body with a Content-Length header: this server checks a "
                                                 "body's size before reading it, so it takes no chunked bodies",
                                            "invalid_request_error", "length_required"))
        length = request.headers.get("content-length")
        # JSON escaping can double the text (newlines, quotes): allow twice the limit on the wire.
        if length and length.isdigit() and int(length) > 2 * max_request_bytes + 65536:
            metrics.requests.labels("INVALID_ARGUMENT", "unknown", "unknown").inc()
            return error_response(HttpError(413, f"request is {length} bytes; this server accepts at most "
                                                 f"{max_request_bytes} bytes of code and snippet",
                                            "invalid_request_error", "request_too_large"))
        return await call_next(request)

    @app.get("/health")
    async def health():
        if draining():
            return JSONResponse({"status": "draining"}, status_code=503)
        if service.applier is None:
            return JSONResponse({"status": "loading"}, status_code=503)
        return {"status": "ok", "model": model_names[0]}

    @app.get("/v1/models")
    async def models():
        now = int(time.time())
        return {"object": "list", "data": [{"id": name, "object": "model", "created": now, "owned_by": "apply_edit"}
                                           for name in model_names]}

    def check_model(name: str | None) -> None:
        if name and name not in model_names:
            raise HttpError(404, f"model {name!r} is not served here; use one of {', '.join(model_names)}",
                            "invalid_request_error", "model_not_found", "model", metric="NOT_FOUND")

    def check_text(*texts: str) -> None:
        """The texts that reach the tokenizer: within the size limit, and Unicode (JSON's \\ud800 escapes decode to
        lone surrogates, which the tokenizer cannot take)."""
        size = text_bytes(*texts)
        if size > max_request_bytes:
            raise HttpError(413, f"request is {size} bytes of text; this server accepts at most "
                                 f"{max_request_bytes}", "invalid_request_error", "request_too_large")
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise _bad(f"the text holds a lone surrogate ({text[exc.start]!r} at character {exc.start}), "
                           f"which is not Unicode text; send UTF-8")

    def apply_job(original: str, update: str, instruction: str, path: str | None, language: str | None,
                  options: ApplyOptions) -> _Job:
        check_text(original, update, instruction)
        request = ApplyRequest(original, update, instruction, _language(path, language, original, update), path or "")
        try:
            request.validate()
            options.validate()
        except ApplyError as exc:
            raise _bad(str(exc))
        if not update.strip() and not instruction.strip():
            raise _bad("the update is empty; send the edit snippet (or at least an instruction)")
        labels = (request.language or "unknown", size_class(original))
        return _Job(lambda applier: applier.stream(request, options), labels, is_apply=True,
                    answer_now=lambda: merge_answer(request, options))

    def chat_job(body: ChatRequest) -> _Job:
        check_model(body.model)
        max_new = body.max_completion_tokens or body.max_tokens
        users = [m for m in body.messages if m.role == "user"]
        tagged = parse_apply_message(_text(users[-1].content)) if users else None
        if tagged is not None:
            instruction, original, update = tagged
            options = ApplyOptions(max_new_tokens=max_new, k=default_k, temperature=body.temperature or 0.0,
                                   top_p=body.top_p if body.top_p is not None else 1.0, seed=body.seed)
            return apply_job(original, update, instruction, body.path, body.language, options)
        prediction = _text(body.prediction.content) if body.prediction else ""
        messages = [{"role": m.role, "content": _text(m.content)} for m in body.messages]
        check_text(prediction, *(text for m in messages for text in (m["role"], m["content"])))
        stops = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
        options = ChatOptions(max_new_tokens=max_new, temperature=body.temperature or 0.0,
                              top_p=body.top_p if body.top_p is not None else 1.0, seed=body.seed, k=default_k,
                              stop=stops)
        return _Job(lambda applier: stream_chat(applier, messages, options, prediction), ("chat", "small"),
                    is_apply=False, prediction=bool(prediction))

    async def pieces(job: _Job, request: Request) -> AsyncIterator[str]:
        """The run's pieces as the model thread verifies them. The first item is None once the run has
        started (so errors before that can still be an HTTP status); the client leaving, or the deadline,
        cancels the run."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        gone = threading.Event()

        def put(item) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is closed: nobody is listening any more
                pass

        def on_run(run: ApplyRun) -> None:
            job.run = run
            if gone.is_set():
                run.cancel()
            put(("started", None))

        def work() -> None:
            try:
                with service.admitted():
                    for piece in service.pieces(job.start, on_run, lambda: not gone.is_set(), job.answer_now):
                        put(("piece", piece))
                put(("end", None))
            except BaseException as exc:  # handed to the request's coroutine
                put(("error", exc))

        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        threading.Thread(target=work, name="apply-edit-http", daemon=True).start()
        watcher = asyncio.ensure_future(_watch_disconnect(request, gone, job))
        ended = False
        try:
            while True:
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                try:
                    kind, value = await asyncio.wait_for(queue.get(), left)
                except asyncio.TimeoutError:
                    raise HttpError(504, f"the request took longer than this server's limit of {timeout_s:g} s",
                                    "timeout_error", "timeout", metric="DEADLINE_EXCEEDED")
                if kind == "started":
                    yield None
                elif kind == "piece":
                    yield value
                elif kind == "end":
                    ended = True
                    return
                else:
                    raise _as_http(value)
        finally:
            gone.set()  # the worker stops waiting for the model, the watcher stops watching
            if job.run is not None and not ended:
                job.run.cancel()
            watcher.cancel()

    async def answer(job: _Job, request: Request, stream: bool, render_stream, render_whole):
        """Runs the job; errors before the first piece are an HTTP status, after it an SSE error event."""
        labels = job.labels
        it = pieces(job, request)
        try:
            await it.__anext__()  # started (or an error)
        except HttpError as exc:
            metrics.requests.labels(exc.metric, *labels).inc()
            await it.aclose()
            return error_response(exc)
        if not stream:
            try:
                text = "".join([p async for p in it])
            except HttpError as exc:
                metrics.requests.labels(exc.metric, *labels).inc()
                return error_response(exc)
            if job.run.cancelled:  # the client hung up: nobody to answer
                metrics.requests.labels("CANCELLED", *labels).inc()
                return error_response(_as_http(ClientGone()))
            _observe(job)
            metrics.requests.labels("OK", *labels).inc()
            return JSONResponse(render_whole(text, job))

        async def events():
            outcome = "CANCELLED"  # until the stream ends one way or the other
            try:
                async for chunk in render_stream(it, job):
                    yield chunk
                _observe(job)
                outcome = "OK"
            except HttpError as exc:
                outcome = exc.metric
                yield _sse(exc.body())
            finally:
                await it.aclose()
                metrics.requests.labels(outcome, *labels).inc()

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    def _observe(job: _Job) -> None:
        if job.run is not None and not job.run.cancelled:
            service.observe(job.run.stats, job.labels)

    def chat_renderers(body: ChatRequest):
        ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

        def chunk(delta: dict, finish: str | None = None, **extra) -> dict:
            return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": body.model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}

        def finish_reason(job: _Job) -> str:
            return "stop" if job.is_apply or job.run.finished else "length"

        async def render_stream(it, job: _Job):
            yield _sse(chunk({"role": "assistant", "content": ""}))
            async for piece in it:
                if piece:
                    yield _sse(chunk({"content": piece}))
            yield _sse(chunk({}, finish_reason(job), **_apply_info(job)))
            if body.stream_options and body.stream_options.include_usage:
                yield _sse({"id": ident, "object": "chat.completion.chunk", "created": created, "model": body.model,
                            "choices": [], "usage": _usage(job.run, job.prediction)})
            yield "data: [DONE]\n\n"

        def render_whole(text: str, job: _Job) -> dict:
            return {"id": ident, "object": "chat.completion", "created": created, "model": body.model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "logprobs": None, "finish_reason": finish_reason(job)}],
                    "usage": _usage(job.run, job.prediction), **_apply_info(job)}

        return render_stream, render_whole

    def check_open() -> None:
        if draining():
            raise HttpError(503, "the server is shutting down; retry on another", "server_error",
                            "unavailable", metric="UNAVAILABLE")

    async def chat_completions(request: Request, body: ChatRequest):
        check_open()
        job = chat_job(body)
        render_stream, render_whole = chat_renderers(body)
        return await answer(job, request, body.stream, render_stream, render_whole)

    app.post("/v1/chat/completions")(chat_completions)
    app.post("/v1/apply/chat/completions")(chat_completions)

    @app.post("/v1/code/apply")
    async def relace_apply(request: Request, body: RelaceRequest):
        check_open()
        check_model(body.model)
        job = apply_job(body.initialCode, body.editSnippet, body.instruction or "", body.path, body.language,
                        ApplyOptions(k=default_k))

        async def render_stream(it, job: _Job):
            async for piece in it:
                if piece:
                    yield _sse({"chunk": piece})
            yield _sse({"usage": _usage(job.run), **_apply_info(job)})
            yield "data: [DONE]\n\n"

        def render_whole(text: str, job: _Job) -> dict:
            return {"mergedCode": text, "usage": _usage(job.run), **_apply_info(job)}

        return await answer(job, request, body.stream, render_stream, render_whole)

    @app.post("/v1/code/warm")
    async def warm(body: WarmRequest):
        """Reads a file into the model ahead of its edits (`ModelService.warm`): the apply to it that follows
        prefills only the snippet and what comes after. `{tokensHeld, seconds}`."""
        status = "OK"
        try:
            check_open()
            check_model(body.model)
            check_text(body.initialCode)
            if not body.initialCode.strip():
                raise _bad("initialCode is empty; send the file to read ahead")
            request = ApplyRequest(body.initialCode, "", "", _language(body.path, body.language, body.initialCode, ""),
                                   body.path or "")
            try:
                held, seconds = await asyncio.to_thread(service.warm, request, lambda: not draining())
            except NoPrefixStore as exc:
                raise HttpError(422, str(exc), "invalid_request_error", "no_prefix_store", metric="FAILED_PRECONDITION")
            return {"tokensHeld": held, "seconds": round(seconds, 4)}
        except Exception as exc:
            error = _as_http(exc)
            status = error.metric
            return error_response(error)
        finally:
            metrics.warmups.labels(status).inc()

    return app


def _apply_info(job: _Job) -> dict:
    """Not OpenAI's (clients ignore unknown fields): the target passes the answer took, the server's own
    times, and for an apply which path produced its text (decide.PATHS), where the model departed, the
    regions it wrote and the readings the target decided."""
    if job.run is None:
        return {}
    s = job.run.stats
    info = {"target_passes": s.decode.target_passes, "ttft_s": round(s.ttft_s, 4), "total_s": round(s.total_s, 4)}
    if job.is_apply:
        info.update(path=s.path, disagreement_line=s.disagreement_line or None,
                    regions_written=s.regions_written or None, verdicts=s.verdicts or None)
    return {"apply_edit": info}


def _sse(data: Any) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def _watch_disconnect(request: Request, gone: threading.Event, job: _Job) -> None:
    """A client that hangs up cancels its run (streaming or not) within one verify pass. It waits for the
    disconnect message itself: `request.is_disconnected()` polls with a cancelled receive, which behind a
    middleware (the guard) is cancelled before it returns, so it never saw one."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    gone.set()
    if job.run is not None:
        job.run.cancel()


def _as_http(exc: BaseException) -> HttpError:
    if isinstance(exc, HttpError):
        return exc
    if isinstance(exc, ApplyRefused):
        return HttpError(422, str(exc), "invalid_request_error", "no_sound_result", metric="FAILED_PRECONDITION")
    if isinstance(exc, ApplyError):
        return _bad(str(exc))
    if isinstance(exc, Busy):
        seconds = max(1, math.ceil(exc.retry_after_ms / 1000))
        return HttpError(429, str(exc), "rate_limit_error", "server_busy", headers={"Retry-After": str(seconds)},
                         metric="RESOURCE_EXHAUSTED")
    if isinstance(exc, NotReady):
        return HttpError(503, str(exc), "server_error", "loading", headers={"Retry-After": "5"}, metric="UNAVAILABLE")
    if isinstance(exc, ClientGone):
        return HttpError(499, "the client went away", "invalid_request_error", "cancelled", metric="CANCELLED")
    if isinstance(exc, TargetTimeout):
        return HttpError(504, str(exc), "timeout_error", "model_timeout", metric="DEADLINE_EXCEEDED")
    if isinstance(exc, TargetUnavailable):
        return HttpError(503, str(exc), "server_error", "model_unavailable", headers={"Retry-After": "5"},
                         metric="UNAVAILABLE")
    return HttpError(500, f"apply failed: {type(exc).__name__}: {exc}", "server_error", "internal", metric="INTERNAL")

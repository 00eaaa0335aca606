"""The HTTP face under hostile input and faults, on the real small model (smollm2-135m, fp32, one torch thread): the
bar tests/test_fuzz.py and tests/test_faults.py set for gRPC.

Every answer is a complete 2xx or a 4xx in OpenAI's error shape `{"error": {"message", "type", ...}}`, never a 5xx
but by design (504 past the server's deadline; 500 only for the injected model failure); a stream is complete
(`data: [DONE]` last) or ends in one `data: {"error": ...}` event; an abandoned request stops within about a
verify pass and frees the model; afterwards the server answers /health, applies exactly as before, and its RSS is
flat once warm.

    short (CI):  .venv/bin/python -m pytest -q tests/test_http_faults.py
    long:        .venv/bin/python -m pytest -q tests/test_http_faults.py --fuzz-examples 2000 --faults 500

The fuzz sends --fuzz-examples / 2 requests (CI: 100), at most 1,000 (the long run); the fault mix injects --faults
faults (CI: 30), ten kinds in a seeded order. Measured on the 2-core CPU here with CI=1: the module 193 s, of which
the fuzz 112 s (0.95 s a request: a refusal takes milliseconds, a served request a prefill) and the faults 58 s
(1.2 s a fault, the deadlines 4 s each); 300 requests took 267 s, so the long run is some 15 min of fuzz and 10 of
faults.
"""

from __future__ import annotations

import copy
import http.client
import json
import math
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import openai
import pytest
import torch
from hypothesis import strategies as st

from apply_edit.faces.cases import load_case
from apply_edit.models.transformers_target import TransformersTarget
from apply_edit.faces.service.http_load import apply_message
from conftest import FIXTURES, free_port, http_server, long_chat, rss_mib, run_hypothesis, wait_until

pytestmark = pytest.mark.model

MODEL = "smollm2-135m"
STORE_BYTES = 32 << 20
LIMIT = 64 * 1024  # these servers' --max-request-mb: small, so that over it is cheap to send
WIRE_LIMIT = 2 * LIMIT + 65536  # the Content-Length the guard refuses above (http.py)
DEADLINE_S = 4.0  # the fault server's --http-timeout
HANG_S = 120.0  # an answer that takes longer is a hang
FUZZ_SHARE, FUZZ_CAP = 2, 1000  # the fuzz sends --fuzz-examples / 2 requests, at most 1,000
CHAT, APPLY_CHAT, RELACE = "/v1/chat/completions", "/v1/apply/chat/completions", "/v1/code/apply"
CASE = load_case(FIXTURES / "ts_small_file_whole_rewrite")  # 14 lines: a whole apply in seconds


@pytest.fixture(scope="module")
def target():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in tests/test_faults.py: on this busy 2-core machine one thread is faster
    yield TransformersTarget.load(MODEL, dtype="fp32", log=lambda *_: None)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def server(target):
    # A prefix store of one chunk of the small model's keys and values (46 kB a token x 512): the fuzz's long
    # chats would otherwise fill the default 256 MiB, which is memory held by design, not leaked.
    server = http_server(target, max_request_bytes=LIMIT, prefix_cache_bytes=STORE_BYTES)
    yield server
    server.stop(0)


def settled(server, target) -> bool:
    """Nothing running or queued, the KV cache freed, and no request's relay thread left."""
    return (server.model.idle() and target._cache is None
            and not any(t.name == "apply-edit-http" for t in threading.enumerate()))


def send(port: int, path: str, body: bytes, content_type: str | None = "application/json", method: str = "POST",
         chunked: bool = False) -> tuple[int, http.client.HTTPMessage, bytes]:
    """(status, headers, body) of one raw request: what no SDK would send, nothing retried."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_S)
    headers = {} if content_type is None else {"Content-Type": content_type}
    try:
        try:
            conn.request(method, path, body=iter([body]) if chunked else body, headers=headers,
                         encode_chunked=chunked)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the body was read (over the size limit): the answer is there to read
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def error_of(status: int, headers, data: bytes) -> dict:
    """The error of a refusal, which must be in OpenAI's shape."""
    assert headers.get_content_type() == "application/json", (status, headers.get_content_type(), data[:300])
    error = json.loads(data)["error"]
    assert isinstance(error["message"], str) and error["message"].strip() and isinstance(error["type"], str), data
    return error


def sse_events(data: bytes) -> list:
    """Each event's data, parsed ("[DONE]" as is)."""
    text = data.decode()
    assert text.endswith("\n\n"), text[-300:]
    events = []
    for block in text[:-2].split("\n\n"):
        assert block.startswith("data: ") and "\n" not in block, block
        events.append(block[6:] if block == "data: [DONE]" else json.loads(block[6:]))
    return events


def stream_outcome(route: str, events: list):
    """A complete stream's text, or the error of the one error event that ended it."""
    *body, last = events
    assert all(isinstance(e, dict) and "error" not in e for e in body), events
    if last != "[DONE]":
        assert isinstance(last["error"]["message"], str) and last["error"]["message"] and last["error"]["type"]
        return last["error"]
    if route == RELACE:
        *chunks, usage = body
        assert all(list(c) == ["chunk"] for c in chunks), body
        # A sound merge is answered without the model (no tokens); the model's answer counts its tokens.
        assert (usage["usage"]["total_tokens"] > 0) == (usage["apply_edit"]["path"] != "merge"), body
        return "".join(c["chunk"] for c in chunks)
    assert body[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    finishes = [c["choices"][0]["finish_reason"] for c in body if c["choices"]]
    assert finishes[-1] in ("stop", "length") and not any(finishes[:-1]), finishes
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in body if c["choices"])


# --- The fuzz: hostile request bodies, encodings, content types and framings --------------------------------------

# Text the tokenizer, the chat template and the SSE framing care about (no apply tags: only the cases built as
# applies parse as one).
TRICKY = ["\x00", "<|im_end|>", "<|im_start|>assistant\n", "<|endoftext|>", "```", "\r\n", "\ufeff", "\u202e",
          "\U0010ffff", "\U0001f600", "# ... existing code ...\n", "\\", '"', "\n\ndata: [DONE]\n\n", "{}", "%s"]
ROLES = ["user", "system", "assistant", "developer", "tool", "function", "", "USER", "narrator"]
CODES = ["", "x = 1\n", "def f():\n    return 1\n", "function f() {\n  return 1;\n}\n", "fn main() {}\n"]
SNIPPETS = ["x = 2\n", "# ... existing code ...\n", "def f():\n    return 2\n", "function g() {}\n", "\U0001f600"]
PATHS = ["a.py", "x.tsx", "main.go", "../../etc/passwd", "/dev/zero", "\x00.py", "a" * 5000 + ".rs", "dir/"]
LANGUAGES = ["python", "PYTHON", "typescript", "brainfuck", "../../etc/passwd", "python\x00", "x" * 300]
ODD_PARTS = [{"type": "text"}, {"type": "text", "text": None}, {"type": "image_url", "image_url": {"url": "data:,"}},
             {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}, {"type": "refusal", "refusal": "no"},
             {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}, {"type": ""}]
EXTRAS = {"user": "u", "logprobs": True, "tools": [{"type": "function", "function": {"name": "f"}}],
          "response_format": {"type": "json_object"}, "metadata": {"a": [[[[{"b": None}]]]]}}
HOSTILE = [None, True, False, 0, -1, 1.5, math.nan, math.inf, -math.inf, 1e308, 2**64, -2**63, "", "x", "8", "true",
           "\ud800", [], {}, [1], [None], {"a": 1}, [[[]]], {"type": "text"}]
# Values each of these fields must refuse (1e6 tokens: more than the context holds).
BAD_NUMBERS = {"temperature": [math.nan, math.inf, -math.inf, -1e-300, -1, 2.0000001, 1e308],
               "top_p": [math.nan, math.inf, 0, -0.5, 1.0000001],
               "max_tokens": [0, -1, math.nan, math.inf, 1.5, 10**6, 2**63], "n": [0, 2, -1]}
SURROGATES = ["\ud800", "\udfff", "\udc80"]
BAD_UTF8 = [b"\xff", b"\xfe\xfd", b"\x80", b"\xc0\xaf", b"\xe2\x82", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80"]
DEEP, BIG_INT = "\x01deep\x01", "\x01int\x01"  # placeholders for JSON that json.dumps cannot write
# Content types and whether the body is read as JSON ("any": either, depending on the FastAPI version).
CONTENT_TYPES = [("application/json", "serve")] * 16 + [
    ("application/json; charset=utf-8", "serve"), ("application/merge-patch+json", "serve"),
    ("text/plain", "refuse"), ("application/x-www-form-urlencoded", "refuse"), ("multipart/form-data; boundary=x",
    "refuse"), ("application/jsonx", "refuse"), (None, "any"), ("", "any")]


def text():
    piece = st.one_of(st.text(st.characters(codec="utf-8"), max_size=20), st.sampled_from(TRICKY))
    return st.lists(piece, max_size=4).map("".join)


def parts():
    part = st.one_of(text().map(lambda t: {"type": "text", "text": t}), st.sampled_from(ODD_PARTS))
    return st.lists(part, max_size=3)


@st.composite
def tagged(draw, code: str | None = None, update: str | None = None) -> str:
    """Morph's apply message, small: every apply costs a prefill of some 300 tokens."""
    instruction = draw(st.sampled_from(["", "instruction", "instructions"]))
    head = f"<{instruction}>{draw(text())}</{instruction}>\n" if instruction else ""
    code = draw(st.sampled_from(CODES)) + draw(text()) if code is None else code
    update = draw(st.sampled_from(SNIPPETS)) if update is None else update
    return f"{head}<code>{code}</code>\n<update>{update}</update>"


@st.composite
def extras(draw) -> dict:
    return {k: v for k, v in EXTRAS.items() if draw(st.sampled_from([False] * 4 + [True]))}


@st.composite
def chat_bodies(draw) -> tuple[dict, bool]:
    """A chat request the server must serve, and whether it is an apply (its last user message tagged)."""
    message = st.fixed_dictionaries({"role": st.sampled_from(ROLES), "content": st.one_of(text(), parts(), st.none())},
                                    optional={"name": text()})
    messages = draw(st.lists(message, min_size=1, max_size=3))
    is_apply = draw(st.booleans())
    if is_apply:
        content = draw(tagged())
        messages.append({"role": "user", "content": content if draw(st.booleans()) else
                         [{"type": "text", "text": content[:9]}, {"type": "text", "text": content[9:]}]})
    # Always a small token limit: without one the model writes up to 4,096 tokens.
    body = {"model": draw(st.sampled_from(["auto", MODEL, "apply-edit"])), "messages": messages,
            draw(st.sampled_from(["max_tokens", "max_completion_tokens"])): draw(st.integers(1, 6))}
    optional = {"temperature": st.sampled_from([0, -0.0, 0.5, 1, 2, 1e-300, 5e-324]),
                "top_p": st.sampled_from([1e-300, 0.5, 1]), "seed": st.sampled_from([0, -1, 2**64, 2**200]),
                "n": st.just(1), "stream": st.booleans(), "stream_options": st.booleans().map(
                    lambda b: {"include_usage": b}),
                "stop": st.sampled_from(["", [], [""], "\n", ["a", ""], "x" * 100, ["\n", "1", "a", "b"]]),
                "prediction": st.one_of(text(), parts()).map(lambda c: {"type": "content", "content": c}),
                "path": st.sampled_from(PATHS), "language": st.sampled_from(LANGUAGES)}
    for key, strategy in optional.items():
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return {**body, **draw(extras())}, is_apply


@st.composite
def relace_bodies(draw) -> dict:
    # No token limit on this route: the file is all there is to write, so keep it a few lines.
    body = {"initialCode": draw(st.sampled_from(CODES)), "editSnippet": draw(st.sampled_from(SNIPPETS))}
    optional = {"instruction": text(), "stream": st.booleans(), "model": st.sampled_from([None, "auto", MODEL]),
                "path": st.sampled_from(PATHS), "language": st.sampled_from(LANGUAGES)}
    for key, strategy in optional.items():
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return {**body, **draw(extras())}


def max_key(body: dict) -> str:
    return "max_tokens" if "max_tokens" in body else "max_completion_tokens"


def field_paths(body: dict) -> list[tuple]:
    """Where a wrong value can go: each field, each message and its fields, each content part's, and those of
    the prediction and the stream options; never the token limit (null or missing, a served chat is 4,096 tokens)."""
    paths = [(k,) for k in body if k not in ("max_tokens", "max_completion_tokens")]
    for i, message in enumerate(body.get("messages", [])):
        paths += [("messages", i)] + [("messages", i, k) for k in message]
        if isinstance(message.get("content"), list):
            paths += [("messages", i, "content", j, k) for j, part in enumerate(message["content"]) for k in part]
    for key in ("prediction", "stream_options"):
        if isinstance(body.get(key), dict):
            paths += [(key, k) for k in body[key]]
    return paths


def holder(body, path):
    for key in path[:-1]:
        body = body[key]
    return body


class Case(NamedTuple):
    route: str
    body: bytes
    content_type: str | None
    method: str
    chunked: bool
    expect: str  # "serve", "refuse" (a 4xx), "413", "411", or "any"
    is_apply: bool
    stream: bool  # what the request asked for, before any change
    max_new: int | None  # the token limit a served chat keeps to
    how: str  # what was done to the request, for the summary

    def __repr__(self) -> str:  # hypothesis prints failing cases: not the 200 kB ones whole
        fields = self._asdict()
        if len(self.body) > 600:
            fields["body"] = self.body[:600] + b"... (%d bytes)" % len(self.body)
        return "Case(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"


@st.composite
def mutated(draw, body: dict, relace: bool, is_apply: bool) -> tuple[str, str]:
    """One change to `body` (in place): (what, the outcome it calls for)."""
    kind = draw(st.sampled_from(["none"] * 8 + ["wrong type", "delete", "huge", "lone surrogate", "nesting",
                                                 "huge integer"] + ["bad number"] * (not relace)))
    if kind == "wrong type":
        path = draw(st.sampled_from(field_paths(body)))
        holder(body, path)[path[-1]] = draw(st.sampled_from(HOSTILE))
        return kind, "any"
    if kind == "delete":
        path = draw(st.sampled_from(field_paths(body)))
        del holder(body, path)[path[-1]]
        required = (path in ((("initialCode",), ("editSnippet",)) if relace else (("model",), ("messages",)))
                    or path[-1] in ("role", "type") or path == ("prediction", "content")
                    or path[0] == "messages" and len(path) == 2 and not body["messages"])  # the only message
        return kind, "refuse" if required else "any"
    if kind == "bad number":
        key = draw(st.sampled_from(list(BAD_NUMBERS)))
        body[max_key(body) if key == "max_tokens" else key] = draw(st.sampled_from(BAD_NUMBERS[key]))
        return f"bad {key}", "refuse"
    if kind == "huge":
        if draw(st.booleans()):  # a field no text limit counts: only the size on the wire refuses it
            body["user"] = "x" * (WIRE_LIMIT + 1)
            return "huge on the wire", "413"
        char = draw(st.sampled_from(["x", "é", "\U0001f600", "\x00", "\n", "\ud800"]))
        big = char * (draw(st.sampled_from([LIMIT + 1, 2 * LIMIT])) // len(char.encode("utf-8", "surrogatepass")) + 1)
        if relace:
            body[draw(st.sampled_from(["initialCode", "editSnippet", "instruction"]))] = big
        elif is_apply:
            body["messages"][-1]["content"] = draw(tagged(code=big))
        else:
            draw(st.sampled_from(body["messages"]))["content"] = big
        return "huge text", "413"
    if kind == "lone surrogate":  # in text that reaches the tokenizer
        lone = draw(st.sampled_from(SURROGATES))
        if relace:
            field = draw(st.sampled_from(["initialCode", "editSnippet", "instruction"]))
            body[field] = body.get(field, "") + lone
        elif is_apply:
            body["messages"][-1]["content"] = draw(tagged(code="x = 1" + lone + "\n"))
        else:
            message = draw(st.sampled_from(body["messages"]))
            message[draw(st.sampled_from(["role", "content"]))] = draw(text()) + lone
        return kind, "refuse"
    if kind == "nesting":  # JSON nested n deep, closed or not (past Python's recursion limit at 100,000)
        depth, closed = draw(st.sampled_from([10, 500, 100_000])), draw(st.booleans())
        path = draw(st.sampled_from(field_paths(body) + [("metadata",)]))
        holder(body, path)[path[-1]] = f"{DEEP}{depth}:{int(closed)}"
        return f"nesting {depth}{'' if closed else ' unclosed'}", "any" if closed and depth < 100_000 else "refuse"
    if kind == "huge integer":  # more digits than Python converts (the body does not parse, whatever the field)
        body[max_key(body)] = BIG_INT
        return kind, "refuse"
    return kind, "serve"


def to_json(body: dict, ascii_only: bool) -> bytes:
    data = json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    data = data.replace(json.dumps(BIG_INT).encode(), b"9" * 5000)
    while (at := data.find(json.dumps(DEEP).encode()[:-1])) >= 0:  # "\u0001deep\u0001<depth>:<closed>"
        end = data.index(b'"', at + 1)
        depth, closed = data[at:end].rsplit(b"u0001", 1)[1].split(b":")
        data = data[:at] + b"[" * int(depth) + b"]" * int(depth) * int(closed) + data[end + 1:]
    return data


@st.composite
def encoded(draw, body: dict) -> tuple[bytes, str, str]:
    """The body's bytes, how they were made, and the outcome that calls for."""
    kind = draw(st.sampled_from(["json"] * 12 + ["duplicate first", "duplicate last", "non-UTF-8", "BOM", "UTF-16",
                                                "truncated", "garbage"]))
    data = to_json(body, draw(st.booleans()))
    if kind.startswith("duplicate") and body:
        key, value = draw(st.sampled_from(list(body))), draw(st.sampled_from(HOSTILE))
        if key in ("max_tokens", "max_completion_tokens") and value is None:
            value = 0
        pair = to_json({key: value}, True)[1:-1]
        if kind == "duplicate first":  # the later (real) value wins
            return b"{" + pair + b", " + data[1:], kind, "serve"
        return data[:-1] + b", " + pair + b"}", kind, "any"
    if kind == "non-UTF-8":
        at = draw(st.sampled_from([i for i, b in enumerate(data) if b == ord('"')])) + 1
        return data[:at] + draw(st.sampled_from(BAD_UTF8)) + data[at:], kind, "refuse"
    if kind == "BOM":
        return b"\xef\xbb\xbf" + data, kind, "any"
    if kind == "UTF-16":
        return data.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass"), kind, "any"
    if kind == "truncated":
        return data[:draw(st.integers(0, len(data) - 1))], kind, "refuse"
    if kind == "garbage":
        return draw(st.one_of(st.binary(max_size=200), st.sampled_from(
            [b"", b"null", b"[]", b"5", b'"x"', b"{}", b"NaN", b"[" * 100_000, b"9" * 5000, b"\x00", b"{"]))), kind, "refuse"
    return data, "json", "serve"


def combine(*outcomes: str) -> str:
    """The outcome several changes call for together: any refusal refuses (413 alone says which)."""
    changed = [o for o in outcomes if o != "serve"]
    if changed == ["413"]:
        return "413"
    if "refuse" in changed or "413" in changed:
        return "refuse"
    return "any" if changed else "serve"


@st.composite
def http_cases(draw) -> Case:
    relace = draw(st.sampled_from([False, False, True]))
    body, is_apply = (draw(relace_bodies()), True) if relace else draw(chat_bodies())
    body = copy.deepcopy(body)  # it is changed in place, and sampled_from hands out this module's own dicts
    route = RELACE if relace else draw(st.sampled_from([CHAT, APPLY_CHAT]))
    stream, max_new = body.get("stream", False), None if relace else body[max_key(body)]
    change, change_outcome = draw(mutated(body, relace, is_apply))
    data, encoding, encoding_outcome = draw(encoded(body))
    content_type, type_outcome = draw(st.sampled_from(CONTENT_TYPES))
    swap = draw(st.sampled_from([False] * 19 + [True]))  # the other route's body: required fields missing
    if swap:
        route = CHAT if relace else RELACE
    if encoding == "duplicate last":  # the hostile value wins, over whatever the change did to that field
        change_outcome = "any"
    outcome = combine(change_outcome, encoding_outcome, type_outcome, "refuse" if swap else "serve")
    method = draw(st.sampled_from(["POST"] * 19 + ["GET", "PUT", "DELETE"]))
    chunked = draw(st.sampled_from([False] * 19 + [True]))
    if method != "POST":
        outcome = "refuse"
    if chunked:
        outcome = "411"
    named_type = {None: "no Content-Type", "": "empty Content-Type"}.get(content_type, content_type)
    how = ", ".join(h for h in (change, encoding, named_type, method, "chunked" * chunked, "swapped" * swap)
                    if h and h not in ("none", "json", "application/json", "POST"))
    return Case(route, data, content_type, method, chunked, outcome, is_apply and not swap, stream, max_new,
                how or "valid")


def check_served(case: Case, headers, data: bytes):
    """A 200's answer is complete: the JSON answer or the whole stream. Returns the stream's outcome, or None."""
    if headers.get_content_type() == "text/event-stream":
        assert case.expect != "serve" or case.stream, case
        return stream_outcome(case.route, sse_events(data))
    assert headers.get_content_type() == "application/json", headers.get_content_type()
    assert case.expect != "serve" or not case.stream, case
    answer = json.loads(data)
    if case.route == RELACE:
        assert isinstance(answer["mergedCode"], str), answer
        assert (answer["usage"]["total_tokens"] > 0) == (answer["apply_edit"]["path"] != "merge"), answer
        return None
    assert answer["object"] == "chat.completion" and isinstance(answer["choices"][0]["message"]["content"], str)
    assert answer["choices"][0]["finish_reason"] in ("stop", "length"), answer
    if case.expect == "serve":
        assert answer["usage"]["completion_tokens"] <= case.max_new, answer
    return None


REFUSALS = {400, 404, 405, 411, 413}


def check_case(case: Case, status: int, headers, data: bytes) -> None:
    if status == 200:
        assert case.expect in ("serve", "any"), f"served a request it must refuse ({case.expect}): {data[:300]!r}"
        streamed = check_served(case, headers, data)
        if isinstance(streamed, dict):  # an error event: only an apply's refusal is by design
            assert case.is_apply and streamed["code"] == "no_sound_result", streamed
        return
    error = error_of(status, headers, data)
    if status == 422:
        assert case.is_apply and case.expect in ("serve", "any") and error["code"] == "no_sound_result", error
        return
    assert status in REFUSALS, (status, error)
    assert case.expect != "serve", f"refused a valid request: {status} {error}"
    if case.expect in ("413", "411"):
        assert status == int(case.expect), (status, error)


def sdk(port: int) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=HANG_S)


def apply_exactly(server) -> None:
    """A real apply through the SDK gives the fixture's expected file."""
    answer = sdk(server.http_port).chat.completions.create(
        model="auto", messages=[{"role": "user", "content": apply_message(CASE)}])
    assert answer.choices[0].message.content == CASE.expected


def health(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def health_or_none(port: int) -> int | None:
    try:
        return health(port)
    except OSError:  # not listening yet
        return None


def counted_statuses(server) -> dict:
    return {s.labels["status"]: s.value for m in server.metrics.registry.collect() for s in m.samples
            if s.name == "apply_edit_requests_total" and s.value}


def test_hostile_requests_get_complete_answers_or_openai_errors(server, target, fuzz_examples):
    apply_exactly(server)
    rss = [rss_mib(os.getpid())]  # this process's: the server's and the test's own
    outcomes: Counter = Counter()
    hows: Counter = Counter()
    times: list[float] = []

    def check(case: Case):
        t0 = time.perf_counter()
        status, headers, data = send(server.http_port, case.route, case.body, case.content_type, case.method,
                                     case.chunked)
        times.append(time.perf_counter() - t0)
        outcomes[f"{status} ({case.expect})"] += 1
        hows[case.how.split(",")[0]] += 1
        check_case(case, status, headers, data)
        assert wait_until(lambda: settled(server, target), seconds=30), "the request did not let go of the model"
        rss.append(rss_mib(os.getpid()))

    run_hypothesis(max(1, min(FUZZ_CAP, fuzz_examples // FUZZ_SHARE)), http_cases(), check)

    assert health(server.http_port) == 200
    apply_exactly(server)
    rss.append(rss_mib(os.getpid()))
    counted = counted_statuses(server)
    assert "INTERNAL" not in counted, counted
    assert outcomes.get("200 (serve)") and outcomes.get("400 (refuse)"), outcomes  # not vacuous
    print(f"\nHTTP fuzz: {sum(outcomes.values())} requests in {sum(times):.0f} s "
          f"({sum(times) / len(times) * 1000:.0f} ms mean, {max(times):.1f} s max): {dict(outcomes)}\n"
          f"changes: {dict(hows)}\nRSS MiB: start {rss[0]:.1f}, half-way {rss[len(rss) // 2]:.1f}, "
          f"end {rss[-1]:.1f}, max {max(rss):.1f}")
    # The first requests fill caches (grammars, the tokenizer's, kernels for new shapes): a server process alone
    # grew 21 MiB over the first 75 fuzz requests, then not at all over the next 125. So the bound is from half-way.
    # One leaked KV cache is 2-14 MB here (46 kB a token); the prefix store may fill meanwhile.
    assert rss[-1] - rss[len(rss) // 2] < 32 + (STORE_BYTES >> 20)


# --- Regressions: each of these used to fail -----------------------------------------------------------------------


@pytest.mark.parametrize("route, body", [
    (CHAT, {"model": "auto", "messages": [{"role": "user", "content": "hi \ud800"}], "max_tokens": 2}),
    (CHAT, {"model": "auto", "messages": [{"role": "\udfff", "content": "hi"}], "max_tokens": 2}),
    (CHAT, {"model": "auto", "messages": [{"role": "user", "content": "<code>x = 1\ud800\n</code><update>x = 2\n"
                                                                       "</update>"}], "max_tokens": 2}),
    (RELACE, {"initialCode": "x = 1\n", "editSnippet": "x = 2\n\udc80"}),
])
def test_lone_surrogates_are_refused_not_a_500(server, route, body):
    # JSON's "\ud800" escape is valid JSON but no UTF-8 text: the tokenizer raised TypeError on it (a 500).
    status, headers, data = send(server.http_port, route, json.dumps(body).encode())
    assert status == 400 and "surrogate" in error_of(status, headers, data)["message"], data


@pytest.mark.parametrize("body, method, reason", [
    (b'{"model": "auto", "messages": [{"role": "user", "content": "\xff"}]}', "POST", "codec can't decode"),
    (b"[" * 100_000, "POST", "recursion"),
    (b'{"model": "auto", "max_tokens": ' + b"9" * 5000 + b"}", "POST", "digits"),
    (b"{}", "GET", "Method Not Allowed"),
])
def test_bodies_fastapi_cannot_parse_get_openai_errors(server, body, method, reason):
    # FastAPI answered these itself, as {"detail": ...}: not what OpenAI clients read.
    status, headers, data = send(server.http_port, CHAT, body, method=method)
    assert status in (400, 405) and reason in error_of(status, headers, data)["message"], data


def test_a_chunked_body_is_refused_before_it_is_read(server):
    # Without a Content-Length the size guard cannot check a body: one past the limit was read whole and served
    # (30 MB of one grew the server's peak RSS by 59 MB), where the same body with a Content-Length is a 413.
    body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                       "user": "x" * (WIRE_LIMIT + 1)}).encode()
    status, headers, data = send(server.http_port, CHAT, body, chunked=True)
    assert status == 411 and error_of(status, headers, data)["code"] == "length_required"


def test_a_function_rewritten_right_before_the_last_line_is_served(server):
    # Found by this fuzz; a bug of the merge (every face and the CLI), not of HTTP: a 500 "IndexError: tuple index
    # out of range" where the merge read the original line of a deletion (tests/test_merge.py has its own case).
    message = "<code>def f():\n    return 1\nx = 3\n</code>\n<update>def f():\n    return 2\n</update>"
    body = {"model": "auto", "messages": [{"role": "user", "content": message}], "max_tokens": 8}
    status, _, data = send(server.http_port, CHAT, json.dumps(body).encode())
    assert status in (200, 422), data


def test_a_client_that_hangs_up_on_a_non_streamed_request_frees_the_model(server, target):
    # The disconnect watcher polled `request.is_disconnected()`, which never sees a disconnect behind the guard
    # middleware: the model went on writing all max_tokens for nobody.
    sock = open_request(server.http_port, {**long_chat(2000), "stream": False})
    assert wait_until(lambda: target._cache is not None, seconds=60)  # decoding
    time.sleep(0.5)
    hang_up(sock, rst=False)
    assert wait_until(lambda: settled(server, target), seconds=5)


# --- Faults in a row against one server -----------------------------------------------------------------------------


def open_request(port: int, body: dict, cut: int | None = None) -> socket.socket:
    """A chat request on a raw socket (only the first `cut` bytes of its body, if given), its answer left unread:
    the test hangs up when it chooses."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG_S)
    sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data[:cut])
    return sock


def read_events(sock: socket.socket, n: int) -> bytes:
    """Read the streamed answer until n SSE events arrived."""
    data = b""
    while data.count(b"data: ") < n:
        chunk = sock.recv(65536)
        assert chunk, f"the stream ended early: {data[-300:]!r}"
        data += chunk
    return data


def hang_up(sock: socket.socket, rst: bool) -> None:
    if rst:  # an abortive close (RST), as when a client process dies, rather than FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.fixture
def fault_server(target):
    server = http_server(target, max_request_bytes=LIMIT, max_queue=1, http_timeout_s=DEADLINE_S)
    yield server
    server.stop(0)


SHORT_CHAT = {"model": "auto", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4}


class HttpFaultRun:
    """Injects one fault of a kind at a time against one server (one running request and one queued at most,
    a deadline of DEADLINE_S) and checks what the client got."""

    KINDS = ["disconnect mid-stream", "disconnect, not streamed", "disconnect while queued", "queue full", "deadline",
             "deadline mid-stream", "truncated body", "malformed", "over-size", "model raises"]

    def __init__(self, server, target, monkeypatch, rng: random.Random):
        self.server, self.target, self.rng = server, target, rng
        self.port = server.http_port
        self.armed = 0  # the model raises on the armed-th forward pass from now (0: never)
        real_logits = target.logits

        def logits(prefix, block):
            if self.armed:
                self.armed -= 1
                if not self.armed:
                    raise RuntimeError("injected fault: the forward pass failed")
            return real_logits(prefix, block)

        monkeypatch.setattr(target, "logits", logits)
        self.reference = self.short_chat()

    def short_chat(self) -> str:
        status, headers, data = send(self.port, CHAT, json.dumps(SHORT_CHAT).encode())
        assert status == 200, data
        return json.loads(data)["choices"][0]["message"]["content"]

    def inject(self, kind: str) -> tuple[str, float | None]:
        """Run one fault: what happened in a few words, and when the client left (to time the server's stop)."""
        return getattr(self, "_" + kind.replace(" ", "_").replace(",", "").replace("-", "_"))()

    def _disconnect_mid_stream(self):
        sock = open_request(self.port, long_chat(2000))
        pieces, rst = self.rng.randint(1, 3), self.rng.random() < 0.5
        read_events(sock, 1 + pieces)  # the role chunk, then text
        left = time.perf_counter()
        hang_up(sock, rst)
        return f"{'RST' if rst else 'FIN'} after {pieces} pieces", left

    def _disconnect_not_streamed(self):
        sock = open_request(self.port, {**long_chat(2000), "stream": False})
        assert wait_until(lambda: self.target._cache is not None, seconds=DEADLINE_S)  # decoding
        time.sleep(self.rng.uniform(0, 1))
        left = time.perf_counter()
        hang_up(sock, self.rng.random() < 0.5)
        return "hung up while it decoded", left

    def hold_model(self) -> tuple[socket.socket, socket.socket]:
        """A running stream and a request queued behind it."""
        running = open_request(self.port, long_chat(2000))
        read_events(running, 1)  # it holds the model now
        queued = open_request(self.port, {**long_chat(2000), "stream": self.rng.random() < 0.5})
        assert wait_until(lambda: self.server.model.in_flight == 2)
        return running, queued

    def _disconnect_while_queued(self):
        running, queued = self.hold_model()
        hang_up(queued, self.rng.random() < 0.5)
        assert wait_until(lambda: self.server.model.in_flight == 1)  # it left the queue without the model
        assert self.target._cache is not None  # and the running one runs on
        left = time.perf_counter()
        hang_up(running, False)
        return "queued one left, then the running one", left

    def _queue_full(self):
        running, queued = self.hold_model()
        status, headers, data = send(self.port, CHAT, json.dumps(SHORT_CHAT).encode())
        assert status == 429 and int(headers["Retry-After"]) >= 1, (status, data)
        assert error_of(status, headers, data)["code"] == "server_busy"
        hang_up(queued, False)
        left = time.perf_counter()
        hang_up(running, False)
        return f"429, Retry-After {headers['Retry-After']}", left

    def _deadline(self):
        t0 = time.perf_counter()
        status, headers, data = send(self.port, CHAT, json.dumps({**long_chat(2000), "stream": False}).encode())
        took = time.perf_counter() - t0
        assert status == 504 and error_of(status, headers, data)["code"] == "timeout", data
        assert DEADLINE_S <= took < DEADLINE_S + 2, took
        return f"504 after {took:.1f}s", t0 + DEADLINE_S

    def _deadline_mid_stream(self):
        t0 = time.perf_counter()
        status, headers, data = send(self.port, CHAT, json.dumps(long_chat(2000)).encode())
        events = sse_events(data)
        error = stream_outcome(CHAT, events)
        assert status == 200 and len(events) > 2 and isinstance(error, dict), data[-300:]
        assert error["code"] == "timeout"  # the last event, with no [DONE]
        return f"error event after {len(events) - 2} pieces", t0 + DEADLINE_S

    def _truncated_body(self):
        sock = open_request(self.port, SHORT_CHAT, cut=self.rng.randrange(len(json.dumps(SHORT_CHAT))))
        hang_up(sock, self.rng.random() < 0.5)
        return "hung up mid-body", None

    def _malformed(self):
        body, content_type = self.rng.choice([
            (b"{not json", "application/json"), (b"\xff\xfe{", "application/json"), (b"[" * 100_000, "application/json"),
            (json.dumps({**SHORT_CHAT, "messages": [{"role": "user", "content": "\ud800"}]}).encode(), "application/json"),
            (json.dumps({**SHORT_CHAT, "temperature": math.nan}).encode(), "application/json"),
            (json.dumps(SHORT_CHAT).encode(), "text/plain"),
            (b'{"model": "auto", "max_tokens": ' + b"9" * 5000 + b"}", "application/json")])
        status, headers, data = send(self.port, CHAT, body, content_type)
        assert status == 400, (status, data)
        return error_of(status, headers, data)["message"][:50], None

    def _over_size(self):
        variant = self.rng.choice(["wire", "text", "chunked"])
        over = {**SHORT_CHAT, "messages": [{"role": "user", "content": "x" * (LIMIT + 1)}]}
        if variant == "wire":
            over = {**SHORT_CHAT, "user": "x" * (WIRE_LIMIT + 1)}
        status, headers, data = send(self.port, CHAT, json.dumps(over).encode(), chunked=variant == "chunked")
        assert status == (411 if variant == "chunked" else 413), (status, data)
        return f"{variant}: {status} {error_of(status, headers, data)['code']}", None

    def _model_raises(self):
        self.armed, streamed = self.rng.randint(1, 3), self.rng.random() < 0.5  # pass 1 is the prefill
        at = self.armed
        status, headers, data = send(self.port, CHAT, json.dumps({**long_chat(20), "stream": streamed}).encode())
        assert self.armed == 0
        if streamed:  # the failure comes after the stream started: its last event
            assert status == 200
            error = stream_outcome(CHAT, sse_events(data))
        else:  # the one 5xx by design: the model itself failed
            assert status == 500
            error = error_of(status, headers, data)
        assert error["code"] == "internal" and "injected fault" in error["message"], error
        return f"raised in pass {at}{', streamed' if streamed else ''}", None


def test_many_http_faults_in_a_row_and_the_server_serves_on(fault_server, target, monkeypatch, request):
    count = request.config.getoption("--faults")
    rng = random.Random(20261201)
    kinds = [HttpFaultRun.KINDS[i % len(HttpFaultRun.KINDS)] for i in range(count)]
    rng.shuffle(kinds)
    run = HttpFaultRun(fault_server, target, monkeypatch, rng)
    rss_before = rss_mib(os.getpid())
    log, stops, start = [], {}, time.perf_counter()
    for n, kind in enumerate(kinds):
        t0 = time.perf_counter()
        what, left = run.inject(kind)
        assert wait_until(lambda: settled(fault_server, target), seconds=30), f"fault {n} ({kind}): not let go"
        if left is not None:
            stops.setdefault(kind, []).append(time.perf_counter() - left)
        log.append(f"{n:3d} {kind:24s} {time.perf_counter() - t0:5.1f}s  {what}")
        if n % 10 == 9:
            assert run.short_chat() == run.reference  # between faults, a normal request is answered as before
    assert health(fault_server.http_port) == 200
    assert run.short_chat() == run.reference
    rss_after = rss_mib(os.getpid())
    with_times = "; ".join(f"{k} {min(v) * 1000:.0f}-{max(v) * 1000:.0f} ms" for k, v in stops.items())
    print(f"\n{count} HTTP faults in {time.perf_counter() - start:.0f}s:\n" + "\n".join(log)
          + f"\ntime from the client leaving (or the deadline) to the model free: {with_times}"
          + f"\nRSS MiB: before {rss_before:.1f}, after {rss_after:.1f}")
    # The server stops an abandoned request after its current verify pass (about 0.1 s here, one token).
    for kind, times in stops.items():
        assert max(times) < 2.0, (kind, times)
    assert rss_after - rss_before < 32


# --- The server SIGKILLed while a client streams ---------------------------------------------------------------------


def test_server_killed_mid_stream_the_sdk_raises_at_once(tmp_path):
    # `apply-edit apply` writes files only through gRPC (tests/test_faults.py); over HTTP the client is an SDK.
    http_port = free_port()
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "apply-edit"), "serve", "--model", MODEL,
                             "--dtype", "fp32", "--port", str(free_port()), "--http-port", str(http_port)],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "APPLY_EDIT_THREADS": "1"})
    try:
        assert wait_until(lambda: proc.poll() is not None or health_or_none(http_port) == 200, seconds=300), \
            (tmp_path / "server.log").read_text()
        stream = sdk(http_port).chat.completions.create(**long_chat(2000))
        chunks = iter(stream)
        text = "".join(next(chunks).choices[0].delta.content or "" for _ in range(4))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        t0 = time.perf_counter()
        with pytest.raises(openai.APIConnectionError) as err:  # the connection dropped mid-body
            for _ in chunks:
                pass
        took = time.perf_counter() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    print(f"\nafter {text!r}, the server killed: {type(err.value).__module__}.{type(err.value).__name__}: "
          f"{err.value} ({took * 1000:.0f} ms)")
    assert text and took < 5 and not isinstance(err.value, openai.APITimeoutError)  # at once, not a timeout

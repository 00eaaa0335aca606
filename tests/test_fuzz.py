"""Fuzzing: the engine against a plain one-token-at-a-time reference, and the gRPC service against bad input.

How many random examples each fuzz test runs: ``--fuzz-examples N`` (a pytest option, see conftest.py) or
the environment variable APPLY_EDIT_FUZZ_EXAMPLES; the option wins. Default: 200 (normal CI).

    short (CI):  .venv/bin/python -m pytest -q tests/test_fuzz.py
    full:        .venv/bin/python -m pytest -q tests/test_fuzz.py --fuzz-examples 10000

N is the count for the greedy engine test; the sampled engine test runs N/2 (three decodes each) and the
request-handling test N/2 requests, at most 1,000 (valid ones run the model). Measured on the 2-core CPU
here while other jobs shared it: 10,000 greedy engine examples 95 s, 5,000 sampled ones 59 s (CI's 200 +
100: a few seconds). Requests: refusals take milliseconds, served ones (about 40%) a prefill of a few
hundred tokens plus up to 8 passes; 300 requests took 119 s (0.4 s mean), CI's 100 took 1-4 min
depending on the load. So the full run's 1,000 requests take roughly 7-40 min; 10,000 would take hours
for little more coverage (the refusal paths, most of the request space, are all hit within a few hundred
examples). Engine tests need no model; the service tests are marked `model` (smollm2-135m, fp32, loaded
once for the module).

Engine properties (for random small deterministic models, proposers, k policies, max_new, eos and stops):
speculative greedy output == the plain greedy reference token for token, each block accepts exactly the
longest drafted prefix the target agrees with, the target is always asked about the right prefix, and
the statistics add up. Sampled: reproducible by seed, never a token outside the warped target's support,
and with a degenerate warp (tiny top_p or temperature) exactly the greedy output.

Service property: every request (random unicode with NUL bytes and special-token strings, fields over
max_request_bytes, empty fields, marker-only and deeply nested snippets, odd languages and paths, random
and edge options, raw bytes that are not protobuf or hold invalid UTF-8 / lone surrogates) ends either in
a complete stream whose last response carries stats, or in a non-OK status from an allowed set with a
message (FAILED_PRECONDITION: a valid request for which no sound result was found); never
INTERNAL/UNKNOWN, never a hang. Afterwards the server is SERVING and a normal request works.
"""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest
import torch
from hypothesis import strategies as st

from apply_edit.engine.decoding import Decoding, DraftModelSampler, greedy_decode, speculative_greedy
from apply_edit.drafting.draft_length import AdaptiveK, RegionAdaptiveK
from apply_edit.models import FunctionModel
from apply_edit.engine.api import CostCurve, Draft, no_draft
from apply_edit.judging.prompting import TextStop
from apply_edit.drafting.proposers import SuffixArrayProposer, draft_model_proposer
from apply_edit.engine.sampling import Sampling
from conftest import run_hypothesis, wait_until

SAMPLED_SHARE = 2  # the sampled engine test runs N / 2 examples
SERVICE_SHARE, SERVICE_CAP = 2, 1000  # the service test runs N / 2 requests, at most 1,000 (they run the model)


@pytest.fixture
def one_thread():
    """Tensors here are tiny: one intra-op thread is many times faster than a pool on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# --- Random small deterministic models ---


class TableModel:
    """A target whose logits after a sequence are a random table row picked by its last `context` tokens.

    `levels` > 0 rounds the logits to multiples of 1/levels, which makes exact ties between tokens common
    (both decoders must break them the same way). Every `logits` call is one pass and is logged.
    """

    def __init__(self, seed: int, vocab: int, context: int, buckets: int, levels: int):
        g = torch.Generator().manual_seed(seed)
        table = torch.randn(buckets, vocab, generator=g, dtype=torch.float64) * 3
        if levels:
            table = torch.round(table * levels / 3) / levels
        self.table = table.float()
        self.context, self.buckets = context, buckets
        self.log: list[tuple[list[int], list[int]]] = []

    def _key(self, seq) -> int:
        return hash(tuple(int(t) for t in seq[-self.context:])) % self.buckets

    def row(self, seq) -> list[float]:
        """The logits after seq, without counting a pass (for the test's own checks)."""
        return self.table[self._key(seq)].tolist()

    def logits(self, prefix, block) -> torch.Tensor:
        self.log.append((list(prefix), list(block)))
        seq, keys = list(prefix), [self._key(prefix)]
        for tok in block:
            seq.append(tok)
            keys.append(self._key(seq))
        return self.table[keys]


class LoggedFunctionModel(FunctionModel):
    """The contract's FunctionModel (probabilities → log-probabilities) over the same kind of table."""

    def __init__(self, table: TableModel):
        self.table = table
        super().__init__(lambda seq: torch.softmax(torch.tensor(table.row(seq), dtype=torch.float64), -1).tolist())
        self.log: list[tuple[list[int], list[int]]] = []

    def row(self, seq) -> list[float]:
        return torch.log(torch.tensor(self.fn(list(seq)), dtype=torch.float64)).tolist()

    def logits(self, prefix, block):
        self.log.append((list(prefix), list(block)))
        return super().logits(prefix, block)


def make_model(case) -> TableModel | LoggedFunctionModel:
    table = TableModel(case["seed"], case["vocab"], case["context"], case["buckets"], case["levels"])
    return LoggedFunctionModel(table) if case["model"] == "function" else table


def first_argmax(row: list[float]) -> int:
    return max(range(len(row)), key=row.__getitem__)  # the first of equal maxima, like torch.argmax


# --- Stops: generation ends with the token that completes a pattern (the engine's stop contract) ---

PIECES = ["\n", "<", "/", "a", ">", "</", "a>", "\n<", "b", " ", "ab", "/a"]  # token i decodes to PIECES[i]


class PieceTokenizer:
    def decode(self, ids, skip_special_tokens=False) -> str:
        return "".join(PIECES[int(i)] for i in ids)


def make_stop(spec):
    """A fresh stop callable for the engine (stateful TextStop included) and a plain one for the reference."""
    if spec is None:
        return None, None
    kind, arg = spec
    if kind == "tokens":
        def stop(tokens):
            for i in range(len(tokens) - len(arg) + 1):
                if [int(t) for t in tokens[i:i + len(arg)]] == arg:
                    return i + len(arg)
            return None

        return stop, stop
    marker, lead = arg
    reference = lambda tokens: len(tokens) if marker in lead + PieceTokenizer().decode(tokens) else None
    return TextStop(PieceTokenizer(), marker, lead=lead), reference


def reference_greedy(model, prompt, max_new, eos, stop) -> list[int]:
    """Plain greedy decoding, one pass per token, written out here (independent of the engine's loop)."""
    seq, out = list(prompt), []
    while len(out) < max_new:
        tok = first_argmax(model.logits(seq, [])[0].tolist())
        out.append(tok)
        seq.append(tok)
        if tok in eos:
            break
        if stop is not None and stop(out) is not None:
            break
    return out


# --- Random proposers ---


class DraftObject:
    """A proposer with `.draft` returning a Draft with (random) distributions, sometimes longer than k."""

    def __init__(self, inner, rng, vocab):
        self.inner, self.rng, self.vocab = inner, rng, vocab

    def draft(self, seq, k):
        tokens = list(self.inner(seq, k))
        if not tokens:
            return Draft([])
        probs = torch.tensor([[self.rng.random() + 0.01 for _ in range(self.vocab)] for _ in tokens],
                             dtype=torch.float64)  # from the seeded rng: runs must repeat
        probs /= probs.sum(-1, keepdim=True)
        return Draft(tokens, probs)


PROPOSERS = ["empty", "random", "oracle", "oracle-overrun", "noisy-oracle", "too-long", "specials", "suffix",
             "suffix-empty", "draft-model", "draft-self", "draft-object", "repeat"]


def make_proposer(kind, rng: random.Random, case, ref: list[int], specials: list[int]):
    vocab, prompt_len = case["vocab"], len(case["prompt"])

    def oracle(seq, k):
        done = len(seq) - prompt_len
        return ref[done:done + k]

    def noisy(seq, k):
        out = oracle(seq, k)
        for i in range(len(out)):
            if rng.random() < 0.3:
                out[i] = rng.choice(specials) if specials and rng.random() < 0.5 else rng.randrange(vocab)
        return out

    if kind == "empty":
        return no_draft
    if kind == "random":
        return lambda seq, k: [rng.randrange(vocab) for _ in range(rng.randint(0, k + 2))]
    if kind == "oracle":
        return oracle
    if kind == "oracle-overrun":  # keeps drafting past the end of the output (past eos and stops)
        return lambda seq, k: (oracle(seq, k) + [rng.randrange(vocab) for _ in range(k)])[:k]
    if kind == "noisy-oracle":
        return noisy
    if kind == "too-long":  # more than k tokens: the engine must cut the draft to k
        return lambda seq, k: oracle(seq, k) + [rng.randrange(vocab) for _ in range(k + rng.randint(1, 5))]
    if kind == "specials":  # drafts made of eos and stop tokens
        pool = specials or [0]
        return lambda seq, k: [rng.choice(pool) for _ in range(rng.randint(0, k))]
    if kind == "suffix":  # the real copy drafter over random references (the output, mutated; noise)
        mutated = [t if rng.random() < 0.8 else rng.randrange(vocab) for t in ref]
        refs = [r for r in (mutated, list(case["prompt"]) + ref, [rng.randrange(vocab) for _ in range(20)])
                if rng.random() < 0.7] or [[rng.randrange(vocab)]]
        return SuffixArrayProposer(refs, min_match=rng.randint(1, 3), max_match=rng.randint(1, 64))
    if kind == "suffix-empty":
        return SuffixArrayProposer(rng.choice([[], [[]], [[], []]]))
    if kind == "draft-model":  # greedy drafting from another random model
        other = TableModel(case["seed"] + 1, vocab, case["context"], case["buckets"], case["levels"])
        return draft_model_proposer(LoggedFunctionModel(other))
    if kind == "draft-self":  # a drafter identical to the target: every draft is accepted
        return draft_model_proposer(LoggedFunctionModel(
            TableModel(case["seed"], vocab, case["context"], case["buckets"], case["levels"])))
    if kind == "draft-object":
        return DraftObject(noisy, rng, vocab)
    if kind == "repeat":  # a lookup drafter stuck in a loop
        return lambda seq, k: list(seq[-k:]) if k else []
    raise AssertionError(kind)


def wrap_return(proposer, how: str):
    """Proposers may return any sequence type: list, tuple, numpy array, iterator."""
    if how == "list" or hasattr(proposer, "draft"):
        return proposer
    convert = {"tuple": tuple, "numpy": lambda x: np.asarray(list(x), dtype=np.int64), "iter": iter}[how]
    return lambda seq, k: convert(proposer(seq, k))


# --- k policies ---


class RecordingPolicy:
    def __init__(self, inner):
        self.inner, self.asked, self.told = inner, [], []

    def next_k(self, context: int) -> int:
        k = self.inner.next_k(context)
        self.asked.append(k)
        return k

    def feedback(self, draft: Draft, accepted: int) -> None:
        self.told.append((len(draft.tokens), accepted))
        self.inner.feedback(draft, accepted)


class RandomK:
    """Any int, including negative and huge ones: the engine must clamp."""

    def __init__(self, rng):
        self.rng = rng

    def next_k(self, context: int) -> int:
        return self.rng.choice([-5, -1, 0, 1, 2, 3, 5, 8, 13, 64, 10**6])

    def feedback(self, draft, accepted) -> None:
        pass


def make_policy(spec, rng, proposer, reference_len):
    kind, k = spec
    if kind == "fixed":
        return k
    cost = CostCurve({c: dict(zip((0, 1, 4, 16, 32, 64), sorted(rng.uniform(0.01, 1.0) for _ in range(6))))
                      for c in sorted(rng.sample(range(10, 5000), rng.randint(1, 3)))})
    if kind == "random":
        inner = RandomK(rng)
    elif kind == "adaptive":
        inner = AdaptiveK(cost, alpha=rng.uniform(0.0, 1.0), k_max=k)
    else:  # per-region estimates driven by the copy drafter's position (only with a suffix proposer)
        regions = rng.randint(1, 4)
        region_of = np.array([rng.randrange(-1, regions) for _ in range(reference_len)], dtype=np.int64)
        inner = RegionAdaptiveK(cost, region_of, [rng.random() < 0.5 for _ in range(regions)],
                                k_max=k, alpha_untouched=rng.uniform(0.05, 1.0), alpha_edited=rng.uniform(0.05, 1.0))
    return RecordingPolicy(inner)


# --- The engine cases ---


@st.composite
def engine_cases(draw, sampled: bool = False):
    vocab = draw(st.integers(2, len(PIECES)))
    case = dict(
        seed=draw(st.integers(0, 2**31)),
        vocab=vocab,
        context=draw(st.integers(1, 3)),
        buckets=draw(st.sampled_from([1, 2, 3, 5, 8, 16, 64])),
        levels=draw(st.sampled_from([0, 0, 1, 2])),
        model=draw(st.sampled_from(["table", "table", "function"])),
        prompt=draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=6)),
        max_new=draw(st.one_of(st.integers(0, 40), st.sampled_from([0, 1, 2]))),
        proposer=draw(st.sampled_from(PROPOSERS)),
        returns=draw(st.sampled_from(["list", "list", "tuple", "numpy", "iter"])),
        k=draw(st.one_of(st.tuples(st.just("fixed"), st.one_of(st.integers(0, 12), st.sampled_from([64, 1000]))),
                         st.tuples(st.sampled_from(["random", "adaptive", "region"]), st.integers(1, 64)))),
        eos=draw(st.one_of(st.none(), st.integers(0, vocab - 1),
                           st.frozensets(st.integers(0, vocab - 1), min_size=1, max_size=2))),
        stop=draw(st.one_of(
            st.none(),
            st.tuples(st.just("tokens"), st.lists(st.integers(0, vocab - 1), min_size=1, max_size=3)),
            st.tuples(st.just("text"), st.tuples(st.sampled_from(["</a>", "\n<", "a", "ab", "b>", "\n\n"]),
                                                 st.sampled_from(["\n", ""])))),
        ),
        entry=draw(st.sampled_from(["Decoding", "Decoding", "contract"])),
    )
    if case["k"][0] == "region" and case["proposer"] != "suffix":
        case["k"] = ("adaptive", case["k"][1])
    if sampled:
        case["levels"] = draw(st.sampled_from([0, 0, 1]))
        extreme = st.sampled_from([1e-300, 1e-50, 1e-45, 1e-40, 1e-30, 1e30, 1e300])  # tiny ones were NaN
        case["temperature"] = draw(st.one_of(st.floats(0.05, 3.0), extreme))
        case["top_p"] = draw(st.one_of(st.floats(0.01, 1.0), st.sampled_from([1.0, 1.0, 1e-9, 0.5])))
        case["rng_seed"] = draw(st.integers(0, 2**31))
    return case


def eos_set(case) -> set[int]:
    eos = case["eos"]
    return set() if eos is None else {eos} if isinstance(eos, int) else set(eos)


def specials_of(case) -> list[int]:
    stop = case["stop"]
    return sorted(eos_set(case) | (set(stop[1]) if stop and stop[0] == "tokens" else set()))


def check_blocks(case, model, run, yielded, policy, max_new):
    """What every run must satisfy, greedy or sampled: the pass log and the statistics add up."""
    s = run.stats
    prompt, out = list(case["prompt"]), run.tokens
    assert sum(yielded, []) == out and all(yielded)  # the stream is the output, no empty pieces
    assert len(out) <= max_new and s.new_tokens == len(out)
    assert s.target_passes == len(s.blocks) == len(model.log)
    assert s.drafted_tokens == sum(b.drafted for b in s.blocks)
    assert s.accepted_tokens == sum(b.accepted for b in s.blocks)
    assert 0 <= s.accepted_tokens <= s.drafted_tokens
    assert sum(b.emitted for b in s.blocks) == len(out)
    # Every block emits at least one token (the stops here keep the token that completes them), so a
    # run never takes more passes than plain decoding would.
    assert all(b.emitted >= 1 for b in s.blocks) and s.target_passes <= len(out)
    assert max_new > 0 or s.target_passes == 0
    assert s.ttft_s <= s.total_s or not s.blocks
    done = 0
    for i, (b, (prefix, block)) in enumerate(zip(s.blocks, model.log)):
        assert prefix == prompt + out[:done], "the target was asked about the wrong prefix"
        assert len(block) == b.drafted and 0 <= b.accepted <= b.drafted
        limit = max_new - done - 1  # a block never drafts past max_new (the bonus token fills the last slot)
        if isinstance(policy, RecordingPolicy):
            limit = min(limit, policy.asked[i])
            assert policy.told[i] == (b.drafted, b.accepted)
        elif isinstance(policy, int):
            limit = min(limit, policy)
        assert b.drafted <= max(limit, 0)
        emitted = out[done:done + b.emitted]
        assert b.emitted <= b.accepted + 1
        assert emitted[:b.accepted] == block[:len(emitted)][:b.accepted]  # accepted tokens are the draft's
        done += b.emitted
    if isinstance(policy, RecordingPolicy):
        assert len(policy.asked) == len(policy.told) == s.target_passes


def test_engine_greedy_fuzz(fuzz_examples, one_thread):
    def check(case):
        eos = eos_set(case)
        stop_engine, stop_reference = make_stop(case["stop"])
        ref = reference_greedy(make_model(case), case["prompt"], case["max_new"], eos, stop_reference)
        assert len(ref) <= case["max_new"]

        rng = random.Random(case["seed"])
        model = make_model(case)
        inner = make_proposer(case["proposer"], rng, case, ref, specials_of(case))
        proposer = wrap_return(inner, case["returns"])
        ref_len = len(inner.text) if isinstance(inner, SuffixArrayProposer) else 0
        policy = make_policy(case["k"], rng, inner, ref_len)
        eos_arg = case["eos"] if not isinstance(case["eos"], frozenset) else list(case["eos"])

        if case["entry"] == "contract" and stop_engine is None and isinstance(policy, int):
            # The contract's entry points (README, "Python API"; thin wrappers over the same loop).
            out = speculative_greedy(model, proposer, case["prompt"], case["max_new"], k=policy, eos=eos_arg)
            assert out == ref
            assert len(model.log) <= len(ref)
            plain = make_model(case)
            assert greedy_decode(plain, case["prompt"], case["max_new"], eos=eos_arg) == ref
            assert len(plain.log) == len(ref) and all(block == [] for _, block in plain.log)
            return

        run = Decoding(model, proposer, case["prompt"], case["max_new"], k=policy, eos=eos_arg, stop=stop_engine)
        yielded = list(run)
        assert run.tokens == ref, "speculative greedy output differs from plain greedy decoding"
        check_blocks(case, model, run, yielded, policy, case["max_new"])
        # Greedy acceptance is exact: each block accepts the longest draft prefix that the target's argmax
        # chain agrees with (computed here from the model directly).
        for b, (prefix, block) in zip(run.stats.blocks, model.log):
            seq, agree = list(prefix), 0
            while agree < len(block) and first_argmax(model.row(seq)) == block[agree]:
                seq.append(block[agree])
                agree += 1
            assert b.accepted == agree
        if case["proposer"] == "empty":
            assert run.stats.target_passes == len(ref) and run.stats.drafted_tokens == 0
        if case["proposer"] in ("oracle", "draft-self"):
            assert run.stats.accepted_tokens == run.stats.drafted_tokens

    run_hypothesis(fuzz_examples, engine_cases(), check)


def nucleus_ok(row: list[float], token: int, sampling: Sampling) -> bool:
    """Whether `token` can be drawn from the warped row (float64, computed independently of the engine)."""
    x = torch.tensor(row, dtype=torch.float64)
    p = torch.softmax((x - x.max()) / sampling.temperature, -1)
    if float(p[token]) <= 0.0:
        return False
    return float(p[p > p[token]].sum()) < sampling.top_p + 1e-5


def test_engine_sampled_fuzz(fuzz_examples, one_thread):
    """Sampled speculative decoding: seeded runs repeat exactly, tokens come from the warped target's
    support, and a degenerate warp gives the greedy output. (The output distribution itself is checked
    against exact enumeration in test_engine.py.)"""

    def decode(case, ref):
        sampling = Sampling(temperature=case["temperature"], top_p=case["top_p"])
        rng = random.Random(case["rng_seed"])
        model = make_model(case)
        if case["proposer"] in ("draft-model", "draft-self"):  # sampled drafting with real q distributions
            seed = case["seed"] + (1 if case["proposer"] == "draft-model" else 0)
            other = TableModel(seed, case["vocab"], case["context"], case["buckets"], case["levels"])
            inner = DraftModelSampler(LoggedFunctionModel(other), sampling, rng)
        else:
            inner = make_proposer(case["proposer"], random.Random(case["seed"]), case, ref, specials_of(case))
        proposer = wrap_return(inner, case["returns"])
        ref_len = len(inner.text) if isinstance(inner, SuffixArrayProposer) else 0
        policy = make_policy(case["k"], random.Random(case["seed"] + 7), inner, ref_len)
        stop_engine, _ = make_stop(case["stop"])
        run = Decoding(model, proposer, case["prompt"], case["max_new"], k=policy, sampling=sampling, rng=rng,
                       eos=case["eos"], stop=stop_engine)
        yielded = list(run)
        return run, model, yielded, policy, sampling

    def check(case):
        eos = eos_set(case)
        _, stop_reference = make_stop(case["stop"])
        ref = reference_greedy(make_model(case), case["prompt"], case["max_new"], eos, stop_reference)
        run, model, yielded, policy, sampling = decode(case, ref)
        again = decode(case, ref)[0]
        assert again.tokens == run.tokens, "the same seed must give the same output"
        assert (again.stats.target_passes, again.stats.accepted_tokens) == \
            (run.stats.target_passes, run.stats.accepted_tokens)
        check_blocks(case, model, run, yielded, policy, case["max_new"])
        seq = list(case["prompt"])
        for tok in run.tokens:
            assert nucleus_ok(model.row(seq), tok, sampling), "sampled a token outside the warped target"
            seq.append(tok)
        one_token = case["temperature"] <= 1e-30 or case["top_p"] <= 1e-6 and case["temperature"] <= 3
        if one_token and case["levels"] == 0:  # (with exact ties the nucleus may hold another tied token)
            assert run.tokens == ref, "a one-token nucleus must decode exactly greedily"

    run_hypothesis(max(1, fuzz_examples // SAMPLED_SHARE), engine_cases(sampled=True), check)


# --- Request handling: a real in-process gRPC server on the small model ---

MAX_REQUEST_BYTES = 64 * 1024  # small, so that "too big" is cheap to send
GRPC_LIMIT = 2 * MAX_REQUEST_BYTES + (1 << 20)  # the server's transport limit (server.py)
CONTEXT = 8192  # smollm2-135m's max_position_embeddings
CALL_TIMEOUT_S = 60.0  # a request that takes longer counts as a hang
ALLOWED_ERRORS = {"INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION"}
METHOD_PATH = "/apply_edit.v1.ApplyEdit/Apply"

# Text that means something to the tokenizer, the prompt or the output extractor.
TRICKY = ["\x00", "<|im_end|>", "<|im_start|>assistant\n", "<|endoftext|>", "</updated-code>", "<updated-code>\n",
          "</code>", "<update>", "</draft>", "```", "{original}", "{}", "%s", "\r\n", "\r", "\t", "\ufeff", "\u202e",
          "\u0301", "\U0010ffff", "\U0001f600", "\u2028", "# ... existing code ...\n", "// ... existing code ...\n",
          "/* ... existing code ... */", "def f():\n    return 1\n", "class A:\n    x = 1\n", "\\", "'''", '"']
SNIPPETS = ["# ... existing code ...\n", "// ... existing code ...\n", "def f():\n    return 2\n", "x = 2\n",
            "class A:\n    y = 2\n# ... existing code ...\n", "\U0001f600"]
LANGUAGE_VALUES = ["", "python", "Python", "PYTHON", "typescript", "tsx", "go", "rust", "c++", "brainfuck",
                   "../../etc/passwd", "python\x00", "\u202epython", "x" * 300]
PATH_VALUES = ["", "a.py", "x.tsx", "main.go", "../../etc/passwd", "/dev/zero", "/proc/self/mem", "C:\\con\\aux.py",
               "file.", ".py", "a.PY", "dir/", "\x00.py", "a" * 5000 + ".rs", "~/.ssh/id_rsa", "file:///etc/shadow"]


def small_text():
    piece = st.one_of(st.text(st.characters(codec="utf-8"), max_size=40), st.sampled_from(TRICKY))
    return st.lists(piece, max_size=6).map("".join)


@st.composite
def big_text(draw):
    """A field of a given byte size class: over max_request_bytes, over the transport limit, or at the edge."""
    char = draw(st.sampled_from(["x", "é", "\u20ac", "\U0001f600", "\x00", "# ... existing code ...\n"]))
    size = draw(st.sampled_from([MAX_REQUEST_BYTES + 1, 2 * MAX_REQUEST_BYTES, GRPC_LIMIT + 1000]))
    return char * (size // len(char.encode()) + 1)


@st.composite
def structured_text(draw):
    """Marker-only snippets, deep nesting, long lines: valid UTF-8 that is hard on merge, regions and prompts."""
    # Sizes stay below about 1,000 tokens: the prompt holds the original twice (as is and merged), and a
    # prefill of thousands of tokens would take seconds per example on a CPU.
    kind = draw(st.sampled_from(["markers", "nested", "long-line", "many-lines"]))
    n = draw(st.integers(1, 100))
    if kind == "markers":
        marker = draw(st.sampled_from(["# ... existing code ...", "// ... existing code ...", "...", "# ..."]))
        return "\n".join([marker] * n) + "\n"
    if kind == "nested":
        opening, closing = draw(st.sampled_from([("(", ")"), ("{", "}"), ("[", "]"), ("def f():\n ", "")]))
        depth = draw(st.integers(1, 1000 // len(opening)))
        return opening * depth + "x" + closing * depth * draw(st.sampled_from([0, 1]))
    if kind == "long-line":
        return "x = '" + "a" * (n * 10) + "'\n"
    return "\n" * (n * 10)


def field_text():
    return st.one_of(small_text(), small_text(), small_text(), structured_text(), st.just(""))


def float32_edges():
    return st.one_of(st.none(), st.floats(width=32), st.sampled_from(
        [0.0, -0.0, 1e-45, 1e-40, 1e-30, 0.3, 0.7, 1.0, 1.0000001, 2.0, 100.0, 3.4e38, -1.0, -1e-45,
         math.nan, math.inf, -math.inf]))


@st.composite
def options_message(draw, valid: bool):
    """Options a client might send (`valid`: only values the server accepts) or anything at all."""
    from apply_edit.request.runs import METHODS
    from apply_edit.v1 import apply_edit_pb2 as pb

    o = pb.ApplyOptions(max_new_tokens=draw(st.integers(1, 8)))
    if valid:
        o.model = draw(st.sampled_from(["", "smollm2-135m"]))
        o.method = draw(st.sampled_from(("",) + METHODS))
        o.drafting = draw(st.sampled_from(["", "merge", "copy"]))
        greedy = o.method == "prompt-lookup" or draw(st.booleans())
        if draw(st.booleans()):
            o.temperature = 0.0 if greedy else draw(st.sampled_from([1e-45, 1e-40, 0.2, 0.7, 1.0, 2.0, 3.4e38]))
        if not greedy and draw(st.booleans()):
            o.top_p = draw(st.sampled_from([1e-45, 1e-6, 0.5, 0.9, 1.0]))
        if draw(st.booleans()):
            o.k_max = draw(st.sampled_from([0, 1, 2, 8, 64, 256]))
        if draw(st.booleans()):
            o.seed = draw(st.integers(0, 2**64 - 1))
        if greedy and draw(st.booleans()):
            o.acceptance = 1
            if draw(st.booleans()):
                o.typical_threshold = draw(st.sampled_from([1e-45, 0.01, 0.3, 1.0]))
        return o
    o.model = draw(st.sampled_from(["", "smollm2-135m", "qwen2.5-coder-0.5b", "gpt-17", "smollm2-135m\x00"]))
    o.method = draw(st.one_of(st.sampled_from(("",) + METHODS), st.sampled_from(["SPEC", "beam", "spec "]),
                              small_text()))
    o.max_new_tokens = draw(st.one_of(st.integers(1, 8), st.sampled_from([2**32 - 1, 100_000])))
    o.drafting = draw(st.sampled_from(["", "merge", "copy", "psychic", "MERGE"]))
    o.acceptance = draw(st.sampled_from([0, 1, 7]))  # 7: an enum value this server does not know
    for name, strategy in [("temperature", float32_edges()), ("top_p", float32_edges()),
                           ("typical_threshold", float32_edges()),
                           ("k_max", st.one_of(st.none(), st.integers(0, 300), st.just(2**32 - 1))),
                           ("seed", st.one_of(st.none(), st.integers(0, 2**64 - 1)))]:
        value = draw(strategy)
        if value is not None:
            setattr(o, name, value)
    return o


@st.composite
def proto_requests(draw, valid: bool):
    """A request a client might send, with odd text (`valid`), or anything at all."""
    from apply_edit.v1 import apply_edit_pb2 as pb

    fields = {name: draw(field_text()) for name in ("original", "update", "instruction")}
    if valid and not fields["update"].strip():
        fields["update"] += draw(st.sampled_from(SNIPPETS))  # a snippet that says something
    elif draw(st.integers(0, 4)) == 0:  # now and then one field is huge
        fields[draw(st.sampled_from(list(fields)))] = draw(big_text())
    msg = pb.ApplyRequest(**fields, language=draw(st.one_of(st.sampled_from(LANGUAGE_VALUES), small_text())),
                          path=draw(st.one_of(st.sampled_from(PATH_VALUES), small_text())))
    # Always a small max_new_tokens: without one the server writes the whole file (original + snippet + 64
    # tokens), seconds per request here; test_service.py covers that default.
    msg.options.CopyFrom(draw(options_message(valid)))
    return msg


# Raw protobuf encoding, to send what no protobuf library would.
def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative numbers: ten-byte two's complement, as protobuf encodes int64
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def length_delimited(field: int, payload: bytes) -> bytes:
    return tag(field, 2) + varint(len(payload)) + payload


BAD_UTF8 = [b"\xff", b"\xfe\xfd", b"\x80", b"\xc0\xaf", b"\xe2\x82", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
            b"\xed\xa0\x80",  # a lone surrogate as CESU/WTF-8 would write it
            "\ud800".encode("utf-8", "surrogatepass"), "\udfff".encode("utf-8", "surrogatepass"),
            "a\udc80b".encode("utf-8", "surrogatepass"), "\ud83d\ude00".encode("utf-8", "surrogatepass")]


@st.composite
def bad_utf8_requests(draw):
    """A hand-built ApplyRequest with invalid UTF-8 (lone surrogates included) in at least one string field,
    at the top level (fields 1-5) or in the options (model 1, method 2, drafting 10)."""
    good = lambda: draw(small_text()).encode()
    bad = lambda: good() + draw(st.sampled_from(BAD_UTF8)) + good()
    fields = [(n, good()) for n in (1, 2, 3, 4, 5)]
    option_fields = [(1, b""), (2, b"spec"), (10, b"")]
    if draw(st.booleans()):
        i = draw(st.integers(0, 4))
        fields[i] = (fields[i][0], bad())
    else:
        i = draw(st.integers(0, 2))
        option_fields[i] = (option_fields[i][0], bad())
    options = b"".join(length_delimited(n, v) for n, v in option_fields) + tag(6, 0) + varint(4)
    message = b"".join(length_delimited(n, v) for n, v in draw(st.permutations(fields)))
    return message + length_delimited(6, options)


@st.composite
def odd_encodings(draw):
    """Valid-looking framing with odd values: negative varints, wrong wire types, unknown and repeated fields,
    lengths that overrun, deep group nesting."""
    kind = draw(st.sampled_from(["negative", "wire-type", "unknown", "repeated", "overrun", "groups", "empty"]))
    base = length_delimited(1, b"x = 1\n") + length_delimited(2, b"x = 2\n")
    if kind == "negative":  # uint32/uint64 fields given -1 etc. (truncated by the parser: huge values)
        field = draw(st.sampled_from([5, 6, 7, 8]))
        return base + length_delimited(6, tag(field, 0) + varint(draw(st.sampled_from([-1, -2**31, -2**63]))))
    if kind == "wire-type":
        return base + tag(draw(st.integers(1, 6)), draw(st.sampled_from([0, 1, 5]))) + b"\x01" * 8
    if kind == "unknown":
        return base + length_delimited(draw(st.integers(7, 10**6)), draw(st.binary(max_size=50))) \
            + length_delimited(6, length_delimited(99, b"\xff\xff") + tag(6, 0) + varint(3))
    if kind == "repeated":  # the last value of a scalar field wins
        return base + length_delimited(2, b"") + length_delimited(6, tag(6, 0) + varint(2)) \
            + length_delimited(6, tag(2, 2) + varint(5) + b"plain")
    if kind == "overrun":
        return base + tag(3, 2) + varint(draw(st.sampled_from([10, 2**31, 2**63]))) + b"short"
    if kind == "groups":  # unknown field 15 as nested groups (start/end group tags)
        depth = draw(st.sampled_from([5, 90, 101, 200, 10_000, 100_000]))
        return base + tag(15, 3) * depth + tag(15, 4) * depth * draw(st.sampled_from([0, 1]))
    return b""


@st.composite
def mutated_requests(draw):
    raw = bytearray(draw(proto_requests(draw(st.booleans())).filter(lambda m: m.ByteSize() < 20_000))
                    .SerializeToString())
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "flip" and raw:
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del raw[at:at + draw(st.integers(1, 4))]
        else:
            del raw[at:]
    return bytes(raw)


def raw_requests():
    return st.one_of(st.binary(max_size=300), bad_utf8_requests(), odd_encodings(), mutated_requests())


@st.composite
def service_cases(draw):
    """(request, what the client does): 40% valid requests, 30% any proto request, 30% raw bytes."""
    kind = draw(st.sampled_from(["raw"] * 3 + ["any"] * 3 + ["valid"] * 4))
    request = draw(raw_requests() if kind == "raw" else proto_requests(kind == "valid"))
    return request, draw(st.sampled_from(["read"] * 18 + ["cancel", "short-deadline"]))


def maybe_too_long(msg) -> bool:
    """Whether the prompt might not fit the context (a token is at least one byte; the default prompt
    holds the original, the snippet and their merge, plus about 300 tokens of instructions)."""
    size = sum(len(s.encode()) for s in (msg.original, msg.update, msg.instruction))
    return 300 + 3 * size + msg.options.max_new_tokens > CONTEXT


def violations(msg) -> list[str]:
    """Reasons the server must refuse `msg` (pieces of its INVALID_ARGUMENT message); [] means it must run
    (or, where `maybe_too_long`, may be refused as too long for the model)."""
    from apply_edit.request.runs import DRAFTING, METHODS

    size = sum(len(s.encode()) for s in (msg.original, msg.update, msg.instruction))
    if size > MAX_REQUEST_BYTES:
        return [f"at most {MAX_REQUEST_BYTES} bytes"]
    o, out = msg.options, []
    if not msg.original.strip() and not msg.update.strip():
        out.append("both empty")
    if not msg.update.strip() and not msg.instruction.strip():
        out.append("update is empty")
    if o.model and o.model != "smollm2-135m":
        out.append("unknown model")
    if o.method and o.method not in METHODS:
        out.append("unknown method")
    for name in ("temperature", "top_p", "typical_threshold"):
        if o.HasField(name) and not math.isfinite(getattr(o, name)):
            out.append(f"options.{name} must be a finite number")
    temperature = o.temperature if o.HasField("temperature") else 0.0
    if not math.isfinite(temperature) or temperature < 0:
        out.append("temperature")
    if o.HasField("top_p") and not 0 < o.top_p <= 1:
        out.append("top_p")
    if o.HasField("k_max") and o.k_max > 256:
        out.append("k must be")
    if o.drafting and o.drafting not in DRAFTING:
        out.append("unknown drafting")
    if o.method == "prompt-lookup" and temperature > 0:
        out.append("prompt-lookup")
    threshold = o.typical_threshold if o.HasField("typical_threshold") else 0.3
    if o.acceptance == 1 and (temperature > 0 or not 0 < threshold <= 1):
        out.append("typical acceptance")
    if o.max_new_tokens >= CONTEXT:
        out.append("too long")
    return out


def parses(raw: bytes):
    from google.protobuf.message import DecodeError

    from apply_edit.v1 import apply_edit_pb2 as pb

    try:
        return pb.ApplyRequest.FromString(raw)
    except DecodeError:
        return None


@pytest.fixture(scope="module")
def fuzz_server():
    from apply_edit.models.transformers_target import TransformersTarget
    from apply_edit.faces.service.server import ApplyServer

    target = TransformersTarget.load("smollm2-135m", dtype="fp32", log=lambda *_: None)
    server = ApplyServer("smollm2-135m", port=0, max_request_bytes=MAX_REQUEST_BYTES, log=lambda *_: None)
    server.start()
    server.load_model(target)
    yield server
    server.stop(0)


def call(channel, request, action):
    """Send one request; returns ("OK", responses) or (status name, details)."""
    import grpc

    from apply_edit.v1 import apply_edit_pb2 as pb

    serialize = (lambda b: b) if isinstance(request, bytes) else pb.ApplyRequest.SerializeToString
    stub = channel.unary_stream(METHOD_PATH, request_serializer=serialize,
                                response_deserializer=pb.ApplyResponse.FromString)
    stream = stub(request, timeout=0.05 if action == "short-deadline" else CALL_TIMEOUT_S)
    responses = []
    try:
        for response in stream:
            responses.append(response)
            if action == "cancel":
                stream.cancel()
                return "CANCELLED", "cancelled by the test"
    except grpc.RpcError as err:
        return err.code().name, err.details() or ""
    return "OK", responses


def check_complete_stream(msg, responses) -> None:
    assert responses and responses[-1].HasField("stats"), "a stream must end with a response carrying stats"
    assert not any(r.HasField("stats") for r in responses[:-1])
    tokens = [r.tokens for r in responses]
    assert tokens == sorted(tokens)
    stats = responses[-1].stats
    if stats.target_passes == 0:  # a sound merge, answered without the model
        assert stats.path == "merge" and stats.new_tokens == tokens[-1] == 0
    else:
        assert stats.new_tokens == tokens[-1] >= 1
    if msg.options.max_new_tokens:
        assert stats.new_tokens <= msg.options.max_new_tokens
    assert stats.accepted_tokens <= stats.drafted_tokens
    assert stats.target_passes <= stats.new_tokens + 1
    assert stats.method == (msg.options.method or "spec") and stats.model == "smollm2-135m"


@pytest.mark.model
def test_request_handling_fuzz(fuzz_examples, fuzz_server, monkeypatch):
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from apply_edit.v1 import apply_edit_pb2 as pb

    from apply_edit.code import regions
    from apply_edit.code.languages import KNOWN_LANGUAGES

    outcomes: dict[str, int] = {}
    timings: list[float] = []
    asked_parsers: set[str] = set()  # the languages the server looked up a grammar for
    cached_parser_for = regions.parser_for
    monkeypatch.setattr(regions, "parser_for", lambda language: asked_parsers.add(language) or
                        cached_parser_for(language))

    with grpc.insecure_channel(f"127.0.0.1:{fuzz_server.port}") as channel:
        def check(case):
            request, action = case
            msg = parses(request) if isinstance(request, bytes) else request
            t0 = time.perf_counter()
            code, result = call(channel, request, action)
            timings.append(time.perf_counter() - t0)
            if timings[-1] > 5:
                shape = [len(getattr(msg, f)) for f in ("original", "update", "instruction")] if msg else None
                print(f"\nslow request: {timings[-1]:.1f} s, {code}, field lengths {shape}, "
                      f"options {str(msg.options).strip() if msg else None}")
            key = f"{code} ({'valid' if msg is not None and not violations(msg) else 'invalid'})"
            outcomes[key] = outcomes.get(key, 0) + 1
            size = len(request) if isinstance(request, bytes) else request.ByteSize()
            if action == "cancel" and code == "CANCELLED":
                return
            if action == "short-deadline" and code == "DEADLINE_EXCEEDED":
                return
            if code == "OK":
                assert msg is not None and size <= GRPC_LIMIT
                # The context limit is the model's: a sound merge answers without the model, whatever
                # max_new_tokens asks for.
                by_merge = result and result[-1].stats.path == "merge" and result[-1].stats.target_passes == 0
                must_refuse = [v for v in violations(msg) if not (by_merge and v == "too long")]
                assert not must_refuse, f"served a request it must refuse: {must_refuse}"
                check_complete_stream(msg, result)
                return
            assert code in ALLOWED_ERRORS, f"{code}: {result}"
            assert result.strip(), f"{code} without a message"
            if size > GRPC_LIMIT:
                assert code == "RESOURCE_EXHAUSTED"
            elif msg is None:  # not protobuf, or invalid UTF-8 / lone surrogates in a string field
                assert code == "INVALID_ARGUMENT" and "not a valid ApplyRequest" in result, result
            elif code == "FAILED_PRECONDITION":  # served, judged and refused: only valid requests get there
                assert not violations(msg) and "no sound result" in result, result
            else:
                reasons = violations(msg) + (["too long"] if maybe_too_long(msg) else [])
                assert code == "INVALID_ARGUMENT", result
                assert reasons, f"refused a valid request: {result}"
                assert any(r in result for r in reasons), (reasons, result)

        run_hypothesis(max(1, min(SERVICE_CAP, fuzz_examples // SERVICE_SHARE)), service_cases(), check)

        # The server came through: nothing in flight, the model free, SERVING, and a normal request works.
        assert wait_until(fuzz_server.model.idle)
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        normal = pb.ApplyRequest(original="def f():\n    return 1\n", update="def f():\n    return 2\n",
                                 path="a.py", options=pb.ApplyOptions(max_new_tokens=8))
        code, responses = call(channel, normal, "read")
        assert code == "OK"
        check_complete_stream(normal, responses)

    # Request text must not grow server state: parser_for caches a parser per language name without bound,
    # so only known names may reach it (it used to get every `language` string a client sent).
    assert asked_parsers and asked_parsers <= KNOWN_LANGUAGES | {""}, asked_parsers - KNOWN_LANGUAGES
    counted = {s.labels["status"]: s.value for m in fuzz_server.metrics.registry.collect() for s in m.samples
               if s.name == "apply_edit_requests_total" and s.value}
    assert not {"INTERNAL", "UNKNOWN"} & set(counted), counted
    assert outcomes.get("OK (valid)") and outcomes.get("INVALID_ARGUMENT (invalid)"), outcomes  # not vacuous
    print(f"\nrequest fuzz: {sum(outcomes.values())} requests, {outcomes}, "
          f"{sum(timings) / len(timings) * 1000:.0f} ms mean, {max(timings):.2f} s max")


EDGE_REQUESTS = {  # found by this fuzz; each used to end INTERNAL
    "empty merge candidate": dict(original="", update="# ... existing code ...\n"),
    "spec with k_max 0": dict(original="x = 1\n", update="x = 2\n", k_max=0),
}


@pytest.mark.model
@pytest.mark.parametrize("name", list(EDGE_REQUESTS))
def test_edge_requests_found_by_the_fuzz_are_served(fuzz_server, name):
    import grpc

    from apply_edit.v1 import apply_edit_pb2 as pb

    fields = dict(EDGE_REQUESTS[name])
    options = pb.ApplyOptions(max_new_tokens=4, **({"k_max": fields.pop("k_max")} if "k_max" in fields else {}))
    msg = pb.ApplyRequest(options=options, **fields)
    with grpc.insecure_channel(f"127.0.0.1:{fuzz_server.port}") as channel:
        code, result = call(channel, msg, "read")
    assert code == "OK", result
    check_complete_stream(msg, result)


@pytest.mark.model
def test_float_option_edges(fuzz_server):
    """The fuzz's float edges, each sent for sure: non-finite values are refused (NaN used to pass every
    range check and sample garbage), and a tiny positive temperature decodes like greedy (it used to give
    NaN probabilities: logits / 1e-40 overflowed)."""
    import grpc

    from apply_edit.v1 import apply_edit_pb2 as pb

    def request(**options):
        return pb.ApplyRequest(original="def f():\n    return 1\n", update="def f():\n    return 2\n", path="a.py",
                               options=pb.ApplyOptions(method="plain", max_new_tokens=8, **options))

    with grpc.insecure_channel(f"127.0.0.1:{fuzz_server.port}") as channel:
        for options in [dict(temperature=math.nan), dict(temperature=math.inf), dict(temperature=-math.inf),
                        dict(top_p=math.nan), dict(temperature=0.5, top_p=math.inf),
                        dict(acceptance=1, typical_threshold=math.nan)]:
            code, details = call(channel, request(**options), "read")
            assert code == "INVALID_ARGUMENT" and "must be a finite number" in details, (options, code, details)
        texts = {}
        for temperature in (0.0, 1e-40, 1e-45):
            code, responses = call(channel, request(temperature=temperature, seed=7), "read")
            assert code == "OK", responses
            check_complete_stream(request(), responses)
            texts[temperature] = "".join(r.text for r in responses)
        assert texts[1e-40] == texts[1e-45] == texts[0.0] and texts[0.0].strip(), texts

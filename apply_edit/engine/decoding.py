"""The speculative decoding engine: draft → one target pass → accept a prefix → emit.

Everything that generates tokens goes through `Decoding`: plain decoding is the same loop with a proposer
that never drafts. Each block

1. asks the proposer for up to k draft tokens d1..dn (n may be 0),
2. runs ONE target pass over the block, giving n+1 next-token distributions
   (after the sequence so far, after +d1, ..., after +dn),
3. accepts the longest prefix the target agrees with and emits the target's own token at the first
   disagreement, or a bonus token from the last distribution when all n were accepted.

So every block emits at least one token, and the output is exactly what the target alone would produce:
greedily (the argmax), or sampled (rejection sampling keeps the target's distribution for any draft
distribution q; a copy drafter's q is a point mass on the drafted token).

The engine talks to two small protocols only: a target (`logits(prefix, block)`, one pass) and a
proposer (`(seq, k) -> tokens`, or `.draft(seq, k) -> Draft` when it also has draft distributions).
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import Callable, Iterable, Iterator, Sequence

import torch

from .api import BlockRecord, DecodeStats, Draft, DraftLengthPolicy, ProposeFn, Target, no_draft
from .sampling import GREEDY, Sampling, draw


class FixedK:
    """The policy of a plain `k`: always k."""

    def __init__(self, k: int):
        self.k = k

    def next_k(self, context: int = 0) -> int:
        return self.k

    def feedback(self, draft: Draft, accepted: int) -> None:
        pass


class Decoding:
    """One generation. Iterate to get the tokens each block emits; `.tokens` and `.stats` fill as it goes.

    k: the most tokens drafted per block, or a draft-length policy (`next_k(context)` before each block,
    `feedback(draft, accepted)` after it; see draft_length.py).
    eos: token id(s) that end generation; the eos token is included in the output.
    stop: called with all new tokens after each block; returns how many to keep when generation must
    stop there (e.g. a closing tag appeared), else None.
    typical_threshold: greedy only, NOT exact: also accept a drafted token that the target gives at least
    this probability (typical acceptance). None (the default) keeps the output exactly the target's.
    """

    def __init__(
        self,
        target: Target,
        proposer: ProposeFn | object,
        prompt: Sequence[int],
        max_new: int,
        *,
        k: int | DraftLengthPolicy = 8,
        sampling: Sampling = GREEDY,
        rng: random.Random | None = None,
        eos: int | Iterable[int] | None = None,
        stop: Callable[[list[int]], int | None] | None = None,
        stats: DecodeStats | None = None,
        typical_threshold: float | None = None,
    ):
        if max_new < 0 or (isinstance(k, int) and k < 0):
            raise ValueError("max_new and k must be >= 0")
        if typical_threshold is not None and not sampling.greedy:
            raise ValueError("typical acceptance is for greedy decoding only")
        self.target = target
        self.proposer = proposer
        self.prompt = list(prompt)
        self.max_new = max_new
        self.policy = FixedK(k) if isinstance(k, int) else k
        self.sampling = sampling
        self.rng = rng if rng is not None else random.Random(sampling.seed)
        self.eos = set() if eos is None else ({eos} if isinstance(eos, int) else set(eos))
        self.stop = stop
        self.typical_threshold = typical_threshold
        self.tokens: list[int] = []
        self.stats = stats if stats is not None else DecodeStats()

    def run(self) -> list[int]:
        for _ in self:
            pass
        return self.tokens

    def __iter__(self) -> Iterator[list[int]]:
        start = time.perf_counter()
        seq = list(self.prompt)
        while len(self.tokens) < self.max_new:
            # k+1 tokens can come out of a block; never let the bonus token overshoot max_new.
            k = min(self.policy.next_k(len(seq)), self.max_new - len(self.tokens) - 1)
            t0 = time.perf_counter()
            draft = self._draft(seq, k)
            t1 = time.perf_counter()
            logits = self.target.logits(seq, draft.tokens)
            accepted, emitted = self._accept(draft, logits)
            self.policy.feedback(draft, accepted)
            self.stats.propose_s += t1 - t0
            self.stats.target_passes += 1
            self.stats.drafted_tokens += len(draft.tokens)
            self.stats.accepted_tokens += accepted

            done, emitted = self._apply_stops(emitted)
            self.tokens.extend(emitted)
            seq.extend(emitted)
            now = time.perf_counter()
            if not self.stats.blocks:
                self.stats.ttft_s, self.stats.prefill_s = now - start, now - t0
            self.stats.blocks.append(BlockRecord(len(draft.tokens), accepted, len(emitted), now - t0))
            self.stats.new_tokens = len(self.tokens)
            self.stats.total_s = now - start
            if emitted:
                yield emitted
            if done:
                return
        self.stats.total_s = time.perf_counter() - start

    def _draft(self, seq: list[int], k: int) -> Draft:
        if k <= 0:
            return Draft([])
        if hasattr(self.proposer, "draft"):
            draft = self.proposer.draft(seq, k)
        else:
            draft = Draft(list(self.proposer(seq, k)))
        if len(draft.tokens) > k:  # a proposer may return fewer tokens, never more
            draft = replace(draft, tokens=draft.tokens[:k], probs=None if draft.probs is None else draft.probs[:k])
        return draft

    def _accept(self, draft: Draft, logits: torch.Tensor) -> tuple[int, list[int]]:
        """(number of draft tokens accepted, tokens emitted by this block)."""
        tokens = draft.tokens
        if self.sampling.greedy:
            choice = logits.argmax(dim=-1).tolist()
            n = 0
            while n < len(tokens) and tokens[n] == choice[n]:
                n += 1
            if self.typical_threshold is not None and n < len(tokens):
                drafted_p = torch.softmax(logits.float(), dim=-1)[torch.arange(len(tokens)), torch.tensor(tokens)]
                while n < len(tokens) and (tokens[n] == choice[n] or float(drafted_p[n]) >= self.typical_threshold):
                    n += 1
            return n, tokens[:n] + [choice[n]]

        p = self.sampling.probs(logits)
        for i, d in enumerate(tokens):
            p_d = float(p[i, d])
            q_d = 1.0 if draft.probs is None else float(draft.probs[i, d])
            if self.rng.random() < min(1.0, p_d / q_d):
                continue
            # Rejected: draw from the residual max(0, p - q), renormalised. For a point mass q this is
            # p with d removed.
            if draft.probs is None:
                residual = p[i].clone()
                residual[d] = 0.0
            else:
                residual = (p[i] - draft.probs[i]).clamp_min(0.0)
            if float(residual.sum()) <= 0.0:  # only reachable through rounding
                residual = p[i]
            return i, tokens[:i] + [draw(residual, self.rng)]
        return len(tokens), tokens + [draw(p[len(tokens)], self.rng)]

    def _apply_stops(self, emitted: list[int]) -> tuple[bool, list[int]]:
        return cut_at_stops(self.tokens, emitted, self.eos, self.max_new, self.stop)


def cut_at_stops(tokens: list[int], emitted: list[int], eos: set[int], max_new: int,
                 stop: Callable[[list[int]], int | None] | None) -> tuple[bool, list[int]]:
    """Cut a block emitted after `tokens` at an eos token (kept), at `max_new` in all, and where `stop`
    says; returns (generation finished, the block's tokens to keep). Every generation cuts this way, this
    loop's and a serving engine's (`models.remote.RemoteTarget.generate`)."""
    for i, tok in enumerate(emitted):
        if tok in eos:
            emitted = emitted[: i + 1]
            break
    done = bool(emitted) and emitted[-1] in eos
    room = max_new - len(tokens)
    if len(emitted) >= room:
        emitted, done = emitted[:room], True
    if stop is not None:
        keep = stop(tokens + emitted)
        if keep is not None:
            emitted = emitted[: max(0, keep - len(tokens))]
            done = True
    return done, emitted


# --- Contract entry points (README, "Python API"): thin wrappers over the one loop above. ---


def greedy_decode(target: Target, prompt: Sequence[int], max_new: int, eos=None) -> list[int]:
    return Decoding(target, no_draft, prompt, max_new, k=0, eos=eos).run()


def speculative_greedy(target: Target, propose: ProposeFn, prompt: Sequence[int], max_new: int, k: int = 4,
                       eos=None) -> list[int]:
    return Decoding(target, propose, prompt, max_new, k=k, eos=eos).run()


def sample_decode(target: Target, prompt: Sequence[int], max_new: int, rng: random.Random, eos=None,
                  temperature: float = 1.0, top_p: float = 1.0) -> list[int]:
    """Plain sampling from the target: the reference speculative_sample must match in distribution."""
    sampling = Sampling(temperature=temperature, top_p=top_p)
    return Decoding(target, no_draft, prompt, max_new, k=0, sampling=sampling, rng=rng, eos=eos).run()


class DraftModelSampler:
    """Drafts by sampling from a small model, reporting its (warped) distributions for exact acceptance."""

    def __init__(self, model, sampling: Sampling, rng: random.Random):
        self.model, self.sampling, self.rng = model, sampling, rng

    def draft(self, seq: Sequence[int], k: int) -> Draft:
        seq, tokens, rows = list(seq), [], []
        for _ in range(k):
            probs = self.sampling.probs(torch.log(torch.as_tensor(self.model.next_dist(seq), dtype=torch.float64)))
            tok = draw(probs, self.rng)
            tokens.append(tok)
            rows.append(probs)
            seq.append(tok)
        return Draft(tokens, torch.stack(rows) if rows else None)


def speculative_sample(target: Target, draft, prompt: Sequence[int], max_new: int, k: int, rng: random.Random,
                       eos=None, temperature: float = 1.0, top_p: float = 1.0) -> list[int]:
    sampling = Sampling(temperature=temperature, top_p=top_p)
    proposer = DraftModelSampler(draft, sampling, rng)
    return Decoding(target, proposer, prompt, max_new, k=k, sampling=sampling, rng=rng, eos=eos).run()

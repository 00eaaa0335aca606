"""The decoding engine's interfaces: what it consumes (a target's one pass, a proposer's draft, a draft-length
policy, a target's cost per pass) and what it reports (its statistics, a target's interruption). Proposers (`proposers.py`),
draft-length policies (`draft_length.py`) and targets (`models/`) implement them. Nothing here loads torch,
so the request layer and the faces hold these types without importing the model's stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

if TYPE_CHECKING:
    import torch


class Target(Protocol):
    def logits(self, prefix: Sequence[int], block: Sequence[int]) -> torch.Tensor:
        """ONE forward pass: next-token logits after prefix, prefix+block[:1], ..., prefix+block.

        Shape [len(block) + 1, vocab]. Any monotone scores work for greedy decoding; for sampling they
        must be log-probabilities up to a per-row constant.
        """


class Interrupted(Exception):
    """A target's `interrupt()` (models/target.py) said stop while a long prompt was being read; the cache holds what was read so far."""


@dataclass
class Draft:
    """A proposal: the drafted tokens, and what the drafter knows about them."""

    tokens: list[int]
    # probs[i] is the distribution tokens[i] was drawn from (already warped like the target's).
    # None means point masses: the drafter proposes deterministically (copying, greedy drafting).
    probs: torch.Tensor | None = None
    # Copy drafting: the position in the proposer's reference the tokens were copied from (None: not a
    # copy), and how many tokens of output matched the reference right before it (what the copy rests on).
    source: int | None = None
    match: int = 0


ProposeFn = Callable[[Sequence[int], int], Sequence[int]]


def no_draft(seq: Sequence[int], k: int) -> list[int]:
    """The empty proposer: speculative decoding with it is plain decoding, one pass per token."""
    return []


class DraftLengthPolicy(Protocol):
    def next_k(self, context: int) -> int: ...

    def feedback(self, draft: Draft, accepted: int) -> None: ...


@dataclass
class BlockRecord:
    drafted: int
    accepted: int
    emitted: int
    seconds: float


@dataclass
class DecodeStats:
    target_passes: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    new_tokens: int = 0
    ttft_s: float = 0.0  # from the start of decoding to the first emitted token (includes prefill)
    total_s: float = 0.0
    prefill_s: float = 0.0  # the first target pass: the prompt (or what is not cached of it) + first token
    prompt_cached: int = 0  # prompt tokens read from the target's prefix store, not prefilled
    threads: int = 0  # torch threads the request ran on (models/threads.py)
    propose_s: float = 0.0  # time spent inside the proposer
    blocks: list[BlockRecord] = field(default_factory=list)

    @property
    def tokens_per_pass(self) -> float:
        return self.new_tokens / self.target_passes if self.target_passes else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0


def _interpolate(points: dict[int, float], x: int) -> float:
    """Piecewise linear through the points; flat below the first, the last slope (at least 0) beyond."""
    xs = sorted(points)
    if x <= xs[0] or len(xs) == 1:
        return points[xs[0]]
    for lo, hi in zip(xs, xs[1:]):
        if x <= hi:
            w = (x - lo) / (hi - lo)
            return points[lo] * (1 - w) + points[hi] * w
    last, before = xs[-1], xs[-2]
    return points[last] + max(0.0, (points[last] - points[before]) / (last - before)) * (x - last)


@dataclass
class CostCurve:
    """Seconds per verify pass by context length and drafted tokens (piecewise linear in both), and
    seconds to read a prompt by its length."""

    points: dict[int, dict[int, float]]  # context -> k -> seconds
    prefill: dict[int, float] = field(default_factory=dict)  # prompt tokens -> seconds to read them; {}: unknown

    def __call__(self, k: int, context: int = 0) -> float:
        return _interpolate({c: _interpolate(by_k, k) for c, by_k in self.points.items()}, context)

    def read_seconds(self, tokens: int) -> float:
        """Seconds to read a prompt of `tokens` into an empty cache (0.0 where not measured). Linear beyond
        the longest prompt measured, so an underestimate there: attention grows faster."""
        return _interpolate({0: 0.0, **self.prefill}, tokens) if self.prefill else 0.0

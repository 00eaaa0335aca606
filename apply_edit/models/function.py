"""A target defined by a Python function: for unit and property tests of the engine."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..engine.api import CostCurve


class FunctionModel:
    """Wraps ``fn(seq) -> next-token distribution`` (a list of probabilities over the vocabulary).

    Every method is one "forward pass" and counts in ``.calls``, so tests can compare pass counts. It is
    a `target.Target` too (`eos`: the ids that end its answer; every pass costs the same), so the whole
    request path runs on it without a model.
    """

    full_rows = True
    engine_decodes = False

    def __init__(self, fn: Callable[[list[int]], Sequence[float]], eos: Sequence[int] = ()):
        self.fn = fn
        self.calls = 0
        self.eos = set(eos)
        self.interrupt: Callable[[], bool] = lambda: False

    def reset(self, cuts=()) -> None:
        pass  # no cache

    def context_limit(self) -> int | None:
        return None

    def eos_ids(self) -> set[int]:
        return self.eos

    def cost_curve(self) -> CostCurve:
        return CostCurve({0: {0: 1.0}})

    def next_dist(self, seq: Sequence[int]) -> list[float]:
        self.calls += 1
        return list(self.fn(list(seq)))

    def score_block(self, prefix: Sequence[int], block: Sequence[int]) -> list[list[float]]:
        """ONE pass: the distributions after prefix, prefix+block[:1], ..., prefix+block."""
        self.calls += 1
        seq = list(prefix)
        dists = [list(self.fn(seq))]
        for tok in block:
            seq.append(tok)
            dists.append(list(self.fn(seq)))
        return dists

    def logits(self, prefix: Sequence[int], block: Sequence[int]) -> torch.Tensor:
        """The engine's view of `score_block`: log-probabilities, one row per distribution."""
        probs = torch.tensor(self.score_block(prefix, block), dtype=torch.float64)
        return torch.log(probs)

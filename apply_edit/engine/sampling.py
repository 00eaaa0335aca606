"""Sampling settings and draws, the same for the target and for a sampling drafter."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    """Sampling settings, applied identically to plain and speculative decoding.

    temperature 0 means greedy (argmax). top_p < 1 keeps the smallest set of most likely tokens whose
    mass reaches top_p.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self):
        # `not x >= 0` also refuses NaN, which every comparison lets through (and which samples garbage).
        if not self.temperature >= 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"sampling needs temperature >= 0 and top_p in (0, 1], got {self.temperature}, "
                             f"{self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Row-wise warped probabilities (float32)."""
        # A tiny temperature (1e-40) made logits / temperature overflow to inf and softmax(inf) is NaN: shift
        # by the row max first (scores <= 0 can only go to -inf, p = 0), and keep the temperature a normal
        # float32 (below that it rounds to 0 in float32 and 0 / 0 is NaN again).
        logits = logits.float()
        temperature = min(max(self.temperature, torch.finfo(torch.float32).tiny), torch.finfo(torch.float32).max)
        probs = torch.softmax((logits - logits.max(dim=-1, keepdim=True).values) / temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            mass_before = sorted_p.cumsum(dim=-1) - sorted_p
            sorted_p[mass_before >= self.top_p] = 0.0
            probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
            probs /= probs.sum(dim=-1, keepdim=True)
        return probs


GREEDY = Sampling()


def draw(probs: torch.Tensor, rng: random.Random) -> int:
    """Inverse-CDF draw from one probability row with a `random.Random` (reproducible by seed)."""
    cdf = probs.double().cumsum(0)
    index = int(torch.searchsorted(cdf, rng.random() * float(cdf[-1]), right=True))
    return min(index, probs.numel() - 1)

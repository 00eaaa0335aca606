"""The engine's fixed public entry points (DESIGN.md, "Contracts"): outside checks import them from here,
so this path stays while the engine lives in `engine/`. Re-exports only."""

from .engine.decoding import greedy_decode, sample_decode, speculative_greedy, speculative_sample

__all__ = ["greedy_decode", "sample_decode", "speculative_greedy", "speculative_sample"]

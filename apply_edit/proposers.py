"""The proposers' fixed public entry points (DESIGN.md, "Contracts"): outside checks import them from here,
so this path stays while the proposers live in `drafting/`. Re-exports only."""

from .drafting.proposers import SuffixArrayProposer, draft_model_proposer

__all__ = ["SuffixArrayProposer", "draft_model_proposer"]

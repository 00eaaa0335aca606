"""What the request path needs of a target model: the protocol `Applier` and the engine run on.

`TransformersTarget` (a Hugging Face causal LM) is the local one, `RemoteTarget` the model on a serving engine
(`remote.py`); `FunctionModel` (a Python function over the vocabulary) implements it for fast tests of the
whole path without a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, Sequence

if TYPE_CHECKING:
    import torch

    from ..engine.api import CostCurve


class Target(Protocol):
    interrupt: Callable[[], bool]  # asked between chunks of a long prompt; set per request by whoever can cancel it
    # Rows are the whole distribution (sampling keeps it); False: exact only on the tokens that decide greedy
    # decoding and likelihood scores (`remote.RemoteTarget`), so sampling is refused.
    full_rows: bool
    # The target decodes greedily itself (`generate(prompt, max_new, stop, stats)`, a serving engine with its
    # own speculation); the engine's loop and this side's drafts are then not used for greedy text.
    engine_decodes: bool

    def logits(self, prefix: Sequence[int], block: Sequence[int]) -> torch.Tensor:
        """ONE pass: a row of logits (or log-probabilities) after prefix, prefix+block[:1], ..., prefix+block.
        May raise `Interrupted`."""

    def reset(self, cuts: Sequence[int] = ()) -> None:
        """Forget the request (its KV cache). `cuts`: prompt positions where a target that stores prompt
        prefixes should end a pass (where what later prompts share ends); others ignore them."""

    def context_limit(self) -> int | None:
        """The most tokens (prompt and output) it takes; None when unbounded or unknown."""

    def eos_ids(self) -> set[int]:
        """The token ids that end its answer."""

    def cost_curve(self) -> CostCurve:
        """Seconds per verify pass by context and drafted tokens (what the adaptive draft length weighs)."""


class TargetUnavailable(RuntimeError):
    """A target on another machine could not be reached or failed a pass: retry later or elsewhere (the
    faces: UNAVAILABLE / 503). The apply fails whole; nothing partial is handed back or written."""


class TargetTimeout(TargetUnavailable):
    """A target on another machine did not answer a pass in time (the faces: DEADLINE_EXCEEDED / 504)."""

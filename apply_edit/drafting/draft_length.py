"""How many tokens to draft per target pass: a fixed k, or k chosen from a measured cost model.

A policy is asked `next_k(context)` (tokens in the sequence so far) before each block and told
`feedback(draft, accepted)` after it (the `Draft` says where a copy came from). The engine knows nothing
else about it (regions and acceptance estimates live here; the cost curve is what a target reports,
`engine.api.CostCurve`; a plain k is the engine's `FixedK`).

The adaptive policy keeps an estimate α of the chance that the next drafted token is accepted, and picks
the k that maximises expected emitted tokens per second of target time:

    E[tokens | k] = (1 - α^(k+1)) / (1 - α)        (accepted prefix + the target's own token)
    k* = argmax_k E[tokens | k] / cost(k)

where cost(k) is the measured time of one verify pass over k drafted tokens for this model and dtype at
the current context length: attention grows with context times block length, so long drafts cost more,
relatively, deep into a long file (measured here: a 64-token verify is ~3x a single-token pass at 1,000
tokens of context and ~7x at 10,000).
"""

from __future__ import annotations

from ..engine.api import CostCurve, Draft

# No 0: a policy that stops drafting never learns that drafting pays again.
CANDIDATE_K = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)


def expected_tokens(alpha: float, k: int) -> float:
    """Tokens one pass emits when each drafted token is accepted independently with probability alpha."""
    if alpha >= 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def best_k(alpha: float, cost: CostCurve, limit: int = CANDIDATE_K[-1], context: int = 0) -> int:
    return max((k for k in CANDIDATE_K if k <= limit), key=lambda k: expected_tokens(alpha, k) / cost(k, context))


class AcceptanceEstimate:
    """A running estimate of the chance that the next drafted token is accepted.

    Each accepted token counts as a success, the first rejected one as a failure; later tokens of the
    block were never tested and do not count. `decay` weighs recent blocks more (edits are local); the
    prior is worth ten tokens.
    """

    def __init__(self, alpha: float, decay: float = 0.85):
        self.decay = decay
        self.successes, self.trials = alpha * 10, 10.0

    @property
    def alpha(self) -> float:
        return self.successes / self.trials

    def update(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        tested = accepted + (1 if accepted < drafted else 0)
        self.successes = self.successes * self.decay + accepted
        self.trials = self.trials * self.decay + tested


class AdaptiveK:
    """k from the cost model and one acceptance estimate for the whole output (optimistic at the start:
    copying from the original is usually right)."""

    def __init__(self, cost: CostCurve, alpha: float = 0.9, k_max: int = 64):
        self.cost, self.k_max = cost, k_max
        self.estimate = AcceptanceEstimate(alpha)

    def next_k(self, context: int = 0) -> int:
        return best_k(self.estimate.alpha, self.cost, self.k_max, context)

    def feedback(self, draft: Draft, accepted: int) -> None:
        self.estimate.update(len(draft.tokens), accepted)


class RegionAdaptiveK:
    """k from the cost model and an acceptance estimate per region of the reference being copied.

    Each draft says the reference position it was copied from (`source`; None: nothing was copied) and
    how many tokens of output matched the reference before it (`match`); `region_of[pos]` is the region
    there (-1: none). A region's estimate starts when drafting first reaches it: at a fixed prior where the
    snippet edits, else at the file-wide estimate of untouched code (which every untouched block updates,
    and which rises above the prior once copying goes well). Right after a miss the region's estimate
    decides; once a draft has been accepted whole, the run of accepted tokens since the last miss lifts it:
    misses cluster at departures, so a copy that holds again deserves a long draft even in a region that
    missed earlier. A short match caps the draft: a copy found on a token or two is a guess.

    The edited prior is mild (0.9, k about 24) because merge drafting usually drafts edited code right;
    lower priors (0.6, 0.8) cost passes on the fixtures.
    """

    def __init__(self, cost: CostCurve, region_of, edited, k_max: int = 64,
                 alpha_untouched: float = 0.9, alpha_edited: float = 0.9):
        self.cost, self.region_of, self.edited, self.k_max = cost, region_of, edited, k_max
        self.alpha_edited = alpha_edited
        self.untouched = AcceptanceEstimate(alpha_untouched)
        self.estimates: dict[int, AcceptanceEstimate] = {}
        self._position: int | None = None
        self._match = 0
        self._run = 0  # drafted tokens accepted since the last miss
        self._region = -1

    def _estimate(self, region: int) -> AcceptanceEstimate:
        if region < 0:
            return self.untouched
        if region not in self.estimates:
            prior = self.alpha_edited if self.edited[region] else self.untouched.alpha
            self.estimates[region] = AcceptanceEstimate(prior)
        return self.estimates[region]

    def next_k(self, context: int = 0) -> int:
        pos = self._position
        self._region = int(self.region_of[pos]) if pos is not None and 0 <= pos < len(self.region_of) else -1
        limit = self.k_max if pos is None else min(self.k_max, max(MIN_CAP, CAP_PER_MATCH * self._match))
        # Misses cluster where the output departs from the reference: after n drafted tokens accepted in a
        # row, (n + RUN_PRIOR) / (n + RUN_PRIOR + 1) is the better guess when it is the higher one.
        run_alpha = (self._run + RUN_PRIOR) / (self._run + RUN_PRIOR + 1) if self._run else 0.0
        alpha = max(self._estimate(self._region).alpha, run_alpha)
        return best_k(alpha, self.cost, limit, context)

    def feedback(self, draft: Draft, accepted: int) -> None:
        drafted = len(draft.tokens)
        self._estimate(self._region).update(drafted, accepted)
        self._run = self._run + accepted if accepted == drafted else 0
        if self._region >= 0 and not self.edited[self._region]:
            self.untouched.update(drafted, accepted)
        if draft.source is not None:
            self._position, self._match = draft.source + accepted, draft.match + accepted


MIN_CAP, CAP_PER_MATCH = 16, 4  # a draft copied after an m-token match is at most max(16, 4m) long

# Pseudo-successes behind a run of accepted drafts. Measured on the 43 fixtures (default model): once a
# draft was accepted whole, the next drafted token is accepted 99.2-99.8% of the time after runs under 16
# tokens, 99.7-99.9% after 16-255, 99.9%+ beyond; 64 keeps the estimate below that at every length
# (0.985 after one token, 0.995 after 135), where the plain rule of succession (a prior of 1) said 0.67.
RUN_PRIOR = 64

"""Proposers: pure token logic that guesses the next tokens, handing the engine a `Draft`
(`engine/api.py`).

A proposer is a callable ``(seq, k) -> tokens``; one that knows more about its guess also has
``.draft(seq, k) -> Draft``: where in its reference a copy came from and how much output matched there
(the copy drafter, for the k policy).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..engine.api import Draft

__all__ = ["SuffixArrayProposer", "draft_model_proposer", "suffix_array"]


def suffix_array(text: np.ndarray) -> np.ndarray:
    """Suffix array of an int sequence by prefix doubling (O(n log² n), vectorised with numpy).

    Example: text [3, 1, 3, 1] has suffixes 0:[3,1,3,1] 1:[1,3,1] 2:[3,1] 3:[1], sorted
    [1] < [1,3,1] < [3,1] < [3,1,3,1], so the result is [3, 1, 2, 0].
    """
    n = len(text)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    rank = np.unique(text, return_inverse=True)[1].astype(np.int64)
    step = 1
    while True:
        second = np.full(n, -1, dtype=np.int64)
        second[: n - step] = rank[step:]
        order = np.lexsort((second, rank))
        pair = np.stack([rank[order], second[order]], axis=1)
        new_group = np.concatenate([[0], np.any(pair[1:] != pair[:-1], axis=1).astype(np.int64)])
        new_rank = np.empty(n, dtype=np.int64)
        new_rank[order] = np.cumsum(new_group)
        rank = new_rank
        if rank.max() == n - 1 or step >= n:
            return order
        step *= 2


class SuffixArrayProposer:
    """Drafts by copying: find the longest suffix of the output that occurs in a reference (the original
    file's tokens, the update snippet's tokens) and propose the tokens that followed it there.

    The suffix array is built over the *reversed* references, so growing the matched suffix of the
    output one token further back narrows one contiguous suffix-array range (binary search per token).

    A continuity pointer makes the common case O(1): when the tokens added since the last proposal are
    exactly the reference's continuation, keep copying from there without searching. Among equally long
    matches, the occurrence right after the last copied position wins (copying stays in order). The last
    `last_resort` references are copied from only where they match longer than all the others.
    """

    def __init__(self, reference: Sequence[int] | Sequence[Sequence[int]], min_match: int = 1,
                 max_match: int = 64, max_candidates: int = 256, last_resort: int = 0):
        refs = [list(reference)] if reference and isinstance(reference[0], (int, np.integer)) else \
            [list(r) for r in reference]
        # Join the references with distinct negative separators so no match crosses a boundary.
        joined: list[int] = []
        self.starts: list[int] = []  # where each reference begins in `text` (for labels per position)
        self._last_resort_from = None  # joined position where the last-resort references begin
        for i, ref in enumerate(refs):
            if i:
                joined.append(-1 - i)
            if i == len(refs) - last_resort:
                self._last_resort_from = len(joined)
            self.starts.append(len(joined))
            joined.extend(ref)
        self.text = np.asarray(joined, dtype=np.int64)
        self._text_list = joined
        self._rev = self.text[::-1].copy()
        self._sa = suffix_array(self._rev)
        self.min_match, self.max_match, self.max_candidates = min_match, max_match, max_candidates
        self._cursor: int | None = None  # reference position expected next, if copying is in progress
        self._seen = 0  # length of seq at the last proposal
        self._match = 0  # tokens of output that matched the reference before the cursor

    def __call__(self, seq: Sequence[int], k: int) -> list[int]:
        return self.draft(seq, k).tokens

    def draft(self, seq: Sequence[int], k: int) -> Draft:
        """Up to k tokens copied from the reference, with where they came from (`source`, `match`)."""
        if k <= 0 or not len(self.text):
            return Draft([])
        start = self._continue(seq)
        if start is not None:
            self._match += len(seq) - self._seen
        else:
            start, self._match = self._search(seq)
        self._seen = len(seq)
        self._cursor = start
        if start is None:
            return Draft([])
        out = self._text_list[start:start + k]
        end = next((i for i, tok in enumerate(out) if tok < 0), len(out))  # a separator: the reference ended
        return Draft(out[:end], source=start, match=self._match)

    def _continue(self, seq: Sequence[int]) -> int | None:
        """The next reference position if seq grew exactly along the reference since the last call."""
        if self._cursor is None or len(seq) <= self._seen:
            return None
        added = list(seq[self._seen:])
        end = self._cursor + len(added)
        if self._text_list[self._cursor:end] == added and end < len(self._text_list):
            return end
        return None

    def _search(self, seq: Sequence[int]) -> tuple[int | None, int]:
        """(reference position following the longest suffix of seq found in the references, its length)."""
        rev, sa, n = self._rev, self._sa, len(self._rev)
        lo, hi, matched = 0, n, 0
        best: tuple[int, int] | None = None  # (lo, hi) of the longest non-empty match
        limit = min(len(seq), self.max_match)
        while matched < limit:
            tok = seq[len(seq) - 1 - matched]
            depth = matched
            # Narrow [lo, hi) to suffixes whose token at `depth` equals tok (they are sorted there).
            a, b = lo, hi
            while a < b:
                mid = (a + b) // 2
                pos = sa[mid] + depth
                if pos < n and rev[pos] < tok or pos >= n:
                    a = mid + 1
                else:
                    b = mid
            first = a
            a, b = first, hi
            while a < b:
                mid = (a + b) // 2
                pos = sa[mid] + depth
                if pos < n and rev[pos] <= tok or pos >= n:
                    a = mid + 1
                else:
                    b = mid
            if first == a:
                break
            lo, hi, matched = first, a, matched + 1
            best = (lo, hi)
        if best is None or matched < self.min_match:
            return None, 0
        # Reversed suffix at r matches; in forward text the match ends at n-1-r, the copy starts after.
        starts = [n - sa[r] for r in range(best[0], min(best[1], best[0] + self.max_candidates))]
        starts = [s for s in starts if s < n]
        if self._last_resort_from is not None:
            starts = [s for s in starts if s < self._last_resort_from] or starts
        if not starts:
            return None, 0
        if self._cursor is not None:
            after = [s for s in starts if s >= self._cursor]
            if after:
                return min(after), matched
        return min(starts), matched


def draft_model_proposer(model):
    """Greedy drafting from a small model with ``next_dist(seq)`` (k passes of the draft per proposal)."""

    def propose(seq: Sequence[int], k: int) -> list[int]:
        seq, out = list(seq), []
        for _ in range(k):
            dist = model.next_dist(seq)
            tok = max(range(len(dist)), key=dist.__getitem__)
            out.append(tok)
            seq.append(tok)
        return out

    return propose

"""A bounded store of KV-cache prefixes: a request whose prompt starts like an earlier one (the same file
again: an agent's retry, several snippets tried on one file, a warm-up call) prefills only what is new.

Exact by construction: the target reads a prompt in passes whose ends follow from the request alone
(`transformers_target.pass_ends`), each entry records where its passes ended, and a prefix is reused only
up to an end that the new request's reading shares, with every earlier end alike. So every reused key and
value was computed from the same tokens, in the same pass, over the same earlier keys and values as a cold
prefill computes it: the same numbers bit for bit, and the output of a request is the same with or without
the store. Where something else changes the numbers (torch's thread count, in fp32), it is the entries'
tag: only prefixes of the same tag are read.
Bounded in bytes; the least recently used prefix goes first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

Layers = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [batch, kv_heads, tokens, dim]


@dataclass
class _Entry:
    tokens: np.ndarray
    ends: tuple[int, ...]  # where the passes that read the tokens ended, ascending; the last is len(tokens)
    layers: Layers
    nbytes: int
    tag: object


def shared_end(stored: Sequence[int], wanted: Sequence[int], common: int) -> int:
    """The last pass end both readings share, with all earlier ends alike, within `common` tokens."""
    found = 0
    for a, b in zip(stored, wanted):
        if a != b or a > common:
            break
        found = a
    return found


def _common_start(stored: np.ndarray, wanted: np.ndarray) -> int:
    """How many first tokens the two sequences share."""
    n = min(len(stored), len(wanted))
    differ = np.flatnonzero(stored[:n] != wanted[:n])
    return int(differ[0]) if differ.size else n


class PrefixCache:
    """Stored prompt prefixes, at most `max_bytes` of keys and values in all."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, _Entry] = OrderedDict()  # least recently used first
        self._next_key = 0
        self.bytes_held = 0
        self.hits = 0  # lookups that reused at least one pass
        self.lookups = 0
        self.tokens_reused = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, tokens: Sequence[int], ends: Sequence[int], tag: object = None) -> tuple[int, Layers | None]:
        """The longest stored prefix of `tokens` that ends where this request's reading ends a pass (`ends`,
        ascending: its cold reading's pass ends, up to the most it may reuse): how many tokens it covers and
        their keys and values (views: the caller copies them into its own cache)."""
        self.lookups += 1
        want = np.asarray(tokens[:ends[-1] if ends else 0], dtype=np.int64)
        best, best_key = 0, None
        for key, entry in self._entries.items():
            if entry.tag != tag:
                continue
            found = shared_end(entry.ends, ends, _common_start(entry.tokens, want))
            if found > best:
                best, best_key = found, key
        if best_key is None:
            return 0, None
        self._entries.move_to_end(best_key)
        self.hits += 1
        self.tokens_reused += best
        return best, [(k[..., :best, :], v[..., :best, :]) for k, v in self._entries[best_key].layers]

    def most_reused(self, tokens: Sequence[int]) -> int:
        """The most of `tokens`' first tokens any stored prefix holds, whatever its tag and pass ends (at
        least what a `lookup` would reuse), without counting as a lookup: what a reading may be spared."""
        want = np.asarray(tokens, dtype=np.int64)
        return max((_common_start(entry.tokens, want) for entry in self._entries.values()), default=0)

    def store(self, tokens: Sequence[int], ends: Sequence[int], layers: Layers, tag: object = None) -> int:
        """Keep the keys and values of `tokens`, read in passes that ended at `ends` (the last is
        len(tokens); the layers hold at least that many positions, copied here), or of the longest prefix
        ending at one of them that the store can hold. A stored prefix these tokens cover (the same tokens,
        read the same way) is dropped. Returns how many tokens it keeps."""
        if not ends or ends[-1] != len(tokens) or list(ends) != sorted(set(ends)) or ends[0] <= 0:
            raise ValueError(f"a stored prefix ends where a pass ended: {len(tokens)} tokens, ends {list(ends)}")
        per_token = sum((k[..., :1, :].nbytes + v[..., :1, :].nbytes) for k, v in layers)
        ends = tuple(e for e in ends if e * per_token <= self.max_bytes)
        if not ends:
            return 0
        n = ends[-1]
        kept = [(k[..., :n, :].clone(), v[..., :n, :].clone()) for k, v in layers]
        nbytes = sum(k.nbytes + v.nbytes for k, v in kept)
        new = np.asarray(tokens[:n], dtype=np.int64)
        for key, entry in list(self._entries.items()):
            m = len(entry.tokens)
            if (entry.tag == tag and m <= n and np.array_equal(entry.tokens, new[:m])
                    and shared_end(entry.ends, ends, m) == m):
                self._drop(key)
        while self._entries and self.bytes_held + nbytes > self.max_bytes:
            self._drop(next(iter(self._entries)))
        self._entries[self._next_key] = _Entry(new, ends, kept, nbytes, tag)
        self._next_key += 1
        self.bytes_held += nbytes
        return n

    def _drop(self, key: int) -> None:
        self.bytes_held -= self._entries.pop(key).nbytes

    def clear(self) -> None:
        self._entries.clear()
        self.bytes_held = 0

"""A bounded store of KV-cache prefixes: a request whose prompt starts like an earlier one (the same file
again: an agent's retry, several snippets tried on one file, a warm-up call) prefills only what is new.

Exact by construction: the target reads a prompt in chunks at fixed positions (multiples of its chunk
length), and only whole chunks are stored and reused. So every reused key and value was computed from
the same tokens, in the same chunk, over the same earlier keys and values as a cold prefill computes it:
the same numbers bit for bit, and the output of a request is the same with or without the store. Where
something else changes the numbers (torch's thread count, in fp32), it is the entries' tag: only prefixes
of the same tag are read.
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
    layers: Layers
    nbytes: int
    tag: object


class PrefixCache:
    """Stored prefixes of whole `granule`s of tokens, at most `max_bytes` of keys and values in all."""

    def __init__(self, max_bytes: int, granule: int):
        self.max_bytes, self.granule = max_bytes, granule
        self._entries: OrderedDict[int, _Entry] = OrderedDict()  # least recently used first
        self._next_key = 0
        self.bytes_held = 0
        self.hits = 0  # lookups that reused at least one granule
        self.lookups = 0
        self.tokens_reused = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, tokens: Sequence[int], limit: int, tag: object = None) -> tuple[int, Layers | None]:
        """The longest stored prefix of `tokens`, in whole granules and at most `limit` tokens: how many
        tokens it covers and their keys and values (views: the caller copies them into its own cache)."""
        self.lookups += 1
        want = np.asarray(tokens[:limit], dtype=np.int64)
        best, best_key = 0, None
        for key, entry in self._entries.items():
            if entry.tag != tag:
                continue
            n = min(len(entry.tokens), len(want))
            differ = np.flatnonzero(entry.tokens[:n] != want[:n])
            common = (int(differ[0]) if differ.size else n) // self.granule * self.granule
            if common > best:
                best, best_key = common, key
        if best_key is None:
            return 0, None
        self._entries.move_to_end(best_key)
        self.hits += 1
        self.tokens_reused += best
        return best, [(k[..., :best, :], v[..., :best, :]) for k, v in self._entries[best_key].layers]

    def store(self, tokens: Sequence[int], layers: Layers, tag: object = None) -> int:
        """Keep the keys and values of `tokens` (a whole number of granules; the layers hold at least that
        many positions, copied here), or of as many granules of them as the store can hold. A stored prefix
        of these tokens is dropped: this one covers it. Returns how many tokens it keeps."""
        n = len(tokens)
        if n == 0 or n % self.granule:
            raise ValueError(f"a stored prefix is whole granules of {self.granule} tokens, not {n}")
        per_token = sum((k[..., :1, :].nbytes + v[..., :1, :].nbytes) for k, v in layers)
        n = min(n, self.max_bytes // (per_token * self.granule) * self.granule)
        if n == 0:
            return 0
        kept = [(k[..., :n, :].clone(), v[..., :n, :].clone()) for k, v in layers]
        nbytes = sum(k.nbytes + v.nbytes for k, v in kept)
        new = np.asarray(tokens[:n], dtype=np.int64)
        for key, entry in list(self._entries.items()):
            if entry.tag == tag and len(entry.tokens) <= n and np.array_equal(entry.tokens, new[:len(entry.tokens)]):
                self._drop(key)
        while self._entries and self.bytes_held + nbytes > self.max_bytes:
            self._drop(next(iter(self._entries)))
        self._entries[self._next_key] = _Entry(new, kept, nbytes, tag)
        self._next_key += 1
        self.bytes_held += nbytes
        return n

    def _drop(self, key: int) -> None:
        self.bytes_held -= self._entries.pop(key).nbytes

    def clear(self) -> None:
        self._entries.clear()
        self.bytes_held = 0

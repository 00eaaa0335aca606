"""A transformers causal LM as the engine's target (`target.Target`): one forward pass per verify, KV cache kept
and rolled back."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Iterator, Sequence

import torch

from ..engine.api import CostCurve, Interrupted
from .cost import cached_cost
from .prefix_cache import PrefixCache
from .registry import DEFAULT_MODEL, cache_root, resolve

# bf16 only where the CPU multiplies it in hardware tiles (AMX). Measured on 2-core CPUs, Qwen2.5-Coder-0.5B:
# with AMX bf16 prefills 2.5x faster than fp32 and verifies blocks far cheaper; with avx512_bf16 but no AMX,
# bf16 is the slower one (1 thread: a 1,024-token prefill 12.6 s against 8.5, a 32-token verify pass 724
# against 647 ms; 2 threads: 6.2 s against 4.4).
def default_dtype() -> torch.dtype:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return torch.bfloat16 if "amx_bf16" in flags else torch.float32


DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp32": torch.float32, "float32": torch.float32}


def parse_dtype(name: str | None) -> torch.dtype:
    if name in (None, "auto"):
        return default_dtype()
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; use auto, bf16 or fp32")
    return DTYPES[name]


# A prompt is read this many tokens per forward pass, so that a cancel or a deadline is seen between chunks.
# Measured on a 2-core CPU without AMX, fp32, a 2,000-token prompt: the default model 27.8-29.4 s in one pass,
# 29.2-30.1 s in chunks of 512, 30.8-32.8 s in chunks of 256; the small model 10.7 s, 11.2 s in chunks of 512.
PREFILL_CHUNK = 512


def pass_ends(cuts: Sequence[int], start: int, stop: int) -> Iterator[int]:
    """Where the passes that read a prompt from `start` (0, or where a pass ended) end, up to `stop`: every
    PREFILL_CHUNK tokens, and at each cut (counting restarts there). A function of the cuts and the start
    alone, so a request reads a prompt the same way from a stored prefix as cold."""
    keep = start
    while True:
        cut = next((c for c in sorted(cuts) if c > keep), None)
        end = keep + PREFILL_CHUNK if cut is None else min(keep + PREFILL_CHUNK, cut)
        if end > stop:
            return
        yield end
        keep = end


def pretrained_location(path: Path) -> tuple[Path, dict]:
    """Where transformers reads a resolved model (`registry.resolve`) from: its directory, with the file's
    name for a GGUF file."""
    return (path.parent, {"gguf_file": path.name}) if path.suffix == ".gguf" else (path, {})


def end_tokens(generation_eos: int | list[int] | None, tokenizer) -> set[int]:
    """The token ids that end a model's answer: its generation config's (one or several) and its tokenizer's."""
    ids = set(generation_eos if isinstance(generation_eos, list) else [] if generation_eos is None else [generation_eos])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


class TransformersTarget:
    """Scores blocks with a Hugging Face causal LM, reusing its KV cache across calls.

    The cache holds the keys/values of `self.cached` tokens. A call `logits(prefix, block)` keeps the
    longest cached prefix of prefix+block (at most len(prefix)-1 tokens, since the last prefix token
    must be fed to get the distribution after it), crops the rest (rollback after a rejected draft) and
    feeds only the new tokens: one forward pass, no recomputation of the prefix. Where more than
    PREFILL_CHUNK tokens of the prefix are new (a prompt), chunks of it go first, one pass each (`pass_ends`),
    and `interrupt()` is asked between them; the chunks depend on the prefix and the cuts, not on the block.

    With a prefix store (`keep_prefixes`), a request's first pass starts from the longest stored prefix of
    its prompt, and what it reads in whole passes is stored for the next (`prefix_cache.py`: exact). `reset`
    takes cuts: where a pass must end besides every PREFILL_CHUNK tokens (the end of the file, which every
    apply to it shares), so that the store can hold all of a shared start.
    """

    full_rows = True
    engine_decodes = False

    def __init__(self, model, tokenizer, name: str = ""):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.passes = 0
        self._cache = None
        self.cached: list[int] = []
        self.prefix_cache: PrefixCache | None = None
        self.reused = 0  # prompt tokens of this request read from the prefix store
        self._cuts: tuple[int, ...] = ()  # this request's extra pass ends (`reset`)
        self._ends: list[int] = []  # where the passes that read the cache's first tokens ended, from position 0
        self._stored = 0  # how many of those tokens were offered to the prefix store
        self._held = 0  # how many of those it holds (fewer where they did not fit)
        self.interrupt: Callable[[], bool] = lambda: False  # set per request by whoever can cancel it
        self._cost: CostCurve | None = None
        self._cost_lock = threading.Lock()

    @classmethod
    def load(cls, name_or_path: str = DEFAULT_MODEL, dtype: str | torch.dtype | None = None, log=print,
             full_hash: bool = False):
        """full_hash: re-hash every cached file first (a long-lived server can afford the ~2 s)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .attention import PACKED_GQA  # registers it with transformers

        dtype = dtype if isinstance(dtype, torch.dtype) else parse_dtype(dtype)
        where, kwargs = pretrained_location(resolve(name_or_path, log=log, full_hash=full_hash))
        model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, attn_implementation=PACKED_GQA, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(where, **kwargs)
        return cls(model, tokenizer, name=name_or_path)

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    def context_limit(self) -> int | None:
        """The most tokens (prompt and output) the model takes, None when its config does not say."""
        return getattr(self.model.config, "max_position_embeddings", None)

    def eos_ids(self) -> set[int]:
        return end_tokens(self.model.generation_config.eos_token_id, self.tokenizer)

    def cost_curve(self) -> CostCurve:
        """Verify-pass cost by draft length for this model and dtype (measured once, cached on disk)."""
        with self._cost_lock:
            if self._cost is None:
                dtype = str(self.dtype).replace("torch.", "")
                name = Path(self.name).name or "model"
                # The name changes when what a pass costs does (here: packed GQA, its mask made once per pass).
                self._cost = cached_cost(self, cache_root() / "costs" / f"{name}-{dtype}-packed-mask.json")
            return self._cost

    def keep_prefixes(self, max_bytes: int) -> None:
        """Keep up to `max_bytes` of prompt prefixes' keys and values across requests (0: none)."""
        self.prefix_cache = PrefixCache(max_bytes) if max_bytes > 0 else None

    def reset(self, cuts: Sequence[int] = ()) -> None:
        """Drop the KV cache (end of a request); stored prefixes stay. `cuts`: where the next request's
        reading of its prompt ends a pass besides every PREFILL_CHUNK tokens."""
        self._cache, self.cached = None, []
        self._cuts, self._ends = tuple(sorted(set(cuts))), []
        self.reused = self._stored = self._held = 0

    @property
    def _read(self) -> int:
        """How many of the cache's first tokens were read in whole passes from position 0."""
        return self._ends[-1] if self._ends else 0

    def _start_from_stored_prefix(self, seq: list[int], limit: int) -> int:
        """A fresh cache, holding the longest stored prefix of seq (at most `limit` tokens): its length."""
        from transformers import DynamicCache

        ends = list(pass_ends(self._cuts, 0, limit))
        found, layers = (self.prefix_cache.lookup(seq, ends, tag=torch.get_num_threads())
                         if self.prefix_cache is not None else (0, None))
        self._cache = DynamicCache(layers, config=self.model.config)
        self._ends = [e for e in ends if e <= found]
        self.reused = self._stored = self._held = found
        return found

    def _store_read_passes(self, seq: list[int]) -> None:
        if self.prefix_cache is not None and self._read > self._stored:
            layers = [(l.keys, l.values) for l in self._cache.layers]
            # tagged: in fp32 the sums (so the keys and values) differ by torch's thread count
            self._held = self.prefix_cache.store(seq[:self._read], self._ends, layers, tag=torch.get_num_threads())
            self._stored = self._read

    def _read_passes(self, seq: list[int], keep: int, stop: int) -> int:
        """Read seq from `keep` in the passes `pass_ends` gives up to `stop` (no logits), store what was read
        from position 0, and return how far the cache now holds. A cancel between passes raises `Interrupted`."""
        for end in pass_ends(self._cuts, keep, stop):
            if self.interrupt():
                self.cached = seq[:keep]
                self._store_read_passes(seq)
                raise Interrupted
            self.model(input_ids=torch.tensor([seq[keep:end]]), cache=self._cache, use_cache=True, logits_to_keep=1)
            if keep == self._read:
                self._ends.append(end)
            keep = end
        self._store_read_passes(seq)
        return keep

    @torch.inference_mode()
    def prefill(self, tokens: Sequence[int]) -> int:
        """Read a prompt's start ahead of its request (a warm-up), all of it in passes that end where it ends,
        into the prefix store; returns how many tokens the store now holds of it. Needs `keep_prefixes`."""
        if self.prefix_cache is None:
            raise ValueError("prefill stores prompt prefixes: call keep_prefixes first")
        tokens = list(tokens)
        self.reset(cuts=(len(tokens),))
        if tokens:
            self._read_passes(tokens, self._start_from_stored_prefix(tokens, len(tokens)), len(tokens))
        held = self._held
        self.reset()
        return held

    @torch.inference_mode()
    def logits(self, prefix: Sequence[int], block: Sequence[int]) -> torch.Tensor:
        seq = list(prefix) + list(block)
        if not prefix:
            raise ValueError("the prefix must hold at least one token")
        keep = 0
        limit = min(len(self.cached), len(prefix) - 1)
        while keep < limit and self.cached[keep] == seq[keep]:
            keep += 1
        if self._cache is None or keep == 0:
            keep = self._start_from_stored_prefix(seq, len(prefix) - 1)
        elif keep < len(self.cached):
            self._cache.crop(keep - len(self.cached))  # negative: drop the rejected tail
            self._ends = [e for e in self._ends if e <= keep]
            self._stored = min(self._stored, self._read)
            self._held = min(self._held, self._read)
        keep = self._read_passes(seq, keep, len(prefix) - 1)  # the last prefix token is read with the block
        out = self.model(input_ids=torch.tensor([seq[keep:]]), cache=self._cache, use_cache=True,
                         logits_to_keep=len(block) + 1)
        self.cached = seq
        self.passes += 1
        return out.logits[0]

    def score_block(self, prefix: Sequence[int], block: Sequence[int]) -> list[list[float]]:
        return torch.softmax(self.logits(prefix, block).float(), dim=-1).tolist()

    def next_dist(self, seq: Sequence[int]) -> list[float]:
        return self.score_block(seq, [])[0]

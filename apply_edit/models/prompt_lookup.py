"""transformers' own prompt lookup decoding (`generate(prompt_lookup_num_tokens=10)`): the peer baseline the
bench measures `spec` against, on the same model and prompt. Not part of apply_edit's own decoding."""

from __future__ import annotations

import queue
import threading
import time
from typing import ContextManager, Iterator

import torch

PROMPT_LOOKUP_TOKENS = 10  # transformers' own suggestion for prompt_lookup_num_tokens


def prompt_lookup_blocks(target, tokenizer, prompt: list[int], max_new: int, close: str, stats,
                         holding_model: ContextManager) -> Iterator[list[int]]:
    """The baseline's new tokens as transformers streams them; `stats` gets its prefill time, tokens and
    forward passes. `target`: a `TransformersTarget` (its model generates); `holding_model`: its lock."""
    model, pieces = target.model, queue.Queue()
    passes = [0]
    hook = model.register_forward_pre_hook(lambda *_: passes.__setitem__(0, passes[0] + 1))
    streamer = _QueueStreamer(pieces)
    t0 = time.perf_counter()

    def generate():
        try:
            with torch.inference_mode():
                model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                               max_new_tokens=max_new, do_sample=False, prompt_lookup_num_tokens=PROMPT_LOOKUP_TOKENS,
                               eos_token_id=sorted(target.eos_ids()), pad_token_id=tokenizer.eos_token_id,
                               stop_strings=["\n" + close], tokenizer=tokenizer, streamer=streamer)
            pieces.put(None)
        except BaseException as exc:  # surfaced in the consuming thread
            pieces.put(exc)

    with holding_model as threads:
        stats.threads = threads
        worker = threading.Thread(target=generate, daemon=True)
        worker.start()
        try:
            while (item := pieces.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                if not stats.prefill_s:
                    stats.prefill_s = time.perf_counter() - t0
                stats.new_tokens += len(item)
                stats.target_passes = passes[0]
                yield item
        finally:
            worker.join()
            hook.remove()
            stats.target_passes = passes[0]
            stats.total_s = time.perf_counter() - t0


class _QueueStreamer:
    """A transformers streamer that hands each chunk of new token ids to a queue (the prompt is skipped)."""

    def __init__(self, out: queue.Queue):
        self.out, self.prompt_seen = out, False

    def put(self, value) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.out.put(value.reshape(-1).tolist())

    def end(self) -> None:
        pass

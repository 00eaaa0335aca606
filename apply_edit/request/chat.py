"""Any chat completion on the loaded model, through the same engine: OpenAI's Predicted Outputs.

A `prediction` (text the answer will mostly repeat: the file being edited) is the reference the copy
drafter drafts from, and the target verifies each drafted block in one pass, as in an apply; the output
is the target's own either way (greedy: identical with and without a prediction; sampled: the target's
distribution). `stats.accepted_tokens` are the prediction's tokens the answer took, `drafted - accepted`
the ones it refused: OpenAI's accepted/rejected prediction tokens.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .apply import Applier
from .runs import ApplyError, ApplyRun, ApplyStats
from ..engine.api import no_draft
from ..engine.sampling import Sampling
from ..drafting.draft_length import AdaptiveK
from ..judging.prompting import IncrementalDetokenizer
from ..drafting.proposers import SuffixArrayProposer

DEFAULT_MAX_NEW = 4096  # when the request names no limit (and the context leaves room)


@dataclass
class ChatOptions:
    max_new_tokens: int | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    k: int = 64  # most tokens drafted from the prediction per target pass
    stop: tuple[str, ...] = ()  # the answer ends before the first of these


class StopText:
    """Streamed text up to the first stop string, never streaming a piece of one (held back until the text
    after it shows it is not a stop)."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops = tuple(s for s in stops if s)
        self.pending = ""
        self.done = False
        self.stopped = False  # a stop string ended the text

    def push(self, text: str) -> str:
        if self.done:
            return ""
        self.pending += text
        hits = [at for at in (self.pending.find(s) for s in self.stops) if at >= 0]
        if hits:
            self.done = self.stopped = True
            out, self.pending = self.pending[:min(hits)], ""
            return out
        hold = max((n for s in self.stops for n in range(min(len(s) - 1, len(self.pending)), 0, -1)
                    if self.pending.endswith(s[:n])), default=0)
        out, self.pending = self.pending[:len(self.pending) - hold], self.pending[len(self.pending) - hold:]
        return out

    def finish(self) -> str:
        if self.done:
            return ""
        self.done = True
        rest, self.pending = self.pending, ""
        return rest


def stream_chat(applier: Applier, messages: list[dict], options: ChatOptions, prediction: str = "") -> ApplyRun:
    """Start a chat completion (the model's chat template, generation prompt added) over messages
    `{"role", "content"}` with text content. Iterate the run for the answer's text as it is verified."""
    start = time.perf_counter()
    tokenizer = applier.tokenizer
    try:
        prompt_text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    except Exception as exc:  # a template that refuses the roles given (e.g. two system messages)
        raise ApplyError(f"the model's chat template refused these messages: {exc}")
    prompt = tokenizer.encode(prompt_text, add_special_tokens=False)
    limit = applier.context_limit() or len(prompt) + DEFAULT_MAX_NEW
    room = limit - len(prompt)
    max_new = options.max_new_tokens or min(DEFAULT_MAX_NEW, room)
    if max_new > room:
        raise ApplyError(f"request too long for the model: {len(prompt)} prompt tokens + {max_new} to write "
                         f"exceed its context of {limit} tokens")
    predicted = tokenizer.encode(prediction, add_special_tokens=False) if prediction else []
    if predicted and options.k:
        proposer, draft_length = SuffixArrayProposer([predicted]), AdaptiveK(applier.cost_curve(), k_max=options.k)
    else:
        proposer, draft_length = no_draft, 0
    stats = ApplyStats(method="spec" if predicted else "plain", prompt_tokens=len(prompt))
    cancel = threading.Event()
    eos = applier.target.eos_ids()
    blocks = applier.decode(prompt, proposer, draft_length, max_new,
                            Sampling(options.temperature, options.top_p, options.seed), None, stats.decode, cancel)
    answer = _Answer(blocks, eos)
    return ChatRun(answer, IncrementalDetokenizer(tokenizer), StopText(options.stop), stats, start, cancel=cancel)


class ChatRun(ApplyRun):
    @property
    def finished(self) -> bool:
        """The answer ended by itself (end of turn, a stop string), not at the token limit."""
        return self._blocks.ended or self._extractor.stopped


class _Answer:
    """The blocks without end-of-turn tokens (not text); closing it closes the decoding (frees the cache)."""

    def __init__(self, blocks, eos: set[int]):
        self._blocks, self._eos = blocks, eos
        self.ended = False

    def __iter__(self):
        return self

    def __next__(self) -> list[int]:
        block = next(self._blocks)
        kept = [t for t in block if t not in self._eos]
        self.ended = self.ended or len(kept) < len(block)
        return kept

    def close(self) -> None:
        self._blocks.close()

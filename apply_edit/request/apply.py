"""Apply an edit: request → merge → prompt → decode (spec, plain, or transformers' prompt lookup as a
baseline, `models/prompt_lookup.py`) → judged, streamed file text, on any `models.target.Target`.

This is the one path that the CLI, the bench and the gRPC service use (the request's types, and the
answer the merge alone settles, are `runs.py`'s). `Applier.stream` returns an
`ApplyRun`: iterate it for text pieces as they are verified; afterwards `.text` is the whole file,
`.stats` says what it cost and `.outcome` which path produced it (`decide.py`). The default (`spec` with
the `checked` pipeline) hands back a merge that passes the checks at once, without running the model;
where it passes them but leaves readings open, the target decides those (`arbiter.py`); else the model's
output if that passes them; and raises `ApplyRefused` when none does.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

from ..judging.decide import Judge
from ..engine.decoding import Decoding
from ..drafting.draft_length import AdaptiveK, RegionAdaptiveK
from .drafts import DraftPlan, plan_drafting, token_lines
from ..engine.api import CostCurve, DecodeStats, Interrupted, no_draft
from ..merge import MergeCandidate
from ..models.target import Target
from ..models.threads import choose_threads
from ..judging.prompting import FORMATS, IncrementalDetokenizer, OutputExtractor, Prompt, PromptFormat, TextStop, build_prompt
from ..judging.regions_to_rewrite import changed_regions
from .runs import (ApplyError, ApplyOptions, ApplyRequest, ApplyRun, ApplyStats, ArbitratedRun, NoPrefixStore,
                      RegionRun, VerifiedRegionsRun, merge_answer)
from ..engine.sampling import Sampling


@dataclass
class RequestPlan:
    """One request's inputs, built once by `Applier.plan`; `Applier.run` decodes from them."""

    request: ApplyRequest
    options: ApplyOptions
    fmt: PromptFormat
    candidate: MergeCandidate | None  # the merge, where it is drafted from, shown in the prompt or judged
    prompt: Prompt  # the prompt's text, with where each document lies in it
    prompt_ids: list[int]
    max_new: int
    judge: Judge | None  # the checks, for the judged pipelines
    proposer: object  # what drafts: the copy drafter, `no_draft` (plain), or one the caller gave
    drafting: DraftPlan | None = None  # the copy drafter's references and regions (spec, spec-fixed)
    plan_s: float = 0.0  # building the drafting plan, the merge it drafts from included
    shared: int = 0  # the prompt's first tokens, through the file, that every apply to this file shares

    @property
    def stop_marker(self) -> str:
        """Where generation ends: the answer's closing tag at the start of a line."""
        return "\n" + self.fmt.close

    def output_extractor(self) -> OutputExtractor:
        """Model text in, file text out: up to the closing tag, the final newline as the original has it."""
        original = self.request.original
        return OutputExtractor(self.fmt.close, keep_final_newline=original.endswith("\n") or not original)


class Applier:
    """Holds a target (`models.target.Target`) and its tokenizer; applies edits one at a time (the KV cache
    belongs to one request). The tokenizer defaults to the target's own (`TransformersTarget.tokenizer`)."""

    def __init__(self, target: Target, tokenizer=None):
        self.target = target
        self.tokenizer = tokenizer if tokenizer is not None else target.tokenizer
        self._lock = threading.Lock()

    def cost_curve(self) -> CostCurve:
        """Verify-pass cost by draft length on this target (`Target.cost_curve`). Under the model's lock:
        measuring runs passes on the target, which must not meet another request's decoding."""
        with self._holding_model():
            return self.target.cost_curve()

    @contextmanager
    def _holding_model(self) -> Iterator[int]:
        """The model's lock, with torch's pool sized for what runs under it (models/threads.py): yields the
        thread count."""
        with self._lock:
            yield choose_threads()

    def _draft_length(self, options: ApplyOptions, drafting: DraftPlan | None):
        if options.method == "plain" or options.k == 0:  # k 0: no drafts, whatever the method
            return 0
        if options.method == "spec-fixed":
            return options.k
        if drafting is None or drafting.candidate is None:
            return AdaptiveK(self.cost_curve(), k_max=options.k)
        return RegionAdaptiveK(self.cost_curve(), drafting.region_of, drafting.edited, k_max=options.k)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def _shared_start(self, prompt: Prompt, prompt_ids: list[int]) -> int:
        """How many of the prompt's tokens come before the end of the file (system, file): what every apply
        to this file, and its warm-up, starts with. Where the tokens across the end of the file merge, the
        ones before it."""
        before = self._encode(prompt.text[:prompt.documents["original"][1]])
        n = 0
        while n < min(len(before), len(prompt_ids)) and before[n] == prompt_ids[n]:
            n += 1
        return n

    def plan(self, request: ApplyRequest, options: ApplyOptions, proposer=None, answer_start: str = "") -> RequestPlan:
        """Build a request's inputs once: the merge where it is needed, the prompt, the token ids, the
        drafting plan. `proposer` replaces the copy drafter (the bench's oracle uses it); `answer_start`:
        the first lines of the answer, known already, pre-filled after the prompt's own answer opening."""
        options.validate()
        request.validate()
        fmt = FORMATS[options.prompt_format]
        copies = proposer is None and options.method in ("spec", "spec-fixed")
        drafts_from_merge = copies and options.drafting == "merge"
        start = time.perf_counter()
        # The judged pipelines' merge is the judge's (the second reading where the alignment fails the checks).
        candidate = (request.judge.candidate if options.judged
                     else request.merged if drafts_from_merge or fmt.shows_merge else None)
        merge_s = time.perf_counter() - start if drafts_from_merge else 0.0  # part of the drafting plan's cost
        prompt = build_prompt(self.tokenizer, fmt, request.original, request.update, request.instruction,
                              request.language_resolved, candidate.text if candidate else None)
        prompt = Prompt(prompt.text + answer_start, prompt.documents)
        prompt_ids = self._encode(prompt.text)
        original_tokens, update_ids = token_lines(self.tokenizer, request.original), self._encode(request.update)
        max_new = options.max_new_tokens or len(original_tokens.ids) + len(update_ids) + 64
        limit = self.context_limit()
        if limit and len(prompt_ids) + max_new > limit:
            raise ApplyError(f"request too long for the model: {len(prompt_ids)} prompt tokens + {max_new} to "
                             f"write exceed its context of {limit} tokens")
        drafting, plan_s = None, 0.0
        if copies:
            start = time.perf_counter()
            drafting = plan_drafting(self.tokenizer, request.original, request.language_resolved, original_tokens,
                                     update_ids, candidate if drafts_from_merge else None, closing=fmt.close,
                                     prompt_words=prompt.words())
            proposer, plan_s = drafting.proposer, time.perf_counter() - start + merge_s
        elif proposer is None:
            proposer = no_draft  # plain (prompt-lookup drafts inside transformers)
        return RequestPlan(request, options, fmt, candidate, prompt, prompt_ids, max_new,
                           request.judge if options.judged else None, proposer, drafting, plan_s,
                           self._shared_start(prompt, prompt_ids))

    def stream(self, request: ApplyRequest, options: ApplyOptions | None = None, proposer=None) -> ApplyRun:
        """Start an apply: the merge's answer where it is sound (the `checked` pipeline: the target decides
        the readings it leaves open; `verify`: the target reads each region it changed, for the report),
        else the model's regions where the merge fails in regions of its own, else the model's run on the
        request's plan. `proposer` replaces the copy drafter (the bench's oracle uses it)."""
        start = time.perf_counter()
        options = options or ApplyOptions()
        if (answer := merge_answer(request, options)) is not None:
            return answer
        sound = options.judged and request.judge.merge_sound  # the answer is the merge: no proposer drafts it
        if sound and options.pipeline == "checked":  # the arbiter's bound is in tokens, not seconds
            return ArbitratedRun(self, request, ApplyStats(method=options.method), start)
        if options.judged and options.model_seconds is not None:
            # The bound is the apply's; measuring a model's pass costs (once per model and dtype, the first
            # time on a machine: ~15 s) is the model's setup, as loading it is, and does not count.
            before = time.perf_counter()
            self.cost_curve()
            start += time.perf_counter() - before
        if sound:
            # verify: the target reads the regions the merge changed, each from its window (a region's cost,
            # not the file's), for the report.
            return VerifiedRegionsRun(self, request, changed_regions(request.judge.candidate), options,
                                      ApplyStats(method=options.method), start)
        if options.judged and proposer is None and (regions := request.failing_regions):
            # The merge's failures sit in regions of their own: the target writes those, each from a window
            # of the original, and the rest is the merge's. It costs a region's time, not the file's (the
            # whole file's prompt alone outlasts the 15 s bound past a few hundred lines on a 2-core CPU),
            # and no file is too long for the model's context (tests/bench/README.md, 2026-12-06).
            return RegionRun(self, request, regions, options, ApplyStats(method=options.method), start)
        return self.run(self.plan(request, options, proposer), start)

    def run(self, plan: RequestPlan, start: float | None = None) -> ApplyRun:
        """Decode a planned request on the target; `start`: the request's start (default: now)."""
        start = time.perf_counter() if start is None else start
        options = plan.options
        stats = ApplyStats(method=options.method, prompt_tokens=len(plan.prompt_ids), plan_s=plan.plan_s)
        extractor = plan.output_extractor()
        cancel = threading.Event()
        if options.method == "prompt-lookup":
            if not hasattr(self.target, "model"):
                raise ApplyError("prompt-lookup runs transformers' generate: it needs a transformers model")
            from ..models.prompt_lookup import prompt_lookup_blocks

            blocks = prompt_lookup_blocks(self.target, self.tokenizer, plan.prompt_ids, plan.max_new, plan.fmt.close,
                                          stats.decode, self._holding_model())
        else:
            typical = options.typical_threshold if options.acceptance == "typical" else None
            bound = options.model_seconds if plan.judge is not None else None
            blocks = self.decode(plan.prompt_ids, plan.proposer, self._draft_length(options, plan.drafting),
                                 plan.max_new, Sampling(options.temperature, options.top_p, options.seed),
                                 TextStop(self.tokenizer, plan.stop_marker), stats.decode, cancel,
                                 typical_threshold=typical, cuts=(plan.shared,),
                                 deadline=None if bound is None else start + bound)
        drafted_from = plan.drafting.candidate if plan.drafting else None
        run = ApplyRun(blocks, IncrementalDetokenizer(self.tokenizer), extractor, stats, start,
                       candidate=drafted_from.text if drafted_from else None, judge=plan.judge, cancel=cancel)
        run.model_seconds = options.model_seconds if plan.judge is not None else None
        run.foreseen_late = self.too_slow(plan.prompt_ids, run.model_seconds, start)
        return run

    def too_slow(self, prompt_ids: list[int], bound: float | None, start: float) -> str:
        """Why a run that began at `start` cannot be done within `bound` seconds, known before any pass:
        reading its prompt alone (less what the prefix store holds of it) takes longer than what is left,
        by the cost curve's prompt reading times, with the bound; "" where it may be done."""
        if bound is None:
            return ""
        store = getattr(self.target, "prefix_cache", None)
        stored = store.most_reused(prompt_ids) if store is not None else 0
        reading = self.cost_curve().read_seconds(len(prompt_ids) - stored)
        if reading <= bound - (time.perf_counter() - start):
            return ""
        held = f" ({stored:,} of them stored)" if stored else ""
        return (f"reading its {len(prompt_ids):,}-token prompt{held} alone takes about {reading:.1f} s on this target, "
                f"beyond the {bound:g} s bound")

    def warm(self, request: ApplyRequest, options: ApplyOptions | None = None) -> int:
        """Read the start that every apply to this file shares (its prompt up to the end of the original) into
        the target's prefix store, before the edit exists: an apply that follows prefills only the rest.
        Returns how many tokens of it the store holds (all, unless the store is too small for them)."""
        options = options or ApplyOptions()
        options.validate()
        if getattr(self.target, "prefix_cache", None) is None:
            raise NoPrefixStore("this model keeps no prompt prefixes (serve with --prefix-cache-mb above 0)")
        prompt = build_prompt(self.tokenizer, FORMATS[options.prompt_format], request.original, "", "",
                              request.language_resolved, merged="")
        prompt_ids = self._encode(prompt.text)
        shared = prompt_ids[:self._shared_start(prompt, prompt_ids)]
        limit = self.context_limit()
        if limit and len(shared) >= limit:
            raise ApplyError(f"file too long for the model: {len(shared)} prompt tokens before the edit, its "
                             f"context is {limit}")
        with self._holding_model():
            return self.target.prefill(shared)

    def next_token_logits(self, tokens: list[int]):
        """The target's logits for the token after `tokens` (one pass, under the model's lock)."""
        with self._holding_model():
            self.target.reset()
            try:
                return self.target.logits(tokens, [])[0].float()
            finally:
                self.target.reset()

    def likelihoods(self, prompt: list[int], answers: list[list[int]],
                    cancel: threading.Event | None = None) -> list[float]:
        """Per answer, the sum of the target's log-probabilities of its tokens after `prompt` and the tokens
        all answers begin with (the same for each, so the sums' differences are the answers' log-likelihood
        ratios). Read as one prefill of what they share and one pass per answer from that cache (the
        target crops back to it). A `cancel` raises `Interrupted` between passes (or prompt chunks)."""
        seqs = [list(prompt) + list(answer) for answer in answers]
        shared = len(prompt)
        while all(len(seq) > shared for seq in seqs) and len({seq[shared] for seq in seqs}) == 1:
            shared += 1
        shared = max(shared, 1)
        interrupted = cancel.is_set if cancel is not None else (lambda: False)
        scores = []
        with self._holding_model():
            self.target.reset()
            self.target.interrupt = interrupted
            try:
                for seq in seqs:
                    if interrupted():
                        raise Interrupted
                    block = seq[shared:]
                    if not block:
                        scores.append(0.0)
                        continue
                    rows = torch.log_softmax(self.target.logits(seq[:shared], block)[:-1].double(), dim=-1)
                    scores.append(float(rows.gather(1, torch.tensor(block)[:, None]).sum()))
            finally:
                self.target.interrupt = lambda: False
                self.target.reset()
        return scores

    def context_limit(self) -> int | None:
        return self.target.context_limit()

    def decode(self, prompt, proposer, draft_length, max_new, sampling: Sampling, stop, stats: DecodeStats,
               cancel: threading.Event, typical_threshold: float | None = None,
               cuts: tuple[int, ...] = (), deadline: float | None = None) -> Iterator[list[int]]:
        """The engine on this target, one request at a time: the blocks of tokens it emits (eos included).
        `cuts`: where the prompt's reading ends a pass (`Target.reset`); `deadline` (a `perf_counter` time):
        past it, the prompt's reading stops as on a cancel. Raises `ApplyError` at once where the target
        cannot decode that way (sampling on a target whose rows are not whole distributions)."""
        if not self.target.full_rows and not (sampling.greedy and typical_threshold is None):
            raise ApplyError("this target reports only the tokens that decide greedy decoding (a serving "
                             "engine): sampling and typical acceptance need its whole distribution")
        return self._decoded(prompt, proposer, draft_length, max_new, sampling, stop, stats, cancel,
                             typical_threshold, cuts, deadline)

    def _decoded(self, prompt, proposer, draft_length, max_new, sampling: Sampling, stop, stats: DecodeStats,
                 cancel: threading.Event, typical_threshold: float | None, cuts: tuple[int, ...],
                 deadline: float | None) -> Iterator[list[int]]:
        with self._holding_model() as threads:
            stats.threads = threads
            self.target.reset(cuts)
            self.target.interrupt = cancel.is_set if deadline is None else (
                lambda: cancel.is_set() or time.perf_counter() > deadline)
            if self.target.engine_decodes and sampling.greedy and typical_threshold is None:
                run = self.target.generate(prompt, max_new, stop, stats)
            else:
                run = Decoding(self.target, proposer, prompt, max_new, k=draft_length, sampling=sampling,
                               eos=self.target.eos_ids(), stop=stop, stats=stats, typical_threshold=typical_threshold)
            try:
                for block in run:
                    stats.prompt_cached = getattr(self.target, "reused", 0)
                    yield block
            finally:
                self.target.interrupt = lambda: False
                self.target.reset()

"""A request as the faces see it: what to apply (`ApplyRequest`), how (`ApplyOptions`), what it cost
(`ApplyStats`), and its run (`ApplyRun`), a stream of file text judged by `decide.py`'s rule.

Nothing here loads the model's stack (torch, transformers): `merge_answer` gives the answer the merge
alone settles, so a face answers it before, or without, loading a model (`apply-edit apply` answered by
the merge never imports torch). Where the model has to run, `apply.Applier` plans and decodes the run.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Iterator

from ..judging.arbiter import WEIGHED, Arbiter
from ..judging.decide import ApplyRefused, Judge, Outcome, first_difference_line
from ..engine.api import DecodeStats, Interrupted
from ..merge import MergeCandidate, is_marker, merge, split_lines
from ..judging.prompting import DEFAULT_FORMAT, FORMATS, IncrementalDetokenizer, OutputExtractor
from ..code.regions import language_for
from ..judging.regions_to_rewrite import (Region, changed_regions, failing_regions, region_snippet,
                                          with_merges_blank_lines)

if TYPE_CHECKING:
    from .apply import Applier

# spec: copy drafting, k chosen per block from the measured cost model (at most `k`);
# spec-fixed: copy drafting, always `k`; plain: one pass per token; prompt-lookup: transformers' baseline.
METHODS = ("spec", "spec-fixed", "plain", "prompt-lookup")
# merge: copy from the merge of original and snippet first, k per region of the original;
# copy: copy from the original and the snippet, one acceptance estimate for the whole file.
DRAFTING = ("merge", "copy")
# exact: the output is the target's own; typical: also accept a drafted token the target gives
# probability >= typical_threshold (faster, NOT the target's output; greedy only).
ACCEPTANCE = ("exact", "typical")
# checked: a merge that passes the checks is the answer at once, the model is not run; otherwise the model
# writes and its output is judged by the checks, and refused when it fails them (decide.py). verify: as
# checked, but a sound merge is the answer with its own reading of what it leaves open, and the model reads
# each region it changed and says where it departs (for the report only; `VerifiedRegionsRun`).
# merge: the merge where it passes the checks (its own reading of what it leaves open),
# else refused; the model never runs. model: the model's own output, unjudged (spec == plain greedy holds).
PIPELINES = ("checked", "verify", "merge", "model")


class ApplyError(ValueError):
    """A request that cannot be applied as given (the message says what to fix)."""


class NoPrefixStore(ApplyError):
    """A warm-up asked of a target that keeps no prompt prefixes (a server setting, not the request's fault)."""


@dataclass
class ApplyRequest:
    original: str
    update: str
    instruction: str = ""
    language: str = ""  # defaults to the path's extension
    path: str = ""

    def validate(self) -> None:
        if not self.original.strip() and not self.update.strip():
            raise ApplyError("original and update are both empty; send the file and the edit snippet")

    # Computed once per request: a face judges the merge before it queues for the model, and the run it
    # starts there drafts from the same merge (the fields do not change after a request is made).
    @cached_property
    def language_resolved(self) -> str:
        """The language given, else the path's (`regions.language_for`: a `.h` file is C or C++ by which
        parses it; without a path, a guess from the text)."""
        return self.language or language_for(self.path, self.original or self.update)

    @cached_property
    def merged(self) -> MergeCandidate:
        """The merge of the snippet into the original."""
        return merge(self.original, self.update, self.language_resolved, self.instruction)

    @cached_property
    def judge(self) -> Judge:
        """The checks of the merge, for the judged pipelines."""
        return Judge(self.original, self.update, self.language_resolved, self.merged, self.instruction)

    @cached_property
    def failing_regions(self) -> list[Region]:
        """The regions of the merge's changes that fail the checks on their own: what the model writes
        where the merge is unsound (`regions_to_rewrite.py`); none where its failures are the file's."""
        return failing_regions(self.original, self.update, self.language_resolved, self.instruction, self.merged,
                               changed_regions(self.merged))


@dataclass
class ApplyOptions:
    method: str = "spec"
    k: int = 64  # most tokens drafted per target pass
    max_new_tokens: int | None = None  # default: enough for the original plus the snippet
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    prompt_format: str = DEFAULT_FORMAT
    drafting: str = "merge"
    acceptance: str = "exact"
    typical_threshold: float = 0.3
    pipeline: str = "checked"  # applies to spec with merge drafting; other methods are the model's own output
    # The judged pipelines' bound on the model writing the whole file (where the merge is unsound): past it,
    # the apply is refused. It is checked between target passes, so an apply may run one pass longer
    # (measured on the corpus with 20 s: refusals at 21-26 s). Measured there (2-core CPU, fp32): unbounded,
    # the 12 rewrites of a first part of the report half were all refused, after 6-461 s; bounded at 20 s,
    # the one rewrite that passed the checks took 14.8 s.
    model_seconds: float | None = 15.0

    @property
    def judged(self) -> bool:
        return self.pipeline in ("checked", "verify", "merge") and self.method == "spec" and self.drafting == "merge"

    def validate(self) -> None:
        if self.method not in METHODS:
            raise ApplyError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.prompt_format not in FORMATS:
            raise ApplyError(f"unknown prompt format {self.prompt_format!r}; choose one of {', '.join(FORMATS)}")
        if not 0 <= self.k <= 256:
            raise ApplyError("k must be between 0 and 256")
        # Written so that NaN fails too (it passes every `<` check) and inf: both sample garbage.
        if not (0 <= self.temperature < math.inf and 0 < self.top_p <= 1):
            raise ApplyError("temperature must be >= 0 and top_p in (0, 1]")
        if self.method == "prompt-lookup" and self.temperature > 0:
            raise ApplyError("prompt-lookup is the greedy baseline; use temperature 0")
        if self.drafting not in DRAFTING:
            raise ApplyError(f"unknown drafting {self.drafting!r}; choose one of {', '.join(DRAFTING)}")
        if self.acceptance not in ACCEPTANCE:
            raise ApplyError(f"unknown acceptance {self.acceptance!r}; choose one of {', '.join(ACCEPTANCE)}")
        if self.pipeline not in PIPELINES:
            raise ApplyError(f"unknown pipeline {self.pipeline!r}; choose one of {', '.join(PIPELINES)}")
        if self.model_seconds is not None and not 0 < self.model_seconds < math.inf:
            raise ApplyError("model_seconds must be a positive number of seconds (or None: no bound)")
        if self.acceptance == "typical" and (self.temperature > 0 or not 0 < self.typical_threshold <= 1):
            raise ApplyError("typical acceptance is greedy only (temperature 0) with a threshold in (0, 1]")


@dataclass
class ApplyStats:
    """What one apply cost. Its times count from the request's start (`Applier.stream`: merge, prompt,
    planning, waiting for the model included); `decode` holds the engine's own statistics, whose clock
    starts at its first target pass (zeros where no model ran)."""

    method: str = "spec"
    prompt_tokens: int = 0
    plan_s: float = 0.0  # building the drafting plan: merge candidate, regions, suffix arrays
    path: str = ""  # which path produced the text (decide.PATHS); "" when unjudged
    disagreement_line: int = 0  # 1-based line of the merge where the model first departed from it; 0: none
    merge_confident: bool | None = None  # the merge's report calls every hunk placed by structure; None: unjudged
    readings_weighed: int = 0  # readings the merge left open that the target weighed (`arbiter.py`)
    readings_taken_other_way: int = 0
    arbiter_tokens: int = 0  # prompt and answer tokens it read for them
    arbiter_s: float = 0.0
    verdicts: list[str] = field(default_factory=list)  # per reading weighed: what, which way, log odds
    # Per region the target wrote (where the merge failed) or read (`verify`): where, tokens, time, verdict.
    regions_written: list[str] = field(default_factory=list)
    ttft_s: float = 0.0  # from the request's start to its first text
    total_s: float = 0.0  # from the request's start to its end
    decode: DecodeStats = field(default_factory=DecodeStats)

    def to_dict(self) -> dict:
        """One flat record: the request's fields, the engine's counts, and its own times as `engine_*`."""
        engine = asdict(self.decode)
        d = {f"engine_{k}" if k in ("ttft_s", "total_s") else k: v for k, v in engine.items()}
        d.update(tokens_per_pass=self.decode.tokens_per_pass, acceptance_rate=self.decode.acceptance_rate,
                 decode_s=max(self.decode.total_s - self.decode.prefill_s, 0.0))
        d.update({f.name: getattr(self, f.name) for f in fields(self) if f.name != "decode"})
        return d


class ApplyRun:
    """One streaming apply. Iterate for file text pieces; `.text`, `.tokens`, `.stats` and `.outcome` are
    complete afterwards. `cancel()` (from any thread) stops decoding after the current verify pass (or
    the current chunk of the prompt);
    `close()` releases the model and its KV cache at once, also when the iteration was abandoned half-way.
    With a `judge`, the text is chosen by `decide.py`'s rule and the iteration raises `ApplyRefused` at the
    end when nothing passes the checks."""

    def __init__(self, blocks: Iterator[list[int]], detok: IncrementalDetokenizer | None,
                 extractor: OutputExtractor | None, stats: ApplyStats, start: float, candidate: str | None = None,
                 judge: Judge | None = None, cancel: threading.Event | None = None):
        self._blocks, self._detok, self._extractor = blocks, detok, extractor
        self.needs_model = detok is not None  # False for `sound_merge`: nothing to decode
        self.stats = stats
        self.candidate = candidate  # the merge candidate's text drafting started from, if any
        self.text = ""
        self.model_text = ""  # what the model wrote (it stops early where a sound merge is the answer)
        self.tokens: list[int] = []
        self.outcome: Outcome | None = None
        self.why_no_model = ""  # `sound_merge`'s refusal: why a pipeline with a model did not ask it
        self._cancel = cancel or threading.Event()
        self._start = start
        self._judge = judge
        self.model_seconds: float | None = None  # where the model writes the file: its bound (`ApplyOptions`)
        self.foreseen_late = ""  # why the bound cannot be met, known before any pass (`Applier.run`)
        self._interrupted = False

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        self._cancel.set()

    def close(self) -> None:
        self._blocks.close()

    def _pieces(self) -> Iterator[str]:
        try:
            try:
                for block in self._blocks:
                    self.tokens.extend(block)
                    yield self._extractor.push(self._detok.push(block))
                    if self._extractor.done or self.cancelled:
                        break
            except Interrupted:  # cancelled, or out of time, while the prompt was being read
                self._interrupted = True
                return
            if not self.cancelled:
                yield self._extractor.push(self._detok.flush())
                yield self._extractor.finish()
        finally:
            self.close()

    def _emit(self, piece: str) -> Iterator[str]:
        if not piece:
            return
        if not self.text:
            self.stats.ttft_s = time.perf_counter() - self._start
        self.text += piece
        yield piece

    @classmethod
    def sound_merge(cls, judge: Judge, stats: ApplyStats, start: float, why_no_model: str = "") -> ApplyRun:
        """The answer without the model: the merge's text where it passes the checks, else a refusal (saying
        `why_no_model` where the pipeline has a model that was not asked)."""
        no_blocks = (block for block in ())
        run = cls(no_blocks, None, None, stats, start, candidate=judge.candidate.text, judge=judge)
        run.why_no_model = why_no_model
        return run

    def __iter__(self) -> Iterator[str]:
        if self._judge is not None:
            self.stats.merge_confident = self._judge.candidate.report.confident
        if self._judge is None:
            for piece in self._pieces():
                self.model_text += piece
                yield from self._emit(piece)
        elif not self.needs_model:
            self.outcome = self._judge.without_model()
            self.stats.path = self.outcome.path
            if self.outcome.path == "refused":
                if self.why_no_model:
                    self.outcome.reason += f" ({self.why_no_model})"
                self.stats.total_s = time.perf_counter() - self._start
                raise ApplyRefused(self.outcome.reason)
            yield from self._emit(self._judge.candidate.text)
        else:  # the merge fails the checks (`Applier.stream` runs the sound merges' pipelines apart)
            yield from self._model_then_judge(self._judge)
        self.stats.total_s = time.perf_counter() - self._start

    def _model_then_judge(self, judge: Judge) -> Iterator[str]:
        if self.foreseen_late:
            self.close()
            self.stats.total_s = time.perf_counter() - self._start
            raise ApplyRefused(self._decide(judge.late("", self.model_seconds, self.foreseen_late)).reason)
        by_line, checked, stopped, late = judge.line_checks(), 0, False, False
        pieces = self._pieces()
        for piece in pieces:
            self.model_text += piece
            yield from self._emit(piece)
            if (lines_end := self.model_text.rfind("\n") + 1) > checked:
                by_line.feed(self.model_text[checked:lines_end])
                checked = lines_end
                if stopped := by_line.failed:
                    pieces.close()
                    break
            if late := self.model_seconds is not None and time.perf_counter() - self._start > self.model_seconds:
                pieces.close()
                break
        if self.cancelled:
            return
        if late or self._interrupted:  # the prompt's reading stopped by the bound
            outcome = self._decide(judge.late(self.model_text, self.model_seconds))
        else:
            outcome = self._decide(judge.stopped(self.model_text, by_line.problems()) if stopped
                                   else judge.after_model(self.model_text))
        if outcome.path == "refused":
            self.stats.total_s = time.perf_counter() - self._start
            raise ApplyRefused(outcome.reason)

    def _decide(self, outcome: Outcome) -> Outcome:
        self.outcome = outcome
        self.stats.path = self.outcome.path
        self.stats.disagreement_line = self.outcome.disagreement_line or 0
        return self.outcome

    def result(self) -> str:
        for _ in self:
            pass
        return self.text


class ArbitratedRun(ApplyRun):
    """The `checked` pipeline where the merge is sound but leaves readings open that the checks do not
    settle: the target weighs each (`arbiter.py`). The text all readings share streams at once, the rest
    once the target has decided; `ApplyRefused` where it cannot."""

    def __init__(self, applier: Applier, request: ApplyRequest, stats: ApplyStats, start: float):
        super().__init__((block for block in ()), None, None, stats, start, candidate=request.judge.candidate.text,
                         judge=request.judge)
        self.needs_model = True
        self._applier, self._request = applier, request

    def __iter__(self) -> Iterator[str]:
        judge, request, stats = self._judge, self._request, self.stats
        stats.merge_confident = judge.candidate.report.confident
        weighed = judge.open_readings(WEIGHED)
        texts = [judge.candidate.text] + [text for _, text in weighed]
        shared = min(len(_common_lines(judge.candidate.text, text)) for text in texts)
        yield from self._emit(judge.candidate.text[:shared])
        arbiter = Arbiter(self._applier.tokenizer, lambda prompt, answers:
                          self._applier.likelihoods(prompt, answers, self._cancel))
        try:
            result = arbiter.decide(request.original, request.update, request.instruction,
                                    request.language_resolved, judge.candidate, weighed, judge.sound_reading)
        except Interrupted:
            return
        stats.readings_weighed = len(result.verdicts)
        stats.readings_taken_other_way = sum(v.other_way for v in result.verdicts)
        stats.arbiter_tokens, stats.arbiter_s = result.tokens, result.seconds
        stats.verdicts = [v.describe() for v in result.verdicts]
        if result.text is not None and not result.text.startswith(self.text):
            result.text, result.reason = None, "the readings the target chose rewrite text already sent"
        if result.text is None:
            self._decide(Outcome("refused", f"no sound result: {result.reason}"))
            stats.total_s = time.perf_counter() - self._start
            raise ApplyRefused(self.outcome.reason)
        self._decide(Outcome("merge+target", f"the merge passes the checks; the target decided what it left "
                                             f"open: {result.reason}"))
        yield from self._emit(result.text[len(self.text):])
        stats.total_s = time.perf_counter() - self._start


class RegionRun(ApplyRun):
    """The `checked` pipeline where the merge fails the checks in regions of its own
    (`regions_to_rewrite.py`): the target rewrites each such region from a window of the original and the
    snippet's hunks there, as it would write a whole file; the rest of the file is the merge's. The merge's
    text before a region streams at once, each region once the target has written it (and the merge has
    put back the window's lines it wrote a marker for); the file must pass every check and be done within
    `model_seconds`, or the iteration raises `ApplyRefused`."""

    VERB = "wrote"  # what the target did with a region, in `ApplyStats.regions_written`

    def __init__(self, applier: Applier, request: ApplyRequest, regions: list[Region], options: ApplyOptions,
                 stats: ApplyStats, start: float):
        super().__init__((block for block in ()), None, None, stats, start, candidate=request.judge.candidate.text,
                         judge=request.judge)
        self.needs_model = True
        self.model_seconds = options.model_seconds
        self._applier, self._request, self._regions = applier, request, regions
        self._options = replace(options, pipeline="model", max_new_tokens=None)

    def _refuse(self, reason: str) -> None:
        self._decide(Outcome("refused", f"no sound result: {reason} — and the merge "
                                        + "; ".join(self._judge.merge_problems)))
        self.stats.total_s = time.perf_counter() - self._start
        raise ApplyRefused(self.outcome.reason)

    def _rewrite(self, region: Region, merged: list[str], verifying: bool = False) -> str:
        """The target's text for one region; refuses when out of time. Where the target copies a marker
        line of the snippet (it writes `// ... existing code ...` for the window's lines it did not copy),
        its text is read as a snippet of the window: the merge puts those lines back. `verifying`: its raw
        text, stopped where it departs from the merge's there, with the window's first lines (unchanged by
        the merge) given as the answer's start: the target reads from the change on (left to write them,
        it drops a window's first lines that begin inside a block: py_add_method). Given to a rewrite, on
        the corpus the target's regions closed early and passed the checks less often: not there."""
        request = self._request
        original = "".join(split_lines(request.original)[region.original_start:region.original_end])
        window = ApplyRequest(original, region_snippet(request.update, merged[region.start:region.end]),
                              request.instruction, request.language_resolved)
        origin, n = self._judge.candidate.origin, 0
        while verifying and n < region.end - region.start - 1 and origin[region.start + n] == region.original_start + n:
            n += 1
        # Without its last newline: the target's next token may hold that newline with what follows
        # (`\n\n`, `\n    `), which a given line break would split where it never does itself.
        lead = "".join(merged[region.start:region.start + n])[:-1]
        began = time.perf_counter()
        try:
            plan = self._applier.plan(window, self._options, answer_start=lead)
        except ApplyError as exc:
            self._refuse(f"the target could not rewrite {region.describe()}: {exc}")
        if why := self._applier.too_slow(plan.prompt_ids, self.model_seconds, self._start):
            self._refuse(f"the target's rewrite of {region.describe()} (not started: {why})")
        run = self._applier.run(plan)
        late, text, ours = False, lead, "".join(merged[region.start:region.end])
        try:
            for piece in run:
                text += piece
                self.model_text += piece
                if self.cancelled or (verifying and not ours.startswith(text)):
                    break
                if late := self.model_seconds is not None and time.perf_counter() - self._start > self.model_seconds:
                    break
        finally:
            run.close()
        if self.cancelled:
            return text
        if lead and text == lead and not late:  # closed right after the given lines: their last one ends
            text += "\n"
        self.stats.prompt_tokens += run.stats.prompt_tokens
        self.stats.regions_written.append(f"{self.VERB} {region.describe()}: {len(run.tokens)} tokens in "
                                          f"{time.perf_counter() - began:.1f} s")
        if late:
            self._refuse(f"the target's rewrite of {region.describe()} was not finished within "
                         f"{self.model_seconds:g} s")
        if verifying:
            return text
        if any(is_marker(line) and line not in original for line in split_lines(text)):  # not the file's own
            text = merge(original, text, request.language_resolved).text
        return with_merges_blank_lines(text, ours)

    def __iter__(self) -> Iterator[str]:
        judge = self._judge
        self.stats.merge_confident = judge.candidate.report.confident
        merged, done = split_lines(judge.candidate.text), 0
        for region in self._regions:
            yield from self._emit("".join(merged[done:region.start]))
            text = self._rewrite(region, merged)
            if self.cancelled:
                return
            yield from self._emit(text)  # each region once the target has written it
            if self.text and not self.text.endswith("\n") and region.end < len(merged):
                self._refuse(f"the target's rewrite of {region.describe()} does not end its last line")
            done = region.end
        yield from self._emit("".join(merged[done:]))
        if problems := judge.problems_of(self.text):
            self._refuse("the file with the target's regions " + "; ".join(problems))
        self._decide(Outcome("merge+model", "the merge fails the checks (" + "; ".join(judge.merge_problems)
                                            + "); the target " + "; ".join(self.stats.regions_written)
                                            + ", and the file passes them",
                             first_difference_line(judge.candidate.text, self.text)))
        self.stats.total_s = time.perf_counter() - self._start


def _common_lines(a: str, b: str) -> str:
    """The whole lines `a` and `b` begin with."""
    n = 0
    for line_a, line_b in zip(a.splitlines(keepends=True), b.splitlines(keepends=True)):
        if line_a != line_b:
            break
        n += len(line_a)
    return a[:n]


def merge_answer(request: ApplyRequest, options: ApplyOptions) -> ApplyRun | None:
    """The answer that needs no model, so a caller can give it before loading one or waiting for one: the
    `checked` pipeline's where the merge passes the checks and leaves nothing open for the target to decide,
    the `merge` pipeline's always (a refusal where the merge fails them), and a refusal in any judged
    pipeline where nothing places the edit. In the `checked` pipeline, where the merge fails the checks but
    in no region of its own and the snippet shows code, a refusal too: the model writes regions, and the
    whole file it would write instead was right in none of the corpus's, the agent set's or the fixtures'
    such applies (5-15 s each; `--pipeline model` still has it write the file). None where the model has
    to run."""
    options.validate()
    request.validate()
    if not options.judged:
        return None
    start = time.perf_counter()
    judge = request.judge
    # A sound merge whose edit has no sure place is refused in every judged pipeline (`Judge.unplaced`):
    # the target, reading a window, cannot tell the places apart either.
    if not (judge.merge_sound and judge.unplaced):
        if options.pipeline == "verify":
            return None
        if options.pipeline == "checked" and (judge.open_readings(WEIGHED) if judge.merge_sound else
                                              request.failing_regions or not request.merged.report.hunks):
            return None
    why = "" if judge.merge_sound or options.pipeline != "checked" else \
        "the model writes only regions the merge fails in, and its failures are in none of its own; " \
        "`--pipeline model` has it write the whole file"
    return ApplyRun.sound_merge(request.judge, ApplyStats(method=options.method, plan_s=time.perf_counter() - start),
                                start, why)


class _Unread(Exception):
    """A region the target could not read (out of time, or no room for its prompt): the reason."""


class VerifiedRegionsRun(RegionRun):
    """The `verify` pipeline where the merge passes the checks: the target reads each region the merge
    changed, from the window a region rewrite has (`regions_to_rewrite.py`), and writes it as it would
    there; the answer is the merge's text whatever it writes, so a file of any length costs its regions.
    The merge's text streams in file order, each region once the target has read it; per region the stats
    say whether the target wrote the merge's text there or where it departed, its tokens and time. Regions
    left when `model_seconds` runs out are reported unread."""

    VERB = "read"

    def __init__(self, applier: Applier, request: ApplyRequest, regions: list[Region], options: ApplyOptions,
                 stats: ApplyStats, start: float):
        super().__init__(applier, request, regions, options, stats, start)
        self._options = replace(options, pipeline="model")  # a bound on what it writes holds per region

    def _refuse(self, reason: str) -> None:
        raise _Unread(reason)

    def __iter__(self) -> Iterator[str]:
        judge = self._judge
        self.stats.merge_confident = judge.candidate.report.confident
        merged, done = split_lines(judge.candidate.text), 0
        departed, agreed, unread = None, 0, []
        for region in self._regions:
            yield from self._emit("".join(merged[done:region.start]))
            ours = "".join(merged[region.start:region.end])
            try:
                theirs = self._rewrite(region, merged, verifying=True)
            except _Unread as why:
                unread.append(f"{region.describe()} ({why})")
                theirs = None
            if self.cancelled:
                return
            if theirs == ours:
                agreed += 1
                self.stats.regions_written[-1] += ", the merge's text"
            elif theirs is not None:
                line = region.start + first_difference_line(ours, theirs)
                departed = departed or line
                self.stats.regions_written[-1] += f", departed from the merge at line {line}"
            yield from self._emit(ours)
            done = region.end
        yield from self._emit("".join(merged[done:]))
        read = len(self._regions) - len(unread)
        reason = (f"the merge ({judge.sureness()}) passes the checks; the target read {read} of the "
                  f"{len(self._regions)} region(s) it changed and wrote the merge's text in {agreed}")
        if unread:
            reason += "; not read: " + "; ".join(unread)
        path = "model+merge" if agreed == len(self._regions) and self._regions else "merge"
        self._decide(Outcome(path, reason, departed))
        self.stats.total_s = time.perf_counter() - self._start

"""The target model decides where the merge is unsure: each reading the merge chose among others
(`merge.Reading`) against the other way, by teacher-forced log-likelihood in a window.

The question the model is asked is not "write the file" but "which of these two texts is the edited
file here?". For one reading:
1. The two texts (the merge's and the one with the reading taken the other way) differ in a run of lines;
   the window is that run with `CONTEXT_LINES` of the texts' common lines on each side.
2. The prompt is the `tags` prompt over the original's lines that the window covers (not the whole file)
   and the whole snippet; each text's window lines are the answer after it (with the closing tag where
   the window reaches the file's end).
3. Both answers are read after one prefill of what they share (`Scorer`); each answer's score is the sum
   of the log-probabilities of its tokens after the shared ones: exactly the difference of the two
   texts' log-likelihoods under that prompt.
4. The model's evidence is added to the prior of the reading's kind (`PRIOR`, the log odds that the
   other way is the right one, measured on the corpus's tune half); the sign of the sum decides, and a
   sum within `MARGIN` of zero is a refusal: neither way is likely enough to hand back as a success.
5. The cost is bounded: where the questions of one apply would have the target read more than
   `MOST_TOKENS`, it refuses before reading any.
Only the kinds of reading where the target's evidence changed answers for the better are weighed
(`WEIGHED`); the others stay as the merge read them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..merge import MergeCandidate, Reading, split_lines
from .prompting import FORMATS, build_prompt

CONTEXT_LINES = 8  # common lines on each side of the lines two readings differ in
PROMPT_FORMAT = "tags"  # the plain file-and-snippet prompt: the merge is what is being judged, not shown

# Log odds that the other way of a reading is the right one, before the target reads it: from the corpus's
# tune half (`apply-edit corpus build`, seed 0), (other way right + 1) / (merge right + 1) among the
# readings whose other way passes the checks. New lines beside the file's edge lines, where the snippet
# puts no marker, were nearly always meant to replace them (12 to 0).
PRIOR = {"replace": 0.0, "edge": math.log(13 / 1), "scope": math.log(2 / 1)}
# The kinds the target decides, by what its evidence changed on the tune half (window of 8 lines;
# `apply-edit corpus readings corpus/tune` prints the table). On the file's edge lines it favoured the
# right text in 12 of 12, by 7.7 nats and more (the merge had all 12 wrong); `scope` and `replace`, one
# case each, ask the same kind of question. Not weighed: a header deleted under its kept body (the target
# agreed with the merge in 28 of 28, by 5.3 nats and more: the read changes nothing and costs ~6 s), a long
# deletion (its evidence pointed the right way in only 24 of 41: it copies what the window shows), and a
# note (its other way never passed the checks; nor does the target tell a note from a comment of the
# file, DESIGN.md). Those stay as the merge read them.
WEIGHED = ("replace", "edge", "scope")
MARGIN = 2.0  # |prior + evidence| below this (nats) decides nothing: the apply refuses
# What one apply may ask of the target, in tokens read (prompts and answers of all its readings): beyond
# it, refused. Measured on the corpus (0.5B, fp32, 2 cores): a reading of ~700 tokens took ~6 s, one of
# ~3,000 took 41 s (the answers' pass grows with the context). On the tune half a weighed reading read
# 230-1,300 tokens (one 8,000: a 300-line edge rewrite).
MOST_TOKENS = 1500


@dataclass(frozen=True)
class Window:
    """Where two texts differ, with context: line ranges [start, end) of each, and of the original."""

    start: int
    end_merge: int
    end_other: int
    original_start: int
    original_end: int


def window(merge_lines: list[str], other_lines: list[str], origin: Sequence[int | None], original_lines: int,
           context: int = CONTEXT_LINES) -> Window:
    """The lines the two texts differ in, `context` common lines on each side, and the original lines the
    merge's window copies (through `origin`, the merge's line -> original line), or those around it."""
    p = 0
    while p < min(len(merge_lines), len(other_lines)) and merge_lines[p] == other_lines[p]:
        p += 1
    s = 0
    while s < min(len(merge_lines), len(other_lines)) - p and merge_lines[-1 - s] == other_lines[-1 - s]:
        s += 1
    start = max(0, p - context)
    end_merge, end_other = (min(len(lines), len(lines) - s + context) for lines in (merge_lines, other_lines))
    copied = [o for o in origin[start:end_merge] if o is not None]
    if copied:
        lo, hi = min(copied), max(copied) + 1
    else:  # the window is all new lines: the original lines before and after it
        before = [o for o in origin[:start] if o is not None]
        after = [o for o in origin[end_merge:] if o is not None]
        lo = before[-1] + 1 if before else 0
        hi = after[0] if after else original_lines
    # Original lines deleted at the window's edges are what the texts disagree about: they belong in it.
    if start == 0:
        lo = 0
    if end_merge == len(merge_lines):
        hi = original_lines
    return Window(start, end_merge, end_other, lo, hi)


# `score(prompt ids, answers)`: per answer, the sum of log-probabilities of its tokens after the tokens
# all answers share (`Applier.likelihoods` runs it on the target).
Scorer = Callable[[list[int], list[list[int]]], list[float]]


@dataclass
class Verdict:
    """The model's reading of one of the merge's readings."""

    reading: Reading
    evidence: float  # log-likelihood of the other way minus the merge's (nats), in the window
    tokens: int  # prompt and answer tokens the model read
    seconds: float

    @property
    def odds(self) -> float:
        """Prior and evidence: above zero, the other way is the more likely."""
        return PRIOR[self.reading.kind] + self.evidence

    @property
    def other_way(self) -> bool:
        return self.odds > 0

    @property
    def decided(self) -> bool:
        return abs(self.odds) >= MARGIN

    def describe(self) -> str:
        way = "taken the other way" if self.other_way else "kept"
        return f"{self.reading.what}: {way} (log odds {self.odds:+.1f})"


@dataclass
class Arbitration:
    """Every reading of one merge, weighed: the text the verdicts make, or why none."""

    verdicts: list[Verdict] = field(default_factory=list)
    text: str | None = None  # None: refused
    reason: str = ""

    @property
    def tokens(self) -> int:
        return sum(v.tokens for v in self.verdicts)

    @property
    def seconds(self) -> float:
        return sum(v.seconds for v in self.verdicts)


@dataclass
class Arbiter:
    """Weighs a merge's open readings on a target (through `score`), in windows of the request's texts."""

    tokenizer: object
    score: Scorer
    context: int = CONTEXT_LINES

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def question(self, original: str, update: str, instruction: str, language: str, candidate: MergeCandidate,
                 other_text: str) -> tuple[list[int], list[list[int]]]:
        """The prompt's ids and the two answers' (the merge's, the other way's) for one reading."""
        fmt = FORMATS[PROMPT_FORMAT]
        merge_lines, other_lines, orig = (split_lines(t) for t in (candidate.text, other_text, original))
        w = window(merge_lines, other_lines, candidate.origin, len(orig), self.context)
        prompt = build_prompt(self.tokenizer, fmt, "".join(orig[w.original_start:w.original_end]), update,
                              instruction, language)

        def answer(lines: list[str], end: int) -> str:
            text = "".join(lines[w.start:end])
            if end == len(lines):  # the file ends here: so does the answer
                text += ("" if text.endswith("\n") or not text else "\n") + fmt.close
            return text

        prompt_ids = self._ids(prompt.text)
        return prompt_ids, [self._ids(prompt.text + answer(lines, end))[len(prompt_ids):]
                            for lines, end in ((merge_lines, w.end_merge), (other_lines, w.end_other))]

    def weigh(self, reading: Reading, prompt_ids: list[int], answers: list[list[int]]) -> Verdict:
        """The target's verdict on one reading, from its question (`question`)."""
        start = time.perf_counter()
        merge_score, other_score = self.score(prompt_ids, answers)
        tokens = len(prompt_ids) + sum(map(len, answers))
        return Verdict(reading, other_score - merge_score, tokens, time.perf_counter() - start)

    def decide(self, original: str, update: str, instruction: str, language: str, candidate: MergeCandidate,
               open_readings: list[tuple[Reading, str]], sound: Callable[[str], bool]) -> Arbitration:
        """Weigh each open reading (with its other way's text: `decide.Judge.open_readings(WEIGHED)`); the
        text with those the target takes the other way, or a refusal where a verdict is too close to call
        or the readings chosen together fail the checks (`sound`)."""
        result = Arbitration()
        questions = [(reading, *self.question(original, update, instruction, language, candidate, other))
                     for reading, other in open_readings]
        if (tokens := sum(len(p) + sum(map(len, a)) for _, p, a in questions)) > MOST_TOKENS:
            result.reason = f"the target would read {tokens} tokens to decide what the merge leaves open " \
                            f"({len(questions)} reading(s)); it reads at most {MOST_TOKENS} in one apply"
            return result
        for reading, prompt_ids, answers in questions:
            result.verdicts.append(self.weigh(reading, prompt_ids, answers))
        if close := [v for v in result.verdicts if not v.decided]:
            result.reason = f"the target could not decide: {close[0].describe()}"
            return result
        taken = [v.reading for v in result.verdicts if v.other_way]
        text = candidate.reread(taken)
        if not sound(text):
            result.reason = "the readings the target chose, taken together, fail the checks"
            return result
        result.text = text
        result.reason = "; ".join(v.describe() for v in result.verdicts)
        return result

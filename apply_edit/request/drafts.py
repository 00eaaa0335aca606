"""How a request is drafted: the references the copy drafter reads, and the region of each position.

With merge drafting the references are [merge candidate, original, snippet]: the candidate comes first,
so copying follows the merged file, and where the target departs from it the suffix array finds the
longest match in any of the three. Every reference position is labelled with the region of the original
it belongs to (candidate lines map back through the merge; new lines belong to the region they were
inserted into, the snippet is a region of its own), and regions the merge changed are marked edited.

The prompt's own words (its tags and instructions) are one more reference, a region of their own: a
confused model sometimes copies them into its answer (the tag that closed the draft, the sentence after
it), and drafting them costs one pass where decoding them costs one per token.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ..merge import MergeCandidate, split_lines
from ..drafting.proposers import SuffixArrayProposer
from ..code.regions import Region, region_of_line, regions


@dataclass
class DraftPlan:
    proposer: SuffixArrayProposer
    region_of: np.ndarray  # per position of the proposer's joined references: region index, -1 a separator
    edited: list[bool]  # per region index (the last two: the snippet, the prompt's words)
    regions: list[Region]
    candidate: MergeCandidate | None


@dataclass(frozen=True)
class TokenLines:
    """A text's token ids and, per token, the line of the text it starts on."""

    ids: list[int]
    lines: list[int]


def token_lines(tokenizer, text: str) -> TokenLines:
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    line_starts = [0]
    for line in split_lines(text)[:-1]:
        line_starts.append(line_starts[-1] + len(line))
    return TokenLines(enc["input_ids"], [bisect.bisect_right(line_starts, a) - 1 for a, _ in enc["offset_mapping"]])


def plan_drafting(tokenizer, original: str, language: str, original_tokens: TokenLines, update_ids: list[int],
                  candidate: MergeCandidate | None, closing: str = "", prompt_words: list[str] = ()) -> DraftPlan:
    """`original_tokens`, `update_ids`: the request's texts as the prompt's tokenizer splits them.
    `candidate`: the merge to draft from first, or None for copy drafting. `closing`: what the model
    writes after the file (the answer's closing tag); the candidate ends with it, so the last pass drafts
    the end of the answer too. `prompt_words`: the prompt's text around its documents
    (`prompting.Prompt.words`), drafted from last."""
    spans = regions(original, language)
    snippet_region, prompt_region = len(spans), len(spans) + 1
    edited = [False] * (len(spans) + 2)
    edited[snippet_region] = True

    refs = [original_tokens.ids, update_ids]
    labels = [[region_of_line(spans, line) for line in original_tokens.lines], [snippet_region] * len(update_ids)]
    if candidate is not None:
        for line in candidate.edited_original_lines():
            edited[region_of_line(spans, line)] = True
        # A candidate line copied from the original lies in that line's region; a new line in the region
        # of the original line before it (where it was inserted).
        line_region, last = [], 0
        for origin in candidate.origin:
            last = origin if origin is not None else last
            line_region.append(region_of_line(spans, last))
        line_region = line_region or [region_of_line(spans, 0)]  # an empty candidate: only the closing tag
        candidate_tokens = token_lines(tokenizer, candidate.text + closing)
        refs.insert(0, candidate_tokens.ids)
        labels.insert(0, [line_region[min(line, len(line_region) - 1)] for line in candidate_tokens.lines])
    for words in prompt_words:
        refs.append(tokenizer.encode(words, add_special_tokens=False))
        labels.append([prompt_region] * len(refs[-1]))

    proposer = SuffixArrayProposer(refs, last_resort=len(prompt_words))
    region_of = np.full(len(proposer.text), -1, dtype=np.int64)  # separators stay -1
    for begin, label in zip(proposer.starts, labels):
        region_of[begin:begin + len(label)] = label
    return DraftPlan(proposer, region_of, edited, spans, candidate)

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

from .merge import MergeCandidate, split_lines
from .proposers import SuffixArrayProposer
from .regions import Region, region_of_line, regions


@dataclass
class DraftPlan:
    proposer: SuffixArrayProposer
    region_of: np.ndarray  # per joined reference position: region index, or -1 for a separator
    edited: list[bool]  # per region index (the last two: the snippet, the prompt's words)
    regions: list[Region]
    candidate: MergeCandidate | None


def _token_lines(tokenizer, text: str) -> tuple[list[int], list[int]]:
    """Token ids of text and the line each token starts on."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    line_starts = [0]
    for line in split_lines(text)[:-1]:
        line_starts.append(line_starts[-1] + len(line))
    return enc["input_ids"], [bisect.bisect_right(line_starts, a) - 1 for a, _ in enc["offset_mapping"]]


def prompt_words(prompt: str, documents: list[str]) -> list[str]:
    """The pieces of the prompt around the documents it shows, in order (blank ones dropped)."""
    pieces = [prompt]
    for document in filter(None, documents):
        pieces = [part for piece in pieces for part in piece.split(document)]
    return [piece for piece in pieces if piece.strip()]


def plan_drafting(tokenizer, original: str, update: str, language: str, candidate: MergeCandidate | None,
                  closing: str = "", prompt: str = "") -> DraftPlan:
    """`candidate`: the merge to draft from first, or None for copy drafting. `closing`: what the model
    writes after the file (the answer's closing tag); the candidate ends with it, so the last pass drafts
    the end of the answer too. `prompt`: the prompt text, whose words around the documents are drafted
    from last."""
    spans = regions(original, language)
    snippet_region, prompt_region = len(spans), len(spans) + 1
    edited = [False] * (len(spans) + 2)
    edited[snippet_region] = True

    original_ids, original_lines = _token_lines(tokenizer, original)
    update_ids, _ = _token_lines(tokenizer, update)
    refs = [original_ids, update_ids]
    labels = [[region_of_line(spans, line) for line in original_lines], [snippet_region] * len(update_ids)]
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
        candidate_ids, candidate_lines = _token_lines(tokenizer, candidate.text + closing)
        refs.insert(0, candidate_ids)
        labels.insert(0, [line_region[min(line, len(line_region) - 1)] for line in candidate_lines])
    documents = [original, update] + ([candidate.text] if candidate is not None else [])
    pieces = prompt_words(prompt, documents)
    for piece in pieces:
        refs.append(tokenizer.encode(piece, add_special_tokens=False))
        labels.append([prompt_region] * len(refs[-1]))

    joined: list[int] = []
    for i, label in enumerate(labels):
        if i:
            joined.append(-1)  # the proposer's separator between references
        joined.extend(label)
    proposer = SuffixArrayProposer(refs, last_resort=len(pieces))
    return DraftPlan(proposer, np.asarray(joined, dtype=np.int64), edited, spans, candidate)

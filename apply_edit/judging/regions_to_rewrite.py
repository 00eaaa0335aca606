"""Where the merge fails the checks, which of its changes the model rewrites, and from what.

The merge changes the original in runs of lines (new lines, deleted lines); a failure of the checks
usually sits in one of them (a hunk placed in the wrong block, a closer dropped). The model is asked to
rewrite only those, each from a window of the original, so its cost is the region's, not the file's:
1. Regions: the merge's changed runs (through `MergeCandidate.origin`) with `CONTEXT` unchanged lines on
   each side; runs whose windows touch are one region.
2. A region fails where the original with only that region's change fails the checks that judge a
   change on its own (`checks.placement_problems`: it parses where the original does, it deletes nothing
   without the snippet's evidence, a marker in a new block stands for some code).
3. Its question is a request of its own: the original's lines the region covers, and the snippet's hunks
   that share a line of code with the merge's text there (all of the snippet where none does).
4. The answer's blank lines are the merge's: where the target's text and the merge's differ only in blank
   lines, the merge's stand (`with_merges_blank_lines`). The target is asked for the code the merge could
   not place; the layout around it the merge took from the original and the snippet, and the checks could
   not tell a blank line the target dropped between two methods from one the edit removed.
The caller (`request.RegionRun`) has the target apply each question as it applies a whole file, puts the
answers in place of the regions, and checks the whole file. Where the merge fails outside any such region
(the checks fail only on the whole file), the model writes the whole file (`Applier.stream`).
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

from .checks import placement_problems
from ..merge import MergeCandidate, is_marker, says_little, split_lines

CONTEXT = 8  # unchanged lines on each side of a changed run: what the model sees of the code around it


@dataclass(frozen=True)
class Region:
    """Merge lines [start, end) and the original lines [original_start, original_end) they stand for."""

    start: int
    end: int
    original_start: int
    original_end: int

    def describe(self) -> str:
        return f"lines {self.start + 1}-{self.end} (original {self.original_start + 1}-{self.original_end})"


def changed_regions(candidate: MergeCandidate, context: int = CONTEXT) -> list[Region]:
    """The merge's changed runs, each with `context` (at least 1) unchanged lines around it, joined where
    they touch."""
    origin, n = candidate.origin, candidate.original_lines
    runs, previous = [], -1  # runs: [start, end) of merge lines; a deletion is an empty run where it was
    for i, o in enumerate(origin):
        if o is None:
            runs.append((i, i + 1))
        else:
            if o != previous + 1:
                runs.append((i, i))
            previous = o
    if previous != n - 1:
        runs.append((len(origin), len(origin)))
    windows: list[list[int]] = []
    for start, end in runs:
        lo, hi = max(0, start - context), min(len(origin), end + context)
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], hi)
        else:
            windows.append([lo, hi])
    # A window's edges are unchanged lines (a change within `context` of one would have widened it): the
    # original lines it stands for run from its first line's to its last line's.
    return [Region(lo, hi, 0 if lo == 0 else origin[lo], n if hi == len(origin) else origin[hi - 1] + 1)
            for lo, hi in windows]


def failing_regions(original: str, update: str, language: str, instruction: str, candidate: MergeCandidate,
                    regions: list[Region]) -> list[Region]:
    """The regions whose change, on its own in the original, fails `checks.placement_problems`."""
    orig, merged = split_lines(original), split_lines(candidate.text)
    failing = []
    for r in regions:
        alone = "".join(orig[:r.original_start] + merged[r.start:r.end] + orig[r.original_end:])
        if placement_problems(original, update, alone, language, instruction):
            failing.append(r)
    return failing


def region_snippet(update: str, merged_lines: list[str]) -> str:
    """The snippet's hunks that share a line of code with `merged_lines` (the merge's text of a region),
    with the markers around them; the whole snippet where no hunk does."""
    lines = split_lines(update)
    hunks: list[list[int]] = [[]]  # line numbers of each hunk; markers split them
    for n, line in enumerate(lines):
        if is_marker(line):
            hunks.append([])
        else:
            hunks[-1].append(n)
    keys = {key for key in (line.strip() for line in merged_lines) if not says_little(key)}
    picked = [h for h in hunks if any(lines[n].strip() in keys for n in h)]
    if not picked:
        return update
    keep = set()
    for h in picked:
        lo, hi = h[0], h[-1]
        keep.update(range(lo, hi + 1))
        if lo > 0:
            keep.add(lo - 1)  # the marker before the hunk
        if hi + 1 < len(lines):
            keep.add(hi + 1)  # the marker after it
    return "".join(lines[n] for n in sorted(keep))


def with_merges_blank_lines(written: str, merged: str) -> str:
    """`written` (the target's text for a region) where each run of lines in which it differs from `merged`
    (the merge's text there) only by blank lines, on both sides, is the merge's."""
    ours, theirs = split_lines(merged), split_lines(written)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, ours, theirs, autojunk=False).get_opcodes():
        layout = tag != "equal" and not any(line.strip() for line in ours[i1:i2] + theirs[j1:j2])
        out += ours[i1:i2] if layout else theirs[j1:j2]
    return "".join(out)

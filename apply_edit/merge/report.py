"""The report of a merge: how each hunk was placed, which original lines were deleted, and which were
kept outside a marker's scope: what a caller needs to decide whether to trust the merge.

Reads the final alignment (`_report`); the last pass of the merge.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from .anchors import _trivial
from .snippet import _Snippet, _width

@dataclass
class HunkPlacement:
    """Where one hunk (the snippet lines between two markers) landed."""

    snippet_line: int  # the hunk's first line in the snippet (0-based)
    lines: int
    # definition: part of a definition shown whole; unique: matches a line found once in the original;
    # scope: starts where its marker's scope ends; edited: replaces an edited version of a line found
    # once; ambiguous: only common lines (`}`, `return nil`) match, or edit them; new: nothing matches
    # (new code at the start or end of the file, or placed by the markers around it)
    anchor: str
    original_line: int | None  # the first original line it matched or was inserted before
    between_markers: bool  # a marker before and after it (new code there has no settled place)


# The kinds of reading (`doubts.py`, and `merge` for notes): what the other reading does.
# replace: drops an original line kept beside a new line that may edit it; header: keeps a deleted line
# whose block stays; edge: drops the file's first (last) lines kept beside new ones; deletion: keeps a long
# run of lines deleted between two snippet lines; scope: keeps lines deleted between a line the snippet
# shows and a marker; note: writes a comment read as a note as code; blank: drops the blank lines kept at the
# file's first (last) line, where the snippet shows it without a marker; anchored: the file as the second
# reading (`anchored.py`, each hunk placed by its own lines) reads it.
READING_KINDS = ("replace", "header", "edge", "deletion", "scope", "note", "blank", "anchored")


@dataclass(frozen=True)
class Reading:
    """One choice the snippet leaves open that the merge made one way, and the other way to make it."""

    kind: str  # one of READING_KINDS
    what: str  # a sentence naming the lines
    # The other reading as rewritten ops (index in the final alignment -> op); empty for a note, which is
    # read again by a merge of its own (`MergeCandidate.reread`).
    other: tuple[tuple[int, tuple], ...] = ()
    snippet_line: int | None = None  # for a note: the snippet line (0-based)

    def __str__(self) -> str:
        return self.what


@dataclass
class MergeReport:
    hunks: list[HunkPlacement] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)  # original lines the merge removed
    crossed: list[int] = field(default_factory=list)  # lines a marker kept outside its scope (less indented)
    # Choices the snippet leaves open that the merge made one way (a comment read as a note, not code).
    readings: list[Reading] = field(default_factory=list)
    read_twice: bool = False  # the second reading (`anchored.py`) reads the same file

    @property
    def ambiguous(self) -> list[HunkPlacement]:
        """Hunks whose place the structure does not settle: only common lines anchor them, or they are
        new code between two markers."""
        return [h for h in self.hunks if h.anchor == "ambiguous" or (h.anchor == "new" and h.between_markers)]

    @property
    def confident(self) -> bool:
        """Every hunk placed by structure, nothing kept outside a marker's scope, no reading chosen among
        others, the second reading reads the same file, and something to merge (a snippet with no code
        lines leaves the edit to the instruction, which only the model reads)."""
        return bool(self.hunks) and not self.ambiguous and not self.crossed and not self.readings and self.read_twice


@dataclass
class MergeCandidate:
    text: str
    origin: list[int | None]  # per candidate line: the original line it copies, or None for a new line
    original_lines: int
    report: MergeReport = field(default_factory=MergeReport)
    # The text where the given readings are taken the other way (`merge`); None for a candidate made by hand.
    rereader: Callable[[list[Reading]], str] | None = field(default=None, repr=False, compare=False)
    # The second reading's file (`anchored.py`), where it places every hunk.
    anchored: MergeCandidate | None = field(default=None, repr=False, compare=False)

    def reread(self, readings: list[Reading]) -> str:
        """The candidate's text with each of `readings` (from its report) taken the other way."""
        if not readings:
            return self.text
        if self.rereader is None:
            raise ValueError("this candidate keeps no alignment to read again")
        return self.rereader(readings)

    def edited_original_lines(self) -> set[int]:
        """Original lines the merge changed: deleted ones, and the neighbours of inserted lines."""
        kept = {o for o in self.origin if o is not None}
        touched = set(range(self.original_lines)) - kept
        last = -1
        for o in self.origin:
            if o is None:
                touched.update(x for x in (last, last + 1) if 0 <= x < self.original_lines)
            else:
                last = o
        return touched


_RANK = ["new", "ambiguous", "edited", "scope", "unique", "definition"]  # how firmly a hunk's place is settled


def _report(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter, pairs,
            replaced: list[int]) -> MergeReport:
    """The report of the alignment `ops`; `replaced`: the kept lines the render dropped as replaced
    declarations (`render._without_replaced_declarations`), deleted too."""
    return MergeReport(hunks=_placements(ops, snippet, orig, counts, pairs),
                       deleted=[op[1] for op in ops if op[0] == "del"] + replaced,
                       crossed=[op[1] for op in ops if op[0] == "keep" and op[2]])


def _placements(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter, pairs) -> list[HunkPlacement]:
    """Per hunk, in order: where it landed and how firmly its lines anchor it there (`_RANK`: the firmest
    of its lines; a hunk whose first line only matches a common line where its marker's scope ends is
    placed by that scope)."""
    in_pair = {i for a, b, _, _, whole in pairs if whole for i in range(a, b + 1)}
    hunk_info: dict[int, dict] = {}
    next_original = 0  # the original line after the last one placed: where a new line goes
    for op in ops:
        kind = op[0]
        if kind in ("keep", "del"):
            next_original = op[1] + 1
            continue
        i = op[1]
        info = hunk_info.setdefault(snippet.hunk_of[i], {"start": i, "lines": 0, "anchor": "new", "at": None})
        info["lines"] += 1
        if kind == "ins":
            if info["at"] is None:
                info["at"] = next_original
            continue
        j = op[2]
        if info["at"] is None:
            info["at"] = j
        if kind == "edit":
            edited = orig[j].strip()
            rank = "edited" if not _trivial(edited) and counts[edited] == 1 else "ambiguous"
        else:
            key = snippet.lines[i].strip()
            rank = "definition" if i in in_pair else "unique" if key and not _trivial(key) and counts[key] == 1 \
                else "ambiguous"
        if _RANK.index(rank) > _RANK.index(info["anchor"]):
            info["anchor"] = rank
        if kind == "match" and i == info["start"] and (reach := snippet.reach[i]) and reach > 0 \
                and rank == "ambiguous" and _width(orig[j]) < reach:
            info["anchor"] = "scope"  # the line its marker's scope ends on
        next_original = j + 1
    return [HunkPlacement(snippet.number[v["start"]], v["lines"], v["anchor"], v["at"],
                          snippet.reach[v["start"]] is not None and snippet.reach[v["start"] + v["lines"]] is not None)
            for _, v in sorted(hunk_info.items())]

"""A second reading of the snippet, independent of the alignment: each hunk placed by its own lines, as
line-anchored appliers place a search block.

The alignment (`align`, `repairs`, `twins`) reads the snippet as a whole and places every line against
every other; where it errs, its own report cannot see it. This reading shares only the parse of the
snippet (`snippet._read`: markers, notes, hunks) and places each hunk on its own:
1. Anchors: the hunk's lines found exactly once in the original and once in the snippet (and saying
   something: not `}` or `end`); where they are out of the file's order, only those whose neighbour in the
   hunk is the file's neighbour too; in a hunk that has none, its lines that edit exactly one line of the
   file (step 2's test); in a hunk that still has none (`}` after a marker), its first line where the file
   next has it, whole. Out of order still, within or across hunks, there is no reading.
2. The hunk's span in the original runs from its first anchor to its last, widened to the nearest line
   (whole, indentation included) the hunk shows before the first (after the last) within twice the
   lines it has there, and then over the file's lines beside the span that the hunk's next lines edit
   (`difflib` ratio at least `EDIT_RATIO`, or the same code with another trailing comment).
3. The span's lines give way to the hunk's lines; lines the hunk shows beyond it are new. Blank lines at
   a hunk's edges stand beside a marker: the file's own blank lines there are kept, the hunk's dropped.
4. A hunk shown at another depth than the file's (every anchor shifted by the same indentation) is
   shifted back.
5. Outside the spans, the original's lines stay, but for the file's edges: where no marker comes before
   the first hunk and it shows lines before its span, they replace the file's first lines (the same at the
   end); where the snippet has no marker at all, it is the whole file.

`merge` compares this text with the alignment's: the merge is confident only where both read the same
file; where they differ, the report carries an `anchored` reading; where the alignment's text fails the
checks and this one passes them, it is the answer (`decide.Judge`).
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from typing import Callable

from .anchors import _trivial
from .snippet import _Snippet

EDIT_RATIO = 0.7  # similarity above which a line beside a span reads as the hunk's edit of it


def anchored_reading(orig: list[str], snippet: _Snippet, ends_in_newline: bool, uncommented: Callable[[str], str]
                     ) -> tuple[list[str], list[int | None]] | None:
    """The file as this reading places the snippet, as lines and, per line, the original line it copies
    (None for the snippet's); None where some hunk has no anchor, or the anchors are out of order.
    `ends_in_newline`: whether the original's last line ends with one (the result's then does too).
    `uncommented`: a line without its trailing comment (`languages.uncommented`)."""
    keys = [line.strip() for line in orig]

    def edits(shown: str, p: int) -> bool:  # whether the hunk's line `shown` edits original line p
        return _edits(shown, keys[p]) or (not _trivial(code := uncommented(shown)) and code == uncommented(keys[p]))

    where = defaultdict(list)
    for p, key in enumerate(keys):
        where[key].append(p)
    in_snippet = Counter(line.strip() for line in snippet.lines)
    hunks = [[line for line, of in zip(snippet.lines, snippet.hunk_of) if of == h]
             for h in range(max(snippet.hunk_of, default=-1) + 1)]
    hunks = [lines for lines in hunks if any(line.strip() for line in lines)]  # blank lines between markers: layout
    if not hunks:
        return None
    anchored = [_anchors(lines, keys, where, in_snippet) for lines in hunks]
    # A hunk with no anchor (a closer after a marker, `}` then new code) goes where its first line is,
    # whole, next after the hunk before it.
    for h, lines in enumerate(hunks):
        if anchored[h] is None:
            after = anchored[h - 1][-1][1] + 1 if h else 0
            before = next((a[0][1] for a in anchored[h + 1:] if a is not None), len(orig))
            first = next(i for i, line in enumerate(lines) if line.strip())
            p = next((p for p in range(after, before) if orig[p].rstrip() == lines[first].rstrip()), None)
            if p is None:
                return None
            anchored[h] = [(first, p)]
    if any(a[-1][1] >= b[0][1] for a, b in zip(anchored, anchored[1:])):
        return None
    whole_file = not any(r is not None for r in snippet.reach)
    out: list[str] = []
    origin: list[int | None] = []
    cursor = 0
    for h, (lines, anchors) in enumerate(zip(hunks, anchored)):
        limit = anchored[h + 1][0][1] if h + 1 < len(hunks) else len(orig)
        start, end, first, last = _span(lines, anchors, orig, where, cursor, limit, edits)
        if h == 0 and snippet.reach[0] is None and any(line.strip() for line in lines[:first]):
            start = 0
        if h == len(hunks) - 1 and snippet.reach[-1] is None and any(line.strip() for line in lines[last + 1:]):
            end = len(orig)
        lines = _at_files_depth(lines, [(lines[i], orig[p]) for i, p in anchors])
        lines = _without_edge_blanks(lines)
        if whole_file:
            start, end = cursor, len(orig)
        out += orig[cursor:start]
        origin += range(cursor, start)
        out += lines
        origin += [orig.index(line, start, end) if _kept(line, orig, start, end) else None for line in lines]
        cursor = end
    out += orig[cursor:]
    origin += range(cursor, len(orig))
    if out and not ends_in_newline and origin[-1] is None:
        out[-1] = out[-1].rstrip("\r\n")
    return out, origin


def _anchors(lines: list[str], keys: list[str], where: dict[str, list[int]],
             in_snippet: Counter) -> list[tuple[int, int]] | None:
    """One hunk's anchors, (hunk line, original line), in order (step 1 of the module's docstring); where
    they are out of order, those whose neighbour in the hunk is the file's neighbour too (a new function
    that copies a line of an old one has that line out of place). None where it has none."""
    shown = [line.strip() for line in lines]
    anchors = [(i, where[key][0]) for i, key in enumerate(shown)
               if key and len(where[key]) == 1 and in_snippet[key] == 1 and not _trivial(key)]
    anchors = anchors or _edited_anchors(lines, keys)
    if any(b[1] <= a[1] for a, b in zip(anchors, anchors[1:])):
        anchors = [(i, p) for i, p in anchors if _in_context(shown, i, keys, p)]
        if any(b[1] <= a[1] for a, b in zip(anchors, anchors[1:])):
            return None
    return anchors or None


def _in_context(shown: list[str], i: int, keys: list[str], p: int) -> bool:
    """Whether the hunk's line i, placed at original line p, has a non-blank neighbour that is the file's."""
    def beside(seq: list[str], at: int, step: int) -> str | None:
        at += step
        while 0 <= at < len(seq) and not seq[at]:
            at += step
        return seq[at] if 0 <= at < len(seq) else None
    return any(beside(shown, i, step) is not None and beside(shown, i, step) == beside(keys, p, step)
               for step in (-1, 1))


def _edited_anchors(lines: list[str], keys: list[str]) -> list[tuple[int, int]]:
    """For a hunk that shows no line of the file as it is (a signature changed, a call rewritten): its
    lines that edit exactly one line of the file, each with that line."""
    found = []
    for i, line in enumerate(lines):
        if _trivial(shown := line.strip()):
            continue
        edits = _edits_of(shown)
        edited = [p for p, key in enumerate(keys) if not _trivial(key) and edits(key)]
        if len(edited) == 1:
            found.append((i, edited[0]))
    return found


def _kept(line: str, orig: list[str], start: int, end: int) -> bool:
    """Whether `line`, shown in a hunk, is a line of its span rather than a new one: it says something,
    and the span has it once."""
    return not _trivial(line.strip()) and orig[start:end].count(line) == 1


def _span(lines: list[str], anchors: list[tuple[int, int]], orig: list[str], where: dict[str, list[int]],
          cursor: int, limit: int, edits: Callable[[str, int], bool]) -> tuple[int, int, int, int]:
    """The original lines [start, end) one hunk replaces (step 2 of the module's docstring), and the hunk's
    lines placed at its first and last; `edits(line, p)`: whether a line of the hunk edits original line p."""
    (first, start), (last, end) = anchors[0], (anchors[-1][0], anchors[-1][1] + 1)
    shown = [line.strip() for line in lines]
    for i in range(first):  # the first line shown before the first anchor that the file has near it
        near = [p for p in where.get(shown[i], ()) if max(cursor, start - 2 * first - 4) <= p < start
                and orig[p].rstrip() == lines[i].rstrip()] if shown[i] else []
        if near:
            first, start = i, near[-1]
            break
    after = len(lines) - 1 - last
    for i in range(len(lines) - 1, last, -1):
        near = [p for p in where.get(shown[i], ()) if end <= p < min(limit, end + 2 * after + 4)
                and orig[p].rstrip() == lines[i].rstrip()] if shown[i] else []
        if near:
            last, end = i, near[0] + 1
            break
    while first > 0 and start > cursor and edits(shown[first - 1], start - 1):
        first, start = first - 1, start - 1
    while last + 1 < len(lines) and end < limit and edits(shown[last + 1], end):
        last, end = last + 1, end + 1
    return start, end, first, last


def _edits_of(shown: str) -> Callable[[str], bool]:
    """The test "a line of the file that `shown` edits" (`difflib` ratio at least `EDIT_RATIO`), with
    `shown`'s index built once for all the lines it is tried on."""
    matcher = difflib.SequenceMatcher(None, "", shown)

    def edits(line: str) -> bool:
        if not (shown and line) or 2 * min(len(shown), len(line)) < EDIT_RATIO * (len(shown) + len(line)):
            return False  # the ratio's bound from the lengths alone (`SequenceMatcher.real_quick_ratio`)
        matcher.set_seq1(line)
        return matcher.quick_ratio() >= EDIT_RATIO and matcher.ratio() >= EDIT_RATIO
    return edits


def _edits(shown: str, line: str) -> bool:
    return _edits_of(shown)(line)


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _at_files_depth(lines: list[str], anchored: list[tuple[str, str]]) -> list[str]:
    """The hunk shifted to the file's depth where every anchor is shifted by the same indentation."""
    shifts = set()
    for shown, line in anchored:
        a, b = _indent(shown), _indent(line)
        if b.endswith(a):
            shifts.add((b[:len(b) - len(a)], ""))
        elif a.endswith(b):
            shifts.add(("", a[:len(a) - len(b)]))
        else:
            return lines
    if len(shifts) != 1 or shifts == {("", "")}:
        return lines
    (add, cut), = shifts
    if add:
        return [add + line if line.strip() else line for line in lines]
    return [line[len(cut):] if line.startswith(cut) else line for line in lines]


def _without_edge_blanks(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]

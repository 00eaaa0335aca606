"""Edits cut from the diff of a file between two releases.

A file's diff (difflib over lines) is a list of hunks; hunks with at most `_JOIN` unchanged lines between
them are one hunk. An edit is one hunk, or up to three hunks that follow each other within `_NEARBY`
lines (an import added with its first use, a field with its getter), applied to the older file alone:
`before` is the older release's file, `after` is it with only those hunks made. So each edit is a real
change of real code, and every line of `after` is either the older file's or the newer one's.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ...code.definitions import duplicate_declarations
from ...merge import split_lines
from ...code.regions import parse_errors, parser_for

_JOIN = 2  # unchanged lines inside one hunk
_NEARBY = 30  # unchanged lines between the hunks of one edit
_MAX_HUNKS = 3
_MAX_CHANGED = 60  # lines removed plus lines added, over the edit
MIN_LINES, MAX_LINES = 40, 3000
_MAX_LINE_CHARS = 400  # longer lines: minified or generated code
_MAX_CHANGED_SHARE = 0.4  # a file diff that changes more than this share of lines is a rewrite


@dataclass(frozen=True)
class Hunk:
    """Old lines [old_start, old_end) become new lines `added`; `after_start` is where they stand in
    the edit's `after` (0-based)."""

    old_start: int
    old_end: int
    added: tuple[str, ...]
    after_start: int = 0

    @property
    def removed(self) -> int:
        return self.old_end - self.old_start

    @property
    def after_end(self) -> int:
        return self.after_start + len(self.added)


@dataclass(frozen=True)
class Edit:
    before: str
    after: str
    hunks: tuple[Hunk, ...]  # in file order, with after_start set


def usable(text: str) -> bool:
    """A file fit for an edit: a size an edit is written for, hand-written lines, one newline style."""
    lines = split_lines(text)
    return (MIN_LINES <= len(lines) <= MAX_LINES and text.endswith("\n")
            and all(len(line) <= _MAX_LINE_CHARS for line in lines) and "\x00" not in text)


def _hunks(old: list[str], new: list[str]) -> list[Hunk]:
    """The diff's hunks. Lines are compared without their trailing whitespace: a release that also strips
    trailing blanks does not make every such line part of the edit (a snippet could not show it)."""
    ops = difflib.SequenceMatcher(None, [line.rstrip() for line in old], [line.rstrip() for line in new],
                                  autojunk=False).get_opcodes()
    ops = [op for op in ops if op[0] != "equal"]
    hunks: list[list] = []
    for _, i1, i2, j1, j2 in ops:
        if hunks and i1 - hunks[-1][1] <= _JOIN:
            last = hunks[-1]
            last[1], last[3] = i2, j2
        else:
            hunks.append([i1, i2, j1, j2])
    return [Hunk(i1, i2, tuple(new[j1:j2])) for i1, i2, j1, j2 in hunks]


def _substantive(old: list[str], hunk: Hunk) -> bool:
    """A hunk that changes code, not only whitespace or blank lines."""
    removed = [line.split() for line in old[hunk.old_start:hunk.old_end] if line.strip()]
    added = [line.split() for line in hunk.added if line.strip()]
    return removed != added


def _apply(old: list[str], hunks: list[Hunk]) -> Edit:
    out: list[str] = []
    placed: list[Hunk] = []
    at = 0
    for hunk in hunks:
        out += old[at:hunk.old_start]
        placed.append(Hunk(hunk.old_start, hunk.old_end, hunk.added, len(out)))
        out += hunk.added
        at = hunk.old_end
    out += old[at:]
    return Edit("".join(old), "".join(out), tuple(placed))


def file_edits(before: str, after: str) -> list[Edit]:
    """The edits of one file's diff between two releases: each run of up to `_MAX_HUNKS` hunks within
    `_NEARBY` lines of each other, taken apart where the run is longer (non-overlapping, in order)."""
    if before == after or not usable(before) or not usable(after):
        return []
    old, new = split_lines(before), split_lines(after)
    hunks = _hunks(old, new)
    changed = sum(h.removed + len(h.added) for h in hunks)
    if changed > _MAX_CHANGED_SHARE * (len(old) + len(new)):
        return []
    edits: list[Edit] = []
    run: list[Hunk] = []
    for hunk in hunks + [None]:
        if hunk is not None and run and hunk.old_start - run[-1].old_end <= _NEARBY and len(run) < _MAX_HUNKS:
            run.append(hunk)
            continue
        if run:
            kept = [h for h in run if _substantive(old, h)]
            if kept and sum(h.removed + len(h.added) for h in kept) <= _MAX_CHANGED:
                edit = _apply(old, kept)
                if edit.after != edit.before and usable(edit.after):
                    edits.append(edit)
        run = [hunk] if hunk is not None else []
    return edits


def consistent(edit: Edit, language: str) -> bool:
    """Whether the edit leaves a program as sound as it found it: no more parse errors, and no name
    declared twice in one scope that was not before. One group of hunks cut from a larger change can
    leave a half-made state (a wrapper added under a name the rest of the change renames away); no
    agent writes such an edit, and no snippet can say what it means."""
    parser = parser_for(language)
    if parser is None:
        return True
    # Each text parsed once, for both tests, as the checks read a result (`checks.problems`).
    old_tree, new_tree = (parser.parse(text.encode()).root_node for text in (edit.before, edit.after))
    if sum(1 for _ in parse_errors(new_tree)) > sum(1 for _ in parse_errors(old_tree)):
        return False
    return not set(duplicate_declarations(new_tree, language)) - set(duplicate_declarations(old_tree, language))

"""A second reading of a result: every run of original lines it deletes must have the snippet's evidence.

The merge places the snippet by one alignment; where that alignment goes wrong it deletes code a marker
keeps, and its own report cannot see it. This reading does not trust any alignment. It diffs the result
against the original (non-blank lines; a patience diff, which pairs the lines found once on both sides
first), and asks of each run of original lines the result deletes or replaces whether the snippet says
so, in one of these ways:

1. the lines on both sides of the run are shown in one stretch of the snippet (no marker between them):
   the snippet shows the code around the run without it. A deleted run between equal lines (`}`) reads
   as well one line up or down; one of those readings will do;
2. the run is an edit at the edge of a stretch: its new lines sit next to a marker in the snippet, and
   each line gone is like one of them, in order (mostly the same characters, the same line with words
   put in front: `int` -> `static int`, or with another trailing comment: `raise` -> `raise  # noqa`), or
   all of them together are like the new lines together (a signature joined onto one line, a tag split
   over several). A line gone that opens a body the result
   keeps after it (the next original line is deeper) is only edited by a line whose own body is not
   closed before that edge (a new `if ... fi` block is not an edit of the `if` whose body follows);
3. the lines go with a name the instruction or a deletion note removes (`removals`), or use a code name
   the instruction mentions (`UUID` in "drop the overload and its now-unused UUID import");
4. the lines are inside a definition the snippet shows whole (its header to its end, no marker inside);
5. the lines are the comment attached to a line the snippet shows with a comment of its own attached
   (a rewritten doc comment).

A run with none of these sits under a marker: code the snippet keeps. Blank lines are not asked about, and
a snippet with no code (the instruction says it all) gives no evidence to read.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher

from patiencediff import PatienceSequenceMatcher

from ..code.definitions import Definition, definitions, snippet_definitions
from ..code.instruction import names_to_remove, noted_names, uses, without_change_notes
from ..code.languages import code_of, uncommented
from .anchors import _CLOSER, _comment_line
from .removals import _removed_lines
from .snippet import _read, _width



@dataclass(frozen=True)
class UnexplainedRun:
    """Original lines (1-based, first) a result deletes with no evidence in the snippet."""

    line: int
    count: int
    text: str  # the first of them, stripped

    def __str__(self) -> str:
        return f"line {self.line} (`{self.text[:60]}`)" + (f" and {self.count - 1} more" if self.count > 1 else "")


# Words put in front of a line (`static`, `export async`, `pub`): the line edited, however short it is.
_QUALIFIERS = re.compile(r"(?:[A-Za-z_]\w* )+")


def _like(a: str, b: str, code_part) -> bool:
    return SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.5 or (
        b.endswith(a) and _QUALIFIERS.fullmatch(b[:len(b) - len(a)]) is not None) or (
        code_part(a) == code_part(b) != "")


def _like_in_order(gone: list[str], new: list[str], code_part) -> list[int] | None:
    """Per line gone, the index of a new line like it, in order; None where there is no such choice."""
    at, found = 0, []
    for line in gone:
        while at < len(new) and not _like(line, new[at], code_part):
            at += 1
        if at == len(new):
            return None
        found.append(at)
        at += 1
    return found


def unexplained_deletions(original: str, update: str, result: str, language: str,
                          instruction: str = "") -> list[UnexplainedRun]:
    """The runs of original lines `result` deletes or replaces without the snippet's evidence (above)."""
    update = without_change_notes(original, update, language)
    orig, _, _, snippet, notes = _read(original, update, language)
    out_lines = [line for line in result.split("\n") if line.strip()]
    out = [line.strip() for line in out_lines]
    shown = [i for i, line in enumerate(snippet.lines) if line.strip()]
    keys = [snippet.lines[i].strip() for i in shown]
    stretch = [snippet.hunk_of[i] for i in shown]
    lead, trail = snippet.reach[0] is not None, snippet.reach[-1] is not None
    if not keys:
        return []
    removed, explained = _removed_and_shown_whole(original, update, orig, snippet, notes, language, instruction)
    # The original's non-blank lines (their numbers in `at`), but what a removal takes: those go first, or
    # the diff would pair like lines elsewhere with them.
    at = [n for n, line in enumerate(orig) if line.strip() and n not in removed]
    old = [orig[n].strip() for n in at]
    cut = uncommented(language)
    if mentioned := _mentioned_names(instruction):
        code = code_of(language)
        explained |= {n for n in at if any(uses(code(orig[n]), name) for name in mentioned)}

    def one_stretch(p: int, n: int) -> bool:  # p, n: snippet positions, -1 / len(keys) for the file's edges
        if p == -1:
            return n == len(keys) or stretch[n] == 0
        if n == len(keys):
            return stretch[p] == stretch[-1]
        return p < n and stretch[p] == stretch[n]

    comment = _comment_line(language)

    def deletion_shown(i1: int, i2: int) -> bool:  # rules 1, 3-5 for old[i1:i2]
        if all(at[i] in explained for i in range(i1, i2)):
            return True
        before = [p for p, key in enumerate(keys) if key == old[i1 - 1]] if i1 else ([] if lead else [-1])
        after = [n for n, key in enumerate(keys) if key == old[i2]] if i2 < len(old) else ([] if trail else [len(keys)])
        if any(one_stretch(p, n) for p in before for n in after):
            return True
        return i2 < len(old) and all(map(comment, old[i1:i2])) and any(
            n and comment(keys[n - 1]) and shown[n - 1] == shown[n] - 1 for n in after)

    found = []
    # Patience diff: lines found once on both sides pair first, so a look-alike line elsewhere (a twin
    # table, a second `default:`) is not what a run is read against.
    for tag, i1, i2, j1, j2 in PatienceSequenceMatcher(None, old, out).get_opcodes():
        if tag == "delete" and any(deletion_shown(a, b) for a, b in _slides(old, i1, i2)):
            continue  # which of equal lines (`}`) a deleted run ends at, the diff chose: any of them will do
        if tag == "replace" and (deletion_shown(i1, i2) or _edge_edit(old, out, out_lines, orig, at, keys, stretch,
                                                                     i1, i2, j1, j2, cut)):
            continue
        if tag in ("delete", "replace"):
            found.append(UnexplainedRun(at[i1] + 1, i2 - i1, old[i1]))
    return found


def _slides(old: list[str], i1: int, i2: int) -> list[tuple[int, int]]:
    """Every run equal to deleting old[i1:i2]: slid up while the line above it equals its last line, down
    while the line below it equals its first."""
    runs = [(i1, i2)]
    a, b = i1, i2
    while a > 0 and old[a - 1] == old[b - 1]:
        a, b = a - 1, b - 1
        runs.append((a, b))
    a, b = i1, i2
    while b < len(old) and old[a] == old[b]:
        a, b = a + 1, b + 1
        runs.append((a, b))
    return runs


def _edge_edit(old, out, out_lines, orig, at, keys, stretch, i1, i2, j1, j2, code_part) -> bool:
    """Rule 2: the replacement out[j1:j2] is shown in the snippet next to a marker, and edits old[i1:i2]
    (`code_part`: a line without its trailing comment, `languages.uncommented`)."""
    new = out[j1:j2]
    for a in range(len(keys) - len(new) + 1):
        if keys[a:a + len(new)] != new:
            continue
        prev_shown = a > 0 and stretch[a - 1] == stretch[a]
        next_shown = a + len(new) < len(keys) and stretch[a + len(new)] == stretch[a + len(new) - 1]
        if prev_shown and next_shown:
            continue
        opens_kept_body = i2 < len(old) and _width(orig[at[i2]]) > _width(orig[at[i2 - 1]]) and not next_shown
        edits = _like_in_order(old[i1:i2], new, code_part)  # each line gone like a new one, in order
        if edits is not None and opens_kept_body:
            depth = _width(out_lines[j1 + edits[-1]])
            if any(_width(out_lines[j]) <= depth for j in range(j1 + edits[-1] + 1, j2)):
                edits = None  # the new line's body closes before the marker: a new block, not this one's header
        if edits is not None:
            return True
        # Or all together, a header joined onto one line or split over several; where the body it opens
        # follows, the new lines must not end by closing a block (`fi`, `}`).
        if _like(" ".join(old[i1:i2]), " ".join(new), code_part) and not (opens_kept_body and _CLOSER.match(new[-1])):
            return True
    return False


# A word of an instruction that reads as a code name: `quoted`, called(), snake_case, camelCase, a.b, or CAPS.
_MENTIONED = re.compile(r"`([^`\s]+)`|([A-Za-z_][\w.]*)")
_CODE_SHAPED = re.compile(r"[_.]|[a-z][A-Z]|^[A-Z0-9]{2,}$")


def _mentioned_names(instruction: str) -> set[str]:
    names = set()
    for m in _MENTIONED.finditer(instruction):
        word = (m[1] or m[2]).strip("().,:;")
        if m[1] or _CODE_SHAPED.search(word) or instruction[m.end():m.end() + 1] == "(":
            names.add(word)
    return {name for name in names if len(name) >= 2}


def _removed_and_shown_whole(original, update, orig, snippet, notes, language, instruction
                             ) -> tuple[set[int], set[int]]:
    """Rules 3 and 4: the original line numbers the instruction or a note removes, and those inside a
    definition the snippet shows whole. Both only for names the original defines once: which of two
    definitions the snippet means is what a placement decides, and this reading does not place."""
    in_original = definitions(original, language) if language else []
    count = Counter(d.name for d in in_original)
    names = {name for name in names_to_remove(instruction, update, language, original) | noted_names(notes)
             if count[name] <= 1}
    removed = {n for n, gone in enumerate(_removed_lines(orig, names, in_original, language)) if gone}
    whole: set[int] = set()
    if not language:
        return removed, whole
    update_lines = update.split("\n")
    markers = sorted(snippet.markers)
    top_level = [n for n in markers if not update_lines[n][:1].isspace()]
    shown = {d.name for d in snippet_definitions(update, language, top_level)
             if shown_whole_beyond_doubt(d, update_lines, markers)}
    for d in in_original:
        if d.name in shown and count[d.name] == 1:
            whole.update(range(d.start_line, d.end_line + 1))
    return removed, whole


def shown_whole_beyond_doubt(d: Definition, lines: list[str], markers: list[int]) -> bool:
    """Whether the snippet (`lines`, its marker lines `markers`) shows definition `d` whole beyond doubt:
    complete, with a body, and no marker from its first line to the first non-blank line after its last,
    at whatever depth (that marker may stand for more of its body). The merge reads some of those
    layouts as whole (`pairs._shown_whole`); a check must not hold a result to a reading the evidence
    leaves open, or both ways of it fail."""
    after = next((k for k in range(d.end_line + 1, len(lines)) if lines[k].strip()), len(lines))
    return d.complete and d.end_line > d.name_line and not any(d.start_line <= m <= after for m in markers)

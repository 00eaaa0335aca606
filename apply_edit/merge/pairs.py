"""Definitions paired between the snippet and the original (tree-sitter, `definitions.py`).

Hands the alignment `pairs`, (first, last snippet code line, first, last original line, whole) for the
snippet's definitions with one namesake in the original, which fix where those lines go; `apart`, per
line of a new definition the original lines it may not match or edit; and, in a snippet without
markers, a marker's gap between two definitions shown whole (`_keep_between_whole_definitions`):

- a definition (function, method, class, type, impl) that the snippet shows whole, with no marker inside,
  replaces the original's definition of the same kind and name from its first line to its last; one
  with no namesake there is new code, whose lines match none of the original's definitions of its kind
  (which it resembles: a similar header, the same locking lines), unless it renames one (most of both
  bodies are the same lines);
- one that the snippet's context places beside its namesake (a line the original has once, shown after
  it but found before the namesake) is another definition of that name, a new overload: new code too.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..code.definitions import Definition, header_line
from .anchors import _closes, _opens, _trivial
from .snippet import _leaves_block, _Snippet, _width

def _keep_between_whole_definitions(snippet: _Snippet, pairs, orig: list[str], comment) -> None:
    """In a snippet without markers, two definitions shown whole one after the other (blank and comment
    lines between) replace two original ones that code separates: "these two functions, changed". That
    code is left where it is, as if a marker stood between them (with markers elsewhere, a snippet that
    shows two definitions side by side shows the code between them deleted)."""
    if snippet.markers:
        return
    whole = sorted((a, b, start, end) for a, b, start, end, is_whole in pairs if is_whole)
    for (a1, b1, _, e1), (a2, _, s2, _) in zip(whole, whole[1:]):
        between = range(b1 + 1, a2)
        if b1 < a2 and e1 + 1 < s2 and all(not (key := snippet.lines[i].strip()) or comment(key) for i in between) \
                and any(line.strip() for line in orig[e1 + 1:s2]) \
                and all(snippet.reach[g] is None for g in range(b1 + 1, a2 + 1)):
            snippet.reach[b1 + 1] = min(_width(snippet.lines[a1]), _width(snippet.lines[a2]))


def _shown_whole(d: Definition, snippet: _Snippet, in_snippet: list[Definition]) -> bool:
    """Whether the snippet shows definition d whole: it parses, no marker inside it or right after it
    (that may be the rest of its body). Nor, where no closing line (`}`, `end`) ends the body, a marker
    after blank lines that is less indented than the header: a flush-left marker, as agents type them,
    stands for lines at any depth, the rest of this body among them (one at the header's depth is the
    next sibling's place, in the file's own layout). Nor where the definition ends with one inside it
    (its last method) that is not shown whole: the marker that may hold the rest of that one's body may
    hold the rest of this one's. Nor where its last line opens a body the snippet does not show (`if x:`
    before a marker, however shallow the marker: it holds that body)."""
    if any(d.name_line < e.name_line and e.end_line == d.end_line
           and not _shown_whole(e, snippet, in_snippet) for e in in_snippet):
        return False
    shown = dict(zip(snippet.number, snippet.lines))
    if _opens(shown.get(d.end_line, "").strip()):
        return False
    after = d.end_line + 1
    header = _width(shown.get(d.name_line, ""))
    if not _closes(shown.get(d.end_line, "").strip()):
        while after in shown and not shown[after].strip():
            after += 1
        gap = sum(n < after for n in snippet.number)  # the gap the marker sits in
        if after in snippet.markers and snippet.reach[gap] is not None and snippet.reach[gap] >= header:
            after = d.end_line + 1
    return d.complete and not any(d.start_line <= m <= after for m in snippet.markers)


# A function definition's kind where the same code inside a class is a method of another kind (PHP).
_METHOD_OF = {"function_definition": "method_declaration"}


def _pairs(snippet: _Snippet, in_snippet: list[Definition], in_original: list[Definition],
           beside: set[Definition], orig: list[str]) -> list[tuple[int, int, int, int, bool]]:
    """(first, last snippet code line, first, last original line, whole) for the snippet's definitions
    that have exactly one namesake of their kind in the original and in the snippet: those shown whole
    (no marker inside: `whole`), and those shown with markers inside but with their closing line
    (`}`, `end`), whose first and last lines are the original's first and last. Not those `beside` their
    namesake (`_beside_namesakes`)."""
    if not in_snippet:
        return []
    names = Counter((d.kind, d.name) for d in in_original)
    shown_names = Counter((d.kind, d.name) for d in in_snippet)
    by_name: dict[tuple[str, str], list[Definition]] = {}
    for o in in_original:
        by_name.setdefault((o.kind, o.name), []).append(o)
    index = {n: i for i, n in enumerate(snippet.number)}
    whole_spans: list[tuple[int, int]] = []
    pairs = []
    for d in in_snippet:  # outer definitions come before the ones inside them
        key = (d.kind, d.name)
        if not names[key] and names[(_METHOD_OF.get(d.kind), d.name)]:
            key = (_METHOD_OF[d.kind], d.name)  # a method shown without its class parses as a function
        if not names[key] or shown_names[d.kind, d.name] != 1 or d.start_line not in index or d.end_line not in index:
            continue
        if any(a <= d.start_line and d.end_line <= b for a, b in whole_spans):
            continue  # inside a definition shown whole: it goes with it
        if (o := _namesake(d, by_name[key], in_snippet, by_name)) is None:
            continue
        # Without decorators of its own, the snippet's definition leaves the original's in place.
        start = o.start_line if d.name_line > d.start_line else header_line(o, snippet.lines[index[d.name_line]], orig)
        whole = _shown_whole(d, snippet, in_snippet)
        if whole and d.end_line == d.name_line and o.end_line > o.name_line:
            continue  # a body-less line (Go's `func f()` before a `{` the parser lost) is no whole body
        last = snippet.lines[index[d.end_line]]
        closed = (d.name_line in index and d.end_line > d.name_line and _trivial(last.strip())
                  and _width(last) <= _width(snippet.lines[index[d.name_line]])  # `}` or `end` closes it
                  and _indented_inside(snippet.lines[index[d.name_line]:index[d.end_line] + 1])
                  and not _leaves_block(snippet, index[d.name_line], index[d.end_line]))
        if closed and not whole and _marker_keeps_nothing(snippet, index[d.name_line], index[d.end_line], o, orig):
            continue  # its closing line closes a later block
        if not (whole or closed) or d in beside:
            continue
        if whole:
            whole_spans.append((d.start_line, d.end_line))
        pairs.append((index[d.start_line], index[d.end_line], start, o.end_line, whole))
    pairs.sort()
    kept, last = [], (-1, -1)
    for p in pairs:  # nested or in order on both sides
        if all(p[2] > q[3] or (q[0] <= p[0] and p[1] <= q[1] and q[2] <= p[2] and p[3] <= q[3]) for q in kept):
            kept.append(p)
    return kept


def _namesake(d: Definition, namesakes: list[Definition], in_snippet: list[Definition],
              by_name: dict[tuple[str, str], list[Definition]]) -> Definition | None:
    """The original definition that the snippet's `d` stands for: its one namesake, or, where the file
    has several (`__init__`, `constructor`, `toString` in each class), the one inside the definition the
    snippet shows `d` in (its innermost enclosing one, itself found once in the file)."""
    if len(namesakes) == 1:
        return namesakes[0]
    enclosing = [e for e in in_snippet if e is not d and e.start_line <= d.start_line and d.end_line <= e.end_line]
    if not enclosing or len(outer := by_name.get((enclosing[-1].kind, enclosing[-1].name), [])) != 1:
        return None
    inside = [o for o in namesakes if outer[0].start_line <= o.start_line and o.end_line <= outer[0].end_line]
    return inside[0] if len(inside) == 1 else None


def _marker_keeps_nothing(snippet: _Snippet, first: int, last: int, o: Definition, orig: list[str]) -> bool:
    """Whether the last marker between snippet lines `first` (a definition's header) and `last` (its
    closing line) follows the last line of the original definition's body: a marker stands for some
    code, so it stands for more than this body (the definitions after it), and the closing line shown
    after it closes a later one."""
    gaps = [g for g in range(first + 1, last + 1) if snippet.reach[g] is not None]
    shown = max((i for i in range(first, gaps[-1]) if snippet.lines[i].strip()), default=None) if gaps else None
    body_end = max((j for j in range(o.name_line + 1, o.end_line) if orig[j].strip()), default=None)
    return shown is not None and shown > first and body_end is not None \
        and snippet.lines[shown].strip() == orig[body_end].strip()


def _beside_namesakes(snippet: _Snippet, in_snippet: list[Definition], in_original: list[Definition],
                      orig: list[str], counts: Counter) -> set[Definition]:
    """The snippet's definitions that their context places beside each of their namesakes, not over one.
    The context is the lines between the definition and the edge of its hunk, where all of them are the
    original's own lines: one the original has once, shown after the definition, is found before the
    namesake (or one shown before it, after). The namesake stays where that context has it; the
    snippet's definition is another (a new overload), new code."""
    once = {key: j for j, line in enumerate(orig) if counts[key := line.strip()] == 1 and not _trivial(key)}
    found_at = [once.get(line.strip()) for line in snippet.lines]
    index = {n: i for i, n in enumerate(snippet.number)}
    by_name: dict[str, list[Definition]] = {}
    for o in in_original:
        by_name.setdefault(o.name, []).append(o)

    def context(lines: list[int]) -> list[int]:  # where the original has those lines found once in it
        if any((key := snippet.lines[i].strip()) and key not in counts for i in lines):
            return []
        return [found_at[i] for i in lines if found_at[i] is not None]

    beside = set()
    for d in in_snippet:
        if d.start_line not in index or d.end_line not in index:
            continue
        first, last = index[d.start_line], index[d.end_line]
        # The context it sits next to: the lines between it and the edge of its hunk, all the original's own.
        above = context([i for i in range(first) if snippet.hunk_of[i] == snippet.hunk_of[first]])
        below = context([i for i in range(last + 1, len(snippet.lines)) if snippet.hunk_of[i] == snippet.hunk_of[last]])
        namesakes = by_name.get(d.name, [])
        if namesakes and all(any(j > o.end_line for j in above) or any(j < o.start_line for j in below)
                             for o in namesakes):
            beside.add(d)
    return beside


def _apart(snippet: _Snippet, in_snippet: list[Definition], in_original: list[Definition],
           orig: list[str], counts: Counter, beside: set[Definition]) -> dict[int, np.ndarray]:
    """Per line of a definition the snippet shows whole with no namesake in the original (new code):
    the original lines it may not match or edit, those of the original's definitions of its kind. A new
    definition looks like its neighbours (`def peek(self, key, default=None)` beside `def setdefault(self,
    key, default=None)`, `v.mu.RLock()` in every method); it is an edit of one of them only where it
    renames it: most of its body and most of that one's are the same lines found once in the original
    (lines every method has say nothing)."""
    index = {n: i for i, n in enumerate(snippet.number)}
    names = {(d.kind, d.name) for d in in_original}
    found: dict[int, np.ndarray] = {}
    old_bodies: dict[Definition, set[str]] = {}
    for d in in_snippet:
        if ((d.kind, d.name) in names and d not in beside) or d.name_line not in index \
                or not _shown_whole(d, snippet, in_snippet):
            continue
        lines = [index[n] for n in range(d.name_line, d.end_line + 1) if n in index]
        body = {key for i in lines[1:] if not _trivial(key := snippet.lines[i].strip())}
        others = np.zeros(len(orig), dtype=bool)
        for o in (o for o in in_original if o.kind == d.kind):
            if o not in old_bodies:
                old_bodies[o] = {key for j in range(o.name_line + 1, o.end_line + 1)
                                 if not _trivial(key := orig[j].strip())}
            shared = len({key for key in body & old_bodies[o] if counts[key] == 1})
            if shared * 2 <= max(len(body), len(old_bodies[o])):
                others[o.name_line:o.end_line + 1] = True
        if others.any():
            found.update((i, others) for i in lines)
    return found


def _indented_inside(lines: list[str]) -> bool:
    """Whether the lines between a definition's first and last stay deeper than its first; a line at its
    depth may only continue it (`{` on a line of its own, `) error {`). Where a marker hides a closing
    line, tree-sitter's error recovery can stretch a definition over the next ones; its indentation
    still says where it ends."""
    width = _width(lines[0])
    # A header may go on at its own depth until a line there opens the body (C's return type on a line of
    # its own, then `name(args)`, then `{`).
    opened = next((k for k, line in enumerate(lines[:-1]) if _width(line) == width and line.rstrip().endswith("{")), 0)
    return all(not line.strip() or _width(line) > width
               or (_width(line) == width and line.strip()[0] in "{)]}" and not _closes(line.strip()))
               for line in lines[opened + 1:-1])

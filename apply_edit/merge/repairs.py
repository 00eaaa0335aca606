"""Repairs of one alignment: op rewrites that the alignment's scores, line by line, cannot see.

Each takes the alignment's ops and hands back ops (or what to align again with):

- the unmatched head (tail) of a snippet without a leading (trailing) marker rewrites the file's head
  (tail) of about its size (`_head_tail_rewrites`, applied to every alignment);
- an edit that is a new neighbour of the line it edits, not a new version of it, is kept apart from
  that line in the next alignment (`_dangling_edits`), and so is the closing line of a new definition
  from the original's closing lines (`_new_block_closers`: a new function's `}` is not its class's), and
  so is a header whose block the snippet closes from one whose body the alignment keeps after it
  (`_closed_block_edits`: a new `if ... fi` is not an edit of the `if` whose body follows);
- a definition's header (`def build(`, `function build(`) replaces the header of the definition it
  names where the file has one, with all the lines up to where that header's parameters close
  (`_rewritten_headers`);
- new code that opens a hunk, with a blank line after it, placed where the original separates two lines
  with a blank line, goes after that blank, not before it (`_blank_before_new_code`: the new code is
  set apart from both neighbours as they were from each other), and new code right before a marker,
  placed after such a blank, goes before it (`_blank_after_new_code`);
- a statement a marker keeps the head of (its lines stop inside the statement's brackets), followed by a new
  line that reads as the statement joined on one line, is rewritten by that line (`_cut_statements`);
- a comment block the snippet shows attached to a line (no blank between), right after a marker, is that
  line's comment: the original's attached comment block, which the marker would keep, goes
  (`_replaced_attached_comments`: a rewritten doc comment is not written beside the old one).
"""

from __future__ import annotations

import re
from collections import Counter

from .anchors import _CLOSER, _comment_block_top, _similar, _trivial
from .snippet import _Snippet, _width

_LONG_NAME = re.compile(r"[A-Za-z_]\w{5,}")
_DECLARED_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w{5,}(?!\w|\s*\()")  # not a member, not a call


def _new_block_closers(ops: list[tuple], snippet_ends: dict[int, int], new_definitions: set[int]
                       ) -> list[tuple[int, int]]:
    """(snippet line, original line) where a new definition (a name the original does not define, opened on
    snippet line in `new_definitions`) written as new closes on a matched original line: the original has
    no such block, so that closing line closes another one (the enclosing class's `}`, taken for a new
    function's, leaves the class unclosed)."""
    at = {op[1]: op for op in ops if op[0] in ("ins", "match", "edit")}
    return [(closer, at[closer][2]) for opener, closer in snippet_ends.items()
            if opener in new_definitions and at.get(opener, ("",))[0] == "ins"
            and at.get(closer, ("",))[0] == "match"]


def _closed_block_edits(ops: list[tuple], snippet: _Snippet, orig: list[str]) -> list[tuple[int, int]]:
    """Edits (snippet line, original line) where the snippet line opens a block it closes before the next
    marker (deeper lines after it, then a closing line as shallow as it, in its hunk: `}`, `fi`, `end`),
    and the original line opens a body (the next line is deeper) that the alignment keeps: the original's
    block goes on, headless, after a block that only looks like it."""
    kept = {op[1] for op in ops if op[0] == "keep"}
    found = []
    for op in ops:
        if op[0] != "edit":
            continue
        i, j = op[1], op[2]
        body = next((k for k in range(j + 1, len(orig)) if orig[k].strip()), None)
        if body is None or body not in kept or _width(orig[body]) <= _width(orig[j]):
            continue
        width, deeper = _width(snippet.lines[i]), False
        for t in range(i + 1, len(snippet.lines)):
            if snippet.hunk_of[t] != snippet.hunk_of[i]:
                break
            if snippet.lines[t].strip():
                if _width(snippet.lines[t]) > width:
                    deeper = True
                else:
                    if deeper and _CLOSER.match(snippet.lines[t].strip()):
                        found.append((i, j))
                    break
    return found


def _dangling_edits(ops: list[tuple], snippet: _Snippet, orig: list[str]) -> list[tuple[int, int]]:
    """Edits (snippet line, original line) that bring a new name and take away one the original line
    introduces (its first line: where it is declared, in most languages; not a call or a member) that the
    snippet never shows, while lines the alignment keeps still use it: not an edit of that declaration
    but a new neighbour that looks like it (a new `PyDoc_STRVAR(x_doc, ...)` over the old one, whose name
    the method table still uses). A rename changes the uses too."""
    first: dict[str, int] = {}
    for j, line in enumerate(orig):
        for name in _LONG_NAME.findall(line):
            first.setdefault(name, j)
    kept = [orig[op[1]] for op in ops if op[0] == "keep"] + [orig[op[2]] for op in ops if op[0] == "match"]
    used = {name for line in kept for name in _LONG_NAME.findall(line)}
    shown = {name for line in snippet.lines for name in _LONG_NAME.findall(line)}
    return [(op[1], op[2]) for op in ops if op[0] == "edit"
            and any(name not in first for name in _DECLARED_NAME.findall(snippet.lines[op[1]]))
            and any(first[name] == op[2] and name in used
                    for name in set(_DECLARED_NAME.findall(orig[op[2]])) - shown)]


def _head_tail_rewrites(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter) -> list[tuple]:
    """A snippet without a leading (trailing) marker whose unmatched head (tail) is followed (preceded)
    by a match of a line found once in the original, blank lines between, rewrites the original's head
    (tail) when that has no more code lines than the snippet's plus one."""
    def anchors(op: tuple) -> bool:  # only a match or an edit has an original line (op[2])
        return op[0] in ("match", "edit") and not _trivial(key := orig[op[2]].strip()) and counts[key] == 1

    def blank_match(op: tuple) -> bool:
        return op[0] == "match" and not orig[op[2]].strip()

    def rewrite(seq: list[tuple]) -> list[tuple]:
        kept = next((n for n, op in enumerate(seq) if op[0] != "keep"), len(seq))
        end = next((n for n in range(kept, len(seq)) if seq[n][0] != "ins"), len(seq))
        anchor = next((n for n in range(end, len(seq)) if not blank_match(seq[n])), len(seq))
        old = sum(1 for op in seq[:kept] if orig[op[1]].strip())  # the lengths in code lines, blanks aside
        new = sum(1 for op in seq[kept:end] if snippet.lines[op[1]].strip())
        if 0 < kept and old <= new + 1 and kept < end <= anchor < len(seq) and anchors(seq[anchor]):
            return [("del", op[1]) for op in seq[:kept]] + seq[kept:]
        return seq

    if snippet.reach[0] is None:
        ops = rewrite(ops)
    if snippet.reach[-1] is None:
        ops = rewrite(ops[::-1])[::-1]
    return ops


def _rewritten_headers(ops: list[tuple], snippet: _Snippet, orig: list[str], header_end: list[int],
                       code) -> list[tuple]:
    """A header the snippet writes on one line that edits the first line of one the original spreads over
    several: the header's other lines go with it, rather than stay under the marker that keeps its body.
    Where its parameters go on (`def build(name,` / `path):`), up to where they close; where it opens the
    body the original opens further down (`: usage_(0) {` over `: usage_(0),` / `last_id_(0) {`, a
    constructor's initializer list), its deeper lines up to that one. And where the alignment wrote the
    snippet's next lines as new because those lines stood in the way (`from typing import (` / `Any,` /
    `)` made one line, then `if TYPE_CHECKING:` shown as context), the lines after the header's that they
    are, kept for a marker, are those lines matched."""
    gone: set[int] = set()
    for op in ops:
        if op[0] != "edit":
            continue
        j, text = op[2], code(snippet.lines[op[1]])
        if sum(map(text.count, "([")) != sum(map(text.count, ")]")):
            continue
        if header_end[j] > j:
            gone.update(range(j + 1, header_end[j] + 1))
        elif text.endswith("{") and not code(orig[j]).endswith("{"):
            end = next((k for k in range(j + 1, len(orig)) if not orig[k].strip() or _width(orig[k]) <= _width(orig[j])
                        or code(orig[k]).endswith("{")), None)
            if end is not None and orig[end].strip() and _width(orig[end]) > _width(orig[j]) \
                    and code(orig[end]).endswith("{"):
                gone.update(range(j + 1, end + 1))
    return _shown_after_headers([("del", op[1]) if op[0] == "keep" and op[1] in gone else op for op in ops],
                                snippet, orig, gone)


def _shown_after_headers(ops: list[tuple], snippet: _Snippet, orig: list[str], gone: set[int]) -> list[tuple]:
    """New lines right after an edit whose header's rest went (`gone`), that are one for one the original
    lines kept right after that rest: matched to them."""
    n = 0
    while n < len(ops):
        if ops[n][0] != "edit" or ops[n][2] + 1 not in gone:
            n += 1
            continue
        k = n + 1
        while k < len(ops) and ops[k][0] == "ins":
            k += 1
        d = k
        while d < len(ops) and ops[d][0] == "del" and ops[d][1] in gone:
            d += 1
        new, kept = ops[n + 1:k], ops[d:d + k - n - 1]
        if new and len(kept) == len(new) and all(
                b[0] == "keep" and snippet.lines[a[1]].rstrip() == orig[b[1]].rstrip() for a, b in zip(new, kept)):
            ops[n + 1:d + len(kept)] = ops[k:d] + [("match", a[1], b[1]) for a, b in zip(new, kept)]
        n += 1
    return ops


def _cut_statements(ops: list[tuple], snippet: _Snippet, orig: list[str], header_end: list[int], code) -> list[tuple]:
    """A marker keeps whole statements. Where the lines it keeps stop inside brackets that a statement of
    the original opens (`} else if (` / `a &&` / `b` kept, its `) {` deleted) and the snippet's next line
    is new, that line rewrites the statement on one line (`} else if (a) {`): it edits the statement's first
    line and the statement's other lines go, instead of the head staying beside its new version. Only
    where the new line reads as the statement with its lines joined (`anchors._similar`), and the lines
    that close the statement are deleted as it is."""
    ops, n = list(ops), 0
    while (n := n + 1) < len(ops):
        if ops[n][0] != "ins" or ops[n - 1][0] != "keep":
            continue
        i, k = ops[n][1], ops[n - 1][1]
        first = n - 1  # the kept run before the new line: ops[first:n]
        while first > 0 and ops[first - 1][0] == "keep" and ops[first - 1][1] == ops[first][1] - 1:
            first -= 1
        start = next((m for m in range(first, n) if header_end[ops[m][1]] > k), None)
        if start is None:
            continue
        j = ops[start][1]
        end = header_end[j]
        closing = [op for op in ops[n + 1:n + 1 + end - k] if op[0] == "del"]
        if [op[1] for op in closing] != list(range(k + 1, end + 1)):
            continue
        joined = " ".join(code(line).strip() for line in orig[j:end + 1])
        joined = re.sub(r"([(\[])\s+|\s+(?=[)\]])", r"\1", joined)
        if not _similar(code(snippet.lines[i]).strip(), joined):
            continue
        ops[start:n + 1] = [("edit", i, j)] + [("del", g) for g in range(j + 1, k + 1)]
    return ops


def _replaced_attached_comments(ops: list[tuple], snippet: _Snippet, orig: list[str], comment) -> list[tuple]:
    """The ops with the original comment block attached to a matched line deleted where the snippet shows
    a new comment block attached to that line and a marker (then only blank lines) before it: the marker
    keeps what comes before the line's comment, not the comment the snippet rewrites. Only where every old
    line kept there is a comment and the whole old block is kept (none of it shown)."""
    lines, ops = snippet.lines, list(ops)
    for n, op in enumerate(ops):
        if op[0] != "match" or not op[2] or not comment(orig[op[2] - 1].strip()):
            continue
        b = n - 1
        while b >= 0 and ops[b][0] == "ins" and lines[ops[b][1]].strip() and comment(lines[ops[b][1]].strip()):
            b -= 1
        if b == n - 1:
            continue
        first = ops[b + 1][1]  # the new block's first line: a marker before it, past blank lines
        g = first
        while g > 0 and snippet.reach[g] is None and not lines[g - 1].strip():
            g -= 1
        if snippet.reach[g] is None:
            continue
        while b >= 0 and ops[b][0] == "ins" and not lines[ops[b][1]].strip():
            b -= 1
        top = _comment_block_top(op[2], orig, comment)  # the old block: the comment lines right above the matched line
        kept = []
        while b >= 0 and ops[b][0] == "keep" and top <= ops[b][1] < op[2]:
            kept.append(b)
            b -= 1
        if len(kept) == op[2] - top:
            for k in kept:
                ops[k] = ("del", ops[k][1])
    return ops


def _blank_before_new_code(ops: list[tuple], snippet: _Snippet, orig: list[str]) -> list[tuple]:
    """The ops with new code moved past the original blank line it was placed before: where a run of new
    lines (code first and last) that opens the snippet or a hunk follows original line j (kept, not shown)
    and the snippet's blank line after the run is matched to the blank line j + 1, j + 1 is kept before
    the run and the snippet's blank is written after it. Matching the blank was cheaper than writing it,
    but left the new code glued to line j."""
    lines, ops = snippet.lines, list(ops)
    n = 1
    while n < len(ops):
        i = ops[n][1] if ops[n][0] == "ins" else None
        # New code that starts the snippet or a hunk (nothing shown before it), after a kept line.
        if i is None or not lines[i].strip() or ops[n - 1][0] != "keep" or any(
                lines[t].strip() and snippet.hunk_of[t] == snippet.hunk_of[i] for t in range(i)):
            n += 1
            continue
        j = ops[n - 1][1]
        k = n
        while k < len(ops) and ops[k][0] == "ins" and lines[ops[k][1]].strip():
            k += 1
        if (k + 1 < len(ops) and ops[k][0] == "match" and orig[j].strip() and j + 1 < len(orig)
                and ops[k][2] == j + 1 and not orig[j + 1].strip() and ops[k + 1][0] in ("match", "edit")
                and orig[ops[k + 1][2]].strip() and ops[k + 1][2] == j + 2):
            ops[n:k + 1] = [("keep", j + 1, False), *ops[n:k], ("ins", ops[k][1])]
        n = k + 1
    return ops


def _blank_after_new_code(ops: list[tuple], snippet: _Snippet, orig: list[str]) -> list[tuple]:
    """The mirror of `_blank_before_new_code`: where a run of new lines (code first and last) right
    before a marker goes before original line j (kept for the marker), and the snippet's blank line
    before the run is matched to the blank line j - 1, which follows code the snippet shows (or new code;
    blank lines between deleted), the snippet's blank is written before the run and the original's blank
    lines there are kept after it: the new code is set apart from both its neighbours, as they were from
    each other, where matching the blank left it glued to line j (and deleted the rest of the run: the two
    blank lines between two classes, where a new method ends the first)."""
    lines, ops = snippet.lines, list(ops)
    n = 2
    while n < len(ops):
        i = ops[n][1] if ops[n][0] == "ins" else None
        if i is None or not lines[i].strip() or ops[n - 1][0] != "match":
            n += 1
            continue
        k = n
        while k < len(ops) and ops[k][0] == "ins":
            k += 1
        last = ops[k - 1][1]
        blank, j = ops[n - 1][2], ops[k][1] if k < len(ops) and ops[k][0] == "keep" else None
        b = n - 2  # the op before the blank lines: those the alignment deleted, then the one it matched
        while b > 0 and ops[b][0] == "del" and ops[b][1] == blank - (n - 1 - b) and not orig[ops[b][1]].strip():
            b -= 1
        if (j is not None and lines[last].strip() and orig[j].strip() and blank == j - 1 and not orig[blank].strip()
                and not lines[ops[n - 1][1]].strip() and _written_code(ops[b], blank - (n - 1 - b), lines, orig)
                and snippet.reach[last + 1] is not None):  # a marker right after the run keeps line j
            ops[b + 1:k] = [("ins", ops[n - 1][1]), *ops[n:k],
                            *(("keep", ops[t][1], False) for t in range(b + 1, n - 1)), ("keep", blank, False)]
        n = k + 1
    return ops


def _written_code(op: tuple, at: int, lines: list[str], orig: list[str]) -> bool:
    """Whether `op` writes a line of code: a new one, or original line `at` as shown or edited."""
    if op[0] == "ins":
        return bool(lines[op[1]].strip())
    return op[0] in ("match", "edit") and op[2] == at and bool(orig[at].strip())

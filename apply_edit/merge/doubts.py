"""What the final alignment leaves in doubt: places where the snippet allows another reading than the
one the merge took. Each doubt is a `Reading` for the report: a sentence, and the ops of the other reading;
a merge with any is not confident (the target model, or the user, decides there).

Takes the final ops; hands the report its readings:

- a new line right beside an original line that no snippet line showed (kept for a marker, or before
  the snippet's first line), where the two are about the same thing (an edited version: a shared start
  and end, or the same name declared, assigned or called): the new line may replace the old one rather
  than stand beside it;
- a run of original lines deleted between two snippet lines, more than `_LONG_DELETION` of them code:
  shown adjacent, the two lines delete it, but so long a deletion is more often a marker forgotten;
- a deleted line that opens a block (the next code line is deeper) whose next line stays: an edit
  rarely takes a header away and leaves its body, an alignment that lost its place often does;
- new lines, or a first (last) snippet line read as an edit, beside original lines kept before the
  snippet's first line (after its last), with no marker there: the snippet may rewrite the file's first
  (last) lines rather than add to them (`from . import a, b` for `from . import a` / `from . import b`);
- blank lines alone kept there: a snippet that shows the file's last line without them may have dropped
  them (an edit that takes the trailing blank line away reads the same as one that leaves it).
"""

from __future__ import annotations

from collections import Counter

from .anchors import _identity, _similar, _trivial
from .report import Reading
from .snippet import _Snippet, _width

_LONG_DELETION = 6


def _written(ops: list[tuple]) -> list[tuple[int, tuple]]:
    """The ops that write a line, in order, with their index in `ops`."""
    return [(n, op) for n, op in enumerate(ops) if op[0] != "del"]


def _neighbours(written: list[tuple[int, tuple]], k: int, text) -> list[tuple[int, tuple]]:
    """The nearest written op before and after written[k] whose line is not blank."""
    found = []
    for step in (-1, 1):
        n = k + step
        while 0 <= n < len(written) and not text(written[n][1]).strip():
            n += step
        if 0 <= n < len(written):
            found.append(written[n])
    return found


def doubts(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter, accounted: set[int],
           pairs: list[tuple] = ()) -> list[Reading]:
    """The readings the alignment `ops` chose among others (see the module's docstring), each with the
    ops of the other reading; `accounted`: original lines whose deletion a definition shown whole, or a
    name the edit removes, explains."""
    def text(op: tuple) -> str:
        return orig[op[1]] if op[0] == "keep" else snippet.lines[op[1]]

    found: list[Reading] = []
    written = _written(ops)
    for k, (_, op) in enumerate(written):
        if op[0] != "ins" or _trivial(line := snippet.lines[op[1]].strip()):
            continue
        shown_at = snippet.number[op[1]] + 1
        for n, other in _neighbours(written, k, text):
            if other[0] != "keep":
                continue
            old = orig[other[1]].strip()
            if not _trivial(old) and (
                    _similar(line, old) or (_identity(line) is not None and _identity(line) == _identity(old))):
                found.append(Reading("replace", f"snippet line {shown_at} may replace original line {other[1] + 1}, "
                                                "kept beside it", ((n, ("del", other[1])),)))
    deleted = {op[1]: n for n, op in enumerate(ops) if op[0] == "del"}
    for j in sorted(set(deleted) - accounted):
        below = next((k for k in range(j + 1, len(orig)) if orig[k].strip()), None)
        if below is not None and below not in deleted and _width(orig[below]) > _width(orig[j]) \
                and orig[j].strip() and not _trivial(orig[j].strip()):
            found.append(Reading("header", f"original line {j + 1} deleted, the block it opens kept",
                                 ((deleted[j], ("keep", j, False)),)))
    for end, order in (("first", range(len(ops))), ("last", range(len(ops) - 1, -1, -1))):
        gap = 0 if end == "first" else len(snippet.lines)
        # Before the snippet's first line (after its last), with no marker there: new lines (or the first
        # line shown, an edit), and original lines kept that no snippet line showed, one beside the other.
        seq = list(order)
        edge = next((k for k, n in enumerate(seq) if ops[n][0] in ("match", "edit")), len(seq))
        kept = [n for n in seq[:edge] if ops[n][0] == "keep" and orig[ops[n][1]].strip()]
        new = any(ops[n][0] == "ins" and snippet.lines[ops[n][1]].strip() for n in seq[:edge]) or (
            edge < len(seq) and ops[seq[edge]][0] == "edit")
        if snippet.reach[gap] is None and new and kept:
            # The other reading: the snippet's edge lines are the file's, with no marker beyond them: every
            # original line kept beyond the first (last) line the snippet shows goes, blank lines too.
            gone = sorted(n for n in seq[:edge] if ops[n][0] == "keep")
            found.append(Reading("edge", f"new lines beside the file's {end} lines, kept: they may replace them",
                                 tuple((n, ("del", ops[n][1])) for n in gone)))
        blanks = [n for n in seq[:edge] if ops[n][0] == "keep"]
        if snippet.reach[gap] is None and blanks and not kept and not new:
            found.append(Reading("blank", f"blank lines kept beyond the file's {end} code line, which the snippet "
                                          "shows with no marker beyond it: it may drop them",
                                 tuple((n, ("del", ops[n][1])) for n in blanks)))
    found += _deleted_beside_markers(ops, orig, accounted)
    found += _whole_up_to_a_marker(ops, snippet, orig, pairs)
    run: list[int] = []
    for n, op in enumerate(ops + [("end",)]):
        if op[0] == "del" and op[1] not in accounted:
            run.append(n)
            continue
        if op[0] == "keep" and not orig[op[1]].strip():
            continue
        code = [m for m in run if orig[ops[m][1]].strip()]
        if len(code) > _LONG_DELETION:
            found.append(Reading("deletion", f"original lines {ops[run[0]][1] + 1}-{ops[run[-1]][1] + 1} deleted "
                                             "between two snippet lines",
                                 tuple((m, ("keep", ops[m][1], False)) for m in run)))
        run = []
    return found


def _deleted_beside_markers(ops: list[tuple], orig: list[str], accounted: set[int]) -> list[Reading]:
    """Runs of deleted lines between a line the snippet shows as it is and a line a marker keeps: nothing
    the snippet shows replaces them, and the marker beside them may stand for them."""
    found = []
    n = 0
    while n < len(ops):
        if ops[n][0] != "del" or ops[n][1] in accounted:
            n += 1
            continue
        end = n
        while end < len(ops) and ops[end][0] == "del" and ops[end][1] not in accounted:
            end += 1
        sides = []
        for step, at in ((-1, n - 1), (1, end)):
            while 0 <= at < len(ops) and ops[at][0] == "keep" and not orig[ops[at][1]].strip():
                at += step
            sides.append(ops[at][0] if 0 <= at < len(ops) else None)
        code = [m for m in range(n, end) if orig[ops[m][1]].strip()]
        if code and sorted(sides, key=str) in (["keep", "match"], ["edit", "keep"]):
            found.append(Reading("scope", f"original lines {ops[n][1] + 1}-{ops[end - 1][1] + 1} deleted beside a "
                                          "marker that may keep them", tuple((m, ("keep", ops[m][1], False))
                                                                            for m in range(n, end))))
        n = end
    return found


def _whole_up_to_a_marker(ops: list[tuple], snippet: _Snippet, orig: list[str], pairs) -> list[Reading]:
    """Definitions read as shown whole where a marker follows their last shown line (an indented body
    that a marker at the definition's own depth ends): the marker may stand for the rest of the body, so
    the original lines of the definition after its last shown one may stay."""
    found = []
    deleted = {op[1]: n for n, op in enumerate(ops) if op[0] == "del"}
    placed = {op[1]: op[2] for op in ops if op[0] in ("match", "edit")}
    for first, last, start, end, whole in pairs:
        gap = last + 1  # the marker may follow blank lines
        while snippet.reach[gap] is None and gap < len(snippet.lines) and not snippet.lines[gap].strip():
            gap += 1
        if not whole or snippet.reach[gap] is None:
            continue
        shown = [placed[i] for i in range(first, last + 1) if i in placed and start <= placed[i] <= end]
        texts = {snippet.lines[i].strip() for i in range(first, last + 1)}
        # Not the lines the snippet shows again (written as new where the alignment did not match them).
        tail = [j for j in range(max(shown, default=start) + 1, end + 1) if j in deleted
                and not (orig[j].strip() and orig[j].strip() in texts)]
        if any(orig[j].strip() for j in tail):
            found.append(Reading("scope", f"original lines {tail[0] + 1}-{tail[-1] + 1} deleted at the end of a "
                                          "definition a marker follows, which may keep them",
                                 tuple((deleted[j], ("keep", j, False)) for j in tail)))
    return found

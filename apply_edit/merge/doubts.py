"""What the final alignment leaves in doubt: places where the snippet allows another reading than the
one the merge took. Each doubt is a sentence for the report's `readings`; a merge with any is not
confident (the target model, or the user, decides there).

Takes the final ops; hands the report its readings:

- a new line right beside an original line that no snippet line showed (kept for a marker, or before
  the snippet's first line), where the two are about the same thing (an edited version: a shared start
  and end, or the same name declared, assigned or called): the new line may replace the old one rather
  than stand beside it;
- a run of original lines deleted between two snippet lines, more than `_LONG_DELETION` of them code:
  shown adjacent, the two lines delete it, but so long a deletion is more often a marker forgotten;
- a deleted line that opens a block (the next code line is deeper) whose next line stays: an edit
  rarely takes a header away and leaves its body, an alignment that lost its place often does;
- new lines beside original lines kept before the snippet's first line (after its last), with no
  marker there: the snippet may rewrite the file's first (last) lines rather than add to them.
"""

from __future__ import annotations

from collections import Counter

from .anchors import _identity, _similar, _trivial
from .snippet import _Snippet, _width

_LONG_DELETION = 6


def _written(ops: list[tuple]) -> list[tuple]:
    """The ops that write a line, in order."""
    return [op for op in ops if op[0] != "del"]


def _neighbours(written: list[tuple], k: int, text) -> list[tuple]:
    """The nearest written op before and after written[k] whose line is not blank."""
    found = []
    for step in (-1, 1):
        n = k + step
        while 0 <= n < len(written) and not text(written[n]).strip():
            n += step
        if 0 <= n < len(written):
            found.append(written[n])
    return found


def doubts(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter, accounted: set[int]
           ) -> list[str]:
    """The readings the alignment `ops` chose among others (see the module's docstring); `accounted`:
    original lines whose deletion a definition shown whole, or a name the edit removes, explains."""
    def text(op: tuple) -> str:
        return orig[op[1]] if op[0] == "keep" else snippet.lines[op[1]]

    found: list[str] = []
    written = _written(ops)
    for k, op in enumerate(written):
        if op[0] != "ins" or _trivial(line := snippet.lines[op[1]].strip()):
            continue
        shown_at = snippet.number[op[1]] + 1
        for other in _neighbours(written, k, text):
            if other[0] != "keep":
                continue
            old = orig[other[1]].strip()
            if not _trivial(old) and (
                    _similar(line, old) or (_identity(line) is not None and _identity(line) == _identity(old))):
                found.append(f"snippet line {shown_at} may replace original line {other[1] + 1}, kept beside it")
    deleted = {op[1] for op in ops if op[0] == "del"}
    for j in sorted(deleted - accounted):
        below = next((k for k in range(j + 1, len(orig)) if orig[k].strip()), None)
        if below is not None and below not in deleted and _width(orig[below]) > _width(orig[j]) \
                and orig[j].strip() and not _trivial(orig[j].strip()):
            found.append(f"original line {j + 1} deleted, the block it opens kept")
    for end, seq in (("first", ops), ("last", ops[::-1])):
        gap = 0 if end == "first" else len(snippet.lines)
        # Before the snippet's first line (after its last), with no marker there: new lines, and original
        # lines kept that no snippet line showed, one beside the other.
        edge = next((k for k, op in enumerate(seq) if op[0] in ("match", "edit")), len(seq))
        kinds = [op[0] for op in seq[:edge] if op[0] != "keep" or orig[op[1]].strip()]
        new = any(op[0] == "ins" and snippet.lines[op[1]].strip() for op in seq[:edge])
        if snippet.reach[gap] is None and new and "keep" in kinds:
            found.append(f"new lines beside the file's {end} lines, kept: they may replace them")
    run: list[int] = []
    for op in ops + [("end",)]:
        if op[0] == "del" and op[1] not in accounted:
            run.append(op[1])
            continue
        if op[0] == "keep" and not orig[op[1]].strip():
            continue
        code = [j for j in run if orig[j].strip()]
        if len(code) > _LONG_DELETION:
            found.append(f"original lines {run[0] + 1}-{run[-1] + 1} deleted between two snippet lines")
        run = []
    return found

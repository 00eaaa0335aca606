"""A deterministic merge of the original and the lazy snippet: the first thing the drafter copies from.

The snippet is split at its marker comments (`// ... existing code ...`) into hunks, and each hunk, in
order, is placed on the span of the original it fits best: a fitting alignment in which skipping
original lines before and after the span is free (the markers stand for them), a line equal to an
original line matches it, a line that looks like an edited version of one replaces it (a changed
signature, a renamed variable), and every other hunk line is new. Inside the span, original lines the
hunk leaves out are deleted. A hunk opens with context, so when its first line occurs in the original
the span starts at one of those occurrences.

The candidate only guides drafting: the target verifies every token, so a wrong merge costs speed, never
correctness. Where it is right, edited regions draft as well as untouched ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARKER = re.compile(r"^\s*(?:#|//|/\*|<!--|--|\{/\*)(?=.*(?:\.\.\.|…|existing code))", re.IGNORECASE)


def is_marker(line: str) -> bool:
    return bool(_MARKER.match(line))


def split_lines(text: str) -> list[str]:
    """Lines with their endings kept ('\\n' or '\\r\\n'); only '\\n' splits (unlike str.splitlines)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def code_lines(text: str) -> list[str]:
    """The non-blank lines, stripped: what line comparisons that ignore layout look at."""
    return [line.strip() for line in split_lines(text) if line.strip()]


@dataclass
class MergeCandidate:
    text: str
    origin: list[int | None]  # per candidate line: the original line it copies, or None for a new line
    original_lines: int

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


# Alignment scores. Deleting an original line costs more than inserting a new one: lazy snippets mostly
# add code, and a deletion must be shown by the snippet's context on both sides.
INSERT, DELETE, EDITED = 1, 1.2, 1
PINS = 8  # occurrences of a hunk's first line tried as its start


def _weight(line: str) -> float:
    """What matching this line is worth: little for blank lines and lone braces, which match anywhere."""
    return 2.0 if len(line.strip()) > 3 else 0.5


def _similar(a: str, b: str) -> bool:
    """Cheap test for "b is an edited version of a": most of the shorter line is a shared start and end
    (a changed argument, a renamed variable, a longer signature)."""
    a, b = a.strip(), b.strip()
    if not a or not b:
        return False
    shorter = min(len(a), len(b))
    start = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), shorter)
    end = next((i for i, (x, y) in enumerate(zip(reversed(a), reversed(b))) if x != y), shorter)
    common = min(start + end, shorter)
    return common >= 8 and common >= 0.7 * shorter


def _hunks(update_lines: list[str]) -> tuple[list[list[str]], bool]:
    """Runs of non-marker lines (blank lines at their ends dropped), and whether the snippet starts
    with a marker."""
    hunks, current = [], []
    for line in update_lines + ["// ...\n"]:  # a closing marker flushes the last hunk
        if is_marker(line):
            while current and not current[-1].strip():
                current.pop()
            if any(x.strip() for x in current):
                hunks.append(current)
            current = []
        else:
            current.append(line)
    content = [x for x in update_lines if x.strip()]
    return hunks, bool(content) and is_marker(content[0])


def _fit(hunk: list[str], original: list[str], cursor: int) -> tuple[float, int, int, list[int | None]] | None:
    """Place the hunk on the span of original[cursor:] it fits best.

    A hunk opens with context: the line right after the code its marker stands for. So when its first
    line occurs in the original, the span starts at one of those occurrences (the best-scoring of the
    first few, the earliest on a tie); otherwise anywhere. Returns (score, span start, span end, per hunk
    line the original line it copies or None for a new line), or None when nothing anchors the hunk.
    """
    h = [x.rstrip() for x in hunk]
    o = [x.rstrip() for x in original[cursor:]]
    pins = [j for j, line in enumerate(o) if line == h[0]][:PINS]
    if not pins:
        return _align(h, o, cursor, pinned=False)
    window = 4 * len(h) + 50  # a hunk replaces about its own length of original
    fits = [_align(h, o[j:j + window], cursor + j, pinned=True) for j in pins]
    fits = [f for f in fits if f is not None]
    return max(fits, key=lambda f: (f[0], -f[1])) if fits else None


def _align(h: list[str], o: list[str], offset: int, pinned: bool) -> tuple[float, int, int, list[int | None]] | None:
    """Fitting alignment of hunk lines h to original lines o (skipping lines of o before and after the
    span is free unless pinned, where the span starts at o[0]; inside it, unmatched lines cost)."""
    m, n = len(h), len(o)
    NEG = float("-inf")
    score = [[0.0] + [NEG if pinned else 0.0] * n] + [[NEG] * (n + 1) for _ in range(m)]
    move = [[0] * (n + 1) for _ in range(m + 1)]  # 1 diagonal, 2 hunk line inserted, 3 original line deleted
    for i in range(1, m + 1):
        row, prev, mv = score[i], score[i - 1], move[i]
        row[0], mv[0] = prev[0] - INSERT, 2
        hi, wi = h[i - 1], _weight(h[i - 1])
        for j in range(1, n + 1):
            best, how = prev[j] - INSERT, 2
            if row[j - 1] - DELETE > best:
                best, how = row[j - 1] - DELETE, 3
            oj = o[j - 1]
            if hi == oj:
                diag = prev[j - 1] + wi
            elif _similar(hi, oj):
                diag = prev[j - 1] + EDITED
            else:
                diag = NEG
            if diag >= best:
                best, how = diag, 1
            row[j], mv[j] = best, how
    end = max(range(n + 1), key=lambda j: (score[m][j], -j))
    if score[m][end] <= -INSERT * m:  # no better than all new lines: nothing anchors the hunk
        return None
    mapping: list[int | None] = []
    i, j = m, end
    while i > 0:
        how = move[i][j]
        if how == 1:
            mapping.append(offset + j - 1 if h[i - 1] == o[j - 1] else None)
            i, j = i - 1, j - 1
        elif how == 2:
            mapping.append(None)
            i -= 1
        else:
            j -= 1
    return score[m][end], offset + j, offset + end, mapping[::-1]


def merge(original: str, update: str) -> MergeCandidate:
    orig = split_lines(original)
    newline = "\r\n" if original.count("\r\n") * 2 > original.count("\n") else "\n"
    # Every snippet line ends like the original's lines, so none is glued to the next.
    update_lines = [line if line.endswith("\n") else line + newline for line in split_lines(update)]
    hunks, starts_with_marker = _hunks(update_lines)
    out: list[tuple[str, int | None]] = []
    cursor = 0

    def keep_until(end: int) -> None:
        nonlocal cursor
        out.extend((orig[i], i) for i in range(cursor, end))
        cursor = max(cursor, end)

    for n, hunk in enumerate(hunks):
        blank_head = next(i for i, line in enumerate(hunk) if line.strip())
        fit = _fit(hunk[blank_head:], orig, cursor)
        if fit is None:
            # Nothing to anchor on: new code. After the last marker it goes at the end of the file.
            if n == len(hunks) - 1 and (n > 0 or starts_with_marker):
                keep_until(len(orig))
            out.extend((line, None) for line in hunk)
            continue
        _, span_start, span_end, lines = fit
        keep_until(span_start)
        out.extend((orig[o], o) if o is not None else (line, None) for line, o in zip(hunk[blank_head:], lines))
        cursor = span_end
    keep_until(len(orig))
    # The original's last line may lack a newline and still land mid-candidate.
    text = "".join(line if line.endswith("\n") else line + newline for line, _ in out[:-1])
    text += out[-1][0] if out else ""
    if text and not original.endswith("\n") and out[-1][1] is None:
        text = text.rstrip("\r\n")  # the snippet wrote the last line: end it like the original
    elif original.endswith("\n") and text and not text.endswith("\n"):
        text += newline
    return MergeCandidate(text, [o for _, o in out], len(orig))

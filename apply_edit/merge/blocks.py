"""Where blocks open and close: brackets counted in code (not in strings or comments), and indentation
where a marker hides closing lines.

Hands the merge, per original line, where the brackets it opens close (`_bracket_ends`: a header's
parameters, a block registered under a name), and per line that opens a block, on either side, the line
that closes it (`_block_ends`, `_indented_block_ends`), which the closing twins (`twins.py`) compare.
"""

from __future__ import annotations

from .anchors import _closes
from .snippet import _width

def _block_ends(lines: list[str], code_of) -> dict[int, int]:
    """Per line that opens a bracketed block (its code ends with `{`, `(` or `[`): the line that closes
    it. Brackets in strings and trailing comments do not count; `} else {` closes one block, opens one."""
    ends: dict[int, int] = {}
    stack: list[tuple[int, int]] = []  # (opening line, depth inside its block)
    depth = 0
    for n, line in enumerate(lines):
        code = code_of(line)
        low = depth
        for ch in code:
            depth += 1 if ch in "{([" else -1 if ch in "})]" else 0
            low = min(low, depth)
        while stack and stack[-1][1] > low:
            ends[stack.pop()[0]] = n
        if code and code[-1] in "{([" and depth > low:
            stack.append((n, depth))
    return ends


def _indented_block_ends(lines: list[str], code_of) -> dict[int, int]:
    """Per closing line (`}`, `)`, `]`): the line that opened its block by indentation, the nearest line
    before it at its depth when every line between is deeper and it ends with an opening bracket. Where a
    marker hides closers (`if (x) {` / marker / `}` closing the function), brackets pair the wrong lines."""
    ends: dict[int, int] = {}
    for n, line in enumerate(lines):
        key = line.strip()
        if not (_closes(key) and key[0] in "})]"):
            continue
        width = _width(line)
        opener = next((m for m in range(n - 1, -1, -1) if lines[m].strip() and _width(lines[m]) <= width), None)
        if opener is not None and _width(lines[opener]) == width:
            code = code_of(lines[opener])
            if code and code[-1] in "{([":
                ends.setdefault(opener, n)
    return ends


def _bracket_ends(orig: list[str], code, opening: str = "([", closing: str = ")]") -> list[int]:
    """Per line, the line where the brackets it opens (by default parentheses and square brackets: where a
    header's parameters close) are all closed again, counted in code, not in strings or comments; itself
    where it opens none or they never close. In one pass (a stack of the nearest shallower positions)."""
    depth = [0]
    for line in orig:
        text = code(line)
        depth.append(depth[-1] + sum(map(text.count, opening)) - sum(map(text.count, closing)))
    ends, later = list(range(len(orig))), []  # later: depth positions after line j, rising, nearest last
    for j in range(len(orig) - 1, -1, -1):
        while later and depth[later[-1]] > depth[j]:
            later.pop()
        if later and depth[j + 1] > depth[j]:
            ends[j] = later[-1] - 1
        later.append(j + 1)
    return ends

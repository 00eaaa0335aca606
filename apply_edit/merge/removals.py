"""What the instruction removes: the original lines that go with a name it asks to remove.

Hands the alignment the mask of those lines (`_removed_lines`), which it scores:

- a line that uses a name the instruction asks to remove (`instruction.py`: "drop the deprecated x",
  "x was removed", a plain word where the file defines it) is not kept for a marker, nor before the
  snippet's first or after its last line: the snippet cannot show a line it drops there; a definition
  of that name goes whole, and so does a block registered under it as a string (`AsyncFunction("name")
  {`), each with the comment block right above it; between two snippet lines such a line goes for free.
"""

from __future__ import annotations

import re

import numpy as np

from ..code.definitions import Definition
from ..code.instruction import uses
from ..code.languages import code_of
from .anchors import _comment_block_top, _comment_line
from .blocks import _bracket_ends

def _removed_lines(orig: list[str], names: set[str], in_original: list[Definition], language: str) -> np.ndarray:
    """The mask of the original lines that go with the names the instruction removes: lines whose code
    uses one, a definition of one whole, and a block a line opens under one as a string (a definition by
    registration: `AsyncFunction("name") {`, `describe("name", () => {`), each with the comment block right
    above it; where that leaves two blank lines together, one of them goes too."""
    removed = np.zeros(len(orig), dtype=bool)
    if not names:
        return removed
    code, comment = code_of(language), _comment_line(language)
    removed[:] = [any(uses(code(line), name) for name in names) for line in orig]
    for d in in_original:
        if d.name in names:
            removed[d.start_line:d.end_line + 1] = True
    as_string = re.compile("|".join(rf"([\"'`]){re.escape(name)}\{n + 1}" for n, name in enumerate(sorted(names))))
    if registered := [j for j, line in enumerate(orig) if as_string.search(line)]:
        block_end = _bracket_ends(orig, code, "([{", ")]}")
        for j in registered:
            if block_end[j] > j:  # a line that only mentions the name as a string stays
                removed[j:block_end[j] + 1] = True
    for first in [j for j in range(len(orig)) if removed[j] and not (j and removed[j - 1])]:
        last = first
        while last + 1 < len(orig) and removed[last + 1]:
            last += 1
        top = _comment_block_top(first, orig, comment)  # the comment above goes with it
        removed[top:first] = True
        first = top
        if 0 < first and not orig[first - 1].strip() and (last + 1 == len(orig) or not orig[last + 1].strip()):
            removed[first - 1] = True
    return removed

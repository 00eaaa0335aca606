"""The output guard: reasons not to overwrite a file with a rewrite that looks broken.

Two checks, before an in-place write:
- the original parses without errors (tree-sitter) and the result does not;
- the result drops more than `max_dropped` of the original's non-blank lines that the snippet does not
  remove (what the merge candidate keeps is what the snippet keeps): a model that stops early or skips
  a block loses code silently otherwise.
"""

from __future__ import annotations

from collections import Counter

from .merge import code_lines, merge
from .regions import parser_for

MAX_DROPPED = 0.2


def check_output(original: str, update: str, result: str, language: str, max_dropped: float = MAX_DROPPED) -> str | None:
    """Why the result should not be written, or None when it looks sound."""
    parser = parser_for(language)
    if parser is not None and result.strip():
        if not parser.parse(original.encode()).root_node.has_error and parser.parse(result.encode()).root_node.has_error:
            return f"the result does not parse as {language} (the original does)"
    before = Counter(code_lines(original))
    meant_to_keep = before & Counter(code_lines(merge(original, update).text))
    dropped = sum((meant_to_keep - Counter(code_lines(result))).values())
    total = sum(before.values())
    if total and dropped > max_dropped * total:
        return (f"the result drops {dropped} of the original's {total} lines that the snippet does not remove "
                f"(more than {max_dropped:.0%})")
    return None

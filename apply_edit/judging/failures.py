"""Why a rewrite is not the expected file: the failure kinds the bench reports per method.

Heuristics over lines (compared stripped, as multisets), for a result known to differ from `expected`:
- reformatted: equal to `expected` once whitespace and blank lines are ignored (nothing else applies);
- markers copied: more lazy-snippet marker lines (`// ... existing code ...`) than `expected` has;
- truncated: fewer code lines than `expected`, ending on a line (not a marker) that ends neither `expected`
  nor the original;
- edit not applied: under half of the edit's line changes (lines it adds, lines it removes) are in the result,
  or, for an edit that only moves lines, the result has the original's lines in the original's order;
- code dropped: lines that both the original and `expected` have are missing (when not truncated);
- other: none of these (a wrong token, extra lines).
"""

from __future__ import annotations

from collections import Counter

from ..merge import code_lines, is_marker

KINDS = ("edit not applied", "truncated", "markers copied", "code dropped", "reformatted", "other")


def _last(lines: list[str]) -> str | None:
    return lines[-1] if lines else None


def _markers(lines: Counter) -> int:
    return sum(n for line, n in lines.items() if is_marker(line))


def failure_kinds(original: str, expected: str, output: str) -> list[str]:
    """The kinds (from KINDS) that describe how `output` departs from `expected`; [] when it is exact."""
    if output == expected:
        return []
    out, want, orig = code_lines(output), code_lines(expected), code_lines(original)
    if [" ".join(line.split()) for line in out] == [" ".join(line.split()) for line in want]:
        return ["reformatted"]
    have, wanted, before = Counter(out), Counter(want), Counter(orig)
    kinds = []
    # Line changes relative to the original, as multisets: a `}` the edit adds counts only as an extra `}`.
    added, removed = wanted - before, before - wanted
    changes = sum(added.values()) + sum(removed.values())
    if changes:
        applied = sum((added & (have - before)).values()) + sum((removed & (before - have)).values())
        if applied < changes / 2:
            kinds.append("edit not applied")
    elif out == orig:  # an edit that only moves lines (an import to the top), not made
        kinds.append("edit not applied")
    # Ending on a marker is a copied marker standing for the rest, not a cut.
    truncated = (len(out) < len(want) and _last(out) not in (_last(want), _last(orig))
                 and not is_marker(_last(out) or ""))
    if truncated:
        kinds.append("truncated")
    if _markers(have) > _markers(wanted):
        kinds.append("markers copied")
    if not truncated and (wanted & before) - have:
        kinds.append("code dropped")
    return kinds or ["other"]

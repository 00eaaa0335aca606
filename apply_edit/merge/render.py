"""Turning the alignment into text: the candidate's lines, each a copy of an original line or a new one,
joined in the original's newline style.

Takes the final ops; hands back the text, the origin of each line and the original lines it dropped as
replaced declarations (which the report counts as deleted):

- a snippet line matched to an original line is written as the original has it; where the snippet is
  a uniformly re-indented copy of original code (a method shown without its class), new lines get the
  original's indentation; where only some lines moved (a block wrapped in a new `if`), the snippet's
  indentation is the edit;
- a new blank line between two lines adjacent in the original is layout around a marker, not a change;
- a kept original line that declares a name again right beside the snippet's new declaration of it, in
  the same scope (`is_std: is_std,` under `is_std,`), is the line the new one replaces.
"""

from __future__ import annotations

from ..definitions import declared_twice_in
from .snippet import _Snippet, _indent, _newline


def _render(ops: list[tuple], snippet: _Snippet, orig: list[str], original: str, language: str
            ) -> tuple[str, list[int | None], list[int]]:
    """The candidate's text, per line the original line it copies (None for a new line), and the
    original lines dropped as replaced declarations."""
    lines = [(line, origin) for line, origin, _ in _without_blank_insertions(_written_lines(ops, snippet, orig))]
    lines, replaced = _without_replaced_declarations(lines, original, language)
    return _join(lines, original, _newline(original)), [o for _, o in lines], replaced


def _written_lines(ops: list[tuple], snippet: _Snippet, orig: list[str]) -> list[tuple[str, int | None, int | None]]:
    """Per op that writes a line: (the line, the original line it copies or None, where it sits in the
    original: that line, or the line an edit replaces, else None)."""
    shifts = _hunk_shifts(ops, snippet, orig)
    out: list[tuple[str, int | None, int | None]] = []
    for op in ops:
        kind = op[0]
        if kind == "keep":
            out.append((orig[op[1]], op[1], op[1]))
            continue
        if kind == "del":
            continue
        line = snippet.lines[op[1]]
        shift = shifts.get(snippet.hunk_of[op[1]])
        if kind == "ins" or kind == "edit":
            if shift and line.strip() and line.startswith(shift[0]):
                line = shift[1] + line[len(shift[0]):]
            out.append((line, None, op[2] if kind == "edit" else None))
            continue
        j = op[2]
        same = line.rstrip() == orig[j].rstrip()
        out.append((orig[j], j, j) if same or shift else (line, None, j))
    return out


def _hunk_shifts(ops: list[tuple], snippet: _Snippet, orig: list[str]) -> dict[int, tuple[str, str] | None]:
    """Per hunk with matched code lines: how its new lines are re-indented (`_shift`)."""
    matched_by_hunk: dict[int, list[tuple[str, str]]] = {}
    for op in ops:
        if op[0] == "match" and snippet.lines[op[1]].strip():
            matched_by_hunk.setdefault(snippet.hunk_of[op[1]], []).append((snippet.lines[op[1]], orig[op[2]]))
    return {h: _shift(p) for h, p in matched_by_hunk.items()}


def _shift(hunk_pairs: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(remove, add): how new lines of a hunk are re-indented when its matched lines all sit at one
    indentation offset from the original's (the snippet shows the code without its enclosing block)."""
    shifts = set()
    for s_line, o_line in hunk_pairs:
        s_ws, o_ws = _indent(s_line), _indent(o_line)
        if o_ws.endswith(s_ws):
            shifts.add(("", o_ws[:len(o_ws) - len(s_ws)]))
        elif s_ws.endswith(o_ws):
            shifts.add((s_ws[:len(s_ws) - len(o_ws)], ""))
        else:
            return None
    if len(shifts) != 1:
        return None
    shift = shifts.pop()
    return shift if shift != ("", "") else None


def _without_replaced_declarations(lines: list[tuple[str, int | None]], original: str, language: str
                                   ) -> tuple[list[tuple[str, int | None]], list[int]]:
    """Drops a kept original line that a new line right beside it (only blank lines between) declares
    again in the same scope, where the original declares the name once: a replaced line kept beside its
    replacement (`is_std: is_std,` under the snippet's `is_std,`; `const limit = 5;` under `const limit = 10;`),
    which the snippet's marker after its new line would otherwise keep. Also returns the original lines
    dropped."""
    twice = declared_twice_in(_join(lines, original, _newline(original)), language)
    if not twice:
        return lines, []
    before = {(path, name) for path, name, _ in declared_twice_in(original, language)}
    drop = set()
    for path, name, spans in twice:
        if (path, name) in before or len(spans) != 2:
            continue
        first, second = sorted(spans)
        if any(lines[k][0].strip() for k in range(first[1] + 1, second[0])):
            continue  # not beside each other
        for new, old in ((first, second), (second, first)):
            if old[0] == old[1] and lines[old[0]][1] is not None and all(
                    lines[k][1] is None for k in range(new[0], new[1] + 1)):
                drop.add(old[0])
    return [line for k, line in enumerate(lines) if k not in drop], [lines[k][1] for k in sorted(drop)]


def _without_blank_insertions(out: list[tuple[str, int | None, int | None]]) -> list[tuple[str, int | None, int | None]]:
    """Drops new blank lines that would sit between two lines adjacent in the original (kept, or one of
    them edited): a blank the snippet puts beside a marker stands for layout around the code the marker
    keeps, not for a change."""
    keep, n = [], 0
    while n < len(out):
        end = n
        while end < len(out) and out[end][1] is None and not out[end][0].strip():
            end += 1
        if end > n:
            before = out[n - 1][2] if n else None
            after = out[end][2] if end < len(out) else None
            if not (before is not None and after is not None and after == before + 1):
                keep.extend(out[n:end])
            n = end
        else:
            keep.append(out[n])
            n += 1
    return keep


def _join(out: list[tuple[str, int | None]], original: str, newline: str) -> str:
    # The original's last line may lack a newline and still land mid-candidate.
    text = "".join(line if line.endswith("\n") else line + newline for line, _ in out[:-1])
    text += out[-1][0] if out else ""
    if text and not original.endswith("\n") and original and out[-1][1] is None:
        text = text.rstrip("\r\n")  # the snippet wrote the last line: end it like the original
    elif (original.endswith("\n") or not original) and text and not text.endswith("\n"):
        text += newline
    return text

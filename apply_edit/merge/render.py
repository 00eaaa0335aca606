"""Turning the alignment into text: the candidate's lines, each a copy of an original line or a new one,
joined in the original's newline style.

Takes the final ops; hands back the text, the origin of each line and the original lines it dropped as
replaced declarations (which the report counts as deleted):

- a snippet line matched to an original line is written as the original has it; where the snippet is
  a uniformly re-indented copy of original code (a method shown without its class), new lines get the
  original's indentation; where only some lines moved (a block wrapped in a new `if`), the snippet's
  indentation is the edit;
- a new blank line beside a marker, between two lines adjacent in the original, is layout around the
  marker, not a change; one the snippet shows between two lines of code is the edit's;
- a kept original line that declares a name again right beside the snippet's new declaration of it, in
  the same scope (`is_std: is_std,` under `is_std,`), is the line the new one replaces.
"""

from __future__ import annotations

from collections import Counter

from ..code.definitions import declared_twice_in, lines_inside_strings
from .anchors import _trivial
from .snippet import _Snippet, _indent, _newline, _width


def _render(ops: list[tuple], snippet: _Snippet, orig: list[str], original: str, language: str
            ) -> tuple[str, list[int | None], list[int]]:
    """The candidate's text, per line the original line it copies (None for a new line), and the
    original lines dropped as replaced declarations."""
    layout = [op[0] == "ins" and _beside_marker(snippet, op[1]) for op in ops if op[0] != "del"]
    prose = lines_inside_strings(original, language)
    lines = [(line, origin) for line, origin, _ in
             _without_blank_insertions(_written_lines(ops, snippet, orig, prose), layout)]
    lines, replaced = _without_replaced_declarations(lines, original, language)
    return _join(lines, original, _newline(original)), [o for _, o in lines], replaced


def _written_lines(ops: list[tuple], snippet: _Snippet, orig: list[str], prose: frozenset[int]
                   ) -> list[tuple[str, int | None, int | None]]:
    """Per op that writes a line: (the line, the original line it copies or None, where it sits in the
    original: that line, or the line an edit replaces, else None). `prose`: the original's lines inside
    multi-line strings."""
    shifts = _hunk_shifts(ops, snippet, orig, prose)
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
        if shift:  # shifted, a line the edit moved deeper (wrapped in a new block) stays moved
            shifted = shift[1] + line[len(shift[0]):] if line.startswith(shift[0]) else orig[j]
            out.append((orig[j], j, j) if shifted.rstrip() == orig[j].rstrip() else (shifted, None, j))
            continue
        same = line.rstrip() == orig[j].rstrip()
        out.append((orig[j], j, j) if same else (line, None, j))
    return out


def _hunk_shifts(ops: list[tuple], snippet: _Snippet, orig: list[str], prose: frozenset[int]
                 ) -> dict[int, tuple[str, str] | None]:
    """Per hunk: how its new lines are re-indented (`_shift`). A hunk whose matched lines sit at no one
    offset (a common line matched at another depth), or that has none, takes the snippet's own offset
    where four in five of all its matched code lines agree on it (an agent's method written flush-left
    moves every hunk alike): the offset is a fact of the snippet, measured once; else the offset of its
    outermost matched lines found once in the original, where it is the most common one of all hunks'
    outermost lines (`_outermost`): a hunk at an offset the rest of the snippet does not share is one
    the edit moved (wrapped in a new block), not a re-indented one."""
    matched_by_hunk: dict[int, list[tuple[str, str]]] = {}
    code_by_hunk: dict[int, list[tuple[str, str]]] = {}  # without lines inside strings: their indentation is prose
    for op in ops:
        if op[0] == "match" and snippet.lines[op[1]].strip():
            matched_by_hunk.setdefault(snippet.hunk_of[op[1]], []).append((snippet.lines[op[1]], orig[op[2]]))
            if op[2] not in prose:
                code_by_hunk.setdefault(snippet.hunk_of[op[1]], []).append((snippet.lines[op[1]], orig[op[2]]))
    offsets = Counter(_offset(s, o) for pairs in matched_by_hunk.values() for s, o in pairs)
    common, count = offsets.most_common(1)[0] if offsets else (None, 0)
    overall = common if common not in (None, ("", "")) and count >= 2 and count >= 0.8 * sum(offsets.values()) else None
    shifts = {h: _shift(p) for h, p in matched_by_hunk.items()}
    once = Counter(line.strip() for line in orig)
    outermost = {h: _outermost([(s, o) for s, o in p if once[o.strip()] == 1 and not _trivial(o.strip())])
                 for h, p in code_by_hunk.items()}
    # Where the snippet's outermost code sits is what re-indented it (a method written flush-left); its
    # deeper lines may sit at another offset where the edit also wrapped them in a new block.
    usual = Counter(_offset(s, o) for pairs in outermost.values() for s, o in pairs).most_common(1)
    outer = {h: shift if (shift := _shift(p)) == usual[0][0] else None
             for h, p in outermost.items() if p and usual}
    own = {h: shifts.get(h) or overall or outer.get(h) for h in set(snippet.hunk_of)}
    in_place = _outermost_in_place(matched_by_hunk)
    return {h: None if shift == ("", "") or h in in_place else shift for h, shift in own.items()}


def _outermost_in_place(matched_by_hunk: dict[int, list[tuple[str, str]]]) -> set[int]:
    """Hunks whose least indented matched lines sit where the original has them: such a hunk is not a
    re-indented copy, whatever the rest of the snippet is; its deeper lines at another offset are ones the
    edit moved (old statements wrapped in a new `for`), and its new lines keep the snippet's indentation."""
    in_place = set()
    for h, pairs in matched_by_hunk.items():
        least = min(_width(s_line) for s_line, _ in pairs)
        if all(_offset(s, o) == ("", "") for s, o in pairs if _width(s) == least):
            in_place.add(h)
    return in_place


def _offset(s_line: str, o_line: str) -> tuple[str, str] | None:
    """(remove, add) that turns the snippet line's indentation into the original line's, None when
    neither ends the other (tabs against spaces)."""
    s_ws, o_ws = _indent(s_line), _indent(o_line)
    if o_ws.endswith(s_ws):
        return "", o_ws[:len(o_ws) - len(s_ws)]
    if s_ws.endswith(o_ws):
        return s_ws[:len(s_ws) - len(o_ws)], ""
    return None


def _shift(hunk_pairs: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(remove, add): how new lines of a hunk are re-indented when its matched lines all sit at one
    indentation offset from the original's (the snippet shows the code without its enclosing block);
    None where they do not."""
    shifts = {_offset(s_line, o_line) for s_line, o_line in hunk_pairs}
    return shifts.pop() if len(shifts) == 1 else None  # ("", ""): the snippet's own indentation


def _outermost(hunk_pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A hunk's matched (snippet, original) lines of those given (lines found once in the original) at its
    least indentation: where a re-indented hunk sits is said by its outermost code (a method's header);
    deeper lines at other offsets are what the edit moved (a nested `with` made one)."""
    least = min((_width(s_line) for s_line, _ in hunk_pairs), default=0)
    return [(s_line, o_line) for s_line, o_line in hunk_pairs if _width(s_line) == least]


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


def _beside_marker(snippet: _Snippet, i: int) -> bool:
    """Whether snippet line i, blank, touches a marker (only blank lines between them)."""
    for k, step in ((i, -1), (i + 1, 1)):  # gap k is the one right before line k
        while True:
            if snippet.reach[k] is not None:
                return True
            line = k - 1 if step < 0 else k
            if not 0 <= line < len(snippet.lines) or snippet.lines[line].strip():
                break
            k += step
    return False


def _without_blank_insertions(out: list[tuple[str, int | None, int | None]], layout: list[bool]
                              ) -> list[tuple[str, int | None, int | None]]:
    """Drops new blank lines that would sit between two lines adjacent in the original (kept, or one of
    them edited), right after a blank line the original has, or at the file's start or end, where the
    snippet has them beside a marker (`layout`, per line of `out`): there a blank stands for layout
    around the code the marker keeps, not for a change. A blank line the snippet shows between two lines
    of code is one the edit adds."""
    keep, n = [], 0
    while n < len(out):
        end = n
        while end < len(out) and out[end][1] is None and not out[end][0].strip():
            end += 1
        if end > n:
            before = out[n - 1][2] if n else None
            after = out[end][2] if end < len(out) else None
            adjacent = before is not None and after is not None and after == before + 1
            after_blank = n > 0 and out[n - 1][1] is not None and not out[n - 1][0].strip()
            at_an_end = n == 0 or end == len(out)
            if not ((adjacent or after_blank or at_an_end) and all(layout[n:end])):
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

"""Reading the snippet: its lines in the file's line endings and indentation, parsed into hunks and markers.

Hands the merge the original's lines and their counts, and a `_Snippet`: the snippet's code lines with
the markers taken out, each line's hunk, and per gap between lines the indentation of the marker there
(how deep the code it keeps goes), plus the deletion notes the snippet carries (`instruction.py`).

A bare `...` (or `…`) line is a marker, unless the original has that line as code (not inside a doc
comment or string) or, in Python, it is a stub body (right after a header, with nothing deeper after it).

A snippet indented with spaces where the file uses tabs (or the reverse) is first re-indented as the
file is.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from ..code.definitions import lines_inside_strings
from ..code.instruction import deletion_notes, is_change_note

_COMMENT = re.compile(r"^\s*(?:#|//|/\*|<!--|--|\{/\*|;)\s*(?P<body>.*?)\s*(?:\*/\}|\*/|-->)?\s*$")
_ELLIPSIS = re.compile(r"\.{3,}|…")
_BRACKETED = re.compile(r"^(?:\.{3,}|…).*\S.*(?:\.{3,}|…)$")  # `... a note ...`
_MARKER_WORDS = re.compile(r"\b(existing|rest|same|unchanged|remain\w*|omitted|other|previous|before|as is|"
                           r"more|code|etc)\b", re.IGNORECASE)


def is_marker(line: str) -> bool:
    """A marker comment: `// ... existing code ...`, `# ... rest of code ...`, `/* ... */`, `{/* … */}`,
    `// existing code`, and a note of any length between two ellipses (`# ... rest of __call__ unchanged
    until the completions are written ...`). Comment text that only ends in dots (`# wait for it...`) is
    not one."""
    m = _COMMENT.match(line)
    if not m:
        return False
    body = m["body"]
    if "existing code" in body.lower():
        return True
    if not _ELLIPSIS.search(body):
        return False
    if _BRACKETED.match(body):
        return True
    words = _ELLIPSIS.sub(" ", body).split()
    return len(words) <= 8 and (_ELLIPSIS.match(body) is not None or bool(_MARKER_WORDS.search(body)))


def split_lines(text: str) -> list[str]:
    """Lines with their endings kept ('\\n' or '\\r\\n'); only '\\n' splits (unlike str.splitlines)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def code_lines(text: str) -> list[str]:
    """The non-blank lines, stripped: what line comparisons that ignore layout look at."""
    return [line.strip() for line in split_lines(text) if line.strip()]


def _newline(original: str) -> str:
    """The file's line ending: '\\r\\n' where most of its lines end so, else '\\n'."""
    return "\r\n" if original.count("\r\n") * 2 > original.count("\n") else "\n"


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _width(line: str) -> int:
    return len(_indent(line).expandtabs(4))


def _space_unit(lines: list[str]) -> int | None:
    """The indentation step of lines indented with spaces only (2, 4 or 8), else None."""
    widths = {len(_indent(line)) for line in lines if line.strip() and _indent(line)}
    if not widths or any("\t" in _indent(line) for line in lines):
        return None
    unit = math.gcd(*widths)
    return unit if unit in (2, 4, 8) else None


def _tabbed(lines: list[str]) -> bool:
    indented = [_indent(line) for line in lines if line.strip() and _indent(line)]
    return bool(indented) and sum(ws.startswith("\t") for ws in indented) * 10 >= len(indented) * 9


def _in_file_indentation(update_lines: list[str], orig: list[str]) -> list[str]:
    """The snippet indented as the file is: a file indented with tabs gets tabs for the snippet's spaces,
    one per step (models often write spaces where the file has tabs, and the reverse)."""
    if _tabbed(orig) and (unit := _space_unit(update_lines)):
        def convert(ws: str) -> str:
            return "\t" * (len(ws) // unit) + " " * (len(ws) % unit)
    elif _tabbed(update_lines) and (unit := _space_unit(orig)):
        def convert(ws: str) -> str:
            return ws.replace("\t", " " * unit)
    else:
        return update_lines
    return [convert(_indent(line)) + line.lstrip(" \t") if line.strip() else line for line in update_lines]


@dataclass
class _Snippet:
    """The snippet as the merge reads it: code lines, and the markers between them."""

    lines: list[str]  # the snippet's code lines, markers removed
    hunk_of: list[int]  # per line: its hunk
    reach: list[int | None]  # per gap (before line i; len(lines) + 1 gaps): the marker's indentation, or None
    number: list[int]  # per line: its line number in the snippet
    markers: set[int]  # line numbers of the marker lines
    # A deletion note before the first code line (after the last), with no marker beyond it: the file's
    # first (last) lines go, where without the note the snippet would read as a piece of the file.
    noted_head: bool = False
    noted_tail: bool = False
    # Gaps (before line i) where a deletion note stood between two code lines: what lies there goes.
    noted_gaps: frozenset[int] = frozenset()


def _parse_snippet(update_lines: list[str], original_keys: set[str], language: str,
                   original_code: set[str], notes: set[int] = frozenset()) -> _Snippet:
    """`original_code`: the original's lines (stripped) outside multi-line comments and strings: a bare
    `...` is the original's own line only where the original has it as code (not in a doc comment).
    `notes`: the deletion notes (`instruction.deletion_notes`), left out, a removal's with a blank line
    it leaves doubled."""
    lines, hunk_of, number, reach, markers = [], [], [], [None], set()
    hunk, previous = 0, ""
    content = [n for n, line in enumerate(update_lines) if line.strip() and n not in notes]
    first, last = (content[0], content[-1]) if content else (0, -1)
    in_strings = lines_inside_strings("".join(update_lines), language) if language else set()
    noted_gaps = set()
    for n, line in enumerate(update_lines[first:last + 1], start=first):
        key = line.strip()
        if n in notes and lines:
            noted_gaps.add(len(lines))
        # A blank line after a note, with one before it: the note stood where code went, with one of
        # its blank lines; a change note stands in no line's place, and both blank lines are the file's.
        if n in notes or (not key and n - 1 in notes and lines and not lines[-1].strip()
                          and not is_change_note(update_lines[n - 1], language)):
            continue
        bare = key in ("...", "…") and not (language == "python" and previous.rstrip().endswith(":")
                                             and _whole_body(update_lines, n, last))
        if (is_marker(line) and key not in original_keys) or (bare and key not in original_code):
            # A marker inside a docstring keeps prose, whose indentation scopes nothing.
            width = 0 if n in in_strings else _width(line)
            reach[-1] = width if reach[-1] is None else min(reach[-1], width)
            markers.add(n)
            if lines:
                hunk += 1
            continue
        lines.append(line)
        hunk_of.append(hunk)
        number.append(n)
        reach.append(None)
        if key:
            previous = line
    noted_head = reach[0] is None and any(n < first for n in notes)
    noted_tail = reach[-1] is None and any(n > last for n in notes)
    noted_gaps = frozenset(g for g in noted_gaps if g < len(lines))  # between two code lines
    return _Snippet(lines, hunk_of, reach, number, markers, noted_head, noted_tail, noted_gaps)


def _leaves_block(snippet: _Snippet, opener: int, closer: int) -> bool:
    """Whether a marker between snippet lines `opener` and `closer` leaves the opener's block: one as
    shallow as the opener with deeper code after it (before the closer) hides the line that code is the
    body of, and the closer shown closes that line's block, not the opener's."""
    depth = _width(snippet.lines[opener])
    return any(snippet.reach[g] is not None and snippet.reach[g] <= depth
               and any(snippet.lines[t].strip() and _width(snippet.lines[t]) > snippet.reach[g] for t in range(g, closer))
               for g in range(opener + 1, closer + 1))


def _whole_body(lines: list[str], n: int, last: int) -> bool:
    """Whether the `...` on line n, right after a Python header, is that body's only line (a stub: what
    follows is less indented) rather than a marker for the body's first lines (`def f():` `...` then more
    of the body)."""
    after = next((line for line in lines[n + 1:last + 1] if line.strip()), None)
    return after is None or _width(after) < _width(lines[n])


def _closing_lines(snippet: _Snippet) -> list[int | None]:
    """Per snippet line: the indentation of the marker whose scope it closes (the first non-blank line
    after a marker inside a body, less indented than the marker), else None."""
    closing: list[int | None] = [None] * len(snippet.lines)
    reach = None
    for i, line in enumerate(snippet.lines):
        if snippet.reach[i] is not None and i > 0:  # a leading marker stands for all before: no scope
            reach = snippet.reach[i]
        if not line.strip():
            continue
        if reach and _width(line) < reach:
            closing[i] = reach
        reach = None
    return closing


def _opening_lines(snippet: _Snippet) -> list[bool]:
    """Per snippet line: whether it opens a body that a marker inside it elides (the last non-blank line
    before a marker indented deeper than the line)."""
    opening = [False] * len(snippet.lines)
    last = None
    for i in range(len(snippet.lines) + 1):
        reach = snippet.reach[i]
        if reach and last is not None and _width(snippet.lines[last]) < reach:
            opening[last] = True
        if i < len(snippet.lines) and snippet.lines[i].strip():
            last = i
    return opening


def _read(original: str, update: str, language: str, notes_as_code: frozenset[int] = frozenset()
          ) -> tuple[list[str], list[str], Counter, _Snippet, dict[int, set[str]]]:
    """The original's lines, the snippet's (in the file's line endings and indentation), the original's
    line counts, the snippet parsed into code lines and markers, and its deletion notes (but those in
    `notes_as_code`: snippet lines to read as code)."""
    orig = split_lines(original)
    newline = _newline(original)
    # Every snippet line ends like the original's lines, so none is glued to the next.
    update_lines = _in_file_indentation([line.rstrip("\r\n") + newline for line in split_lines(update)], orig)
    counts = Counter(line.strip() for line in orig)
    prose = lines_inside_strings(original, language, comments=True) if language else set()
    notes = {n: named for n, named in deletion_notes(original, update, language).items() if n not in notes_as_code}
    snippet = _parse_snippet(update_lines, set(counts), language,
                             {line.strip() for n, line in enumerate(orig) if n not in prose}, set(notes))
    return orig, update_lines, counts, snippet, notes


def marker_keys(original: str, update: str, language: str = "") -> set[str]:
    """The snippet's marker lines as the merge reads them, stripped (a bare `...` included where it is
    a marker, not code)."""
    _, update_lines, _, snippet, _ = _read(original, update, language)
    return {update_lines[n].strip() for n in snippet.markers}

"""The snippet writer: from an edit (before, after, hunks) to the lazy snippet an agent would write.

The snippet always means `after`: what it shows is `after`'s lines, a marker stands for lines of the file
kept as they are, and a deletion is shown by the lines around it standing next to each other (or said by
a note, or by the instruction alone). Styles, each seeded per case:

- `minimal`: each hunk with a few lines of context (more where they are all common lines such as `}`),
  `... existing code ...` markers between;
- `worded`: the same with markers in words (`// ... rest of the class ...`), `/* ... */` in C-like code;
- `bare`: markers written as a bare `...` (not for a file with `...` lines of its own);
- `no-leading-marker`: no marker before the first line: the snippet starts as a piece of the file (a
  trailing marker stays: a snippet that stops inside a definition without one does not say whether the
  rest of it goes);
- `whole-definition`: the innermost definition holding every hunk, shown whole;
- `inner-markers`: that definition's header, a marker inside its body, the hunks, a marker, its end;
- `reindented`: a minimal or whole snippet shifted left (flush-left, or one level less), as agents write
  a method without its class;
- `changed-note`: a `// changed: ...` comment line above the changed lines (a note, not code);
- `deletion-note`: a deletion written as a `// removed ...` comment where the lines were;
- `instruction-only`: a deleted definition said only by the instruction ("Remove the `x` function."),
  with an empty snippet.

On top of its style, a snippet takes on the habits coding agents have, each drawn per case at about the
rate measured on `shared/agent-edits` (210 snippets written as agents write them; `HABITS`):

- `flush-markers`: every marker written at column 0, whatever the depth of the code it stands for (17%
  of agent snippets have one between indented lines); the habits with markers touch the writer's own,
  never a line of the file that reads like one (`//   ... Process(...) ...`);
- `blank-by-markers`: a blank line typed between a marker and the code next to it (agents: 40% after a
  marker, 33% before one);
- `note-on-line`: a changed line carries a note to the applier, `x = 1  # NEW`, `// changed: ...`
  (4%; notes on lines of their own are the `changed-note` style);
- `explained-removal`: a deletion note says why, `// removed foo(): no longer used` (4% of agent
  snippets; half of the deletion notes here).
"""

from __future__ import annotations

import os
import random
import re
from collections import Counter
from dataclasses import dataclass

from ...code.definitions import definitions, lines_inside_strings
from ...code.instruction import uses
from ...merge import is_marker, split_lines
from ...merge.snippet import _indent
from .edits import Edit, Hunk

STYLES = ("minimal", "worded", "bare", "no-leading-marker", "whole-definition", "inner-markers", "reindented",
          "changed-note", "deletion-note", "instruction-only")
# How often each style is drawn; one that does not fit the edit is drawn again among the rest.
WEIGHTS = {"minimal": 20, "worded": 10, "bare": 3, "no-leading-marker": 6, "whole-definition": 15,
           "inner-markers": 12, "reindented": 9, "changed-note": 5, "deletion-note": 8, "instruction-only": 5}
_HASH_COMMENTS = {"python", "ruby", "bash"}
_MAX_DEFINITION_LINES = 150
_WORDED = ("... rest of the code ...", "... rest of the file unchanged ...", "... existing code unchanged ...",
           "... unchanged ...", "... keep existing code ...", "... other code ...", "... previous code ...",
           "existing code")
_CHANGED = ("changed: updated", "changed: new logic here", "changed", "changed: see below", "changed: edited lines")
_GENERIC_REMOVALS = ("removed the old code here", "removed these lines", "deleted the unused lines",
                     "dropped the old handling")
_KIND_WORDS = (("class", "class"), ("struct", "struct"), ("method", "method"), ("impl", "impl block"),
               ("interface", "interface"), ("enum", "enum"), ("trait", "trait"), ("module", "module"),
               ("type", "type"))


# Per habit: the share of snippets that take it on (of those it fits).
# Drawn so that the corpus's tune half shows them about as often as the agent set does (a flush marker
# between indented lines in 17% of snippets, a blank after a marker in 40%, before one in 33%; styles
# `bare` and `no-leading-marker` weighted to its 4% and 17%).
HABITS = {"flush-markers": 0.7, "blank-by-markers": 0.5, "note-on-line": 0.05, "explained-removal": 0.5}
BLANK_AFTER, BLANK_BEFORE = 0.8, 0.6  # per marker, in a snippet with `blank-by-markers`
_LINE_NOTES = ("NEW", "changed", "changed: updated", "NEW: see above", "changed: fixed")
_REASONS = ("no longer used", "unused", "replaced above", "obsolete")


@dataclass(frozen=True)
class Snippet:
    update: str
    instruction: str
    style: str
    habits: tuple[str, ...] = ()


def comment_start(language: str) -> str:
    return "#" if language in _HASH_COMMENTS else "--" if language == "lua" else "//"


def _newline(lines: list[str]) -> str:
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


class _Writer:
    def __init__(self, edit: Edit, language: str, rng: random.Random):
        self.edit, self.language, self.rng = edit, language, rng
        self.before, self.after = split_lines(edit.before), split_lines(edit.after)
        self.nl = _newline(self.after)
        self.counts = Counter(line.strip() for line in self.before)
        self.comment = comment_start(language)
        self._inside: frozenset[int] | None = None
        self.explained = False  # the deletion note says why (the `explained-removal` habit)

    # --- what the snippet shows -------------------------------------------------------------------
    def _distinctive(self, line: str) -> bool:
        key = line.strip()
        return len(key) >= 6 and sum(c.isalnum() for c in key) >= 4 and self.counts[key] == 1

    def _context(self, start: int, step: int, limit: int) -> int:
        """How many lines of context to show from `start` going by `step`: 1 to 3, more (up to 8) until
        one of them is found once in the file."""
        n, wanted = 0, self.rng.choice((1, 2, 2, 3))
        while 0 <= start + step * n < limit and n < 8:
            n += 1
            shown = range(start, start + step * n, step)
            if n >= wanted and any(self._distinctive(self.after[i]) for i in shown):
                break
        return n

    def windows(self) -> list[tuple[int, int]]:
        """Ranges of `after` the snippet shows: each hunk with context, touching ranges joined."""
        spans = []
        for hunk in self.edit.hunks:
            before = self._context(hunk.after_start - 1, -1, len(self.after))
            after = self._context(hunk.after_end, 1, len(self.after))
            spans.append(self._outside_strings(hunk.after_start - before, hunk.after_end + after))
        joined: list[list[int]] = []
        for s, e in spans:
            if joined and s <= joined[-1][1]:
                joined[-1][1] = max(joined[-1][1], e)
            else:
                joined.append([s, e])
        return [(s, e) for s, e in joined]

    def _outside_strings(self, s: int, e: int) -> tuple[int, int]:
        """The range widened so that no marker cuts a multi-line string or comment in two."""
        inside = self._string_lines()
        while s > 0 and (s in inside or s - 1 in inside):
            s -= 1
        while e < len(self.after) and (e in inside or e - 1 in inside):
            e += 1
        return s, e

    def _string_lines(self) -> frozenset[int]:
        """The middle lines of `after`'s multi-line strings and comments."""
        if self._inside is None:
            self._inside = lines_inside_strings(self.edit.after, self.language, comments=True)
        return self._inside

    # --- markers ----------------------------------------------------------------------------------
    def marker(self, omitted: range, words: str | None = None, shown: str = "") -> str:
        """A marker line for the omitted lines of `after`, indented as the shallowest code among them:
        a marker deeper than some line it stands for would say that the block it sits in ends there
        and the rest of the file goes on (prose inside multi-line strings does not count)."""
        inside = self._string_lines()
        code = [self.after[i] for i in omitted if self.after[i].strip() and i not in inside]
        indent = min((_indent(line) for line in code), key=len, default="")
        if words == "..." and self.language == "python" and shown.rstrip().endswith(":"):
            words = None  # a bare `...` under a Python header is a stub body, not a marker
        return indent + self.marker_body(words) + self.nl

    def marker_body(self, words: str | None) -> str:
        if words == "...":
            return "..."
        text = words or "... existing code ..."
        if text.startswith("/*"):
            return text
        return f"{self.comment} {text}"

    def assemble(self, windows: list[tuple[int, int]], words=None, lead=True, tail=True) -> list[str]:
        out: list[str] = []
        at = 0
        for n, (s, e) in enumerate(windows):
            if s > at and (lead or n > 0):
                out.append(self.marker(range(at, s), words() if words else None, out[-1] if out else ""))
            out += self.after[s:e]
            at = e
        if at < len(self.after) and tail:
            out.append(self.marker(range(at, len(self.after)), words() if words else None, out[-1]))
        return out

    # --- styles -------------------------------------------------------------------------------------
    def minimal(self) -> list[str]:
        return self.assemble(self.windows())

    def worded(self) -> list[str]:
        block = self.comment == "//" and self.rng.random() < 0.3
        return self.assemble(self.windows(), lambda: "/* ... */" if block else self.rng.choice(_WORDED))

    def bare(self) -> list[str] | None:
        if any(line.strip() in ("...", "…") for line in self.after):
            return None  # the file's own `...` lines (stubs, docstrings) would read as markers too
        return self.assemble(self.windows(), lambda: "...")

    def no_leading_marker(self) -> list[str] | None:
        windows = self.windows()
        if windows[0][0] == 0:
            return None
        return self.assemble(windows, lead=False)

    def _holder(self):
        """The innermost definition of `after` that holds every hunk, of a size shown whole. The lines a
        hunk removes must lie inside its namesake in `before`: shown whole, a definition says nothing of
        lines outside it (a function deleted right above the one shown would be hidden by the marker)."""
        hunks = self.edit.hunks
        lo, hi = hunks[0].after_start, max(hunks[-1].after_end - 1, hunks[-1].after_start)
        old = definitions(self.edit.before, self.language)
        names = Counter((o.kind, o.name) for o in old)
        namesake = {(o.kind, o.name): o for o in old if names[o.kind, o.name] == 1}

        def holds_removals(d) -> bool:
            o = namesake.get((d.kind, d.name))
            return all(o is not None and o.start_line <= h.old_start and h.old_end <= o.end_line + 1
                       for h in hunks if h.removed)

        holders = [d for d in definitions(self.edit.after, self.language)
                   if d.start_line <= lo and hi <= d.end_line and d.complete
                   and d.end_line - d.start_line < _MAX_DEFINITION_LINES and holds_removals(d)]
        return min(holders, key=lambda d: d.end_line - d.start_line, default=None)

    def whole_definition(self) -> list[str] | None:
        d = self._holder()
        return None if d is None else self.assemble([(d.start_line, d.end_line + 1)])

    def inner_markers(self) -> list[str] | None:
        d = self._holder()
        if d is None:
            return None
        header_end = d.name_line + 1  # decorators and the header's first line
        if not re.search(r"[{:]\s*$|\b(?:do|then)\s*$", self.after[d.name_line].rstrip()):
            return None  # a header spread over lines: shown whole or not at all
        closing = d.end_line if re.fullmatch(r"[)\]}]*;?|end", self.after[d.end_line].strip()) else d.end_line + 1
        inside = [(max(s, header_end), min(e, closing)) for s, e in self.windows()]
        inside = [(s, e) for s, e in inside if s < e]
        if not inside or (inside[0][0] == header_end and inside[-1][1] == closing):
            return None  # nothing of the body left for a marker
        windows = [(d.start_line, header_end)] + inside + [(closing, d.end_line + 1)]
        joined: list[tuple[int, int]] = []
        for s, e in windows:
            if joined and s <= joined[-1][1]:
                joined[-1] = (joined[-1][0], max(joined[-1][1], e))
            elif s < e:
                joined.append((s, e))
        return self.assemble(joined)

    def reindented(self) -> list[str] | None:
        lines = (self.whole_definition() if self.rng.random() < 0.5 else None) or self.minimal()
        code = [line for line in lines if line.strip() and not self._is_marker(line)]
        # The indentation every code line starts with: a shift is by whole characters of it (a file that
        # mixes tabs and spaces, GNU style, shares none and is not shifted).
        common = os.path.commonprefix([_indent(line) for line in code])
        if not common:
            return None
        cut = len(common) if self.rng.random() < 0.6 else 1 if common[0] == "\t" else min(4, len(common))
        return [line[min(cut, len(_indent(line))):] if line.strip() else line for line in lines]

    def _is_marker(self, line: str) -> bool:
        return line.strip() in (self.marker_body(None), self.marker_body("..."))

    def _note_at(self, hunk: Hunk) -> tuple[int, str]:
        """Where a note about a hunk goes (its first line in `after`) and the indentation there."""
        line = self.after[hunk.after_start] if hunk.added else self.before[hunk.old_start]
        return hunk.after_start, _indent(line)

    def changed_note(self) -> list[str] | None:
        hunk = next((h for h in self.edit.hunks if h.added), None)
        if hunk is None:
            return None
        return self._with_note(hunk, self.rng.choice(_CHANGED))

    def deletion_note(self) -> list[str] | None:
        deletions = [h for h in self.edit.hunks if not h.added]
        at_ends = [h for h in deletions if h.after_start in (0, len(self.after))]
        hunk = next(iter(at_ends + deletions), None)
        if hunk is None:
            return None
        text = self._removal(hunk)
        if text not in _GENERIC_REMOVALS and self.rng.random() < HABITS["explained-removal"]:
            self.explained = True
            text += f": {self.rng.choice(_REASONS)}"
        return self._with_note(hunk, text)

    def _removal(self, hunk: Hunk) -> str:
        """What a deletion note says: the definition or name that went, when the file no longer has it."""
        gone = self._deleted_definition(hunk)
        if gone is not None and not uses(self.edit.after, gone[1]):
            return f"removed {gone[1]}" + ("()" if gone[0] == "function" else "")
        after_code = self.edit.after
        for line in self.before[hunk.old_start:hunk.old_end]:
            for name in re.findall(r"[A-Za-z_][A-Za-z0-9_.]{2,}", line):
                if not uses(after_code, name):
                    return f"removed {name}"
        return self.rng.choice(_GENERIC_REMOVALS)

    # --- habits -------------------------------------------------------------------------------------
    def habits(self, lines: list[str]) -> tuple[list[str], tuple[str, ...]]:
        """The snippet's lines with the habits drawn for it (`HABITS`), and their names."""
        taken = ["explained-removal"] if self.explained else []
        for habit in ("flush-markers", "blank-by-markers", "note-on-line"):
            if self.rng.random() < HABITS[habit]:
                changed = getattr(self, habit.replace("-", "_"))(lines)
                if changed is not None:
                    lines = changed
                    taken.append(habit)
        return lines, tuple(taken)

    def _marker_lines(self, lines: list[str]) -> set[int]:
        """The writer's own markers: a line shown from the file is code, however much it looks like one
        (`//   ... Process(...) ...`), and an agent's habits with markers do not touch it."""
        code = {line.strip() for line in self.after}
        return {n for n, line in enumerate(lines)
                if (is_marker(line) or line.strip() in ("...", "…")) and line.strip() not in code}

    def flush_markers(self, lines: list[str]) -> list[str] | None:
        markers = self._marker_lines(lines)
        if not any(_indent(lines[n]) for n in markers):
            return None
        return [line.lstrip(" \t") if n in markers else line for n, line in enumerate(lines)]

    def blank_by_markers(self, lines: list[str]) -> list[str] | None:
        markers, out = self._marker_lines(lines), []
        for n, line in enumerate(lines):
            if n in markers and out and out[-1].strip() and self.rng.random() < BLANK_BEFORE:
                out.append(self.nl)
            out.append(line)
            if n in markers and n + 1 < len(lines) and lines[n + 1].strip() and self.rng.random() < BLANK_AFTER:
                out.append(self.nl)
        return out if len(out) > len(lines) else None

    def note_on_line(self, lines: list[str]) -> list[str] | None:
        """A note after a line the edit adds (code the original lacks, not in a multi-line string)."""
        inside = self._string_lines()
        added = {self.after[i].strip() for h in self.edit.hunks for i in range(h.after_start, h.after_end)
                 if i not in inside and self.counts[self.after[i].strip()] == 0}
        candidates = [n for n, line in enumerate(lines) if line.strip() in added and len(line.strip()) > 3
                      and not line.strip().startswith(("#", "//", "/*", "*", "--"))]
        if not candidates:
            return None
        n = self.rng.choice(candidates)
        lines = list(lines)
        lines[n] = f"{lines[n].rstrip(chr(13) + chr(10))}  {self.comment} {self.rng.choice(_LINE_NOTES)}{self.nl}"
        return lines

    def _with_note(self, hunk: Hunk, text: str) -> list[str]:
        at, indent = self._note_at(hunk)
        note = f"{indent}{self.comment} {text}{self.nl}"
        windows = self.windows()
        lines = self.assemble(windows)
        # The note goes right above the hunk's first line in the snippet: find it by position.
        shown = self._positions(windows)
        index = shown.index(at) if at in shown else shown.index(at - 1) + 1
        return lines[:index] + [note] + lines[index:]

    def _positions(self, windows: list[tuple[int, int]]) -> list[int]:
        """For each line `assemble(windows)` writes, the `after` line it shows (-1 for a marker)."""
        out: list[int] = []
        at = 0
        for s, e in windows:
            if s > at:
                out.append(-1)
            out += range(s, e)
            at = e
        if at < len(self.after):
            out.append(-1)
        return out

    def _deleted_definition(self, hunk: Hunk):
        """(kind word, name) of a definition of `before` that the hunk deletes whole."""
        if hunk.added:
            return None
        for d in definitions(self.edit.before, self.language):
            if hunk.old_start <= d.start_line and d.end_line < hunk.old_end:
                rest = self.before[hunk.old_start:d.start_line] + self.before[d.end_line + 1:hunk.old_end]
                if all(not line.strip() or line.strip().startswith(("#", "//", "/*", "*", "--")) for line in rest):
                    kind = next((word for key, word in _KIND_WORDS if key in d.kind), "function")
                    return kind, d.name
        return None

    def instruction_only(self) -> tuple[list[str], str] | None:
        if len(self.edit.hunks) != 1:
            return None
        gone = self._deleted_definition(self.edit.hunks[0])
        if gone is None or uses(self.edit.after, gone[1]):
            return None
        return [], f"Remove the `{gone[1]}` {gone[0]}."


def write_snippet(edit: Edit, language: str, rng: random.Random, style: str | None = None) -> Snippet:
    """The snippet for the edit in `style`, or in one drawn by `rng` among those that fit the edit.

    A deletion of the file's first or last lines cannot be shown by the lines around it (there is a
    line on one side only, and a snippet that starts at the file's new first line reads as a piece of
    the file): it is written with a note (`deletion-note`) whatever the style."""
    writer = _Writer(edit, language, rng)
    last = len(writer.after)
    if any(not h.added and h.after_start in (0, last) for h in edit.hunks):
        style = "deletion-note"
    elif style is None and rng.random() < 0.3 and writer.instruction_only() is not None:
        style = "instruction-only"  # the one kind of edit an instruction alone says: drawn more often where it fits
    left = {} if style else dict(WEIGHTS)  # a style asked for falls back to `minimal` at once
    while True:
        style = style or rng.choices(list(left), weights=list(left.values()))[0]
        made = getattr(writer, style.replace("-", "_"))()
        if made is not None:
            break
        left.pop(style, None)
        style = None if left else "minimal"
    update, instruction = made if style == "instruction-only" else (made, "")
    update, habits = writer.habits(update) if update else (update, ())
    return Snippet("".join(update), instruction, style, habits)

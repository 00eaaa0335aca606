"""Checks of a rewritten file that need no expected file: reasons not to trust it.

Each is a property every correct apply has, whoever wrote the result (the model or the merge):
- the snippet's code lines are all in it, in order (compared stripped; an edit shows its new lines),
  but for its deletion notes (`// removed foo()`, `instruction.deletion_notes`); where the snippet has
  markers, each hunk is one piece of it, with no line between its lines that the snippet does not show;
- it has no lazy-marker line (`// ... existing code ...`, or a bare `...` where the snippet uses one as
  a marker) the original lacks, nor a deletion note of the snippet's written as code;
- it parses (tree-sitter) where the original does, and where the original does not (macros tree-sitter
  cannot read), it has no more parse errors than the original;
- a marker inside a block the snippet opens anew stands for some code: the block holds more than the
  snippet shows of it (code moved into a new function, which no merge in file order can fetch);
- it declares no name twice in one scope where the original does not (a field, a `const`, a Go
  function: a replaced line kept beside its replacement);
- a definition the snippet shows whole (its body, no marker inside) is in it with the same lines;
- a code name the instruction or a deletion note asks to remove ("drop the deprecated
  `http.CloseNotifier`", "x was removed", `// removed foo()`) is gone from its code, unless the
  snippet's code uses that name (comments do not count);
- each run of original lines it deletes has the snippet's evidence (shown around without it, edited at
  a marker, removed by name, or inside a definition shown whole: `merge.evidence`), placement-free, so
  that a merge that places a hunk wrongly and deletes code a marker keeps is refused, not trusted;
- it is not the original unchanged while the snippet shows lines the original lacks, or while an
  instruction asks for an edit the snippet does not show;
- it keeps the original's lines the snippet does not remove: no more than `MAX_DROPPED` of them go
  missing (what the merge keeps is what the snippet keeps; a model that stops early or skips a block
  loses code silently otherwise).
"""

from __future__ import annotations

import re
from collections import Counter

from ..code.definitions import (comment_lines, definitions, duplicate_declarations, header_line, snippet_definitions,
                                syntax_tree)
from ..code.instruction import (code_text, deletion_notes, names_to_remove, noted_names, uses, without_change_notes,
                          without_comment_lines)
from ..merge import (closes_block, code_lines, indent_width, is_marker, marker_keys, merge, opens_block,
                     shown_whole_beyond_doubt, unexplained_deletions)
from ..code.regions import parse_errors, parser_for

MAX_DROPPED = 0.2


def _marks(line: str) -> bool:
    """A marker line, or a bare `...` / `…` line: where a snippet's hunks part, for the checks."""
    return is_marker(line) or line.strip() in ("...", "…")


def _missing_in_order(wanted: list[str], have: list[str]) -> int:
    """How many of `wanted` are not matched when walking `have` in order (a greedy subsequence match)."""
    at, missing = 0, 0
    for line in wanted:
        found = next((i for i in range(at, len(have)) if have[i] == line), None)
        if found is None:
            missing += 1
        else:
            at = found + 1
    return missing


def _line_errors(node, lines: list[str]) -> tuple[str, str, int, int]:
    """An error within one line as (the stripped line, the node's kind, its span from the line's first
    character), comparable wherever the line stands and however it is indented."""
    line = lines[node.start_point[0]]
    indent = len(line) - len(line.lstrip())
    return line.strip(), node.type, node.start_point[1] - indent, node.end_point[1] - indent


def _lines_the_grammar_misreads(snippet_tree, update: str, original: str) -> frozenset[tuple]:
    """The errors (`_line_errors`) of the snippet's own parse within a new code line (one the original
    lacks): an ERROR or MISSING node, at any depth, starting and ending on it. Where the grammar cannot
    read the line's text (`#  if __has_include(<x>)`, a macro before a declaration), the same error in a
    result is the new line's, not the merge's placement: an error of the same kind on that line where the
    spans meet (an ERROR node's edges move with what the parser read before it). An error of another kind
    or place is the result's: a new `} else if (x) {` errs in a snippet for want of the `if` a marker
    hides, and lacks a `)` in a result that keeps the old condition's head before it. An old line erring
    in the snippet errs there for want of the lines a marker hides (a fragment's closers), which says
    nothing of the result."""
    if snippet_tree is None or not snippet_tree.has_error:
        return frozenset()
    lines = update.split("\n")
    misread, stack = set(), [snippet_tree]
    while stack:
        node = stack.pop()
        if (node.is_error or node.is_missing) and node.start_point[0] == node.end_point[0]:
            misread.add(_line_errors(node, lines))
        if node.has_error:
            stack.extend(node.children)
    old = {line.strip() for line in original.split("\n")}
    return frozenset(e for e in misread if e[0] and e[0] not in old and not is_marker(e[0]))


def _placement_errors(tree, text: str, excused: frozenset[tuple]) -> int:
    """The parse errors of `text` (outermost) but those within one line that the snippet's own parse has
    there too (`_lines_the_grammar_misreads`)."""
    lines = text.split("\n")

    def is_excused(node) -> bool:
        if node.start_point[0] != node.end_point[0]:
            return False
        line, kind, start, end = _line_errors(node, lines)
        return any(e[0] == line and e[1] == kind and start <= e[3] and e[2] <= end for e in excused)

    return sum(1 for node in parse_errors(tree) if not is_excused(node))


def _hunks_broken_up(shown: list[str], have: list[str]) -> list[str]:
    """Where the snippet has markers, each hunk (its lines between two markers) is a piece of the result:
    from the hunk's first line the result has once to its last, the result's lines are the hunk's own
    (blank lines aside). `shown`: the snippet's lines but its notes; `have`: the result's `code_lines`.
    The first line of each hunk that comes apart (old lines kept inside it). A snippet without markers
    may show two definitions whole with the code between them kept, so it is not read so."""
    if not any(map(_marks, shown)):
        return []
    hunks, hunk = [], []
    for line in shown:
        if _marks(line):
            hunks.append(hunk)
            hunk = []
        elif line.strip():
            hunk.append(line.strip())
    hunks.append(hunk)
    count, broken = Counter(have), []
    for hunk in hunks:
        in_hunk = Counter(hunk)
        once = [n for n, line in enumerate(hunk) if count[line] == 1 and in_hunk[line] == 1]
        if len(once) < 2:
            continue
        first, last = have.index(hunk[once[0]]), have.index(hunk[once[-1]])
        if have[first:last + 1] != hunk[once[0]:once[-1] + 1]:
            broken.append(hunk[once[0]])
    return broken


def _markers_in_new_blocks_left_empty(original: str, update: str, result: str) -> list[str]:
    """The new blocks (an opening line the original lacks) whose body the snippet elides with a marker,
    where the result's block holds nothing but the snippet's own lines: a marker stands for code that
    exists, so that code is missing (code the snippet moves into a new function, which no merge in file
    order can fetch). By indentation: a block runs to the next line as shallow as its opening line, and
    a marker's block opens on the nearest shallower line above it, unless that line is a marker too."""
    old = {line.strip() for line in original.split("\n")}
    lines, out = update.split("\n"), result.split("\n")
    found = []
    for n, line in enumerate(lines):
        if not is_marker(line) or not (width := indent_width(line)):
            continue
        opener = next((m for m in range(n - 1, -1, -1) if lines[m].strip() and indent_width(lines[m]) < width), None)
        if opener is None or is_marker(lines[opener]) or (head := lines[opener].strip()) in old or head in found:
            continue
        shown = set(_block(lines, opener))
        starts = [m for m, text in enumerate(out) if text.strip() == head]
        if len(starts) == 1 and all(text in shown for text in _block(out, starts[0])):
            found.append(head)
    return found


def _block(lines: list[str], opener: int) -> list[str]:
    """The stripped non-blank, non-marker lines after `opener` that are deeper than it, up to the first
    that is not."""
    width, body = indent_width(lines[opener]), []
    for text in lines[opener + 1:]:
        if text.strip() and not is_marker(text):
            if indent_width(text) <= width:
                break
            body.append(text.strip())
    return body


# A call by bare name (`size()`, not `x.size()` or `a::size()`): one the file's own definitions answer.
_BARE_CALL = re.compile(r"(?<![\w.>:$@])([A-Za-z_]\w*)\s*\(")


def _calls_to_deleted_definitions(original: str, update: str, result: str, language: str) -> list[str]:
    """Names the original defines and the result no longer does, which the snippet's new lines call by
    bare name: the new code needs what the result deleted (a hunk read as an edit of the method it calls,
    where the snippet adds a method beside it)."""
    def defined(text: str) -> set[str]:
        return {d.name.split(".")[-1].split("::")[-1] for d in definitions(text, language)}

    gone = defined(original) - defined(result)
    if not gone:
        return []
    old = {line.strip() for line in original.split("\n")}
    new_code = code_text("\n".join(line for line in update.split("\n") if line.strip() not in old), language)
    return sorted(gone & set(_BARE_CALL.findall(new_code)))


def _changed_whole_definitions(original: str, update: str, result: str, language: str) -> list[str]:
    """Names of the definitions the snippet shows whole (with their body, no marker inside or right
    after, as `merge.pairs._shown_whole` reads it) that the result holds with other lines: code was
    interleaved into them (a new method's header read as an edit of the next method's keeps that one's
    body under the new name). For a definition the original has, only where the snippet shows it whole
    beyond doubt (`merge.shown_whole_beyond_doubt`): a marker after it, even after blank lines at its
    own depth, may hold the rest of its old body, and the evidence leaves both readings open."""
    lines = update.split("\n")
    markers = [n for n, line in enumerate(lines) if _marks(line)]
    shown = snippet_definitions(update, language, [n for n in markers if not lines[n][:1].isspace()])
    names = Counter((d.kind, d.name) for d in shown)
    old = {(d.kind, d.name) for d in definitions(original, language)}

    def whole(d) -> bool:
        if opens_block(lines[d.end_line].strip()):  # its body is not shown: a marker after it holds it
            return False
        after = d.end_line + 1
        if not closes_block(lines[d.end_line].strip()):  # a flush-left marker after blank lines may hold the rest
            while after < len(lines) and not lines[after].strip():
                after += 1
            if after not in markers or indent_width(lines[after]) >= indent_width(lines[d.name_line]):
                after = d.end_line + 1
        return (d.complete and d.end_line > d.name_line and not any(d.start_line <= m <= after for m in markers)
                and ((d.kind, d.name) not in old or shown_whole_beyond_doubt(d, lines, markers))
                and all(whole(e) for e in shown if d.name_line < e.name_line and e.end_line == d.end_line))

    wanted = {(d.kind, d.name): lines[d.name_line:d.end_line + 1] for d in shown
              if names[d.kind, d.name] == 1 and whole(d)}
    if not wanted:
        return []
    out = result.split("\n")
    have = [d for d in definitions(result, language) if (d.kind, d.name) in wanted]
    found = Counter((d.kind, d.name) for d in have)
    return sorted({d.name for d in have if found[d.kind, d.name] == 1
                   and code_lines("\n".join(out[header_line(d, wanted[d.kind, d.name][0], out):d.end_line + 1]))
                   != code_lines("\n".join(wanted[d.kind, d.name]))})


class LineChecks:
    """The checks a result fails by single lines: a marker line or a deletion note of the snippet's written
    as code more often than the original has it, and a code name the instruction or a note asks to remove
    still in use. A line that fails one fails it in every text that holds the line, so a model's output can
    be checked as it is written (`feed` it its finished lines) and stopped where no ending can pass.
    `problems` runs them on whole results."""

    def __init__(self, original: str, update: str, language: str, instruction: str, notes: dict[int, set[str]]):
        self.language = language
        self.before = Counter(code_lines(original))
        # Marker comments, and the lines the snippet itself uses as markers (a bare `...`).
        self.as_markers = marker_keys(original, update, language)
        update_lines = update.split("\n")
        # A note on a code line (`x = 1  # changed: was 0`) is no more a part of the result than one alone.
        noted_code = [line for line, clean in zip(update_lines, without_change_notes(original, update, language)
                                                  .split("\n")) if line != clean]
        self.note_lines = Counter([update_lines[n].strip() for n in notes] + [line.strip() for line in noted_code])
        self.noted = noted_names(notes)
        self.names = names_to_remove(instruction, update, language, original) | self.noted
        self.written: Counter[str] = Counter()  # the result's lines fed so far (`code_lines`)
        self.kept: set[str] = set()
        self._over = False  # a marker or note line is written more often than the original has it

    @property
    def failed(self) -> bool:
        """Whether the lines fed so far fail a check (`problems` says which), in O(1)."""
        return self._over or bool(self.kept)

    def _over_original(self, line: str) -> bool:
        if is_marker(line) or line in self.as_markers:
            return self.written[line] > self.before[line]
        return min(self.written[line], self.note_lines[line]) > self.before[line]

    def feed(self, lines: str) -> None:
        """Read more of the result: whole lines (up to a newline), or the whole rest of it."""
        new = code_lines(lines)
        self.written.update(new)
        self._over = self._over or any(map(self._over_original, new))
        if left := self.names - self.kept:
            code = code_text(lines, self.language)
            self.kept |= {name for name in left if uses(code, name)}
        # A note's names may be strings too (`AsyncFunction("getPermissionsAsync")`), as the note read them.
        if left := self.noted - self.kept:
            with_strings = without_comment_lines(lines, self.language)
            self.kept |= {name for name in left if uses(with_strings, name)}

    def problems(self) -> list[str]:
        found = []
        new = self.written - self.before
        if markers := sum(n for line, n in new.items() if is_marker(line) or line in self.as_markers):
            found.append(f"it writes {markers} marker line(s) (`... existing code ...`) the original does not have")
        if written_notes := sum(((self.written & self.note_lines) - self.before).values()):
            found.append(f"it writes {written_notes} of the snippet's note(s) (`// removed ...`, `// changed: ...`) as code")
        if self.kept:
            found.append(f"it still has {', '.join(f'`{n}`' for n in sorted(self.kept))}, which the instruction or "
                         "a note in the snippet asks to remove")
        return found


def problems(original: str, update: str, result: str, language: str, kept_by_merge: str | None = None,
             instruction: str = "", comments_may_go: bool = False) -> list[str]:
    """What is wrong with `result` as the edited file, [] when it passes every check. `kept_by_merge`:
    the merge candidate's text when the caller has it (it tells which original lines the snippet keeps).
    `comments_may_go`: the share of lines it may drop counts code only (a reading of the snippet that
    replaces the file's header comment with the snippet's first lines drops a licence, not code)."""
    found = []
    notes = deletion_notes(original, update, language)
    update_lines = without_change_notes(original, update, language).split("\n")
    shown = "\n".join(line for n, line in enumerate(update_lines) if n not in notes)
    snippet = [line for line in code_lines(shown) if not _marks(line)]
    have = code_lines(result)
    if (missing := _missing_in_order(snippet, have)) and snippet:
        found.append(f"{missing} of the snippet's {len(snippet)} lines are not in it (in order)")
    if broken := _hunks_broken_up(shown.split("\n"), have):
        found.append(f"{len(broken)} of the snippet's hunks come apart in it, from `{broken[0]}` on (lines between "
                     "that the snippet does not show)")
    by_line = LineChecks(original, update, language, instruction, notes)
    by_line.feed(result)
    found += by_line.problems()
    parser = parser_for(language)
    # The parses the merge made of these texts (cached); the snippet is parsed only where the result errs.
    old_tree, new_tree = syntax_tree(original, language), syntax_tree(result, language)
    found += _parse_problems(parser, old_tree, new_tree, original, update, result, language)
    twice = sorted({name for _, name in duplicate_declarations(new_tree, language)
                    - duplicate_declarations(old_tree, language)})
    if twice:
        found.append(f"it declares {', '.join(f'`{n}`' for n in twice)} twice in one scope (the original does not)")
    found += _empty_marker_problems(original, update, result)
    if changed := _changed_whole_definitions(original, shown, result, language):  # notes are not lines of the result
        found.append(f"it has {', '.join(f'`{n}`' for n in changed)} with other lines than the snippet shows whole")
    before = by_line.before
    if result == original and any(line not in before for line in snippet):
        found.append("it is the original unchanged, but the snippet shows lines the original does not have")
    elif result == original and instruction.strip() and all(line in before for line in snippet):
        found.append("it is the original unchanged, but the instruction asks for an edit")
    found += _deletion_problems(original, update, result, language, instruction)
    if called := _calls_to_deleted_definitions(original, shown, result, language):
        found.append(f"it deletes the definition of {', '.join(f'`{n}`' for n in called)}, which the snippet's new "
                     "code calls")
    kept = Counter(code_lines(kept_by_merge if kept_by_merge is not None else merge(original, update, language, instruction).text))
    counted = before
    if comments_may_go:
        prose = comment_lines(original, language)
        counted = Counter(line.strip() for n, line in enumerate(original.split("\n"))
                          if line.strip() and n not in prose)
    dropped = sum(((counted & kept) - Counter(have)).values())
    total = sum(counted.values())
    if total and dropped > MAX_DROPPED * total:
        found.append(f"it drops {dropped} of the original's {total} lines that the snippet does not remove "
                     f"(more than {MAX_DROPPED:.0%})")
    return found


def _tree(parser, text: str):
    """The text's syntax tree, None without a parser or text."""
    return parser.parse(text.encode()).root_node if parser is not None and text.strip() else None


def _parse_problems(parser, old_tree, new_tree, original: str, update: str, result: str, language: str) -> list[str]:
    if old_tree is None or new_tree is None or not new_tree.has_error:
        return []
    snippet_tree = _tree(parser, update)
    excused = _lines_the_grammar_misreads(snippet_tree, update, original)
    old_errors = _placement_errors(old_tree, original, excused)
    if (more := _placement_errors(new_tree, result, excused) - old_errors) <= 0:
        return []
    return [f"it does not parse as {language} (the original does)" if not old_errors else
            f"it has {more} more parse error(s) as {language} than the original"]


def _empty_marker_problems(original: str, update: str, result: str) -> list[str]:
    if empty := _markers_in_new_blocks_left_empty(original, update, result):
        return [f"a marker in the new block {', '.join(f'`{h}`' for h in empty)} stands for code it does not have"]
    return []


def _deletion_problems(original: str, update: str, result: str, language: str, instruction: str) -> list[str]:
    if unexplained := unexplained_deletions(original, update, result, language, instruction):
        return [f"it deletes {sum(run.count for run in unexplained)} line(s) the snippet keeps under a marker, "
                f"from {unexplained[0]}"]
    return []


def placement_problems(original: str, update: str, result: str, language: str, instruction: str = "") -> list[str]:
    """The checks that judge a text holding only some of the snippet's hunks (the rest of the file as the
    original has it): it parses where the original does, deletes nothing without the snippet's evidence,
    and a marker in a new block stands for some code. What tells which of a merge's changed regions is
    wrong (`regions_to_rewrite.py`)."""
    parser = parser_for(language)
    old_tree, new_tree = syntax_tree(original, language), syntax_tree(result, language)
    return (_parse_problems(parser, old_tree, new_tree, original, update, result, language)
            + _deletion_problems(original, update, result, language, instruction)
            + _empty_marker_problems(original, update, result))

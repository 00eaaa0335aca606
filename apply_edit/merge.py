"""The deterministic merge of the original and the lazy snippet, with a report of how sure it is.

The snippet is a sequence of lines and marker comments (`// ... existing code ...`); a marker stands for
original lines kept as they are. The merge is one alignment of the whole snippet against the original
(dynamic programming over snippet line x original line), scored so that structure decides:

- a snippet line equal to an original line matches it; a line unique in the original is worth much more
  than a common one (`return nil`, `}`), and writing such a line as new code (a duplicate) costs as much;
- a line that looks like an edited version of an original line (shared start and end; or the same name
  declared, typed field included, assigned or called, where the file has that on one or two lines;
  or, for a new line that opens a body a marker keeps, the same first word and last bracket at its
  depth, the original's header possibly spread over several lines) replaces it; a definition's header
  (`def build(`, `function build(`) replaces the header of the definition it names where the file has
  one, with all the lines up to where that header's parameters close; a line that names nothing (`break;`, `return nil`,
  `} else {`) is a common line, even where the original has it once;
- between two snippet lines with no marker between them, original lines are deleted (that is how a
  snippet shows a deletion); at a marker they are kept for free, but only as deep as the marker is
  indented: a marker inside a body stands for the rest of that body, not for what follows the body
  (keeping the less indented line where that body ends costs more than a deletion, each one after it
  less: a few such lines are the replaced end of the block, many are code after a forgotten marker;
  a line as shallow as the snippet's next line is a sibling of that line and costs only the latter),
  except the body's closing line (`}`, `end`) where the snippet goes on beside that body without it;
- a definition (function, method, class, type, impl) that the snippet shows whole, with no marker inside,
  replaces the original's definition of the same kind and name from its first line to its last (tree-
  sitter, `definitions.py`); one with no namesake there is new code, whose lines match none of the
  original's definitions of its kind (which it resembles: a similar header, the same locking lines),
  unless it renames one (most of both bodies are the same lines);
- before the first and after the last snippet line, with no marker there, original lines are kept too
  (a snippet without markers is a piece of the file), unless the snippet's unmatched head or tail is a
  rewrite of a head or tail of about its own size, or the snippet starts (ends) with the file's own
  first (last) lines;
- right after a closing line (`}`, `end`) a marker keeps code at most as deep as that line: the rest of
  the block just closed is not kept (a replaced `return err` before `}` does not survive); a block the
  snippet opens on a line found once and closes after a marker inside it closes where the original's
  block does (brackets decide where indentation cannot, as in a C `switch`; a header whose parameters
  close on the line that opens its body, `): Readable<T> {`, goes on to where that body closes);
- lines shown as context are not written twice: a run of snippet lines that the alignment wrote as new
  right beside a marker keeping the very same run of the original is aligned again, matched to that run
  (the lines between it and the snippet line before it are then deleted, as the snippet showed them),
  and so is its end from a line found once; a comment line that ends a hunk of new comment lines
  before a marker (`//`, `//! ````) is its twin further down the comment block the hunk rewrites;
  and the first lines after a marker are where the old code resumes: a line found once is not written
  as new while its original is deleted, and a run of lines the original has in a row is not written as
  new either (new code latching onto copies of old lines had pushed them aside);
- a line that uses a name the instruction asks to remove (`instruction.py`: "drop the deprecated x",
  "x was removed", a plain word where the file defines it) is not kept for a marker, nor before the
  snippet's first or after its last line: the snippet cannot show a line it drops there; a definition
  of that name goes whole, and so does a block registered under it as a string (`AsyncFunction("name")
  {`), each with the comment block right above it; between two snippet lines such a line goes for free;
- a kept original line that declares a name again right beside the snippet's new declaration of it, in
  the same scope (`is_std: is_std,` under `is_std,`), is the line the new one replaces;
- new code is not placed between two blank lines of the original: a run of blank lines (a file's double
  spacing before a definition) stays together, and the new code brings the blank lines it shows.

A bare `...` (or `…`) line is a marker, unless the original has that line as code (not inside a doc
comment or string) or, in Python, it is a stub body (right after a header, with nothing deeper after it).

A snippet indented with spaces where the file uses tabs (or the reverse) is first re-indented as the
file is. Where the snippet is a uniformly re-indented copy of original code (a method shown without its class),
new lines get the original's indentation; where only some lines moved (a block wrapped in a new `if`),
the snippet's indentation is the edit.

`MergeCandidate.report` says how each hunk was placed, which original lines were deleted, and which were
kept outside a marker's scope: what a caller needs to decide whether to trust the merge.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .definitions import Definition, declared_twice_in, definitions, lines_inside_strings, snippet_definitions
from .instruction import deletion_notes, names_to_remove, noted_names, uses
from .languages import code_of, spec_of

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
class HunkPlacement:
    """Where one hunk (the snippet lines between two markers) landed."""

    snippet_line: int  # the hunk's first line in the snippet (0-based)
    lines: int
    # definition: part of a definition shown whole; unique: matches a line found once in the original;
    # scope: starts where its marker's scope ends; edited: replaces an edited version of a line found
    # once; ambiguous: only common lines (`}`, `return nil`) match, or edit them; new: nothing matches
    # (new code at the start or end of the file, or placed by the markers around it)
    anchor: str
    original_line: int | None  # the first original line it matched or was inserted before
    between_markers: bool  # a marker before and after it (new code there has no settled place)


@dataclass
class MergeReport:
    hunks: list[HunkPlacement] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)  # original lines the merge removed
    crossed: list[int] = field(default_factory=list)  # lines a marker kept outside its scope (less indented)

    @property
    def ambiguous(self) -> list[HunkPlacement]:
        """Hunks whose place the structure does not settle: only common lines anchor them, or they are
        new code between two markers."""
        return [h for h in self.hunks if h.anchor == "ambiguous" or (h.anchor == "new" and h.between_markers)]

    @property
    def confident(self) -> bool:
        """Every hunk placed by structure, nothing kept outside a marker's scope, and something to merge
        (a snippet with no code lines leaves the edit to the instruction, which only the model reads)."""
        return bool(self.hunks) and not self.ambiguous and not self.crossed


@dataclass
class MergeCandidate:
    text: str
    origin: list[int | None]  # per candidate line: the original line it copies, or None for a new line
    original_lines: int
    report: MergeReport = field(default_factory=MergeReport)

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


# Scores (a match is worth its weight; the rest cost). Chosen on the even-named half of the fixtures.
# A snippet line the original has once is context almost surely: matching it is worth much, writing it
# as new code (a duplicate) costs as much. A line the original has several times (`return nil`, `}`) is
# as likely new code as context: little either way, so new code does not latch onto old code.
UNIQUE, COMMON, TRIVIAL, BLANK = 3.0, 0.5, 0.3, 0.3  # match of a line found once / more often / `}` / blank
REINDENTED = 0.25  # a match whose indentation differs is worth this much less
EDITED = -0.5  # a snippet line that replaces a similar original line (worse than a keep and a new line)
INSERT, INSERT_BLANK = 1.0, 0.2  # a line the original does not have; a line it has costs its match weight
DELETE, DELETE_BLANK = 1.0, 0.3
CROSS = 2.5  # keeping a line a marker's indentation says it does not stand for (where its block ends)
BEYOND = 0.5  # keeping each further such line: many of them are code the snippet did not mean to delete
OUT_OF_SCOPE = 10.0  # a body's opening line written as new, or its closing line placed inside it
DUPLICATE = 1000.0  # a line shown as context written as new code (see _realigned)
SPLIT = 1.0  # new code placed between two blank lines of the original (splitting their run)
NAMED_REMOVED = 2.5  # keeping a line that uses a name the instruction asks to remove (`instruction.py`)
_NEG = -1e18


def _trivial(key: str) -> bool:
    return len(key) <= 3 or not any(ch.isalnum() for ch in key)


# Words that name nothing: a line made only of them and punctuation (`break;`, `return nil`, `} else {`)
# is the same in every block, so even found once in the original it says little about where a hunk goes.
_NAMELESS = frozenset("""break continue return pass else try finally default do end then fi done
    nil null None undefined true false True False self this super raise throw yield fallthrough""".split())
_WORD = re.compile(r"[A-Za-z_]\w*")
_LITERAL = re.compile(r"\d|['\"`]")


def _names_nothing(key: str) -> bool:
    return all(word in _NAMELESS for word in _WORD.findall(key)) and not _LITERAL.search(key)


def _closes(key: str) -> bool:
    """A line that only closes blocks: `}`, `});`, `]`, `end`; not `}, {` or `} {`, which open the next."""
    return bool(key) and _trivial(key) and (key[0] in "})]" or key.rstrip(";") == "end") and key[-1] not in "{(["


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
    return common >= 8 and common >= 0.6 * shorter


_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")
_NOT_CALLS = frozenset("if while for switch return catch sizeof typeof function elif and or not in".split())


# `let x =`, `const x =`, `var x`, Rust's `let mut x`, Go's `x, err :=`, `this.end = `, `self.x = `: the
# name a line declares or assigns.
_DECLARES = re.compile(r"^(?:export\s+)?(?:(?:let|const|var)\s+(?:mut\s+)?([A-Za-z_$][\w$]*)"
                       r"|([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*:="
                       r"|([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\s*=(?!=))")


# A typed declaration, `private final Map<String, Option> optionMap = ...;`, `static int count;`, PHP's
# `public $version = ...;`: words (a type, modifiers), then the name, then `=` or `;`. Not `return x;`.
_TYPED = re.compile(r"^(?!(?:return|throw|yield|case|else|new|delete|await|goto|echo|print|import|package|using)\b)"
                    r"(?:[A-Za-z_][\w.]*(?:<[^=;()]*>)?(?:\[\])*\s+)+([A-Za-z_$][\w$]*)\s*(?:=(?!=)|;)")


# A definition's header: `def build(`, `async function build(`, `pub fn build<T>(`, `class Build:`.
_DEFINES = re.compile(r"^(?:(?:export|default|async|pub(?:\([\w:]+\))?|static|public|private|protected|final|"
                      r"abstract|override|inline|suspend|open)\s+)*(?:def|function\*?|fn|fun|func|class|struct|enum|"
                      r"trait|interface|module)\s+([A-Za-z_$][\w$]*)")


def _identity(key: str) -> tuple[str, ...] | None:
    """What a line is about, whatever else changed in it: the definition it starts, the name it declares,
    else the names it calls, in order (`if (!write_bignum(out, x))` -> write_bignum), when one is six
    characters or more."""
    if defines := _DEFINES.match(key):
        return ("defines", defines[1])
    if declared := _DECLARES.match(key):
        return ("assigns", declared[3]) if declared[3] else ("declares", declared[1] or declared[2])
    if typed := _TYPED.match(key):
        return ("declares", typed[1])
    calls = tuple(name for name in _CALL.findall(key) if name not in _NOT_CALLS)
    return ("calls", *calls) if calls and max(map(len, calls)) >= 6 else None


def _rare_identities(keys: list[str]) -> dict[tuple[str, ...], set[int]]:
    """Lines by `_identity`, for identities found on at most two lines (a definition and one use): a
    snippet line with the same identity is an edit of that line, however its arguments changed or
    whatever now wraps the call (`let retryAfterHeader = retryAfter ? ... : undefined`). An identity
    found more often (`fmt.Errorf`, `print`, `err :=`) says nothing about which line was edited."""
    found: dict[tuple[str, ...], set[int]] = {}
    for j, key in enumerate(keys):
        if (identity := _identity(key)) is not None:
            found.setdefault(identity, set()).add(j)
    return {identity: lines for identity, lines in found.items() if len(lines) <= 2}


def _dangling_edits(ops: list[tuple], snippet: _Snippet, orig: list[str]) -> list[tuple[int, int]]:
    """Edits (snippet line, original line) that bring a new name and take away one the original line
    introduces (its first line: where it is declared, in most languages; not a call or a member) that the
    snippet never shows, while lines the alignment keeps still use it: not an edit of that declaration
    but a new neighbour that looks like it (a new `PyDoc_STRVAR(x_doc, ...)` over the old one, whose name
    the method table still uses). A rename changes the uses too."""
    first: dict[str, int] = {}
    for j, line in enumerate(orig):
        for name in _LONG_NAME.findall(line):
            first.setdefault(name, j)
    kept = [orig[op[1]] for op in ops if op[0] == "keep"] + [orig[op[2]] for op in ops if op[0] == "match"]
    used = {name for line in kept for name in _LONG_NAME.findall(line)}
    shown = {name for line in snippet.lines for name in _LONG_NAME.findall(line)}
    return [(op[1], op[2]) for op in ops if op[0] == "edit"
            and any(name not in first for name in _DECLARED_NAME.findall(snippet.lines[op[1]]))
            and any(first[name] == op[2] and name in used
                    for name in set(_DECLARED_NAME.findall(orig[op[2]])) - shown)]


_HEAD = re.compile(r"^\W*\w+")  # a line's first word with what precedes it: `<View`, `if`, `def`
_LONG_NAME = re.compile(r"[A-Za-z_]\w{5,}")
_DECLARED_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w{5,}(?!\w|\s*\()")  # not a member, not a call


def _ends_index(keys: list[str | None]) -> dict[str, list[int]]:
    """Positions of the keys by their first and by their last four characters: a line `_similar` to
    another (or equal to it) shares one of them, so only those need comparing."""
    index: dict[str, list[int]] = {}
    for j, key in enumerate(keys):
        if key is not None:
            index.setdefault(key[:4], []).append(j)
            index.setdefault("\0" + key[-4:], []).append(j)
    return index


def _sharing_ends(index: dict[str, list[int]], key: str) -> set[int]:
    return set(index.get(key[:4], ())) | set(index.get("\0" + key[-4:], ()))


@dataclass
class _Snippet:
    lines: list[str]  # the snippet's code lines, markers removed
    hunk_of: list[int]  # per line: its hunk
    reach: list[int | None]  # per gap (before line i; len(lines) + 1 gaps): the marker's indentation, or None
    number: list[int]  # per line: its line number in the snippet
    markers: set[int]  # line numbers of the marker lines


def _parse_snippet(update_lines: list[str], original_keys: set[str], language: str,
                   original_code: set[str], notes: set[int] = frozenset()) -> _Snippet:
    """`original_code`: the original's lines (stripped) outside multi-line comments and strings: a bare
    `...` is the original's own line only where the original has it as code (not in a doc comment).
    `notes`: the deletion notes (`instruction.deletion_notes`), left out with a blank line they leave doubled."""
    lines, hunk_of, number, reach, markers = [], [], [], [None], set()
    hunk, previous = 0, ""
    content = [n for n, line in enumerate(update_lines) if line.strip() and n not in notes]
    first, last = (content[0], content[-1]) if content else (0, -1)
    in_strings = lines_inside_strings("".join(update_lines), language) if language else set()
    for n, line in enumerate(update_lines[first:last + 1], start=first):
        key = line.strip()
        if n in notes or (not key and n - 1 in notes and lines and not lines[-1].strip()):
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
    return _Snippet(lines, hunk_of, reach, number, markers)


def _keep_between_whole_definitions(snippet: _Snippet, pairs, orig: list[str], comment) -> None:
    """In a snippet without markers, two definitions shown whole one after the other (blank and comment
    lines between) replace two original ones that code separates: "these two functions, changed". That
    code is left where it is, as if a marker stood between them (with markers elsewhere, a snippet that
    shows two definitions side by side shows the code between them deleted)."""
    if snippet.markers:
        return
    whole = sorted((a, b, start, end) for a, b, start, end, is_whole in pairs if is_whole)
    for (a1, b1, _, e1), (a2, _, s2, _) in zip(whole, whole[1:]):
        between = range(b1 + 1, a2)
        if b1 < a2 and e1 + 1 < s2 and all(not (key := snippet.lines[i].strip()) or comment(key) for i in between) \
                and any(line.strip() for line in orig[e1 + 1:s2]) \
                and all(snippet.reach[g] is None for g in range(b1 + 1, a2 + 1)):
            snippet.reach[b1 + 1] = min(_width(snippet.lines[a1]), _width(snippet.lines[a2]))


def _whole_body(lines: list[str], n: int, last: int) -> bool:
    """Whether the `...` on line n, right after a Python header, is that body's only line (a stub: what
    follows is less indented) rather than a marker for the body's first lines (`def f():` `...` then more
    of the body)."""
    after = next((line for line in lines[n + 1:last + 1] if line.strip()), None)
    return after is None or _width(after) < _width(lines[n])


def _shown_whole(d: Definition, snippet: _Snippet) -> bool:
    """Whether the snippet shows definition d whole: it parses, no marker inside it or right after it
    (that may be the rest of its body)."""
    return d.complete and not any(d.start_line <= m <= d.end_line + 1 for m in snippet.markers)


# A function definition's kind where the same code inside a class is a method of another kind (PHP).
_METHOD_OF = {"function_definition": "method_declaration"}


def _pairs(snippet: _Snippet, in_snippet: list[Definition], in_original: list[Definition]
           ) -> list[tuple[int, int, int, int, bool]]:
    """(first, last snippet code line, first, last original line, whole) for the snippet's definitions
    that have exactly one namesake of their kind in the original and in the snippet: those shown whole
    (no marker inside: `whole`), and those shown with markers inside but with their closing line
    (`}`, `end`), whose first and last lines are the original's first and last."""
    if not in_snippet:
        return []
    names = Counter((d.kind, d.name) for d in in_original)
    shown_names = Counter((d.kind, d.name) for d in in_snippet)
    by_name = {(d.kind, d.name): d for d in in_original}
    index = {n: i for i, n in enumerate(snippet.number)}
    whole_spans: list[tuple[int, int]] = []
    pairs = []
    for d in in_snippet:  # outer definitions come before the ones inside them
        key = (d.kind, d.name)
        if not names[key] and names[(_METHOD_OF.get(d.kind), d.name)]:
            key = (_METHOD_OF[d.kind], d.name)  # a method shown without its class parses as a function
        if names[key] != 1 or shown_names[d.kind, d.name] != 1 or d.start_line not in index or d.end_line not in index:
            continue
        if any(a <= d.start_line and d.end_line <= b for a, b in whole_spans):
            continue  # inside a definition shown whole: it goes with it
        o = by_name[key]
        # Without decorators of its own, the snippet's definition leaves the original's in place.
        start = o.start_line if d.name_line > d.start_line else o.name_line
        whole = _shown_whole(d, snippet)
        if whole and d.end_line == d.name_line and o.end_line > o.name_line:
            continue  # a body-less line (Go's `func f()` before a `{` the parser lost) is no whole body
        last = snippet.lines[index[d.end_line]]
        closed = (d.name_line in index and d.end_line > d.name_line and _trivial(last.strip())
                  and _width(last) <= _width(snippet.lines[index[d.name_line]])  # `}` or `end` closes it
                  and _indented_inside(snippet.lines[index[d.name_line]:index[d.end_line] + 1]))
        if whole:
            whole_spans.append((d.start_line, d.end_line))
        elif not closed:
            continue
        pairs.append((index[d.start_line], index[d.end_line], start, o.end_line, whole))
    pairs.sort()
    kept, last = [], (-1, -1)
    for p in pairs:  # nested or in order on both sides
        if all(p[2] > q[3] or (q[0] <= p[0] and p[1] <= q[1] and q[2] <= p[2] and p[3] <= q[3]) for q in kept):
            kept.append(p)
    return kept


def _apart(snippet: _Snippet, in_snippet: list[Definition], in_original: list[Definition],
           orig: list[str], counts: Counter) -> dict[int, np.ndarray]:
    """Per line of a definition the snippet shows whole with no namesake in the original (new code):
    the original lines it may not match or edit, those of the original's definitions of its kind. A new
    definition looks like its neighbours (`def peek(self, key, default=None)` beside `def setdefault(self,
    key, default=None)`, `v.mu.RLock()` in every method); it is an edit of one of them only where it
    renames it: most of its body and most of that one's are the same lines found once in the original
    (lines every method has say nothing)."""
    index = {n: i for i, n in enumerate(snippet.number)}
    names = {(d.kind, d.name) for d in in_original}
    found: dict[int, np.ndarray] = {}
    old_bodies: dict[Definition, set[str]] = {}
    for d in in_snippet:
        if (d.kind, d.name) in names or d.name_line not in index or not _shown_whole(d, snippet):
            continue
        lines = [index[n] for n in range(d.name_line, d.end_line + 1) if n in index]
        body = {key for i in lines[1:] if not _trivial(key := snippet.lines[i].strip())}
        others = np.zeros(len(orig), dtype=bool)
        for o in (o for o in in_original if o.kind == d.kind):
            if o not in old_bodies:
                old_bodies[o] = {key for j in range(o.name_line + 1, o.end_line + 1)
                                 if not _trivial(key := orig[j].strip())}
            shared = len({key for key in body & old_bodies[o] if counts[key] == 1})
            if shared * 2 <= max(len(body), len(old_bodies[o])):
                others[o.name_line:o.end_line + 1] = True
        if others.any():
            found.update((i, others) for i in lines)
    return found


def _indented_inside(lines: list[str]) -> bool:
    """Whether the lines between a definition's first and last stay deeper than its first; a line at its
    depth may only continue it (`{` on a line of its own, `) error {`). Where a marker hides a closing
    line, tree-sitter's error recovery can stretch a definition over the next ones; its indentation
    still says where it ends."""
    width = _width(lines[0])
    return all(not line.strip() or _width(line) > width
               or (_width(line) == width and line.strip()[0] in "{)]}" and not _closes(line.strip()))
               for line in lines[1:-1])


def _head_tail_rewrites(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter) -> list[tuple]:
    """A snippet without a leading (trailing) marker whose unmatched head (tail) is followed (preceded)
    by a match of a line found once in the original rewrites the original's head (tail) when that is no
    longer than the snippet's plus one."""
    def anchors(op: tuple) -> bool:  # only a match or an edit has an original line (op[2])
        return op[0] in ("match", "edit") and not _trivial(key := orig[op[2]].strip()) and counts[key] == 1

    def rewrite(seq: list[tuple]) -> list[tuple]:
        kept = next((n for n, op in enumerate(seq) if op[0] != "keep"), len(seq))
        end = next((n for n in range(kept, len(seq)) if seq[n][0] != "ins"), len(seq))
        if 0 < kept <= end - kept + 1 and kept < end < len(seq) and anchors(seq[end]):
            return [("del", op[1]) for op in seq[:kept]] + seq[kept:]
        return seq

    if snippet.reach[0] is None:
        ops = rewrite(ops)
    if snippet.reach[-1] is None:
        ops = rewrite(ops[::-1])[::-1]
    return ops


def _align(orig: list[str], snippet: _Snippet, pairs, counts: Counter, attached: dict[int, np.ndarray],
           apart: dict[int, np.ndarray], removed: np.ndarray, header_end: list[int],
           context: dict[int, int] | None = None) -> list[tuple]:
    """The best-scoring alignment as ops in order: ("keep", j) ("del", j) ("match", i, j) ("edit", i, j)
    ("ins", i); "keep" ops carry a third item, True where the kept line is outside the marker's scope.
    `apart`: snippet line -> mask of the original lines it may not match or edit (`_apart`).
    `removed`: mask of the original lines that use a name the instruction asks to remove.
    `header_end`: per original line, the line where the parentheses it opens close (`_bracket_ends`).
    `context`: snippet line -> the original line it must match (writing it as new costs DUPLICATE)."""
    context = context or {}
    s_lines, m, n = snippet.lines, len(snippet.lines), len(orig)
    o_keys = [line.strip() for line in orig]
    o_rstrip = [line.rstrip() for line in orig]
    o_width = np.array([_width(line) for line in orig], dtype=np.int64)
    o_blank = np.array([not k for k in o_keys], dtype=bool)
    ids: dict[str, int] = {}
    o_key_id = np.array([ids.setdefault(k, len(ids)) for k in o_keys], dtype=np.int64)
    o_exact_id = np.array([ids.setdefault("\0" + k, len(ids)) for k in o_rstrip], dtype=np.int64)
    by_ends = _ends_index(o_keys)
    by_head: dict[str, list[int]] = {}
    for j, k in enumerate(o_keys):
        if head := _HEAD.match(k):
            by_head.setdefault(head[0], []).append(j)
    by_identity = _rare_identities(o_keys)
    delete = np.where(o_blank, DELETE_BLANK, DELETE)
    delete_between = np.where(removed, 0.0, delete)  # between two snippet lines a removed line goes for free
    keep_removed = np.where(removed, NAMED_REMOVED, 0.0)
    splits = np.concatenate(([0.0], np.where(o_blank[:-1] & o_blank[1:], SPLIT, 0.0), [0.0])) if n else np.zeros(1)
    # A definition shown whole (snippet lines a..b) replaces the original's (lines start..end): the
    # alignment is at column `start` before line a and places line b on column end + 1.
    starts_at, ends_at, inside = {}, {}, []
    for a, b, start, end, whole in pairs:
        starts_at[a], ends_at[b + 1] = start, end + 1
        if whole:
            inside.append((a + 1, b, start, end + 1))
    last_hunk = [line.strip() for line, h in zip(s_lines, snippet.hunk_of) if h == snippet.hunk_of[-1]] if m else []
    if m and snippet.reach[-1] is None and not any(k in counts for k in last_hunk if k):
        ends_at[m] = n  # new code after the last marker, with nothing after it: the end of the file
    # A snippet that starts (ends) with the file's first (last) lines starts (ends) where the file does.
    content = [o_rstrip[j] for j in range(n) if o_keys[j]]
    s_content = [i for i in range(m) if s_lines[i].strip()]
    s_text = [s_lines[i].rstrip() for i in s_content]
    if content and s_content and snippet.reach[0] is None and _names_the_end(s_text, content):
        starts_at.setdefault(s_content[0], next(j for j in range(n) if o_keys[j]))
    if content and s_content and snippet.reach[-1] is None and _names_the_end(s_text[::-1], content[::-1]):
        ends_at.setdefault(s_content[-1] + 1, max(j for j in range(n) if o_keys[j]) + 1)

    score = np.full((m + 1, n + 1), _NEG)
    src = np.zeros((m + 1, n + 1), dtype=np.int32)
    how = np.zeros((m + 1, n + 1), dtype=np.int8)  # 0 insert, 1 match, 2 edit
    cols = np.arange(n + 1)

    def horizontal(i: int, cand: np.ndarray) -> None:
        if i in ends_at:
            cand = np.where(cols == ends_at[i], cand, _NEG)
        if snippet.reach[i] is None and 0 < i < m:
            costs = delete_between
        elif (reach := scope(i)) is None:  # a piece of the file, or all that comes before / after it
            costs = np.zeros(n)  # (a line the instruction removes is deleted there, see below)
        else:
            cross = prev_width >= reach
            if (sibling := sibling_width[i]) is not None:
                # A line as shallow as the snippet's next one is that line's sibling, not the replaced
                # end of the marker's block: keeping it costs no more than keeping any later one.
                cross = cross & (o_width > sibling)
            costs = keep_removed + np.where(o_blank | (o_width >= reach), 0.0, np.where(cross, CROSS, BEYOND))
            if sibling is not None:
                # The snippet goes on beside the block this marker is in, without showing its closing
                # line (`}`, `end`): that line is kept, or the block would stay open.
                costs = np.where(o_closes & (o_width == sibling) & (prev_width >= reach), keep_removed, costs)
        # Moving along the row consumes original lines; the best start for each column is a running max.
        acc = np.concatenate(([0.0], np.cumsum(costs)))
        val = cand + acc
        if (closed := closed_at.get(i)) is not None:
            # Right after a closing line, code continues at most as deep as it: keeping a deeper line
            # first (the rest of the block just closed) costs CROSS; staying put costs nothing.
            val = val - np.where(next_width > closed, CROSS, 0.0)
        run = np.maximum.accumulate(val)
        moved = run - acc
        score[i] = np.maximum(cand, moved)
        src[i] = np.where(cand >= moved, cols, np.maximum.accumulate(np.where(val >= run, cols, 0)))
        if i in starts_at:
            score[i, :starts_at[i]] = _NEG
            score[i, starts_at[i] + 1:] = _NEG
        for lo, hi, start, stop in inside:
            if lo <= i <= hi:
                score[i, :start] = _NEG
                score[i, stop + 1:] = _NEG

    closing, opening = _closing_lines(snippet), _opening_lines(snippet)
    # Gaps with a marker right after a closing line (`}`, `end`): that line's width.
    closed_at = {i: _width(s_lines[i - 1]) for i in range(1, m + 1)
                 if snippet.reach[i] is not None and _closes(s_lines[i - 1].strip())}
    prev_width = np.full(n, 1 << 30, dtype=np.int64)  # per line: the width of the non-blank line before it
    for j in range(1, n):
        prev_width[j] = prev_width[j - 1] if o_blank[j - 1] else o_width[j - 1]
    next_width = np.full(n + 1, -1, dtype=np.int64)  # per column: the width of the next non-blank line
    next_closes = np.zeros(n + 1, dtype=bool)  # per column: whether that line only closes a block
    o_closes = np.array([_closes(k) for k in o_keys], dtype=bool)
    for j in range(n - 1, -1, -1):
        next_width[j] = next_width[j + 1] if o_blank[j] else o_width[j]
        next_closes[j] = next_closes[j + 1] if o_blank[j] else o_closes[j]
    after: list[int | None] = [None] * (m + 1)  # per gap: the snippet's next non-blank line after it
    for g in range(m - 1, -1, -1):
        after[g] = g if s_lines[g].strip() else after[g + 1]
    # The first line of each hunk after a marker: where the marker stops keeping old code.
    resumes = {after[g] for g in range(m) if snippet.reach[g] is not None and after[g] is not None}
    # Per gap with a marker: the width of the snippet's next line, where it is less indented than the
    # marker (it follows the block the marker is in, without closing it), else None.
    sibling_width: list[int | None] = [None] * (m + 1)
    for g in range(1, m):
        if snippet.reach[g] is not None and (t := after[g]) is not None and not _closes(s_lines[t].strip()) \
                and _width(s_lines[t]) < snippet.reach[g]:
            sibling_width[g] = _width(s_lines[t])

    def scope(i: int) -> int | None:
        """How deep the marker in gap i keeps lines: a marker between two snippet lines stands for code
        as deep as it is indented; one before the first or after the last line for all before or after.
        Where the line after it closes a block at that block's end in the original (a twin from
        `_closing_twins`), the marker stands for the rest of that block, however shallow it is written."""
        if not 0 < i < m or (reach := snippet.reach[i]) is None:
            return None
        t = after[i]
        if t is not None and t in context and _closes(s_lines[t].strip()):
            return min(reach, _width(s_lines[t]) + 1)
        return reach
    first = np.full(n + 1, _NEG)
    first[0] = 0.0
    horizontal(0, first)
    for i in range(1, m + 1):
        line = s_lines[i - 1]
        key, prev = line.strip(), score[i - 1]
        if not key:
            weight, insert = BLANK, INSERT_BLANK
        elif key not in counts:
            weight, insert = 0.0, INSERT
        elif _trivial(key):
            weight = insert = TRIVIAL
        else:
            weight = insert = UNIQUE if counts[key] == 1 and not _names_nothing(key) else COMMON
        cand = prev - (DUPLICATE if i - 1 in context else insert)
        if key:
            cand = cand - splits  # new code goes beside a run of blank lines, not into it
        gain = np.full(n, _NEG)
        edited = np.zeros(n, dtype=bool)
        if key in ids:
            strip_eq = o_key_id == ids[key]
            gain[strip_eq] = weight - REINDENTED
            exact = ids.get("\0" + line.rstrip())
            if exact is not None:
                gain[o_exact_id == exact] = weight
        if key and len(key) >= 4 and key not in counts:  # a line the original has is not an edit of another
            edits = {j for j in _sharing_ends(by_ends, key) if _similar(key, o_keys[j])}
            if opening[i - 1] and (head := _HEAD.match(key)):
                # A new opening line whose body a marker keeps edits an opener of that body's kind at its
                # depth (`<View style={styles.actions}>` given a second style): the body exists. Its
                # header may have gone on over more lines (`def build(name,` / `path):`).
                edits |= {j for j in by_head.get(head[0], ()) if o_width[j] == _width(line)
                          and o_keys[header_end[j]][-1:] == key[-1] and key[-1] in "{([>:"}
            identity = _identity(key)
            if identity and identity[0] in ("defines", "declares") and identity in by_identity:
                edits = set()  # a header or declaration edits the one of the name it declares, not a neighbour's
            for j in edits | by_identity.get(identity, set()):
                if gain[j] == _NEG:
                    gain[j], edited[j] = EDITED, True
        if (others := apart.get(i - 1)) is not None:
            gain = np.where(others, _NEG, gain)
        if (decorated := attached.get(i - 1)) is not None:
            gain = np.where(decorated, gain, _NEG)
        if (twin := context.get(i - 1)) is not None:
            gain = np.where(cols[:-1] == twin, gain, _NEG)
        diag = np.concatenate(([_NEG], prev[:-1] + gain))
        if (reach := closing[i - 1]) is not None:
            # The first line less indented than the marker before it closes the marker's scope: it is
            # placed where that scope ends (on the first such original line, or before it when new).
            ends = ~o_blank & (o_width < reach)
            cand = np.where(np.concatenate((ends, [True])), cand, cand - OUT_OF_SCOPE)
            diag = np.where(np.concatenate(([False], ends)), diag, diag - OUT_OF_SCOPE)
        if i - 1 in resumes and not _closes(key):
            # New code after a marker starts where a block at its depth may: a marker does not stop in
            # the middle of a deeper block (before its lines, or before the closing line at this depth).
            width = _width(line)
            cand = cand - np.where((next_width > width) | ((next_width == width) & next_closes), CROSS, 0.0)
        if opening[i - 1]:
            cand = cand - OUT_OF_SCOPE  # a marker inside a body stands for existing code: the body exists
        better = diag >= cand
        how[i] = np.where(better, np.where(np.concatenate(([False], edited)), 2, 1), 0)
        cand = np.where(better, diag, cand)
        horizontal(i, cand)

    ops: list[tuple] = []
    i, j = m, n
    while True:
        s = int(src[i, j])
        reach = scope(i)
        for t in range(j - 1, s - 1, -1):
            if snippet.reach[i] is None and 0 < i < m or reach is None and removed[t]:
                ops.append(("del", t))
            else:
                outside = reach is not None and not o_blank[t] and o_width[t] < reach
                ops.append(("keep", t, bool(outside)))
        j = s
        if i == 0:
            break
        if how[i, j] == 0:
            ops.append(("ins", i - 1))
        else:
            ops.append(("match" if how[i, j] == 1 else "edit", i - 1, j - 1))
            j -= 1
        i -= 1
    return ops[::-1]


def _kept_twins(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter,
                definition_starts: set[int]) -> dict[int, int]:
    """Runs of lines written as new right beside a marker that keeps the very same run of original lines
    (its twin; the nearest one): the snippet showed them as context, and deleting the original lines
    between them and the snippet's line before (after) them was costlier in the alignment's scores than a
    duplicate. New code that copies a line or two of old code is not a twin: the whole run must be, or
    the run's end next to the marker (its start, for a marker before it) from a line found once in the
    original: the new lines before it replace what lies between (`if (!(f = open(path)))` rewritten
    above its unchanged error handling, with the code that computed the path gone), where no original
    definition starts among those (a new method copying the last lines of an old one far below is new).
    Returns snippet line -> twin line, for an alignment where each must match its twin."""
    def written(op: tuple) -> bool:  # new lines, and blank lines between them
        return op[0] == "ins" or (op[0] == "match" and not snippet.lines[op[1]].strip())

    def kept_run(t: int, step: int) -> list[int]:
        run = []
        while 0 <= t < len(ops) and ops[t][0] == "keep":
            if orig[ops[t][1]].strip():
                run.append(ops[t][1])
            t += step
        return run if step > 0 else run[::-1]

    found: dict[int, int] = {}
    n = 0
    while n < len(ops):
        if ops[n][0] != "ins":
            n += 1
            continue
        end = next((e for e in range(n, len(ops)) if not written(ops[e])), len(ops))
        lines = [op[1] for op in ops[n:end] if op[0] == "ins" and snippet.lines[op[1]].strip()]
        keys = [snippet.lines[i].strip() for i in lines]
        if any(not _trivial(k) for k in keys):
            after, before = kept_run(end, 1), kept_run(n - 1, -1)
            for kept, starts in ((after, range(len(after) - len(keys) + 1)),
                                 (before, range(len(before) - len(keys), -1, -1))):
                start = next((t for t in starts if [orig[j].strip() for j in kept[t:t + len(keys)]] == keys), None)
                if start is not None:
                    found.update(zip(lines, kept[start:start + len(keys)]))
                    break
            else:
                found.update(_anchored_end(lines, keys, after, before, orig, counts, definition_starts))
        n = end
    return found


def _anchored_end(lines: list[int], keys: list[str], after: list[int], before: list[int], orig: list[str],
                  counts: Counter, definition_starts: set[int]) -> dict[int, int]:
    """The longest end of a written run (next to a kept run `after` it) or start (next to one `before` it)
    that starts (ends) with a line found once in the original and is a run of the kept lines, with no
    definition starting among the kept lines it passes over."""
    def anchor(key: str) -> bool:
        return counts[key] == 1 and not _trivial(key) and not _names_nothing(key)

    kept_after = [orig[j].strip() for j in after]
    for k in range(1, len(keys)):
        tail = keys[k:]
        if anchor(tail[0]):
            at = next((t for t in range(len(after) - len(tail) + 1) if kept_after[t:t + len(tail)] == tail), None)
            if at is not None and not definition_starts & set(after[:at]):
                return dict(zip(lines[k:], after[at:at + len(tail)]))
    kept_before = [orig[j].strip() for j in before]
    for k in range(len(keys) - 1, 0, -1):
        head = keys[:k]
        if anchor(head[-1]):
            at = next((t for t in range(len(before) - k, -1, -1) if kept_before[t:t + k] == head), None)
            if at is not None and not definition_starts & set(before[at + k:]):
                return dict(zip(lines[:k], before[at:at + k]))
    return {}


def _resumed_lines(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter) -> dict[int, int]:
    """The first line after a marker, written as new although the old code has it right there: the
    marker says the existing code resumes at that line, so it is context. Its twin is the last instance
    the marker keeps just before it (deleting the old lines after the twin was costlier in the scores
    than a duplicate), or its one instance in the original where the alignment deletes that (new code
    after it latched onto copies of old lines and pushed it aside, whether or not the marker kept any).
    Elsewhere a line written as new and deleted from its place may be moved on purpose (imports put in
    order)."""
    deleted = {orig[op[1]].strip(): op[1] for op in ops if op[0] == "del"}
    found = {}
    for n, op in enumerate(ops):
        if op[0] != "ins" or snippet.reach[op[1]] is None or n == 0:
            continue
        key = snippet.lines[op[1]].strip()
        if _trivial(key):
            continue
        t = n - 1
        while t >= 0 and ops[t][0] == "keep" and orig[ops[t][1]].strip() != key:
            t -= 1
        if t >= 0 and ops[t][0] == "keep":
            found[op[1]] = ops[t][1]
        elif key in deleted and counts[key] == 1:
            found[op[1]] = deleted[key]
    return found


def _rewritten_comment_ends(ops: list[tuple], snippet: _Snippet, orig: list[str], comment) -> dict[int, int]:
    """The last line before a marker, a comment line (`//`, `//! ````, ` *`) written as new after new
    comment lines that follow a matched comment line: the hunk rewrites that comment block, and the line
    is its twin further down the same block, which the marker keeps (writing it as new was cheaper in the
    scores than deleting the old lines it replaces, so the old paragraph survived beside the new one)."""
    lines, found = snippet.lines, {}
    for n, op in enumerate(ops):
        if op[0] != "ins" or not comment(key := lines[op[1]].strip()):
            continue
        g = op[1] + 1  # the gap after it, past blank lines
        while snippet.reach[g] is None and g < len(lines) and not lines[g].strip():
            g += 1
        if snippet.reach[g] is None:
            continue
        b = n - 1
        while b >= 0 and ops[b][0] == "ins" and comment(lines[ops[b][1]].strip()):
            b -= 1
        if b == n - 1 or b < 0 or ops[b][0] != "match" or not comment(orig[ops[b][2]].strip()):
            continue
        t = n + 1
        while t < len(ops) and ops[t][0] in ("ins", "match") and not lines[ops[t][1]].strip():
            t += 1
        while t < len(ops) and ops[t][0] == "keep" and comment(orig[ops[t][1]].strip()):
            if orig[ops[t][1]].strip() == key:
                found[op[1]] = ops[t][1]
                break
            t += 1
    return found


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


def _closing_twins(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter,
                   snippet_ends: dict[int, int], original_ends: dict[int, int]) -> dict[int, int]:
    """A block the snippet opens on an original line found once closes where the original's block does.
    With a marker inside, the marker stands for the rest of that block and no more (where the
    indentation cannot tell, as in a C `switch` whose `case` lines sit at its own depth); shown whole,
    it replaces that block, however many old lines that deletes (a trailing marker would otherwise keep
    them and the snippet's closing lines be written twice)."""
    placed = {op[1]: op[2] for op in ops if op[0] == "match"}
    found = {}
    for opener, closer in snippet_ends.items():
        at = placed.get(opener)
        if at is None or at not in original_ends or placed.get(closer) == original_ends[at] \
                or counts[orig[at].strip()] != 1:
            continue
        end = original_ends[at]
        # A header's bracket closed on a line that opens its body (`): Readable<T> {`, `} else {`): the
        # block goes on to where that body closes.
        while end in original_ends and orig[end].strip()[:1] in ")]}" and _width(orig[end]) == _width(orig[at]) \
                and snippet.lines[closer].strip() != orig[end].strip():
            end = original_ends[end]
        # A marker may hide openers, so brackets alone do not pair lines: the closer sits at its opener's depth.
        if _width(snippet.lines[closer]) == _width(snippet.lines[opener]) \
                and snippet.lines[closer].strip() == orig[end].strip() and placed.get(closer) != end:
            found[closer] = end
    return found


def _rewritten_headers(ops: list[tuple], snippet: _Snippet, orig: list[str], header_end: list[int],
                       code) -> list[tuple]:
    """A header the snippet writes on one line that edits the first line of one the original spreads over
    several: the header's other lines go with it, rather than stay under the marker that keeps its body.
    Where its parameters go on (`def build(name,` / `path):`), up to where they close; where it opens the
    body the original opens further down (`: usage_(0) {` over `: usage_(0),` / `last_id_(0) {`, a
    constructor's initializer list), its deeper lines up to that one."""
    gone: set[int] = set()
    for op in ops:
        if op[0] != "edit":
            continue
        j, text = op[2], code(snippet.lines[op[1]])
        if sum(map(text.count, "([")) != sum(map(text.count, ")]")):
            continue
        if header_end[j] > j:
            gone.update(range(j + 1, header_end[j] + 1))
        elif text.endswith("{") and not code(orig[j]).endswith("{"):
            end = next((k for k in range(j + 1, len(orig)) if not orig[k].strip() or _width(orig[k]) <= _width(orig[j])
                        or code(orig[k]).endswith("{")), None)
            if end is not None and orig[end].strip() and _width(orig[end]) > _width(orig[j]) \
                    and code(orig[end]).endswith("{"):
                gone.update(range(j + 1, end + 1))
    return [("del", op[1]) if op[0] == "keep" and op[1] in gone else op for op in ops]


def _resuming_runs(ops: list[tuple], snippet: _Snippet, orig: list[str]) -> dict[int, int]:
    """The lines a hunk starts with after a marker, where two or more of them (one a line of code) follow
    each other in the original too: the marker says the existing code resumes there, so the alignment
    must not write them as new (a new block after them had latched onto old lines further on). Their
    twin is the last such run in the original between the lines found once that the alignment matched
    in the hunks before and after theirs."""
    written = {op[1] for op in ops if op[0] == "ins"}
    content = [j for j, line in enumerate(orig) if line.strip()]
    text = [orig[j].strip() for j in content]
    once = Counter(text)
    # Where the alignment placed lines found once in the original: what surely comes before and after.
    at = {op[1]: op[2] for op in ops
          if op[0] == "match" and not _trivial(key := orig[op[2]].strip()) and once[key] == 1}
    found: dict[int, int] = {}
    for start in range(len(snippet.lines)):
        if snippet.reach[start] is None:
            continue
        run = [i for i in range(start, len(snippet.lines))
               if snippet.hunk_of[i] == snippet.hunk_of[start] and snippet.lines[i].strip()]
        keys = [snippet.lines[i].strip() for i in run]
        for k in range(len(keys), 1, -1):  # the longest head of the hunk that is a run in the original
            head = run[:k]
            if not written & set(head) or all(_trivial(key) for key in keys[:k]):
                continue
            # Only other hunks' anchors bound it: this hunk's own may be the latched ones.
            hunk = snippet.hunk_of[start]
            before = max((j for i, j in at.items() if i < head[0] and snippet.hunk_of[i] != hunk), default=-1)
            after = min((j for i, j in at.items() if i > head[-1] and snippet.hunk_of[i] != hunk), default=len(orig))
            places = [s for s in range(len(text) - k + 1) if text[s:s + k] == keys[:k]
                      and before < content[s] and content[s + k - 1] < after]
            if places:
                found.update(zip(head, (content[places[-1] + n] for n in range(k))))
                break
    return found


def _realigned(ops: list[tuple], finders, align) -> list[tuple]:
    """Aligns again while a finder names snippet lines that must match their twins (snippet line ->
    original line); each round can show twins that the one before hid. What a finder names is kept only
    where the alignment can match every twin named so far."""
    context: dict[int, int] = {}
    for _ in range(4):
        progressed = False
        for find in finders:
            found = {i: j for i, j in find(ops).items() if i not in context}
            if not found:
                continue
            trial = {**context, **found}
            again = align(trial)
            if {op[1]: op[2] for op in again if op[0] == "match" and op[1] in trial} == trial:
                ops, context, progressed = again, trial, True
        if not progressed:
            break
    return ops


def _names_the_end(snippet: list[str], original: list[str]) -> bool:
    """Whether the snippet's first non-blank lines that equal the original's first ones (pass both
    reversed for the last ones) say "the start of the file": a line of code does; closing lines alone
    (`}`, `end`) do only where the original has that run of them nowhere else."""
    k = next((n for n, (a, b) in enumerate(zip(snippet, original)) if a != b), min(len(snippet), len(original)))
    if k == 0:
        return False
    if not all(_trivial(line.strip()) for line in original[:k]):
        return True
    run = original[:k]
    return not any(original[s:s + k] == run for s in range(1, len(original) - k + 1))


_ATTRIBUTE = re.compile(r"^(@[\w.]+(\(.*\))?|#!?\[.*\])$")  # `@decorator(...)`, `@Override`, `#[test]`
_SLASH_COMMENT = re.compile(r"^(//|/\*|\*(\s|/|$))")  # `// x`, `/** x`, ` * x`, ` */`; not `*p = 0;`


def _comment_line(language: str):
    """A predicate: whether a stripped line is only a comment, in this language."""
    spec = spec_of(language)
    slashes = spec.block_comments or "//" in spec.line_comments
    others = tuple(s for s in spec.line_comments if s != "//")
    return lambda key: bool(slashes and _SLASH_COMMENT.match(key) or (
        others and key.startswith(others) and not _ATTRIBUTE.match(key)))


def _attached_lines(snippet: _Snippet, o_keys: list[str], counts: Counter, language: str) -> dict[int, np.ndarray]:
    """Per snippet line that belongs to the code after it, shown right after it: the original lines it
    may match, those followed by that code (or an edit of it). A decorator or attribute goes with its
    definition (`#[test]` above a new test is new, not the last old test's); so does a block of comments
    with no line found once in the original (`///`, `/// # Example` above a new method are the new
    method's, not the next old one's doc); and a comment line with nothing in it (`#`, `/**`) goes with
    the line after it. Comments and attributes in between are skipped on both sides."""
    comment = _comment_line(language)

    def attaches(key: str) -> bool:
        return bool(_ATTRIBUTE.match(key)) or comment(key)

    def followed_by(skip):
        """Per original line the next line after it not skipped, and those lines by their ends (`_ends_index`)."""
        out, after = [None] * len(o_keys), None
        for j in range(len(o_keys) - 1, -1, -1):
            out[j] = after
            if o_keys[j] and not skip(o_keys[j]):
                after = o_keys[j]
        return out, _ends_index(out)

    def followed_lines(target: str, following) -> np.ndarray:
        lines_after, index = following
        mask = np.zeros(len(o_keys), dtype=bool)
        for j in _sharing_ends(index, target):
            mask[j] = lines_after[j] == target or _similar(lines_after[j], target)
        return mask

    next_code, next_line = followed_by(attaches), followed_by(lambda key: False)
    lines = snippet.lines
    found = {}
    for i, line in enumerate(lines):
        key = line.strip()
        if not attaches(key):
            continue
        code = next((t for t in range(i + 1, len(lines)) if lines[t].strip() and not attaches(lines[t].strip())), None)
        if code is None or any(snippet.reach[g] is not None for g in range(i + 1, code + 1)):
            continue  # a marker between: what it belongs to is not shown
        first = next(t for t in range(i, -1, -1) if t == 0 or snippet.reach[t] is not None
                     or (lines[t - 1].strip() and not attaches(lines[t - 1].strip())))
        placed = any(counts[lines[t].strip()] == 1 for t in range(first, code) if comment(lines[t].strip()))
        if _ATTRIBUTE.match(key) or not placed:
            target, following = lines[code].strip(), next_code
        elif _trivial(key):
            target, following = next(lines[t].strip() for t in range(i + 1, code + 1) if lines[t].strip()), next_line
        else:
            continue  # a comment of its own, in a block a line found once places
        found[i] = followed_lines(target, following)
    return found


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
        while first > 0 and comment(orig[first - 1].strip()):
            first -= 1
            removed[first] = True
        if 0 < first and not orig[first - 1].strip() and (last + 1 == len(orig) or not orig[last + 1].strip()):
            removed[first - 1] = True
    return removed


_RANK = ["new", "ambiguous", "edited", "scope", "unique", "definition"]  # how firmly a hunk's place is settled


def _newline(original: str) -> str:
    return "\r\n" if original.count("\r\n") * 2 > original.count("\n") else "\n"


def _read(original: str, update: str, language: str) -> tuple[list[str], list[str], Counter, _Snippet,
                                                                dict[int, set[str]]]:
    """The original's lines, the snippet's (in the file's line endings and indentation), the original's
    line counts, the snippet parsed into code lines and markers, and its deletion notes."""
    orig = split_lines(original)
    newline = _newline(original)
    # Every snippet line ends like the original's lines, so none is glued to the next.
    update_lines = _in_file_indentation([line.rstrip("\r\n") + newline for line in split_lines(update)], orig)
    counts = Counter(line.strip() for line in orig)
    prose = lines_inside_strings(original, language, comments=True) if language else set()
    notes = deletion_notes(original, update, language)
    snippet = _parse_snippet(update_lines, set(counts), language,
                             {line.strip() for n, line in enumerate(orig) if n not in prose}, set(notes))
    return orig, update_lines, counts, snippet, notes


def marker_keys(original: str, update: str, language: str = "") -> set[str]:
    """The snippet's marker lines as the merge reads them, stripped (a bare `...` included where it is
    a marker, not code)."""
    _, update_lines, _, snippet, _ = _read(original, update, language)
    return {update_lines[n].strip() for n in snippet.markers}


def merge(original: str, update: str, language: str = "", instruction: str = "") -> MergeCandidate:
    """The merge of `update` into `original`; `instruction` only says which names it removes."""
    orig, update_lines, counts, snippet, notes = _read(original, update, language)
    names = names_to_remove(instruction, update, language, original) | noted_names(notes)
    in_snippet, in_original = [], []
    if language and orig:
        top_level = [n for n in snippet.markers if not _width(update_lines[n])]
        in_snippet = snippet_definitions("".join(update_lines), language, top_level)
        in_original = definitions(original, language) if in_snippet or names else []
    pairs = _pairs(snippet, in_snippet, in_original)
    _keep_between_whole_definitions(snippet, pairs, orig, _comment_line(language))
    apart = _apart(snippet, in_snippet, in_original, orig, counts)
    attached = _attached_lines(snippet, [line.strip() for line in orig], counts, language)
    code = code_of(language)
    removed = _removed_lines(orig, names, in_original, language)
    header_end = _bracket_ends(orig, code)
    ops = _head_tail_rewrites(_align(orig, snippet, pairs, counts, attached, apart, removed, header_end), snippet, orig, counts)
    if dangling := _dangling_edits(ops, snippet, orig):
        for i, j in dangling:
            apart.setdefault(i, np.zeros(len(orig), dtype=bool))[j] = True
        ops = _head_tail_rewrites(_align(orig, snippet, pairs, counts, attached, apart, removed, header_end), snippet, orig, counts)

    original_ends = _block_ends(orig, code)
    # Where the snippet's blocks close, by brackets and, where a marker hides closers, by indentation.
    snippet_ends = {**_block_ends(snippet.lines, code), **_indented_block_ends(snippet.lines, code)}

    def align(context: dict[int, int]) -> list[tuple]:
        return _head_tail_rewrites(_align(orig, snippet, pairs, counts, attached, apart, removed, header_end, context),
                                   snippet, orig, counts)

    ops = _rewritten_headers(ops, snippet, orig, header_end, code)
    definition_starts = {d.name_line for d in in_original or (definitions(original, language) if language else [])}
    ops = _realigned(ops, [lambda o: _kept_twins(o, snippet, orig, counts, definition_starts),
                           lambda o: _resumed_lines(o, snippet, orig, counts),
                           lambda o: _resuming_runs(o, snippet, orig),
                           lambda o: _rewritten_comment_ends(o, snippet, orig, _comment_line(language)),
                           lambda o: _closing_twins(o, snippet, orig, counts, snippet_ends, original_ends)], align)

    in_pair = {i for a, b, _, _, whole in pairs if whole for i in range(a, b + 1)}
    matched_by_hunk: dict[int, list[tuple[str, str]]] = {}
    for op in ops:
        if op[0] == "match" and snippet.lines[op[1]].strip():
            matched_by_hunk.setdefault(snippet.hunk_of[op[1]], []).append((snippet.lines[op[1]], orig[op[2]]))
    shifts = {h: _shift(p) for h, p in matched_by_hunk.items()}

    out: list[tuple[str, int | None, int | None]] = []  # (line, the original line it copies, where it sits)
    report = MergeReport()
    hunk_info: dict[int, dict] = {}
    next_original = 0
    for op in ops:
        kind = op[0]
        if kind == "keep":
            out.append((orig[op[1]], op[1], op[1]))
            if op[2]:
                report.crossed.append(op[1])
            next_original = op[1] + 1
            continue
        if kind == "del":
            report.deleted.append(op[1])
            next_original = op[1] + 1
            continue
        i = op[1]
        line, hunk = snippet.lines[i], snippet.hunk_of[i]
        info = hunk_info.setdefault(hunk, {"start": i, "lines": 0, "anchor": "new", "at": None})
        info["lines"] += 1
        shift = shifts.get(hunk)
        if kind == "ins" or kind == "edit":
            if shift and line.strip() and line.startswith(shift[0]):
                line = shift[1] + line[len(shift[0]):]
            out.append((line, None, op[2] if kind == "edit" else None))
            if info["at"] is None:
                info["at"] = op[2] if kind == "edit" else next_original
            if kind == "edit":
                edited = orig[op[2]].strip()
                rank = "edited" if not _trivial(edited) and counts[edited] == 1 else "ambiguous"
                if _RANK.index(rank) > _RANK.index(info["anchor"]):
                    info["anchor"] = rank
                next_original = op[2] + 1
            continue
        j = op[2]
        same = line.rstrip() == orig[j].rstrip()
        out.append((orig[j], j, j) if same or shift else (line, None, j))
        key = line.strip()
        if info["at"] is None:
            info["at"] = j
        rank = "definition" if i in in_pair else "unique" if key and not _trivial(key) and counts[key] == 1 \
            else "ambiguous"
        if _RANK.index(rank) > _RANK.index(info["anchor"]):
            info["anchor"] = rank
        if i == info["start"] and (reach := snippet.reach[i]) and reach > 0 and rank == "ambiguous" \
                and _width(orig[j]) < reach:
            info["anchor"] = "scope"  # the line its marker's scope ends on
        next_original = j + 1
    report.hunks = [HunkPlacement(snippet.number[v["start"]], v["lines"], v["anchor"], v["at"],
                                  snippet.reach[v["start"]] is not None and snippet.reach[v["start"] + v["lines"]] is not None)
                    for _, v in sorted(hunk_info.items())]
    lines = [(line, origin) for line, origin, _ in _without_blank_insertions(out)]
    lines = _without_replaced_declarations(lines, original, language, report)
    return MergeCandidate(_join(lines, original, _newline(original)), [o for _, o in lines], len(orig), report)


def _without_replaced_declarations(lines: list[tuple[str, int | None]], original: str, language: str,
                                   report: MergeReport) -> list[tuple[str, int | None]]:
    """Drops a kept original line that a new line right beside it (only blank lines between) declares
    again in the same scope, where the original declares the name once: a replaced line kept beside its
    replacement (`is_std: is_std,` under the snippet's `is_std,`; `const limit = 5;` under `const limit = 10;`),
    which the snippet's marker after its new line would otherwise keep."""
    twice = declared_twice_in(_join(lines, original, _newline(original)), language)
    if not twice:
        return lines
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
    report.deleted += [lines[k][1] for k in sorted(drop)]
    return [line for k, line in enumerate(lines) if k not in drop]


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

"""How snippet lines relate to original lines, before any alignment: which lines say little about where
a hunk goes, which snippet line may be an edit of which original line, and which lines go with the code
after them.

Hands the alignment the line tests (`_trivial`, `_names_nothing`, `_closes`, `_similar`, `_identity`),
the indexes that find candidate lines fast (`_ends_index`, `_HEAD`, `_rare_identities`), the comment
test of a language (`_comment_line`) and, per snippet line that goes with the code after it, the
original lines it may match (`_attached_lines`):

- a line that looks like an edited version of an original line (shared start and end; or the same name
  declared, typed field included, assigned or called, where the file has that on one or two lines;
  or, for a new line that opens a body a marker keeps, the same first word and last bracket at its
  depth, the original's header possibly spread over several lines) replaces it; a line that names
  nothing (`break;`, `return nil`, `} else {`) is a common line, even where the original has it once;
- a line that is an original line with a trailing comment added, changed or taken off (`raise` ->
  `raise  # noqa: PLE0704`) is an edit of it, however short: the code is the same line's.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ..code.languages import spec_of, uncommented
from .snippet import _Snippet

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


# A line that closes a block and opens none (`}`, `fi`, `end`, `</div>`; not `} else {` or `) {`).
_CLOSER = re.compile(r"^(?:[}\])]|end\b|fi\b|done\b|esac\b|</)(?!.*[{(\[:]$)")


def _closes(key: str) -> bool:
    """A line that only closes blocks: `}`, `});`, `]`, `end`; not `}, {` or `} {`, which open the next."""
    return bool(key) and _trivial(key) and (key[0] in "})]" or key.rstrip(";") == "end") and key[-1] not in "{(["


# A line that opens a body on the lines after it: `if x:`, `fn f() {`, `call(`, `if x then`, `each do |e|`.
_OPENER = re.compile(r"(?:[{(\[:]|\b(?:then|do|else|begin)|\bdo\s*\|[^|]*\|)$")


def _opens(key: str) -> bool:
    """A line that ends by opening a body (`_OPENER`): it cannot be the last line of a definition shown whole."""
    return bool(_OPENER.search(key))


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


# `let x =`, `const x =`, `var x`, Rust's `let mut x`, Go's `x, err :=`, Python's `LIMIT: int = 5`,
# `this.end = `, `self.x = `: the name a line declares or assigns.
_DECLARES = re.compile(r"^(?:export\s+)?(?:(?:let|const|var)\s+(?:mut\s+)?([A-Za-z_$][\w$]*)"
                       r"|([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*:="
                       r"|(?!(?:case|default)\b)([A-Za-z_]\w*)\s*:\s*[^=:]+?=(?!=)"
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
        return ("assigns", declared[4]) if declared[4] else ("declares", declared[1] or declared[2] or declared[3])
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


_HEAD = re.compile(r"^\W*\w+")  # a line's first word with what precedes it: `<View`, `if`, `def`


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


_ATTRIBUTE = re.compile(r"^(@[\w.]+(\(.*\))?|#!?\[.*\])$")  # `@decorator(...)`, `@Override`, `#[test]`
_SLASH_COMMENT = re.compile(r"^(//|/\*|\*(\s|/|$))")  # `// x`, `/** x`, ` * x`, ` */`; not `*p = 0;`


def _comment_line(language: str):
    """A predicate: whether a stripped line is only a comment, in this language."""
    spec = spec_of(language)
    slashes = spec.block_comments or "//" in spec.line_comments
    others = tuple(s for s in spec.line_comments if s != "//")
    return lambda key: bool(slashes and _SLASH_COMMENT.match(key) or (
        others and key.startswith(others) and not _ATTRIBUTE.match(key)))


def _comment_block_top(line: int, orig: list[str], comment) -> int:
    """The first line of the comment block right above original line `line` (`line` where none is)."""
    while line > 0 and orig[line - 1].strip() and comment(orig[line - 1].strip()):
        line -= 1
    return line


def _comment_edits(snippet: _Snippet, orig: list[str], counts: Counter, language: str) -> dict[int, list[int]]:
    """Per snippet line the original does not have: the original lines that are it but for a trailing
    comment (added, changed or taken off), where their code says something (`}` does not)."""
    cut = uncommented(language)
    by_code: dict[str, list[int]] = {}
    for j, line in enumerate(orig):
        if not _trivial(code := cut(line)):
            by_code.setdefault(code, []).append(j)
    return {i: by_code[code] for i, line in enumerate(snippet.lines)
            if (key := line.strip()) and key not in counts and (code := cut(line)) in by_code}


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

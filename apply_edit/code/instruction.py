"""What an instruction says that a snippet cannot show: the code names it asks to remove.

A snippet shows an edit by its new lines; a line it drops beside a marker it cannot show at all (the
marker says "unchanged"). So "drop the deprecated `http.CloseNotifier`", or "std::random_shuffle was
removed in C++17", is a removal only the instruction states, or a note in the snippet itself
(`// removed deprecated foo() and bar()`), which is not written into the file. The merge does not keep
a line using such a name for a marker, nor a definition of that name, and the checks refuse a result
that still has the name.
"""

from __future__ import annotations

import re
from collections import Counter

from .definitions import definitions
from .languages import STRING_LITERAL, code_of, spec_of

# "remove `x`", "drop the deprecated x", "stop depending on x", "no longer use x" and their like.
_REMOVE_VERB = re.compile(
    r"\b(?:remove|drop|delete|stop (?:using|depending on|calling)|get rid of|no longer (?:use|support|"
    r"depend on|call))(?:s|d|ing)?\s+(?:(?:the|its|their|deprecated|unused|old|legacy|closing|trailing|stray)\s+)*"
    r"`?([A-Za-z_][\w.:]*|[^\s\w`'\"]{2,})", re.IGNORECASE)
# What an instruction calls a piece of code after its name: "remove the x helper and the y function".
_ENTITY = (r"(?:\s+(?:helper|function|method|class|struct|field|member|property|constant|variable|type|interface|"
           r"enum|alias|overload|import|module|macro|hook|handler|wrapper|option|flag|test)s?\b)?")
# After a removal's first name, the rest of its list: "remove x / y", "drop `a()`, `b()` and the static c()".
_LIST_NEXT = re.compile(r"(?:\(\))?`?" + _ENTITY + r"\s*(?:/|,|&|\band\b|\bor\b)\s*(?:(?:the|its|their|deprecated|"
                        r"unused|old|legacy|static)\s+)*`?([A-Za-z_][\w.:]*)", re.IGNORECASE)
_DECLARING = r"\b(?:const|let|var|val|def|fn|func|function|type|class|struct|enum|interface|trait)\s+"
# "x was removed", "`x` has been removed": the name of something that no longer exists.
_WAS_REMOVED = re.compile(r"`?([A-Za-z_][\w.:]*)`?\s+(?:was|were|has been|have been)\s+removed\b", re.IGNORECASE)
# `http.CloseNotifier`, `call_extra`, `attrIndex`, `?>`: not a word
_CODE_NAME = re.compile(r"[._:]|[a-z][A-Z]|^[^\w]+$")


# A comment that starts "removed"/"deleted"/"dropped", or whose first clause ends so: `// removed deprecated
# foo() and bar()`, `# old_helper deleted`, `// foo() removed: use bar()`, `-- x removed (unused)`.
_NOTE = re.compile(r"^(?:removed|deleted|dropped)\b|\b(?:removed|deleted|dropped)\s*(?:[:;(\u2014\u2013]|\W*$)",
                   re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z_][\w.:]*[\w]")
# A note of what the snippet changes, addressed to whoever applies it: `// changed: ...`, `# updated`,
# `// NEW: retry on timeout`. A word and then a colon or nothing: a comment that goes on as a sentence
# (`// Updated when the user logs in`) describes code.
_CHANGE_NOTE = re.compile(r"^(?:changed|updated|modified|edited|fixed|new|added)\b\s*(?::|$)", re.IGNORECASE)


def _comment_body(line: str, language: str) -> str | None:
    """The text of a line that is only a comment, else None."""
    key = line.strip()
    spec = spec_of(language)
    for start in spec.line_comments + (("/*",) if spec.block_comments else ()):
        if key.startswith(start):
            body = key[len(start):].strip()
            return body[:-2].strip() if start == "/*" and body.endswith("*/") else body
    return None


def _trailing_comments(line: str, language: str) -> list[int]:
    """Where comments after code on `line` may start (an opening token after whitespace), last first: a
    note may follow the line's own comment (`x = nil  -- for 5.1  -- changed`)."""
    spec = spec_of(language)
    starts = spec.line_comments + (("/*",) if spec.block_comments else ())
    masked = STRING_LITERAL.sub(lambda m: "x" * len(m[0]), line)  # a `//` inside a string opens nothing
    return sorted((m.start(1) for start in starts for m in re.finditer(r"\S\s+(" + re.escape(start) + ")", masked)),
                  reverse=True)


def is_change_note(line: str, language: str) -> bool:
    """Whether a line is a comment of what the snippet changes (`# changed: new logic here`, `// NEW`),
    not of what it removes: such a note stands beside code that is there, in no removed line's place."""
    body = _comment_body(line, language)
    return bool(body) and bool(_CHANGE_NOTE.match(body)) and not _NOTE.search(body)


def _is_note(comment: str) -> bool:
    """Whether a trailing comment (from its opening token on) has a note's form."""
    body = comment.lstrip("/#-;*").strip()
    body = body[:-2].rstrip() if body.endswith("*/") else body
    return bool(_CHANGE_NOTE.match(body) or _NOTE.match(body))


def without_change_notes(original: str, update: str, language: str) -> str:
    """The snippet with its notes on code lines taken off: `foo();  // NEW: retry on timeout`,
    `x = 1  # changed: was 0`, `bar() // removed the fallback`. Agents mark what they changed that way;
    the note is addressed to whoever applies the edit, not a part of the line (the form is
    `_CHANGE_NOTE`'s or `_NOTE`'s, as for a note on its own line). A line the original has as it is
    (its own comment) stays whole."""
    original_lines = None
    lines = update.split("\n")
    for n, line in enumerate(lines):
        at = next((at for at in _trailing_comments(line, language) if _is_note(line[at:])), None)
        if at is None:
            continue
        if original_lines is None:
            original_lines = {o.strip() for o in original.split("\n")}
        if line.strip() not in original_lines:
            lines[n] = line[:at].rstrip() + ("\r" if line.endswith("\r") else "")
    return "\n".join(lines)


def without_comment_lines(text: str, language: str) -> str:
    """The text but its comment-only lines: code with its strings (`AsyncFunction("name")` names code too)."""
    return "\n".join(line for line in text.split("\n") if _comment_body(line, language) is None)


def deletion_notes(original: str, update: str, language: str) -> dict[int, set[str]]:
    """Per snippet line that is a note to the applier, not a line of the file: the code names it says
    are gone. A deletion note (`// removed deprecated foo() and bar()`) names code the original has and
    the snippet does not, outside comments (strings count: `AsyncFunction("getPermissionsAsync")`
    defines that name); one that names nothing of the kind (`# removed the old fallback`) and a change
    note (`// changed: ...`) are notes by their form. A comment line the original has is never a note: it
    is the file's own, shown as context (`// removed in v2`, `/// kept until this cache is dropped`)."""
    notes: dict[int, set[str]] = {}
    lines = update.split("\n")
    original_code = snippet_code = None
    original_lines: set[str] | None = None
    for n, line in enumerate(lines):
        body = _comment_body(line, language)
        if not body or not (_NOTE.search(body) or _CHANGE_NOTE.match(body)):
            continue
        if original_code is None:
            original_code, snippet_code = (without_comment_lines(text, language) for text in (original, update))
            defined = _defined_names(original, language)
            original_lines = {o.strip() for o in original.split("\n")}
            around = _definitions_around_context(original, update, language)
        if line.strip() in original_lines:
            continue  # the file's own comment shown as context, whatever it says
        names = {m[0] for m in _NAME.finditer(body)
                 if (_CODE_NAME.search(m[0]) or body[m.end():m.end() + 2] == "()" or m[0] in defined)
                 and uses(original_code, m[0]) and not uses(snippet_code, m[0])
                 and m[0] not in around} if _NOTE.search(body) else set()
        notes[n] = names
    return notes


def _definitions_around_context(original: str, update: str, language: str) -> set[str]:
    """The names of the original's definitions that hold a line the snippet shows as context (a line of
    code found once in the original, not the definition's first): what the snippet keeps, whatever a note
    beside it says (`// removed: no longer disable the Twig cache`, inside the class `Twig`)."""
    if not language:
        return set()
    lines = original.split("\n")
    counts = Counter(line.strip() for line in lines)
    shown = {line.strip() for line in update.split("\n") if counts[line.strip()] == 1 and len(line.strip()) > 3}
    return {d.name for d in definitions(original, language)
            if any(lines[n].strip() in shown for n in range(d.name_line + 1, d.end_line))}


def names_to_remove(instruction: str, update: str, language: str, original: str = "") -> set[str]:
    """The code names the instruction asks to remove (a plain word only where the original, given,
    defines it) that the snippet's code does not use (a snippet comment that names them, `// x was
    removed; use y`, does not keep them). What a deletion note removes is `noted_names`."""
    named = {m[1] for m in _WAS_REMOVED.finditer(instruction)}
    for m in _REMOVE_VERB.finditer(instruction):
        named.add(m[1])
        at = m.end()
        while item := _LIST_NEXT.match(instruction, at):
            named.add(item[1])
            at = item.end()
    named = {name.rstrip(".:") for name in named}
    # A plain word ("remove the deprecated interpret alias") is a code name where the file defines it.
    plain = {name for name in named if not _CODE_NAME.search(name)}
    named -= plain - _defined_names(original, language, plain)
    if named:
        snippet_code = code_text(update, language)
        named = {name for name in named if not uses(snippet_code, name)}
    return named


def _defined_names(original: str, language: str, among: set[str] | None = None) -> set[str]:
    """The names the original defines (a definition, or `var x`, `def x`, `type x` and their like in its
    code): where a plain word ("baseline", "interpret") is a code name. `among`: only these are asked."""
    if not original or among is not None and not among:
        return set()
    found = {d.name for d in definitions(original, language)} if language else set()
    code = code_text(original, language)
    declared = {m[1] for m in re.finditer(_DECLARING + r"([A-Za-z_$][\w$]*)", code)}
    return (found | declared) & among if among is not None else found | declared


def noted_names(notes: dict[int, set[str]]) -> set[str]:
    """Every name the deletion notes (`deletion_notes`) say are gone."""
    return {name for names in notes.values() for name in names}


def code_text(text: str, language: str) -> str:
    """The text's code: its comments and strings taken out, line by line."""
    return "\n".join(map(code_of(language), text.split("\n")))


def uses(code: str, name: str) -> bool:
    """Whether `code` uses `name` as a whole name (`std::shuffle` is not in `std::shuffle_order`)."""
    return re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", code) is not None

"""The languages apply_edit knows, in one table: the file extensions that name them, whether a
tree-sitter grammar parses them here, and how their comments are written. Prompting (the name in the
prompt), regions and definitions (the parser), the merge (comments) and the faces (which names a request
may give) all read it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath


@dataclass(frozen=True)
class Language:
    name: str
    extensions: tuple[str, ...]
    grammar: bool = False  # tree-sitter-language-pack parses it (regions, definitions, the parse check)
    line_comments: tuple[str, ...] = ()  # what starts a comment that runs to the end of the line
    block_comments: bool = False  # `/* ... */`


_C_STYLE = {"line_comments": ("//",), "block_comments": True}
_HASH = {"line_comments": ("#",)}

TABLE = (
    Language("python", (".py",), True, **_HASH),
    Language("javascript", (".js", ".mjs", ".cjs"), True, **_C_STYLE),
    Language("jsx", (".jsx",), True, **_C_STYLE),
    Language("typescript", (".ts",), True, **_C_STYLE),
    Language("tsx", (".tsx",), True, **_C_STYLE),
    Language("go", (".go",), True, **_C_STYLE),
    Language("rust", (".rs",), True, **_C_STYLE),
    Language("java", (".java",), True, **_C_STYLE),
    Language("c", (".c", ".h"), True, **_C_STYLE),
    Language("cpp", (".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".inl"), True, **_C_STYLE),
    Language("csharp", (".cs",), True, **_C_STYLE),
    Language("kotlin", (".kt",), True, **_C_STYLE),
    Language("swift", (".swift",), True, **_C_STYLE),
    Language("ruby", (".rb",), True, **_HASH),
    Language("php", (".php",), True, line_comments=("//", "#"), block_comments=True),
    Language("bash", (".sh",), True, **_HASH),
    Language("lua", (".lua",), True, line_comments=("--",)),
    Language("css", (".css",), block_comments=True),
    Language("html", (".html",)),
    Language("markdown", (".md",)),
    Language("json", (".json",)),
    Language("yaml", (".yaml", ".yml"), **_HASH),
    Language("toml", (".toml",), **_HASH),
    Language("sql", (".sql",), line_comments=("--",), block_comments=True),
)
BY_NAME = {language.name: language for language in TABLE}
KNOWN_LANGUAGES = frozenset(BY_NAME)
GRAMMARS = frozenset(language.name for language in TABLE if language.grammar)
_BY_EXTENSION = {extension: language.name for language in TABLE for extension in language.extensions}


def language_of(path: str | None) -> str:
    """The language a file's extension names, "" when none does."""
    return _BY_EXTENSION.get(PurePath(path).suffix.lower(), "") if path else ""


STRING_LITERAL = re.compile(r"""'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"|`(?:\\.|[^`\\])*`""")
# A language not in the table: `//` and `#` comments, but `#` before a name or `[` is code (`#private`, `#[attr]`).
_UNKNOWN = Language("", (), line_comments=("//", "#"), block_comments=True)


def spec_of(name: str) -> Language:
    """The table's entry for a language name; for a name it lacks, C-style and `#` comments."""
    return BY_NAME.get(name, _UNKNOWN)


def _line_comment(language: str) -> re.Pattern | None:
    """What starts the language's line comment (`#` is code in JavaScript's `#private` and in regular
    expressions, `//` is Python's floor division: only the language's own tokens count)."""
    starts = spec_of(language).line_comments
    if not starts:
        return None
    hash_code = r"(?![\w\[])" if language not in BY_NAME else ""
    return re.compile("|".join(re.escape(s) + (hash_code if s == "#" else "") for s in starts))


def code_of(language: str):
    """A function from a line to its code: strings and the language's line comment taken out."""
    comment = _line_comment(language)

    def code(line: str) -> str:
        text = STRING_LITERAL.sub("", line.strip())
        found = comment.search(text) if comment else None
        return (text[:found.start()] if found else text).rstrip()
    return code


def uncommented(language: str):
    """A function from a line to its text without the language's trailing line comment, strings kept,
    stripped (`raise  # noqa: E722` -> `raise`)."""
    comment = _line_comment(language)

    def cut(line: str) -> str:
        masked = STRING_LITERAL.sub(lambda m: "\0" * len(m.group()), line)  # a `#` in a string is no comment
        found = comment.search(masked) if comment else None
        return (line[:found.start()] if found else line).strip()
    return cut

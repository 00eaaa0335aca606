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


def code_of(language: str):
    """A function from a line to its code: strings and the language's line comment taken out (`#` is
    code in JavaScript's `#private` and in regular expressions, `//` is Python's floor division)."""
    starts = spec_of(language).line_comments
    if not starts:
        return lambda line: STRING_LITERAL.sub("", line.strip()).rstrip()
    hash_code = r"(?![\w\[])" if language not in BY_NAME else ""
    comment = re.compile("(?:" + "|".join(re.escape(s) + (hash_code if s == "#" else "") for s in starts) + ").*$")
    return lambda line: comment.sub("", STRING_LITERAL.sub("", line.strip())).rstrip()

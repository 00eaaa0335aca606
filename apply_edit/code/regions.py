"""Regions of a source file: imports, top-level definitions, class members, and the gaps between them.

Regions are line ranges that cover the file without holes: each starts at the first line of its node
(leading comments and decorators included) and runs to the next region's start. Drafting quality is
local (an edited function drafts worse than an untouched one), so the draft-length policy keeps its
acceptance estimate per region.

tree-sitter grammars come from `tree-sitter-language-pack` (< 1: those versions carry the grammars in
the wheel; later ones download at run time). Languages without a grammar, or files that do not parse,
fall back to blank-line blocks that start at column 0.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePath
from typing import Iterator

from .languages import GRAMMARS, language_of

# Node types (in any of the supported grammars) whose members become regions of their own.
_CONTAINERS = {"class_definition", "class_declaration", "class", "module", "abstract_class_declaration", "impl_item",
               "trait_item", "mod_item", "record_declaration"}
_WRAPPERS = {"decorated_definition", "export_statement"}  # look through these to the definition
_IMPORTS = {"import_statement", "import_from_statement", "future_import_statement", "import_declaration",
            "use_declaration", "package_clause", "package_declaration", "extern_crate_declaration"}
_LEADING = {"comment", "line_comment", "block_comment", "attribute_item"}  # belong to the node after them


@dataclass(frozen=True)
class Region:
    start_line: int
    end_line: int  # exclusive
    kind: str  # a node type (a class's region is its header, up to its first member), "imports", "block"


def parser_for(language: str):
    """The tree-sitter parser for a language name, or None (unknown name or no grammar here)."""
    return _parser(language) if language in GRAMMARS else None


@lru_cache(maxsize=None)  # only names from GRAMMARS reach it: request text cannot grow the cache
def _parser(language: str):
    try:
        from tree_sitter_language_pack import get_parser

        return get_parser("javascript" if language == "jsx" else language)
    except Exception:  # no grammar on this machine: the fallback still gives usable regions
        return None


# The languages a request without a path is told apart by, in the order that settles ties (JavaScript
# before TypeScript, which parses it too; C before C++). PHP only by its opening tag: its grammar takes
# any other text as HTML without an error.
_GUESSABLE = ("python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp", "ruby")


# Extensions two languages share: the grammar that parses the file best decides.
_SHARED = {".h": ("c", "cpp")}


def language_for(path: str | None, text: str) -> str:
    """The language of a file: its extension's; where the extension is shared (`.h`: C or C++), the one
    whose grammar parses the text best; without a path, a guess from the text (`guess_language`)."""
    if not path:
        return guess_language(text)
    shared = _SHARED.get(PurePath(path).suffix.lower())
    return (guess_language(text, shared) or shared[0]) if shared else language_of(path)


def guess_language(text: str, candidates: tuple[str, ...] = _GUESSABLE) -> str:
    """The grammar (of `candidates`) under which the fewest lines of text sit in parse errors, or "" when
    every one of them leaves more than a tenth of the lines in errors (not code, or a language not listed)."""
    if not text.strip():
        return ""
    if text.lstrip().startswith("<?php") and candidates is _GUESSABLE:
        return "php"
    data = text.encode("utf-8")
    best, best_lines = "", None
    for language in candidates:
        parser = parser_for(language)
        if parser is None:
            continue
        lines = _lines_in_errors(parser.parse(data).root_node)
        if best_lines is None or lines < best_lines:
            best, best_lines = language, lines
        if lines == 0:
            break
    return best if best_lines is not None and best_lines * 10 <= text.count("\n") + 1 else ""


def parse_errors(root) -> Iterator:
    """The outermost ERROR and MISSING nodes of a parse: the places it could not read (an error's insides
    are not walked)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            yield node
        elif node.has_error:
            stack.extend(node.children)


def _lines_in_errors(root) -> int:
    """Lines covered by the outermost ERROR or MISSING nodes (one ERROR node may swallow a whole file)."""
    return len({line for node in parse_errors(root) for line in range(node.start_point[0], node.end_point[0] + 1)})


def regions(text: str, language: str) -> list[Region]:
    """The file's regions, in order, covering every line."""
    n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    parser = parser_for(language)
    starts: list[tuple[int, str]] = []
    if parser is not None:
        tree = parser.parse(text.encode("utf-8"))
        if not tree.root_node.has_error:
            starts = _node_starts(tree.root_node)
    if not starts:
        starts = _blank_line_starts(text)
    return _cover(starts, n_lines)


def _node_starts(root) -> list[tuple[int, str]]:
    """(first line, kind) of each region, from the syntax tree's top level and class-like bodies."""
    starts: list[tuple[int, str]] = []

    def visit(nodes) -> None:
        pending_comment: int | None = None
        for node in nodes:
            if node.type in _LEADING:
                pending_comment = node.start_point[0] if pending_comment is None else pending_comment
                continue
            first = node.start_point[0] if pending_comment is None else pending_comment
            pending_comment = None
            inner = node
            while inner.type in _WRAPPERS and inner.named_child_count:
                inner = inner.named_children[-1]
            kind = "imports" if inner.type in _IMPORTS else inner.type
            if kind == "imports" and starts and starts[-1][1] == "imports":
                continue  # consecutive imports are one region
            starts.append((first, kind))
            body = inner.child_by_field_name("body") if inner.type in _CONTAINERS else None
            if body is not None and body.named_child_count:
                visit(body.named_children)  # the container's own region is its header

    visit(_wrapped(root.named_children))
    return starts


def _wrapped(nodes) -> list:
    """The top-level nodes to split, or, in a file that is one statement around the rest (a shell script's
    `{ ... }` download guard, an IIFE), the first level inside it with several multi-line parts."""
    if len([n for n in nodes if n.type not in _LEADING]) != 1:
        return nodes
    inner, multi = nodes, []
    while len(multi := [n for n in inner if n.type not in _LEADING and n.end_point[0] > n.start_point[0]]) == 1:
        inner = multi[0].named_children
    return inner if multi else nodes


def _blank_line_starts(text: str) -> list[tuple[int, str]]:
    """Fallback: a region starts at each non-blank column-0 line that follows a blank line."""
    starts, blank_before = [], True
    for i, line in enumerate(text.split("\n")):
        if line.strip() and blank_before and not line[0].isspace():
            starts.append((i, "block"))
        blank_before = not line.strip()
    return starts


def _cover(starts: list[tuple[int, str]], n_lines: int) -> list[Region]:
    """Regions from sorted start lines: each runs to the next start; the first begins at line 0."""
    merged: dict[int, str] = {}
    for line, kind in starts:
        merged.setdefault(line, kind)  # a class and its first member on one line: keep the class
    merged.setdefault(0, "block")
    lines = sorted(merged)
    ends = lines[1:] + [max(n_lines, lines[-1] + 1)]
    return [Region(s, e, merged[s]) for s, e in zip(lines, ends)]


def region_of_line(regions_: list[Region], line: int) -> int:
    return max(0, bisect.bisect_right([r.start_line for r in regions_], line) - 1)

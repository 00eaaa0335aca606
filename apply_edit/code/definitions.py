"""Named definitions (functions, methods, classes, types, impls, and functions bound to a `const`) found
with tree-sitter, by line range.

The merge uses them as structure: a definition the snippet shows whole, with no marker inside, replaces
the original's definition of the same kind and name, from its first line to its last, whatever lines of
the old body the snippet no longer has.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache

from .regions import parser_for

# Node types that define something by name, in the grammars the language pack ships.
_DEFINITIONS = frozenset({
    "function_definition", "class_definition",  # python, c, cpp
    "function_declaration", "generator_function_declaration", "class_declaration", "method_definition",
    "interface_declaration", "type_alias_declaration", "enum_declaration", "abstract_class_declaration",
    "method_declaration", "constructor_declaration", "record_declaration",  # java, go
    "type_declaration",  # go
    "function_item", "struct_item", "enum_item", "trait_item", "impl_item", "mod_item",  # rust
    "method", "singleton_method", "class", "module",  # ruby
    "struct_specifier",  # c
})
# What a C/C++ declarator names: `f`, a member `f`, `operator=`, `~T`, `T::f` defined outside its class.
_DECLARATOR_NAMES = {"identifier", "field_identifier", "operator_name", "destructor_name", "qualified_identifier"}
_C_TYPES = {"void", "int", "char", "short", "long", "float", "double", "unsigned", "signed", "bool", "_Bool"}
_WRAPPERS = {"decorated_definition", "export_statement"}  # a definition's range includes these
# `const f = (a) => {...}`, `let C = class {...}`: in JavaScript and TypeScript as common as declarations.
_BOUND = frozenset({"lexical_declaration", "variable_declaration"})
_FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "generator_function", "class"}


@dataclass(frozen=True)
class Definition:
    kind: str  # the node type
    name: str  # what the definition is called (for Go methods and Rust impls: with the receiver type)
    start_line: int  # its decorators and export keyword included
    end_line: int  # inclusive
    name_line: int  # where the definition itself starts (after its decorators)
    complete: bool  # parses without errors


def _text(node) -> str:
    return node.text.decode("utf-8", "replace")


def _bound_function(node) -> str | None:
    """The name in `const name = <function or class>` (one declarator), else None."""
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    if len(declarators) != 1:
        return None
    name, value = declarators[0].child_by_field_name("name"), declarators[0].child_by_field_name("value")
    if name is None or name.type != "identifier" or value is None or value.type not in _FUNCTION_VALUES:
        return None
    return _text(name)


def _name(node) -> str | None:
    if node.type in _BOUND:
        return _bound_function(node)
    if node.type == "impl_item":
        trait, type_ = node.child_by_field_name("trait"), node.child_by_field_name("type")
        return f"{_text(trait) if trait else ''} for {_text(type_)}" if type_ else None
    if node.type == "type_declaration":
        spec = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), None)
        return _name(spec) if spec else None
    if node.type == "function_definition" and node.child_by_field_name("name") is None:  # c, cpp
        declarator, type_ = node.child_by_field_name("declarator"), node.child_by_field_name("type")
        if declarator is not None and declarator.type == "parenthesized_declarator" \
                and type_ is not None and type_.type == "type_identifier" and _text(declarator)[1:-1].strip() in _C_TYPES:
            # `beep(void) {`: a function shown from its name line (its return type on the line above)
            # reads in C's grammar as type `beep` with a declarator `(void)`, which can name nothing: the
            # type is its name. (`DEF_PRIMITIVE(list_swap) {` is named by its declarator, `list_swap`.)
            return _text(type_)
        while declarator is not None and declarator.type not in _DECLARATOR_NAMES:
            # `T& f()`: a reference declarator holds the function's without naming the field
            declarator = declarator.child_by_field_name("declarator") or next(
                (c for c in declarator.named_children if c.type.endswith("declarator") or c.type in _DECLARATOR_NAMES),
                None)
        return _text(declarator) if declarator is not None else None
    name = node.child_by_field_name("name")
    if name is None:
        return None
    receiver = node.child_by_field_name("receiver")  # go methods: (s *Store) pathFor
    return f"{_text(receiver)} {_text(name)}" if receiver is not None else _text(name)


# Children a declaration starts with that come before the declaration itself (Java's annotations sit
# in its `modifiers`, TypeScript's decorators in the class).
_PREFIXES = {"modifiers", "decorator", "annotation", "marker_annotation", "comment", "line_comment", "block_comment"}


def _name_line(node) -> int:
    """The line where the declaration itself starts, after its decorators and annotations (Java keeps
    those in `modifiers` with `public final`, which do start the declaration)."""
    for child in node.children:
        if child.type == "modifiers":
            keyword = next((c for c in child.children if c.type not in _PREFIXES), None)
            if keyword is not None:
                return keyword.start_point[0]
        elif child.type not in _PREFIXES:
            return child.start_point[0]
    return node.start_point[0]


# How far below a definition's node start its header line may be (`static inline int` / `TEST_END` lines).
_HEADER_LINES = 3


def header_line(d: Definition, first: str, lines: list[str]) -> int:
    """The line of `lines` where definition d starts as a text whose first line is `first` shows it: d's
    own first line, or, where `first` is one of its next lines (C's return type on a line of its own, a
    macro the grammar took into the declaration), that line. A snippet that shows a definition from
    there leaves the lines above it as they are."""
    key = first.strip()
    if lines[d.name_line].strip() != key:
        for j in range(d.name_line + 1, min(d.name_line + _HEADER_LINES, d.end_line) + 1):
            if lines[j].strip() == key:
                return j
    return d.name_line


def _outer(node):
    while node.parent is not None and node.parent.type in _WRAPPERS:
        node = node.parent
    return node


def definitions(text: str, language: str) -> list[Definition]:
    """The named definitions in text, outer ones before the ones inside them."""
    return list(_definitions_of(text, language))


# One apply reads the same original and snippet many times over (merge, readings, checks): each text is
# parsed once. Trees and definitions are not changed by their readers.
@lru_cache(maxsize=16)
def _definitions_of(text: str, language: str) -> tuple[Definition, ...]:
    root = syntax_tree(text, language)
    return () if root is None else tuple(_definitions_in(root, language))


@lru_cache(maxsize=16)
def syntax_tree(text: str, language: str):
    """The root of text's tree-sitter parse, None without a grammar or text. Cached: the merge, its
    checks and the second reading read the same original and result."""
    parser = parser_for(language)
    return parser.parse(_as_code(text, language)).root_node if parser is not None and text.strip() else None


def _as_code(text: str, language: str) -> bytes:
    """The bytes to parse. PHP outside `<?php` is HTML text: a snippet of PHP code without the tag (a
    method, a class's end) is opened on its first line, so that no line moves."""
    if language == "php" and "<?php" not in text:
        text = "<?php " + text
    return text.encode("utf-8")


# Where a snippet lacks its class, error recovery can read `if (x) {...}` as a method named `if`.
_STATEMENT_KEYWORDS = {"if", "else", "for", "while", "do", "switch", "case", "catch", "try", "finally", "return",
                       "with", "match", "loop", "foreach", "elif", "unless", "until"}


def _definitions_in(root, language: str) -> list[Definition]:
    found: list[Definition] = []
    for node in _nodes_of(root, language, _DEFINITIONS | _BOUND):
        if (name := _name(node)) and name not in _STATEMENT_KEYWORDS:
            outer = _outer(node)
            start, (end, column) = outer.start_point[0], outer.end_point
            end -= 1 if column == 0 and end > start else 0  # a node that ends with its newline
            found.append(Definition(node.type, name, start, end, _name_line(node), not node.has_error))
    return found


def snippet_definitions(text: str, language: str, cuts: list[int]) -> list[Definition]:
    """The definitions of a lazy snippet. Where a marker hides closing lines, the snippet parses with
    errors and tree-sitter's recovery can lose every definition after them; so each piece between the
    lines in `cuts` (its top-level markers) is parsed alone too, and fills in what the whole parse lost
    or found only broken."""
    root = syntax_tree(text, language)
    found = [] if root is None else _definitions_in(root, language)
    if not cuts or root is None or not root.has_error:
        return found
    lines = text.split("\n")
    bounds = [-1, *sorted(cuts), len(lines)]
    whole = {(d.kind, d.name) for d in found if d.complete}
    pieces = [replace(d, start_line=d.start_line + a + 1, end_line=d.end_line + a + 1, name_line=d.name_line + a + 1)
              for a, b in zip(bounds, bounds[1:]) for d in definitions("\n".join(lines[a + 1:b]), language)
              if (d.kind, d.name) not in whole]
    replaced = {(d.kind, d.name) for d in pieces}
    kept = [d for d in found if (d.kind, d.name) not in replaced]
    return sorted(kept + pieces, key=lambda d: (d.start_line, -d.end_line))


# Declarations a scope may not hold twice under one name, by language (where the language itself refuses
# it, or it is a mistake no one writes on purpose): Java overloads methods (a method there is its name
# and parameter types), C++ functions too (one there is its whole declarator: name, parameters and
# qualifiers, `get() const` beside `get()`; the same text twice is one function defined twice), and
# Rust redefines under different `#[cfg]`s (its functions are not here); `var` and Python's decorated
# definitions (`@x.setter`, `@overload`) may repeat a name by design.
_SINGLE = {
    "go": {"function_declaration", "method_declaration"},
    "c": {"function_definition"},
    "cpp": {"function_definition"},
    "java": {"field_declaration", "method_declaration", "constructor_declaration"},
    "javascript": {"lexical_declaration", "method_definition", "import_statement"},
    "jsx": {"lexical_declaration", "method_definition", "import_statement"},
    "typescript": {"lexical_declaration", "method_definition", "import_statement"},
    "tsx": {"lexical_declaration", "method_definition", "import_statement"},
    "python": {"function_definition", "class_definition"},
    "rust": {"field_initializer", "shorthand_field_initializer"},  # `S { x, x: y }` names x twice
}


def _declared(node, language: str) -> list[str]:
    """The names a declaration node declares (a getter and a setter are different names)."""
    if node.type in ("lexical_declaration", "field_declaration"):
        names = [c.child_by_field_name("name") for c in node.named_children if c.type == "variable_declarator"]
        return [_text(n) for n in names if n is not None and n.type == "identifier"]
    if node.type == "import_statement":
        return _imported(node)
    if language == "java" and node.type in ("method_declaration", "constructor_declaration"):
        return [_signature(node)]  # one signature, once (Go's methods are one name, once)
    if language == "cpp" and node.type == "function_definition":
        declarator = node.child_by_field_name("declarator")
        return ["".join(_text(declarator).split())] if declarator is not None and _name(node) else []
    if node.type == "field_initializer":
        field = node.child_by_field_name("field")
        return [_text(field)] if field is not None else []
    if node.type == "shorthand_field_initializer":
        return [_text(c) for c in node.named_children if c.type == "identifier"]
    if node.type == "method_definition":
        kind = "".join(c.type + " " for c in node.children if c.type in ("get", "set", "static"))
        name = node.child_by_field_name("name")
        return [kind + _text(name)] if name is not None else []
    name = _name(node)
    return [name] if name else []


def _signature(node) -> str:
    """A Java method's name and parameter types, `f(Collection<Filter>, int...)`: overloads differ in it."""
    types = []
    for param in getattr(node.child_by_field_name("parameters"), "named_children", []):
        if param.type == "formal_parameter" and (type_ := param.child_by_field_name("type")) is not None:
            types.append(_text(type_))
        elif param.type == "spread_parameter" and param.named_children:
            types.append(_text(param.named_children[0]) + "...")
        elif param.type != "line_comment" and param.type != "block_comment":
            types.append(param.type)  # a receiver parameter or the like: kept distinct
    return f"{_name(node)}({', '.join(''.join(t.split()) for t in types)})"


def _imported(node) -> list[str]:
    """The names an `import` binds: its default, each named import (or its alias), a namespace."""
    names = []
    for clause in node.named_children:
        if clause.type == "import_require_clause":  # `import f = require('g')`
            names += [_text(c) for c in clause.named_children[:1] if c.type == "identifier"]
        if clause.type != "import_clause":
            continue
        for part in clause.named_children:
            if part.type == "identifier":
                names.append(_text(part))
            elif part.type == "namespace_import":
                names += [_text(c) for c in part.named_children if c.type == "identifier"]
            elif part.type == "named_imports":
                for spec in part.named_children:
                    bound = spec.child_by_field_name("alias") or spec.child_by_field_name("name")
                    if spec.type == "import_specifier" and bound is not None:
                        names.append(_text(bound))
    return names


def declared_twice(root, language: str) -> list[tuple[tuple, str, list[tuple[int, int]]]]:
    """Each name declared twice or more in one scope of a parse (its root node; None: nothing): the
    enclosing definitions' names, the name, and the first and last lines of each of its declarations
    there (`const x` twice in one block, a Go function or a Java field defined twice)."""
    kinds = _SINGLE.get(language)
    if not kinds or root is None:
        return []
    scopes: dict[int, tuple[object, dict[str, list[tuple[int, int]]]]] = {}
    for node in _nodes_of(root, language, frozenset(kinds)):
        scope, spans = scopes.setdefault(node.parent.id, (node.parent, {}))
        for name in _declared(node, language):
            spans.setdefault(name, []).append((node.start_point[0], node.end_point[0]))
    return [(_enclosing_names(scope), name, lines)
            for scope, spans in scopes.values() for name, lines in spans.items() if len(lines) > 1]


def _enclosing_names(node) -> tuple[str, ...]:
    """The names of the definitions a node is (or is inside), outermost first. Asked only where a scope
    holds a duplicate: naming every node of a large file on the way down was most of the check's time."""
    names = []
    while node.parent is not None:
        if name := _name(node):
            names.append(name)
        node = node.parent
    return tuple(reversed(names))


def declared_twice_in(text: str, language: str) -> list[tuple[tuple, str, list[tuple[int, int]]]]:
    """`declared_twice` of the text's parse."""
    return declared_twice(syntax_tree(text, language), language) if language in _SINGLE else []


def duplicate_declarations(root, language: str) -> Counter:
    """(enclosing definitions' names, name) for each name declared twice or more in one scope, counted
    per scope (`declared_twice`)."""
    return Counter((path, name) for path, name, _ in declared_twice(root, language))


_STRINGS = frozenset({"string", "template_string", "raw_string_literal", "string_literal", "heredoc_body",
                      "text_block"})
_COMMENTS = frozenset({"comment", "block_comment", "multiline_comment"})


@lru_cache(maxsize=32)
def lines_inside_strings(text: str, language: str, comments: bool = False) -> frozenset[int]:
    """Lines wholly inside a multi-line string literal (a docstring's middle lines): indentation there is
    prose, not structure. `comments`: inside a multi-line comment too (a `...` there is prose, not code)."""
    root = syntax_tree(text, language)
    if root is None:
        return frozenset()
    inside: set[int] = set()
    for node in _nodes_of(root, language, _STRINGS | _COMMENTS if comments else _STRINGS):
        inside.update(range(node.start_point[0] + 1, node.end_point[0]))  # a nested one's lines are its outer's
    return frozenset(inside)


@lru_cache(maxsize=32)
def comment_lines(text: str, language: str) -> frozenset[int]:
    """Lines that are only comment: wholly inside a comment's node, from its first non-blank character to
    its last (a licence block's lines, `// note`; not `x = 1  // note`)."""
    root = syntax_tree(text, language)
    if root is None:
        return frozenset()
    lines = text.split("\n")
    found: set[int] = set()
    for node in _nodes_of(root, language, _COMMENTS | {"line_comment"}):
        (first, start), (last, end) = node.start_point, node.end_point
        for n in range(first, min(last, len(lines) - 1) + 1):
            line = lines[n].encode()  # tree-sitter's columns are bytes
            body = line.strip()
            if not body:
                continue
            lead, tail = len(line) - len(line.lstrip()), len(line.rstrip())
            if (n > first or start <= lead) and (n < last or end >= tail):
                found.add(n)
    return frozenset(found)


def _nodes_of(root, language: str, kinds: frozenset[str]) -> list:
    """The named nodes of these kinds in a parse of the language, in file order (an outer one before the
    ones inside it), found by a tree-sitter query: a walk of every node in Python was most of the time of
    the checks on a large file."""
    from tree_sitter import QueryCursor

    query = _query_for(language, kinds)
    if query is None:
        return []
    nodes = QueryCursor(query).captures(root).get("node", [])
    # A grammar may alias another node type to one of the kinds (C#'s struct as a class): the kind decides.
    return sorted((node for node in nodes if node.type in kinds), key=lambda node: (node.start_byte, -node.end_byte))


@lru_cache(maxsize=None)  # a few sets of kinds per grammar
def _query_for(language: str, kinds: frozenset[str]):
    """A query that captures the nodes of these kinds as `node` (None: the grammar has none of them)."""
    from tree_sitter import Query

    grammar = parser_for(language).language
    present = [kind for kind in sorted(kinds) if grammar.id_for_node_kind(kind, True)]
    return Query(grammar, "[" + " ".join(f"({kind})" for kind in present) + "] @node") if present else None

"""Regions of the original from tree-sitter (offline grammars), with a blank-line fallback."""

import pytest

from apply_edit.faces.cases import load_cases
from apply_edit.code.regions import language_for, parser_for, region_of_line, regions
from conftest import FIXTURES

PY = '''import os
import sys

X = 1


class Cache:
    """Doc."""

    def get(self, key):
        return key

    # a comment that belongs to put
    def put(self, key, value):
        pass


@decorator
def helper():
    return 2
'''


@pytest.mark.parametrize("language", ["python", "javascript", "typescript", "tsx", "go", "rust", "java"])
def test_grammars_load_offline(language):
    assert parser_for(language) is not None


def test_python_regions_split_classes_into_members():
    rs = regions(PY, "python")
    starts = {r.start_line: r.kind for r in rs}
    assert starts[0] == "imports"
    assert starts[6] == "class_definition"  # the class header up to its first member
    assert starts[9] == "function_definition"  # get
    assert starts[12] == "function_definition"  # put, with its leading comment
    assert starts[17] == "function_definition"  # helper, with its decorator
    assert region_of_line(rs, 10) == region_of_line(rs, 9)


@pytest.mark.parametrize("case", load_cases(FIXTURES), ids=lambda c: c.name)
def test_regions_cover_every_line_once(case):
    rs = regions(case.original, case.language)
    assert rs[0].start_line == 0
    assert all(a.end_line == b.start_line for a, b in zip(rs, rs[1:]))
    assert rs[-1].end_line >= case.original.count("\n")
    # A whole new file has nothing to split; a file that is one statement around the rest (an IIFE, a shell
    # script's `{ ... }` guard) is split inside it.
    assert len(rs) > 1 or not case.original


def test_unknown_language_falls_back_to_blank_line_blocks():
    text = "first:\n  a\n\nsecond:\n  b\n  c\n\n  still second\n"
    rs = regions(text, "")
    assert [(r.start_line, r.kind) for r in rs] == [(0, "block"), (3, "block")]


def test_unparsable_code_falls_back():
    rs = regions("def broken(:\n    pass\n\nx = [\n", "python")
    assert all(r.kind == "block" for r in rs)


def test_a_header_is_c_or_cpp_by_which_grammar_parses_it():
    cpp = ("#pragma once\n#include <string>\n\nnamespace c10 {\ntemplate <typename T>\nclass Box {\n public:\n"
           "  T get() const { return v_; }\n\n private:\n  T v_;\n};\n}  // namespace c10\n")
    c = "#ifndef BOX_H\n#define BOX_H\n\nstruct box {\n  int v;\n};\n\nint box_get(const struct box *b);\n\n#endif\n"
    assert language_for("include/box.h", cpp) == "cpp"
    assert language_for("include/box.h", c) == "c"
    assert language_for("src/box.py", cpp) == "python"  # an extension that names one language decides
    assert language_for("", "def f(x):\n    return x + 1\n") == "python"  # no path: a guess from the text

"""Where brackets and blocks close (`apply_edit.merge.blocks`)."""

from apply_edit.code.languages import code_of
from apply_edit.merge.blocks import _block_ends, _bracket_ends, _indented_block_ends


def test_where_the_parentheses_a_line_opens_close():
    lines = ["def build(name,\n", "          path):\n", "    return f(name)\n", "x = ')'  # (\n"]
    assert _bracket_ends(lines, code_of("python")) == [1, 1, 2, 3]  # strings and comments do not count
    assert _bracket_ends(["f(\n", "  g(\n"], code_of("python")) == [0, 1]  # never closed: itself


def test_blocks_close_by_brackets_and_an_else_closes_one_and_opens_one():
    lines = ["if (x) {\n", "  y();\n", "} else {\n", "  z(\"}\");\n", "}\n"]
    assert _block_ends(lines, code_of("javascript")) == {0: 2, 2: 4}


def test_where_a_marker_hides_a_closer_indentation_pairs_the_lines():
    lines = ["function f() {\n", "  if (x) {\n", "}\n"]  # the `if`'s `}` is behind a marker
    code = code_of("javascript")
    assert _block_ends(lines, code) == {1: 2}  # brackets pair the `}` with the `if`
    assert _indented_block_ends(lines, code) == {0: 2}  # its depth pairs it with the function

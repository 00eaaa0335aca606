"""Turning the alignment into text (`apply_edit.merge.render`)."""

from apply_edit.merge.render import (_join, _outermost, _render, _shift, _without_blank_insertions,
                                     _without_replaced_declarations, _written_lines)
from apply_edit.merge.snippet import _parse_snippet, split_lines


def test_the_end_of_the_text_ends_like_the_original():
    assert _join([("a\n", 0), ("b", None)], "a\nb\n", "\n") == "a\nb\n"  # a final newline is added
    assert _join([("a\n", 0), ("c\n", None)], "a\nb", "\n") == "a\nc"  # the snippet wrote the last line
    assert _join([("a\r\n", 0), ("b", 1)], "a\r\nb", "\r\n") == "a\r\nb"  # the original's own last line
    assert _join([], "", "\n") == ""


def test_a_new_blank_line_beside_a_marker_between_two_adjacent_original_lines_is_dropped():
    out = [("a\n", 0, 0), ("\n", None, None), ("b\n", 1, 1), ("\n", None, None), ("c\n", None, None), ("d\n", 3, 3)]
    beside = [False, True, False, True, False, False]
    assert _without_blank_insertions(out, beside) == [("a\n", 0, 0), ("b\n", 1, 1), ("\n", None, None),
                                                      ("c\n", None, None), ("d\n", 3, 3)]
    # Shown between two lines of code, away from any marker, the blank line is the edit's.
    assert _without_blank_insertions(out, [False] * 6) == out


def test_a_hunk_shown_without_its_enclosing_block_is_indented_as_the_original():
    assert _shift([("def f():\n", "    def f():\n"), ("    x = 1\n", "        x = 1\n")]) == ("", "    ")
    assert _shift([("        x = 1\n", "    x = 1\n")]) == ("    ", "")
    assert _shift([("  a\n", "    a\n"), ("b\n", "b\n")]) is None  # only some lines moved: that is the edit
    assert _shift([("x\n", "x\n")]) == ("", "")  # the snippet's own indentation


def test_new_lines_of_a_shifted_hunk_get_the_original_indentation():
    orig = split_lines("class A:\n    def f(self):\n        return 1\n")
    snippet = _parse_snippet(["def f(self):\n", "    log()\n", "    return 1\n"], set(), "", set())
    ops = [("keep", 0, False), ("match", 0, 1), ("ins", 1), ("match", 2, 2)]
    assert _written_lines(ops, snippet, orig, frozenset()) == [("class A:\n", 0, 0), ("    def f(self):\n", 1, 1),
                                                  ("        log()\n", None, None), ("        return 1\n", 2, 2)]


def test_a_kept_declaration_beside_its_new_version_is_dropped():
    original = "const limit = 5;\nrun(limit);\n"
    lines = [("const limit = 10;\n", None), ("const limit = 5;\n", 0), ("run(limit);\n", 1)]
    assert _without_replaced_declarations(lines, original, "javascript") == (
        [("const limit = 10;\n", None), ("run(limit);\n", 1)], [0])
    assert _without_replaced_declarations(lines[1:], original, "javascript") == (lines[1:], [])


def test_render_returns_the_text_origins_and_the_replaced_lines():
    original = "const limit = 5;\nrun(limit);\n"
    snippet = _parse_snippet(["const limit = 10;\n", "// ... existing code ...\n"], set(), "javascript", set())
    ops = [("ins", 0), ("keep", 0, False), ("keep", 1, False)]
    assert _render(ops, snippet, split_lines(original), original, "javascript") == \
        ("const limit = 10;\nrun(limit);\n", [None, 1], [0])


def test_a_hunk_whose_lines_moved_by_the_edit_sits_where_its_outermost_lines_say():
    # A method written flush-left whose nested `with` the edit made one: its header is 4 deeper in the
    # file, the lines the edit moved are not.
    pairs = [("def f(self):\n", "    def f(self):\n"), ("        x,\n", "            x,\n"), ("    ):\n", "            ):\n")]
    assert _shift(pairs) is None
    assert _outermost(pairs) == pairs[:1]


def test_methods_written_flush_left_whose_blocks_the_edit_wrapped_keep_the_files_depth():
    # Most matched lines are the wrapped ones (at the original's own depth); the headers say the
    # methods were written 4 to the left, in both hunks.
    from apply_edit.merge import merge

    body = "".join(f"            go{n}()\n" for n in range(4))
    original = ("class A:\n    def f(self):\n        log('f')\n        if x:\n" + body + "        return 1\n\n"
                "    def g(self):\n        if y:\n" + body.replace("go", "stop") + "        return 2\n")
    update = ("# ... existing code ...\ndef f(self):\n    log('f')\n    with lock:\n        if x:\n" + body
              + "    return 1\n# ... existing code ...\ndef g(self):\n    with lock:\n        if y:\n"
              + body.replace("go", "stop") + "    return 2\n")
    expected = ("class A:\n    def f(self):\n        log('f')\n        with lock:\n            if x:\n"
                + body.replace("            ", "                ") + "        return 1\n\n"
                "    def g(self):\n        with lock:\n            if y:\n"
                + body.replace("go", "stop").replace("            ", "                ") + "        return 2\n")
    assert merge(original, update, "python").text == expected


def test_a_blank_line_typed_before_a_trailing_marker_at_the_files_end_is_layout():
    from apply_edit.merge import merge

    py = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    update = "def g():\n    return 3\n\n# ... existing code ...\n"
    assert merge(py, update, "python").text == py.replace("return 2", "return 3")


def test_a_hunk_whose_outermost_lines_sit_in_place_keeps_its_own_indentation():
    # Most matched lines moved one level deeper (wrapped in the new `for`), so most of the snippet sits at
    # one offset from the file; but the hunk's outermost lines are where the file has them: it is not a
    # re-indented copy, and its new lines are written as the snippet has them.
    from apply_edit.merge import merge

    checks = "".join(f"\tassert(t, {n}, got[{n}])\n" for n in range(10))
    original = "package p\n\nfunc TestOffsets(t *testing.T) {\n\tgot := colors(0)\n" + checks + "}\n"
    update = ("// ... existing code ...\nfunc TestOffsets(t *testing.T) {\n\tfor _, attr := range attrs {\n"
              "\t\tgot := colors(attr)\n" + checks.replace("\t", "\t\t") + "\t}\n}\n")
    expected = ("package p\n\nfunc TestOffsets(t *testing.T) {\n\tfor _, attr := range attrs {\n\t\tgot := colors(attr)\n"
                + checks.replace("\t", "\t\t") + "\t}\n}\n")
    assert merge(original, update, "go").text == expected

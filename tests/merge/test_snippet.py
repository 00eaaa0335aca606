"""Reading the snippet (`apply_edit.merge.snippet`): lines, indentation, markers, hunks."""

from apply_edit.merge.snippet import (_closing_lines, _in_file_indentation, _newline, _opening_lines, _parse_snippet,
                                      _width, code_lines, marker_keys, split_lines)


def test_only_a_line_feed_splits_and_endings_are_kept():
    assert split_lines("a\r\nb\rc\nd") == ["a\r\n", "b\rc\n", "d"]
    assert split_lines("") == []
    assert code_lines("  x = 1\n\n\t y\n   \n") == ["x = 1", "y"]


def test_the_file_line_ending_is_what_most_lines_end_with():
    assert _newline("a\r\nb\r\nc\n") == "\r\n"
    assert _newline("a\r\nb\nc\n") == "\n"
    assert _width("\t  x") == 6


def test_a_snippet_in_spaces_is_reindented_with_the_file_tabs_and_the_reverse():
    tabbed = ["func f() {\n", "\treturn 1\n", "}\n"]
    update = ["func f() {\n", "    if x {\n", "        return 2\n", "    }\n", "}\n"]
    assert _in_file_indentation(update, tabbed) == ["func f() {\n", "\tif x {\n", "\t\treturn 2\n", "\t}\n", "}\n"]
    spaced = ["def f():\n", "  if x:\n", "    return 1\n"]
    assert _in_file_indentation(["def f():\n", "\treturn 2\n"], spaced) == ["def f():\n", "  return 2\n"]
    assert _in_file_indentation(update, ["def f():\n", "    pass\n"]) == update  # already as the file is


def test_markers_split_the_snippet_into_hunks_and_record_their_depth():
    update = ["\n", "def f():\n", "    # ... existing code ...\n", "    return 2\n", "# ... existing code ...\n",
              "def g():\n", "\n"]
    snippet = _parse_snippet(update, set(), "", set())
    assert snippet.lines == ["def f():\n", "    return 2\n", "def g():\n"]  # outer blank lines dropped
    assert snippet.number == [1, 3, 5]
    assert snippet.hunk_of == [0, 1, 2]
    assert snippet.reach == [None, 4, 0, None]  # per gap: the indentation of the marker there
    assert snippet.markers == {2, 4}


def test_a_marker_line_the_original_has_is_code():
    update = ["# ... existing code ...\n", "x = 1\n"]
    assert _parse_snippet(update, set(), "", set()).markers == {0}
    assert _parse_snippet(update, {"# ... existing code ..."}, "", set()).markers == set()


def test_a_bare_ellipsis_after_a_python_header_is_a_stub_body_unless_more_body_follows():
    stub = _parse_snippet(["def f():\n", "    ...\n", "x = 1\n"], set(), "python", set())
    assert stub.markers == set() and len(stub.lines) == 3
    elided = _parse_snippet(["def f():\n", "    ...\n", "    return 1\n"], set(), "python", set())
    assert elided.markers == {1} and elided.reach == [None, 4, None]


def test_lines_that_open_and_close_a_marker_scope():
    snippet = _parse_snippet(["if (x) {\n", "    // ... existing code ...\n", "}\n", "y();\n"], set(), "", set())
    assert _opening_lines(snippet) == [True, False, False]  # `if (x) {` opens the body the marker elides
    assert _closing_lines(snippet) == [None, 4, None]  # `}` ends the marker's scope
    leading = _parse_snippet(["    // ... existing code ...\n", "}\n"], set(), "", set())
    assert _closing_lines(leading) == [None]  # a leading marker stands for all before: no scope


def test_marker_keys_are_the_markers_as_the_merge_reads_them():
    original = "function a() {\n  return 1;\n}\n"
    update = "// ... existing code ...\nfunction b() {}\n...\n"
    assert marker_keys(original, update, "javascript") == {"// ... existing code ...", "..."}
    assert marker_keys("x = '...'\n...\n", "x = 1\n...\n", "python") == set()  # the original's own `...`

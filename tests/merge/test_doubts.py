"""What the final alignment leaves in doubt (`apply_edit.merge.doubts`), through `merge`."""

from collections import Counter

from apply_edit.merge import merge
from apply_edit.merge.doubts import doubts
from apply_edit.merge.snippet import _parse_snippet, split_lines

PY = "".join(f"def f{i}(x):\n    total = x + {i}\n    return total\n\n\n" for i in range(6))


def test_a_new_line_beside_the_kept_line_it_may_replace_is_a_doubt():
    orig = split_lines("def f():\n    timeout = 5\n    run(timeout)\n")
    snippet = _parse_snippet(["def f():\n", "    # ... existing code ...\n", "    timeout = 10\n", "    run(timeout)\n"],
                             set(), "python", set())
    # The marker kept the old assignment and the new one was written beside it.
    ops = [("match", 0, 0), ("keep", 1, False), ("ins", 1), ("match", 2, 2)]
    assert [r.what for r in doubts(ops, snippet, orig, Counter(line.strip() for line in orig), set())] == [
        "snippet line 3 may replace original line 2, kept beside it"]
    edited = [("match", 0, 0), ("edit", 1, 1), ("match", 2, 2)]
    assert doubts(edited, snippet, orig, Counter(line.strip() for line in orig), set()) == []


def test_a_long_deletion_between_two_snippet_lines_is_a_doubt_and_a_short_one_is_not():
    long_gone = merge(PY, "def f0(x):\n    total = x + 0\n    return total\n", "python")
    assert any("deleted between two snippet lines" in r.what for r in long_gone.report.readings) is False  # a piece: kept
    update = "def f0(x):\n    total = x + 0\n    return total\n\n\ndef f5(x):\n# ... existing code ...\n"
    cut = merge(PY, update, "python")
    assert "def f3(x)" not in cut.text  # shown adjacent, f0 and f5 delete what was between them
    assert any("deleted between two snippet lines" in r.what for r in cut.report.readings)
    assert not cut.report.confident
    short = merge(PY, "def f0(x):\n    return x + 0\n# ... existing code ...\n", "python")
    assert not any("deleted" in r.what for r in short.report.readings)


def test_new_lines_beside_the_files_first_lines_kept_are_a_doubt():
    js = "'use strict';\n\nconst a = require('a');\n" + "".join(f"\nfunction f{i}() {{\n  return {i};\n}}\n" for i in range(4))
    # One new first line and a marker: added above the old one, or in its place? The snippet cannot say.
    readings = merge(js, '"use strict";\n// ... existing code ...\n', "javascript").report.readings
    assert any("beside the file's first lines" in r.what for r in readings)
    shown = merge(js, "'use strict';\n\nconst a = require('a');\nconst b = require('b');\n// ... existing code ...\n",
                  "javascript")
    assert shown.report.readings == [] and "const b = require('b');\n" in shown.text


def test_the_other_way_of_new_first_lines_is_the_snippets_start_with_no_old_line_left_above_it():
    # A new license header over the old one: taken the other way, the old one goes with the blank line
    # that separated it from the code (the snippet's own blank line separates the new one).
    old = "".join(f"// Licensed under the terms {i}\n" for i in range(6))
    go = old + "\npackage spec\n\nimport (\n\t\"encoding/json\"\n)\n" + "".join(
        f"\nfunc F{i}() int {{\n\treturn {i}\n}}\n" for i in range(4))
    update = "// SPDX-License-Identifier: Apache-2.0\n\npackage spec\n// ... existing code ...\n"
    candidate = merge(go, update, "go")
    edge = [r for r in candidate.report.readings if r.kind == "edge"]
    assert candidate.reread(edge) == go.replace(old + "\n", "// SPDX-License-Identifier: Apache-2.0\n\n")


def test_an_edited_first_line_with_an_old_line_kept_above_it_is_a_doubt_too():
    # No marker before the snippet, whose first line joins the file's first two: the alignment edits one
    # of them and keeps the other above it, as if the snippet began inside the file.
    py = "from . import errors\nfrom . import utils\nfrom .types import Stream\n\n\nclass Api:\n    pass\n"
    candidate = merge(py, "from . import errors, utils\nfrom .types import Stream\n\n\n# ... existing code ...\n",
                      "python")
    edge = [r for r in candidate.report.readings if r.kind == "edge"]
    assert candidate.text.startswith("from . import errors\n") and edge
    assert candidate.reread(edge) == py.replace("from . import errors\nfrom . import utils\n",
                                                "from . import errors, utils\n")


def test_deleting_a_header_and_keeping_its_body_is_a_doubt():
    orig = split_lines("class A:\n    def f(self):\n        return 1\n")
    snippet = _parse_snippet(["class A:\n", "        return 1\n"], set(), "python", set())
    ops = [("match", 0, 0), ("del", 1), ("match", 1, 2)]
    assert [r.what for r in doubts(ops, snippet, orig, Counter(line.strip() for line in orig), set())] == [
        "original line 2 deleted, the block it opens kept"]


def test_a_definition_read_as_whole_up_to_a_marker_may_go_on_under_it():
    orig = "class T:\n    def a(self):\n        x = 1\n\n        y = 2\n        return x + y\n\n    def b(self):\n        return 3\n"
    update = "class T:\n    def a(self):\n        x = 1\n\n    # ... existing code ...\n\n    def c(self):\n        return 4\n"
    merged = merge(orig, update, "python")
    scope = [r for r in merged.report.readings if r.kind == "scope"]
    assert "y = 2" not in merged.text and len(scope) == 1 and not merged.report.confident
    assert "        y = 2\n        return x + y\n" in merged.reread(scope)


def test_blank_lines_kept_past_the_last_line_a_snippet_shows_without_a_marker_are_a_doubt():
    orig = "".join(f"f{i}() {{\n  return {i};\n}}\n\n" for i in range(3)) + "\n"
    update = "// ... existing code ...\nf2() {\n  return 20;\n}\n"
    merged = merge(orig, update, "javascript")
    assert [r.kind for r in merged.report.readings] == ["blank"] and not merged.report.confident
    assert merged.text.endswith("return 20;\n}\n\n\n")  # kept as the merge reads it
    assert merged.reread(merged.report.readings).endswith("return 20;\n}\n")
    marked = merge(orig, update + "// ... existing code ...\n", "javascript")
    assert marked.report.readings == [] and marked.report.confident

"""The original lines that go with a name the instruction removes (`apply_edit.merge.removals`)."""

from apply_edit.code.definitions import definitions
from apply_edit.merge.removals import _removed_lines
from apply_edit.merge.snippet import split_lines


def test_nothing_is_removed_without_names():
    assert not _removed_lines(["x = 1\n"], set(), [], "python").any()


def test_uses_and_the_definition_of_a_name_go_with_their_comment_block():
    original = ("import os\n\n# The old way.\n# Kept for now.\ndef legacy_path(p):\n    return os.path.join('old', p)\n\n\n"
                "def path(p):\n    return legacy_path(p) if OLD else p\n")
    orig = split_lines(original)
    removed = _removed_lines(orig, {"legacy_path"}, definitions(original, "python"), "python")
    # the definition, its comments, one of the two blank lines it leaves together, and the use
    assert [j for j in range(len(orig)) if removed[j]] == [1, 2, 3, 4, 5, 9]


def test_a_block_registered_under_the_name_goes_whole():
    original = ('const run = require("run");\n\ndescribe("legacy", () => {\n  it("works", () => {\n    run();\n  });\n});\n\n'
                'describe("current", () => {\n  it("works", () => {});\n});\n')
    orig = split_lines(original)
    removed = _removed_lines(orig, {"legacy"}, [], "javascript")
    assert [j for j in range(len(orig)) if removed[j]] == [1, 2, 3, 4, 5, 6]  # and one of two blank lines

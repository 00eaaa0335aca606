"""Checks that need no expected file: what makes a rewrite untrustworthy, whoever wrote it."""

from apply_edit.checks import problems

ORIGINAL = "import os\n\n\ndef area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n    return 0\n"
UPDATE = "# ... existing code ...\ndef area(w, h, scale=1):\n    return w * h * scale\n# ... existing code ...\n"
GOOD = ORIGINAL.replace("def area(w, h):\n    return w * h\n", "def area(w, h, scale=1):\n    return w * h * scale\n")


def test_a_sound_rewrite_passes():
    assert problems(ORIGINAL, UPDATE, GOOD, "python") == []


def test_a_result_that_no_longer_parses_is_refused():
    found = problems(ORIGINAL, UPDATE, GOOD.replace("def main():", "def main(:"), "python")
    assert found == ["it does not parse as python (the original does)"]


def test_a_result_cut_short_is_refused():
    found = problems(ORIGINAL, UPDATE, GOOD[:GOOD.index("def main")], "python")
    assert len(found) == 1 and "drops 3 of the original's 6 lines" in found[0]


def test_deletions_the_snippet_asks_for_are_allowed():
    update = "import os\n\n\ndef main():\n    print(2 * 3)\n    return 0\n"  # area() removed on purpose
    result = "import os\n\n\ndef main():\n    print(2 * 3)\n    return 0\n"
    assert problems(ORIGINAL, update, result, "python") == []


def test_unknown_languages_get_the_deletion_check_only():
    assert problems("a\nb\nc\nd\ne\n", "", "a\n", "") != []
    assert problems("a\nb\n", "", "a\nb\nc\n", "") == []


def test_snippet_lines_missing_from_the_result_are_named():
    found = problems(ORIGINAL, UPDATE, ORIGINAL.replace("def area(w, h):", "def area(w, h, scale=1):"), "python")
    assert found == ["1 of the snippet's 2 lines are not in it (in order)"]


def test_copied_marker_lines_are_refused():
    result = GOOD.replace("def main():\n    print(area(2, 3))\n", "# ... existing code ...\n")
    assert any("marker line" in p for p in problems(ORIGINAL, UPDATE, result, "python"))


def test_an_unchanged_file_is_refused_when_the_snippet_shows_new_lines():
    found = problems(ORIGINAL, UPDATE, ORIGINAL, "python")
    assert "it is the original unchanged, but the snippet shows lines the original does not have" in found

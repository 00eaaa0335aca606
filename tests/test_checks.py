"""The output guard refuses rewrites that break the syntax or silently drop code."""

from apply_edit.guard import check_output

ORIGINAL = "import os\n\n\ndef area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n    return 0\n"
UPDATE = "# ... existing code ...\ndef area(w, h, scale=1):\n    return w * h * scale\n# ... existing code ...\n"
GOOD = ORIGINAL.replace("def area(w, h):\n    return w * h\n", "def area(w, h, scale=1):\n    return w * h * scale\n")


def test_a_sound_rewrite_passes():
    assert check_output(ORIGINAL, UPDATE, GOOD, "python") is None


def test_a_result_that_no_longer_parses_is_refused():
    reason = check_output(ORIGINAL, UPDATE, GOOD.replace("def main():", "def main(:"), "python")
    assert "does not parse as python" in reason


def test_a_result_cut_short_is_refused():
    reason = check_output(ORIGINAL, UPDATE, GOOD[:GOOD.index("def main")], "python")
    assert "drops 3 of the original's 6 lines" in reason


def test_deletions_the_snippet_asks_for_are_allowed():
    update = "import os\n\n\ndef main():\n    print(2 * 3)\n    return 0\n"  # area() removed on purpose
    result = "import os\n\n\ndef main():\n    print(2 * 3)\n    return 0\n"
    assert check_output(ORIGINAL, update, result, "python") is None


def test_unknown_languages_get_the_deletion_check_only():
    assert check_output("a\nb\nc\nd\ne\n", "", "a\n", "") is not None
    assert check_output("a\nb\n", "", "a\nb\nc\n", "") is None

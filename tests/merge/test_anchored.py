"""The second reading, each hunk placed by its own lines (`apply_edit.merge.anchored`), and what the merge
and the judge make of it."""

from apply_edit.code.languages import uncommented
from apply_edit.judging.decide import Judge
from apply_edit.merge import merge
from apply_edit.merge.anchored import anchored_reading
from apply_edit.merge.report import MergeCandidate
from apply_edit.merge.snippet import _read

PY = ("import os\n\n\ndef load(path):\n    with open(path) as f:\n        return f.read()\n\n\n"
      "def save(path, text):\n    with open(path, 'w') as f:\n        f.write(text)\n\n\n"
      "def main():\n    text = load('a')\n    save('b', text)\n")


def read(original: str, update: str, language: str = "python") -> str | None:
    orig, _, _, snippet, _ = _read(original, update, language)
    found = anchored_reading(orig, snippet, original.endswith("\n"), uncommented(language))
    return "".join(found[0]) if found else None


def test_each_hunk_goes_where_its_own_lines_are_and_an_edited_line_beside_them_replaces_its_old_version():
    update = ("# ... existing code ...\ndef save(path, text):\n    with open(path, 'w', encoding='utf-8') as f:\n"
              "        f.write(text)\n# ... existing code ...\n")
    expected = PY.replace("open(path, 'w')", "open(path, 'w', encoding='utf-8')")
    assert read(PY, update) == expected
    result = merge(PY, update, "python")
    assert result.text == expected and result.report.read_twice and result.report.confident


def test_a_line_given_a_trailing_comment_is_an_edit_of_it_in_both_readings_however_short():
    """`raise` -> `raise  # noqa: E0704`: the same code, so the hunk edits that line; the marker after it
    keeps nothing of it (it had kept the old `raise` under the new one, in both readings: a sure answer)."""
    original = ("def close(stream, exc):\n    stream.abort()\n    if not isinstance(exc, Exception):\n"
                "        raise\n\n\ndef serve(handler):\n    handler()\n")
    update = ("# ... existing code ...\n    if not isinstance(exc, Exception):\n        raise  # noqa: E0704\n"
              "# ... existing code ...\n")
    expected = original.replace("        raise\n", "        raise  # noqa: E0704\n")
    assert read(original, update) == expected
    result = merge(original, update, "python")
    assert result.text == expected and result.report.read_twice
    judge = Judge(original, update, "python", result)
    assert judge.merge_sound and not judge.alignment_problems  # the evidence reads it as that line's edit
    # Taken off again, and in a language whose comments start with `//`.
    js = "function f(a) {\n  if (a) {\n    return; // early\n  }\n  g(a);\n}\n"
    update = "// ... existing code ...\n  if (a) {\n    return;\n  }\n// ... existing code ...\n"
    assert merge(js, update, "javascript").text == js.replace("return; // early", "return;")


def test_a_line_shown_before_the_first_anchor_widens_the_span_to_where_the_file_has_it_nearest():
    original = "def a():\n    x = 1\n    return x\n\n\ndef b():\n    x = 1\n    return x + 1\n"
    # `x = 1` is no anchor (the file has it twice); the one right above `return x + 1` is the one shown.
    update = "# ... existing code ...\n    x = 1\n    return x + 1\n    # done\n"
    assert read(original, update, "python") == original + "    # done\n"


def test_a_hunk_that_shows_no_line_of_the_file_has_no_reading_and_the_merge_is_then_not_sure():
    update = "# ... existing code ...\ndef helper():\n    pass\n# ... existing code ...\n"
    assert read(PY, update) is None
    result = merge(PY, update, "python")
    assert not result.report.read_twice and not result.report.confident


def test_a_hunk_of_edited_lines_only_is_placed_by_the_one_line_each_edits():
    update = "# ... existing code ...\ndef load(path, mode='r'):\n    with open(path, mode) as f:\n# ... existing code ...\n"
    assert read(PY, update) == PY.replace("def load(path):\n    with open(path) as f:",
                                          "def load(path, mode='r'):\n    with open(path, mode) as f:")


def test_hunks_whose_lines_come_in_another_order_than_the_files_have_no_reading():
    update = ("# ... existing code ...\n    save('b', text)\n# ... existing code ...\n"
              "def load(path):\n# ... existing code ...\n")
    assert read(PY, update) is None


def test_a_hunk_shown_at_another_depth_is_shifted_to_the_files():
    update = "# ... existing code ...\nwith open(path, 'w') as f:\n    f.write(text + '\\n')\n# ... existing code ...\n"
    assert read(PY, update) == PY.replace("f.write(text)", "f.write(text + '\\n')")


def test_where_the_two_readings_differ_the_report_says_so_and_can_read_the_other_way():
    # No marker at all: to the second reading the snippet is the whole file; the alignment reads it as a
    # piece and keeps the file's first lines.
    update = "def load(path):\n    with open(path) as f:\n        return f.read()\n\n\ndef main():\n    pass\n"
    result = merge(PY, update, "python")
    assert result.text.startswith("import os\n") and read(PY, update) == update
    other = [r for r in result.report.readings if r.kind == "anchored"]
    assert len(other) == 1 and result.reread(other) == update and not result.report.confident


def test_where_the_alignment_fails_the_checks_and_the_second_reading_passes_them_the_judge_takes_it():
    update = "# ... existing code ...\ndef save(path, text):\n    with open(path, 'w') as f:\n        f.write(text.strip())\n"
    right = PY.replace("f.write(text)", "f.write(text.strip())")
    broken = right.replace("def main():\n", "def main(:\n")  # fails to parse where the original does not
    second = MergeCandidate(right, [], 0)
    judge = Judge(PY, update, "python", MergeCandidate(broken, [], 0, anchored=second))
    assert judge.merge_sound and judge.candidate is second and judge.alignment_problems
    assert "each placed by its own lines" in judge.without_model().reason
    # Where the second reading fails them too, the alignment's problems stand.
    judge = Judge(PY, update, "python", MergeCandidate(broken, [], 0, anchored=MergeCandidate(broken, [], 0)))
    assert not judge.merge_sound and judge.candidate.text == broken

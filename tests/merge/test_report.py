"""The report of a merge (`apply_edit.merge.report`)."""

from collections import Counter

from apply_edit.merge.report import HunkPlacement, MergeCandidate, MergeReport, _report
from apply_edit.merge.snippet import _parse_snippet, split_lines


def test_a_report_is_confident_only_when_structure_places_every_hunk_and_a_second_reading_agrees():
    placed = HunkPlacement(0, 2, "unique", 4, False)
    assert MergeReport([placed], read_twice=True).confident
    assert not MergeReport([placed]).confident  # the second reading read another file, or none
    assert not MergeReport([], read_twice=True).confident  # nothing to merge
    assert not MergeReport([placed], crossed=[7], read_twice=True).confident
    loose = HunkPlacement(3, 1, "new", 9, True)
    assert MergeReport([placed, loose]).ambiguous == [loose]
    assert MergeReport([placed, HunkPlacement(3, 1, "new", 9, False)]).ambiguous == []  # new code at an end


def test_edited_lines_are_the_deleted_ones_and_the_neighbours_of_new_ones():
    candidate = MergeCandidate("", [0, None, 1, 3], 5)
    assert candidate.edited_original_lines() == {0, 1, 2, 4}


def test_hunks_are_ranked_by_their_firmest_line():
    orig = split_lines("start_server()\n}\nlog_done()\n}\nclose_all()\n")
    snippet = _parse_snippet(["start_server()\n", "new_call()\n", "// ... existing code ...\n", "}\n",
                              "// ... existing code ...\n", "close_all(force)\n"], set(), "", set())
    ops = [("match", 0, 0), ("ins", 1), ("keep", 1, False), ("keep", 2, False), ("match", 2, 3), ("edit", 3, 4)]
    report = _report(ops, snippet, orig, Counter(line.strip() for line in orig), [], [1])
    assert report.hunks == [HunkPlacement(0, 2, "unique", 0, False),  # `start_server()` is found once
                            HunkPlacement(3, 1, "ambiguous", 3, True),  # only a `}` places it
                            HunkPlacement(5, 1, "edited", 4, False)]  # an edit of a line found once
    assert report.deleted == [1] and report.crossed == []

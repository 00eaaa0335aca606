from apply_edit.faces.cases import load_cases
from apply_edit.judging.failures import failure_kinds
from conftest import FIXTURES

ORIGINAL = "import os\n\n\ndef load(path):\n    data = read(path)\n    return data\n\n\ndef save(path, data):\n    write(path, data)\n"
EXPECTED = ORIGINAL.replace("    return data\n", "    log(path)\n    return data.strip()\n")


def test_exact_output_has_no_failure_kind():
    assert failure_kinds(ORIGINAL, EXPECTED, EXPECTED) == []


def test_the_original_back_is_an_edit_not_applied():
    assert failure_kinds(ORIGINAL, EXPECTED, ORIGINAL) == ["edit not applied"]


def test_output_cut_short_is_truncated():
    assert failure_kinds(ORIGINAL, EXPECTED, EXPECTED[:EXPECTED.index("def save")]) == ["truncated"]


def test_whitespace_only_differences_are_reformatting():
    assert failure_kinds(ORIGINAL, EXPECTED, EXPECTED.replace("\n\n\n", "\n\n").replace("(path)\n", "(path)  \n")) \
        == ["reformatted"]


def test_copied_marker_and_dropped_code():
    lazy = EXPECTED.replace("def save(path, data):\n    write(path, data)\n", "# ... existing code ...\n")
    assert failure_kinds(ORIGINAL, EXPECTED, lazy) == ["markers copied", "code dropped"]


def test_a_wrong_token_elsewhere_is_other():
    assert failure_kinds(ORIGINAL, EXPECTED, EXPECTED.replace("log(path)", "log(data)")) == ["other"]


def test_every_fixture_classifies_its_own_original_as_not_applied():
    for case in load_cases(FIXTURES):
        assert failure_kinds(case.original, case.expected, case.expected) == []
        if case.original != case.expected:
            assert "edit not applied" in failure_kinds(case.original, case.expected, case.original), case.name

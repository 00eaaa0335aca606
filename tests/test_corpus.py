"""The corpus generator: edits cut from release diffs, the snippet writer's styles, the build and its split."""

from __future__ import annotations

import hashlib
import io
import json
import random
import tarfile

import pytest

from apply_edit.faces.corpus.build import build, half_of
from apply_edit.faces.corpus.edits import file_edits, usable
from apply_edit.faces.corpus.releases import Project, Release, source_files
from apply_edit.faces.corpus.snippets import STYLES, write_snippet
from apply_edit.merge import is_marker


def _python_file(n_funcs: int = 12, tweak: dict[int, str] | None = None, drop: set[int] = frozenset()) -> str:
    tweak = tweak or {}
    parts = ['"""A module."""\n\nimport os\n']
    for i in range(n_funcs):
        if i in drop:
            continue
        body = tweak.get(i, f"    value = os.getenv('KEY_{i}')\n    return value or {i}\n")
        parts.append(f"\n\ndef helper_{i}(arg):\n    \"\"\"Helper number {i}.\"\"\"\n{body}")
    return "".join(parts)


BEFORE = _python_file()


def _edits(after: str):
    return file_edits(BEFORE, after)


def _shown_in_order(snippet: str, after: str) -> bool:
    """Every line of the snippet that is not a marker or a note is a line of `after`, in order."""
    lines = after.split("\n")
    at = 0
    for line in snippet.split("\n"):
        if not line.strip() or is_marker(line) or line.strip() == "..." or line.strip().startswith("# changed") \
                or line.strip().startswith("# removed"):
            continue
        while at < len(lines) and lines[at].strip() != line.strip():
            at += 1
        if at == len(lines):
            return False
        at += 1
    return True


def test_nearby_hunks_are_one_edit_and_far_ones_apart():
    after = _python_file(tweak={1: "    return 1\n", 2: "    return 2\n", 11: "    return 11\n"})
    edits = _edits(after)
    assert len(edits) == 2  # helpers 1 and 2 together, helper 11 alone
    first, last = edits
    assert len(first.hunks) == 2 and len(last.hunks) == 1
    assert "return 1\n" in first.after and "return 2\n" in first.after and "return 11\n" not in first.after
    assert "return 11\n" in last.after and "return 1\n" not in last.after
    for edit in edits:  # each edit is the older file with only its own hunks made
        for hunk in edit.hunks:
            assert "".join(edit.after.splitlines(True)[hunk.after_start:hunk.after_end]) == "".join(hunk.added)


def test_files_outside_the_sizes_an_edit_is_written_for():
    assert usable(BEFORE)
    assert not usable("x = 1\n" * 10)  # too short
    assert not usable(BEFORE + "x = [" + "1, " * 200 + "]\n")  # a minified line
    assert not usable(BEFORE.rstrip("\n"))  # no final newline
    assert file_edits(BEFORE, BEFORE.replace("    return", "        return")) == []  # a rewrite of every body


def test_whitespace_only_hunks_are_no_edit():
    after = BEFORE.replace("    return value or 3\n", "    return value or 3  \n")
    assert _edits(after) == []


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("in_class", [False, True])
def test_every_style_shows_only_lines_of_the_edited_file(style, in_class):
    if style == "reindented" and not in_class:
        pytest.skip("top-level code has nothing to shift left")
    if style == "inner-markers" and not in_class:
        pytest.skip("a top-level helper of four lines leaves no body for a marker inside it")
    wrap = _in_class if in_class else (lambda text: text)
    after = _python_file(tweak={1: "    value = os.environ.get('KEY_1', '')\n    return value.strip() or 1\n"},
                         drop={10})
    made = set()
    for edit in file_edits(wrap(BEFORE), wrap(after)):
        for seed in range(6):
            snippet = write_snippet(edit, "python", random.Random(seed), style)
            made.add(snippet.style)
            assert _shown_in_order(snippet.update, edit.after), snippet.update
            assert snippet == write_snippet(edit, "python", random.Random(seed), style)  # seeded
    assert style in made


def test_deletions_by_note_and_by_instruction():
    after = _python_file(drop={8})
    (edit,) = _edits(after)
    note = write_snippet(edit, "python", random.Random(0), "deletion-note")
    assert "# removed helper_8()" in note.update.split("\n")
    only = write_snippet(edit, "python", random.Random(0), "instruction-only")
    assert only.update == "" and only.instruction == "Remove the `helper_8` function."


def _in_class(text: str) -> str:
    head, body = text.split("import os\n", 1)
    return head + "import os\n\n\nclass Box:\n" + "".join("    " + line if line.strip() else line
                                                         for line in body.splitlines(True))


def test_reindented_snippets_are_shifted_left():
    before = _in_class(BEFORE)
    after = before.replace("        return value or 5\n", "        return (value or 5) + 1\n")
    (edit,) = file_edits(before, after)
    for seed in range(10):
        snippet = write_snippet(edit, "python", random.Random(seed), "reindented")
        if snippet.style == "reindented":
            lines = snippet.update.split("\n")
            assert "return (value or 5) + 1" in [line.strip() for line in lines]
            assert not any(line.startswith("        return") for line in lines)
            return
    pytest.fail("no reindented snippet in 10 seeds")


def test_a_definition_deleted_right_above_another_is_never_hidden_by_showing_that_one_whole():
    # helper_8 is deleted: helper_9 alone, shown whole after a marker, would not say so.
    (edit,) = _edits(_python_file(drop={8}))
    for seed in range(6):
        snippet = write_snippet(edit, "python", random.Random(seed), "whole-definition")
        assert snippet.style != "whole-definition" or "def helper_7(arg):" in snippet.update


def test_a_file_mixing_tabs_and_spaces_is_not_reindented_by_characters():
    # GNU style: a tab is one level, two spaces another; cutting one character off each line would
    # shift them by different widths.
    before = _in_class(BEFORE).replace("\n        ", "\n\t").replace("\n    def", "\n  def")
    (edit,) = file_edits(before, before.replace("return value or 5\n", "return (value or 5) + 1\n"))
    for seed in range(6):
        assert write_snippet(edit, "python", random.Random(seed), "reindented").style != "reindented"


def test_markers_are_indented_as_the_code_they_stand_for():
    after = BEFORE.replace("    return value or 5\n", "    return (value or 5) + 1\n")
    (edit,) = _edits(after)
    snippet = write_snippet(edit, "python", random.Random(1), "whole-definition")
    lines = snippet.update.split("\n")
    assert lines[0] == "# ... existing code ..." and lines[-2] == "# ... existing code ..."


def _tarball(top: str, files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_source_files_skip_vendored_and_minified_code():
    data = _tarball("pkg-1.0", {"src/a.py": "x = 1\n", "vendor/b.py": "y = 2\n", "web/app.min.js": "z\n",
                                "README.md": "hi\n", "lib/c.ts": "let c = 1;\n"})
    assert set(source_files(data)) == {"src/a.py", "lib/c.ts"}


def test_build_splits_by_project_and_is_reproducible(tmp_path):
    cache = tmp_path / "downloads"
    cache.mkdir()
    projects = []
    for name in ("alpha", "beta", "gamma", "delta"):
        releases = []
        for version, text in (("1.0", BEFORE), ("1.1", _python_file(tweak={3: "    return 3\n"}, drop={9}))):
            data = _tarball(f"{name}-{version}", {"src/mod.py": text})
            digest = hashlib.sha256(data).hexdigest()
            (cache / digest).write_bytes(data)
            releases.append(Release(version, f"https://example.invalid/{name}-{version}.tar.gz", digest))
        projects.append(Project(name, "pypi", "MIT", tuple(releases)))
    out = tmp_path / "corpus"
    records = build(projects, out, cache, log=lambda m: None)
    assert len(records) == 8  # two edits per project
    for r in records:
        assert r["half"] == half_of(r["project"])
        folder = out / r["half"] / r["case"]
        assert (folder / "original.py").read_text() == BEFORE
        assert json.loads((folder / "source.json").read_text())["license"] == "MIT"
    halves = {r["project"]: r["half"] for r in records}
    assert len({(p, h) for p, h in halves.items()}) == 4  # each project in one half only
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    build(projects, out, cache, log=lambda m: None)
    assert first == {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_a_release_whose_bytes_changed_is_refused(tmp_path):
    data = _tarball("x-1.0", {"a.py": BEFORE})
    (tmp_path / ("0" * 64)).write_bytes(data)
    project = Project("x", "pypi", "MIT", (Release("1.0", "https://example.invalid/x", "0" * 64),
                                          Release("1.1", "https://example.invalid/y", "0" * 64)))
    lines = []
    records = build([project], tmp_path / "out", tmp_path, log=lines.append)
    assert records == [] and "sha256" in lines[0]


def test_an_edit_that_leaves_a_half_made_program_is_not_taken():
    from apply_edit.faces.corpus.edits import consistent

    twice = _python_file(tweak={11: "    return 11\n\n\ndef helper_3(arg):\n    return 3\n"})
    (edit,) = file_edits(BEFORE, twice)
    assert not consistent(edit, "python")  # helper_3 defined twice: the rest of the change renamed one
    broken = BEFORE.replace("def helper_5(arg):", "def helper_5(arg")
    (edit,) = file_edits(BEFORE, broken)
    assert not consistent(edit, "python")
    (edit,) = file_edits(BEFORE, _python_file(tweak={4: "    return 4\n"}))
    assert consistent(edit, "python")


def test_the_shipped_manifest_pins_permissive_releases_of_many_languages():
    from apply_edit.faces.corpus.build import SOURCES
    from apply_edit.faces.corpus.releases import load_sources

    projects = load_sources(SOURCES)
    rows = json.loads(SOURCES.read_text())
    assert len(projects) >= 300 and len({p.name for p in projects}) == len(projects)
    permissive = {"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC", "Zlib", "0BSD", "Unlicense",
                  "PSF-2.0", "MIT-0", "BSL-1.0"}
    assert {p.license for p in projects} <= permissive
    assert all(len(r.sha256) == 64 and int(r.sha256, 16) >= 0 and len(p.releases) >= 2
               for p in projects for r in p.releases)
    assert len({language for row in rows for language in row["languages"]}) >= 10


def test_the_readings_summary_counts_per_kind_which_way_was_right_and_whether_the_evidence_agreed():
    from apply_edit.faces.corpus.readings import summary

    records = [{"kind": "edge", "right": "other", "evidence": 9.0}, {"kind": "edge", "right": "other", "evidence": -1.0},
               {"kind": "header", "right": "merge", "evidence": -20.0}, {"kind": "header", "right": "neither",
                                                                        "evidence": 3.0}]
    rows = {line.split()[0]: line.split() for line in summary(records)[1:]}
    assert rows["edge"] == ["edge", "2", "0", "2", "0", "1", "of", "2"]
    assert rows["header"] == ["header", "2", "1", "0", "1", "1", "of", "1"]
    assert rows["note"][1] == "0"


def test_agent_habits_keep_the_snippet_meaning_the_edited_file():
    before = _in_class(BEFORE)
    (edit,) = file_edits(before, before.replace("        return value or 5\n", "        return (value or 5) + 1\n"))
    writer_habits = {}
    for seed in range(60):
        snippet = write_snippet(edit, "python", random.Random(seed), "minimal")
        for habit in snippet.habits:
            writer_habits.setdefault(habit, snippet.update)
        lines = snippet.update.split("\n")
        if "flush-markers" in snippet.habits:  # markers flush left, though they stand for a method's lines
            assert all(line == "# ... existing code ..." for line in lines if "existing code" in line)
        # What a habit adds is layout or a note: the lines of code are still the file's, in order.
        code = "\n".join(line.split("  # ")[0] for line in lines if line.strip())
        assert _shown_in_order(code, edit.after), snippet.update
    assert {"flush-markers", "blank-by-markers", "note-on-line"} <= set(writer_habits)
    assert any(line.endswith(("# NEW", "# changed")) or "# NEW:" in line or "# changed:" in line
               for line in writer_habits["note-on-line"].split("\n"))


def test_habits_with_markers_leave_the_files_own_marker_like_lines_as_they_are():
    # A comment of the file that reads like a marker is code the snippet shows: flushing it left or
    # padding it with blank lines would change lines of the file, not stand for any.
    from apply_edit.faces.corpus.snippets import _Writer

    own = "        # ... the cached value ...\n"
    assert is_marker(own)
    before = _in_class(BEFORE).replace("        return value or 5\n", own + "        return value or 5\n")
    (edit,) = file_edits(before, before.replace("        return value or 5\n", "        return (value or 5) + 1\n"))
    writer = _Writer(edit, "python", random.Random(0))
    lines = writer.minimal()
    assert own in lines
    assert own in writer.flush_markers(lines)
    padded = writer.blank_by_markers(lines) or lines
    at = padded.index(own)
    assert padded[at - 1].strip() and padded[at + 1].strip()


def test_bare_markers_are_not_written_for_a_file_with_ellipsis_lines_of_its_own():
    before = BEFORE.replace("    return value or 2\n", "    ...\n")
    (edit,) = file_edits(before, before.replace("    return value or 7\n", "    return (value or 7) + 1\n"))
    snippet = write_snippet(edit, "python", random.Random(0), "bare")
    assert snippet.style == "minimal"
    assert "# ... existing code ..." in snippet.update


def test_the_scale_set_is_one_edit_the_merge_cannot_place_in_files_of_each_length(tmp_path):
    from apply_edit.faces.cases import load_cases
    from apply_edit.judging.checks import problems
    from apply_edit.faces.corpus.scale import write_scale_set
    from apply_edit.merge import merge, split_lines
    from apply_edit.judging.regions_to_rewrite import changed_regions, failing_regions

    write_scale_set(tmp_path, (100, 3000))
    cases = load_cases(tmp_path)
    assert [c.name for c in cases] == ["scale_00100", "scale_03000"]
    windows = []
    for case, lines in zip(cases, (100, 3000)):
        assert abs(len(split_lines(case.original)) - lines) < 20
        candidate = merge(case.original, case.update, case.language)
        assert problems(case.original, case.update, candidate.text, case.language)  # the model has to write
        [region] = failing_regions(case.original, case.update, case.language, "", candidate,
                                   changed_regions(candidate))
        window = split_lines(case.original)[region.original_start:region.original_end]
        assert "function route(request, queue) {\n" in window
        windows.append(window)
        # The edit is the same wherever it stands: three lines moved into a new function of six.
        assert case.expected.count("\n") == case.original.count("\n") + 4 and case.expected.endswith("}\n")
    assert len(windows[0]) == len(windows[1]) < 30  # what the model reads does not grow with the file

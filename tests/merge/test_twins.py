"""Realignment by twins (`apply_edit.merge.twins`)."""

from collections import Counter

from apply_edit.merge import merge
from apply_edit.merge.twins import _closing_twins, _kept_twins, _realigned, _resumed_lines
from apply_edit.merge.snippet import _parse_snippet, split_lines


def test_twins_are_kept_only_where_the_alignment_can_match_them_all():
    first = [("ins", 0), ("keep", 0, False)]
    good = [("del", 0), ("match", 0, 0)]
    assert _realigned(first, [lambda ops: {0: 0}], lambda context: good) == good
    assert _realigned(first, [lambda ops: {0: 0}], lambda context: [("ins", 0), ("match", 0, 1)]) == first
    assert _realigned(first, [lambda ops: {}], lambda context: good) == first


def test_a_line_written_as_new_right_after_a_marker_kept_it_resumes_there():
    orig = split_lines("setup_all()\nrun_checks()\nfinish()\n")
    snippet = _parse_snippet(["// ... existing code ...\n", "run_checks()\n", "report_results()\n"], set(), "", set())
    ops = [("keep", 0, False), ("keep", 1, False), ("keep", 2, False), ("ins", 0), ("ins", 1)]
    assert _resumed_lines(ops, snippet, orig, Counter(line.strip() for line in orig)) == {0: 1}


def test_a_run_written_beside_a_marker_keeping_the_same_run_is_its_twin():
    orig = split_lines("alpha_step()\nbeta_step()\ngamma_step()\n")
    snippet = _parse_snippet(["new_step()\n", "alpha_step()\n", "beta_step()\n", "// ... existing code ...\n"],
                             set(), "", set())
    ops = [("ins", 0), ("ins", 1), ("ins", 2), ("keep", 0, False), ("keep", 1, False), ("keep", 2, False)]
    counts = Counter(line.strip() for line in orig)
    # the whole run is not kept ([new_step, alpha, beta]), its end from a line found once is
    assert _kept_twins(ops, snippet, orig, counts, set(), set()) == {1: 0, 2: 1}
    assert _kept_twins(ops, snippet, orig, counts, {0}, set()) == {1: 0, 2: 1}  # no definition starts before the twin
    far = split_lines("def other():\n    x()\nalpha_step()\nbeta_step()\n")
    ops = [("ins", 0), ("ins", 1), ("ins", 2)] + [("keep", j, False) for j in range(4)]
    assert _kept_twins(ops, snippet, far, Counter(line.strip() for line in far), {0}, set()) == {}


def test_the_start_of_the_next_definition_shown_before_a_marker_is_context_past_the_definitions_between():
    original = ("// Strict checks everything.\nfunc Strict() Option {\n\treturn strict\n}\n\n"
                "// RejectRepeats errs where a key comes twice.\nfunc RejectRepeats() Option {\n\treturn func(d *Decoder) error {\n\t\td.rejectRepeats = true\n\t\treturn nil\n\t}\n}\n\n"
                "// UseOrderedMap reads a map in order,\n// a MapSlice where no type says otherwise.\n"
                "func UseOrderedMap() Option {\n\treturn ordered\n}\n")
    update = ("// ... existing code ...\nfunc Strict() Option {\n\treturn strict\n}\n\n"
              "// AllowDuplicates ignores a duplicate key.\nfunc AllowDuplicates() Option {\n\treturn allow\n}\n\n"
              "// UseOrderedMap reads a map in order,\n// ... existing code ...\n")
    # The last line before the marker begins the doc of `UseOrderedMap`: context, so the definition the
    # snippet shows no longer between `Strict` and it is gone (a new function copying an old one's last
    # lines far below stays new: the test above).
    assert merge(original, update, "go").text == original.replace(
        "// RejectRepeats errs where a key comes twice.\nfunc RejectRepeats() Option {\n\treturn func(d *Decoder) error {\n"
        "\t\td.rejectRepeats = true\n\t\treturn nil\n\t}\n}",
        "// AllowDuplicates ignores a duplicate key.\nfunc AllowDuplicates() Option {\n\treturn allow\n}")


def test_a_block_opened_on_a_line_found_once_closes_where_the_original_block_does():
    orig = split_lines("switch (x) {\ncase 1:\n  one();\n}\nafter();\n")
    snippet = _parse_snippet(["switch (x) {\n", "case 0:\n", "  zero();\n", "// ... existing code ...\n", "}\n"],
                             set(), "", set())
    # the alignment matched `}` to nothing: it was written as new after the marker kept the old `}`
    ops = [("match", 0, 0), ("ins", 1), ("ins", 2), ("keep", 1, False), ("keep", 2, False), ("keep", 3, False),
           ("keep", 4, False), ("ins", 3)]
    assert _closing_twins(ops, snippet, orig, Counter(line.strip() for line in orig), {0: 3}, {0: 3}) == {3: 3}


def test_a_closing_line_after_a_flush_left_marker_may_close_a_later_block():
    from apply_edit.merge import merge

    js = ("function norm(config, values, callback) {\n  if (values) {\n    config.values = values\n  }\n"
          "  if (callback) {\n    config.callback = callback\n  }\n  return config\n}\n")
    # Typed flush left, the marker stands for lines at any depth: the end of `if (values)` and the
    # block after it, up to the `}` before `return config`.
    update = ("// ... existing code ...\nfunction norm(config, values, callback) {\n  config = copy(config)\n"
              "  if (values) {\n\n// ... existing code ...\n\n  }\n  return config\n}\n")
    assert merge(js, update, "javascript").text == js.replace("{\n  if (values)", "{\n  config = copy(config)\n  if (values)")


def test_the_last_line_before_a_marker_is_where_the_old_code_goes_on():
    from apply_edit.merge import merge

    rust = ("fn root(p: &Path) -> PathBuf {\n    let root = if p.is_absolute() {\n        p.to_owned()\n    } else {\n"
            "        let dir = match current_dir() {\n            Some(dir) => dir,\n            None => {\n"
            "                return PathBuf::new();\n            }\n        };\n        dir.join(p)\n    };\n    root\n}\n")
    new = ("    } else if p.starts_with(\"~\") {\n        let home = match home_dir() {\n            Some(home) => home,\n"
           "            None => {\n                return PathBuf::new();\n            }\n        };\n        home.join(p)\n")
    # The new branch looks like the old one; read as its edit, the old branch's lines go and the
    # snippet's last lines, its context, are written anew.
    update = ("// ... existing code ...\n    let root = if p.is_absolute() {\n        p.to_owned()\n" + new
              + "    } else {\n        let dir = match current_dir() {\n// ... existing code ...\n")
    assert merge(rust, update, "rust").text == rust.replace("        p.to_owned()\n", "        p.to_owned()\n" + new)


def test_the_first_line_after_a_marker_is_context_where_new_code_copies_it():
    # A blank line typed after the marker, then the last line of `test_latest` as context, then a new
    # test whose body is that same line: the copy is the new one, `test_latest` stays whole.
    py = ("def test_main():\n    run()\n\n\n@fixture('index')\ndef test_latest():\n    assert latest() == '13.5'\n\n\n"
          "@fixture('index')\ndef test_lts():\n    assert lts() == '12.1'\n")
    new_test = "@fixture('alpha')\ndef test_latest_skips_alpha():\n    assert latest() == '13.5'\n\n\n"
    update = ("# ... existing code ...\n\n    assert latest() == '13.5'\n\n\n" + new_test
              + "@fixture('index')\ndef test_lts():\n\n# ... existing code ...\n")
    assert merge(py, update, "python").text == py.replace("@fixture('index')\ndef test_lts", new_test + "@fixture('index')\ndef test_lts")


def test_a_run_resuming_after_a_marker_leaves_the_marker_some_code():
    # Two methods end alike; the snippet shows the second's end (its last line edited) after a marker
    # below the first's opening lines. Matched to the first's own end, the run left the marker nothing
    # to stand for and the second method was deleted.
    tail = "        q = p\n\n        p += 5\n\n        self.check(p, q)\n        self.same(p, 15)\n        self.same(q, 10)\n\n"
    py = ("class T:\n    def test_a(self):\n        p = A(10)\n" + tail + "        self.kind(p, Base)\n\n"
          "    def test_b(self):\n        p = B(10)\n" + tail + "        self.kind(p, Old)\n\n"
          "    def test_c(self):\n        p = C(10)\n")
    update = ("    def test_a(self):\n        p = A(10)\n    # ... existing code ...\n" + tail
              + "        self.kind(p, Base)\n\n    def test_c(self):\n    # ... existing code ...\n")
    assert merge(py, update, "python").text == py.replace("Old", "Base")


def test_a_closer_after_a_marker_closes_a_later_block_where_the_shown_one_has_nothing_left():
    # The marker (at the arms' depth) follows the last line of the `(u8)` arm: it stands for that arm's
    # `};` and the arms after it, so the `};` shown after it closes the arm before `(u128)`, and no arm is
    # deleted.
    rs = ("macro_rules! forward {\n    (u8) => {\n        forward_method!{deserialize_u8}\n    };\n"
          "    (u16) => {\n        forward_method!{deserialize_u16}\n    };\n"
          "    (u128) => {\n        forward_method!{deserialize_u128}\n    };\n}\n")
    update = ("// ... existing code ...\n    (u8) => {\n        forward_method!{deserialize_u8}\n    // ... existing code ...\n\n"
              "    };\n    (u128) => {\n        forward_method!{deserialize_u128_or_panic}\n    };\n}\n")
    assert merge(rs, update, "rust").text == rs.replace("deserialize_u128}", "deserialize_u128_or_panic}")

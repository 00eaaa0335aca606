"""The dynamic-programming alignment (`apply_edit.merge.align`)."""

from collections import Counter

import numpy as np

from apply_edit.code.languages import code_of
from apply_edit.merge.align import (BLANK, COMMON, INSERT, INSERT_BLANK, TRIVIAL, UNIQUE, _align, _fixed_columns,
                                    _line_weights, _names_the_end)
from apply_edit.merge.blocks import _bracket_ends
from apply_edit.merge.snippet import _read


def aligned(original, update, language="", context=None):
    orig, _, counts, snippet, _ = _read(original, update, language)
    return _align(orig, snippet, [], counts, {}, {}, np.zeros(len(orig), dtype=bool),
                  _bracket_ends(orig, code_of(language)), {}, context)


def test_line_weights_by_how_often_the_original_has_the_line():
    counts = Counter(["}", "}", "load_config()", "return nil", "x = 1", "x = 1"])
    shown = Counter(["load_config()", "return nil", "x = 1"])  # the snippet's lines
    assert _line_weights("", counts, shown) == (BLANK, INSERT_BLANK)
    assert _line_weights("brand_new()", counts, shown) == (0.0, INSERT)
    assert _line_weights("}", counts, shown) == (TRIVIAL, TRIVIAL)
    assert _line_weights("load_config()", counts, shown) == (UNIQUE, UNIQUE)
    assert _line_weights("return nil", counts, shown) == (COMMON, COMMON)  # found once, but names nothing
    assert _line_weights("x = 1", counts, shown) == (COMMON, COMMON)
    # Found once, but the snippet shows it twice: one of them at least is new code, neither pins a place.
    assert _line_weights("load_config()", counts, shown + Counter(["load_config()"])) == (COMMON, COMMON)


def test_lines_between_two_snippet_lines_are_deleted_and_an_edit_replaces_its_line():
    original = "load_config()\nsetup_logging()\nrun_server(port)\n"
    assert aligned(original, "load_config()\nrun_server(port)\n") == \
        [("match", 0, 0), ("del", 1), ("match", 1, 2)]
    assert aligned(original, "load_config()\nsetup_logging(verbose=True)\nrun_server(port)\n") == \
        [("match", 0, 0), ("edit", 1, 1), ("match", 2, 2)]


def test_a_marker_keeps_the_lines_it_stands_for():
    original = "load_config()\nsetup_logging()\nrun_server(port)\n"
    assert aligned(original, "load_config()\n# ... existing code ...\nrun_server(port)\n") == \
        [("match", 0, 0), ("keep", 1, False), ("match", 1, 2)]


def test_a_marker_inside_a_body_does_not_stand_for_what_follows_the_body():
    original = "def f():\n    one = 1\n    two = 2\nprint(f())\n"
    ops = aligned(original, "def f():\n    # ... existing code ...\n    three = 3\nprint(f())\n")
    # the marker keeps the rest of the body; the new line goes at its end, not after `print`
    assert ops == [("match", 0, 0), ("keep", 1, False), ("keep", 2, False), ("ins", 1), ("match", 2, 3)]
    # New code after the last marker, with nothing after it, ends the file: `print` is kept outside
    # the marker's scope (reported as crossed).
    ops = aligned(original, "def f():\n    # ... existing code ...\n    three = 3\n")
    assert ops == [("match", 0, 0), ("keep", 1, False), ("keep", 2, False), ("keep", 3, True), ("ins", 1)]


def test_a_context_line_must_match_its_twin():
    original = "start()\nlog_event()\nmiddle()\nlog_event()\n"
    update = "start()\n# ... existing code ...\nlog_event()\n# ... existing code ...\n"
    assert aligned(original, update)[-1] == ("match", 1, 3)  # the markers keep for free: either will do
    assert aligned(original, update, context={1: 1}) == \
        [("match", 0, 0), ("match", 1, 1), ("keep", 2, False), ("keep", 3, False)]


def test_a_snippet_that_starts_with_the_file_first_lines_starts_where_the_file_does():
    assert _names_the_end(["import os", "x = 1"], ["import os", "y = 2"])
    assert not _names_the_end(["x = 1"], ["import os"])
    assert _names_the_end(["}"], ["}", "x"])  # closing lines alone only where that run is nowhere else
    assert not _names_the_end(["}"], ["}", "x", "}"])
    orig, _, counts, snippet, _ = _read("import os\n\nx = 1\n", "import os\nimport sys\n", "")
    assert _fixed_columns(snippet, [], counts, orig, [line.strip() for line in orig]).starts_at == {0: 0}


def test_new_code_after_the_last_marker_ends_the_file():
    orig, _, counts, snippet, _ = _read("a_line()\nb_line()\n", "# ... existing code ...\nc_line()\n", "")
    assert _fixed_columns(snippet, [], counts, orig, [line.strip() for line in orig]).ends_at == {1: 2}


def test_lines_between_two_shown_lines_where_a_deletion_note_stands_go_for_free():
    from apply_edit.merge import merge

    kt = ("fun send(call: Call) {\n    log(\"sending\")\n\n    // buffering defeats streaming\n"
          "    if (body is StreamContent) {\n        warn(\n            \"buffering a StreamContent \" +\n"
          "                \"defeats the purpose of streaming. \" +\n                \"Suppress compression.\"\n        )\n"
          "        metrics.count(\"buffered\")\n        metrics.flush()\n    }\n\n"
          "    call.respond(body)\n}\n")
    update = ("// ... existing code ...\n    log(\"sending\")\n\n    // removed the StreamContent buffering warning\n\n"
              "    call.respond(body)\n}\n")
    expected = kt[:kt.index("    // buffering")] + kt[kt.index("    call.respond"):]
    assert merge(kt, update, "kotlin").text == expected


def test_a_new_definition_whose_body_a_marker_elides_edits_no_header_of_another_name():
    from apply_edit.merge import merge

    js = ("function label(user) {\n  return user.name;\n}\n\nfunction route(r) {\n  if (r.ok) {\n"
          "    send(r.body);\n  }\n}\n")
    update = ("// ... existing code ...\nfunction deliver(request) {\n  // ... moved here from route ...\n}\n\n"
              "function route(r) {\n  if (r.ok) {\n    deliver(r);\n// ... existing code ...\n")
    merged = merge(js, update, "javascript").text
    assert merged.startswith("function label(user) {\n  return user.name;\n")  # not renamed to `deliver`

"""Repairs of one alignment (`apply_edit.merge.repairs`)."""

from collections import Counter

from apply_edit.code.languages import code_of
from apply_edit.merge import merge
from apply_edit.merge.blocks import _bracket_ends
from apply_edit.merge.repairs import _dangling_edits, _head_tail_rewrites, _rewritten_headers
from apply_edit.merge.snippet import _parse_snippet, split_lines


def test_an_unmatched_head_rewrites_the_file_head_of_about_its_size():
    orig = ["old_header()\n", "anchor_line()\n", "rest()\n"]
    snippet = _parse_snippet(["new_header()\n", "anchor_line()\n", "# ... existing code ...\n"], set(), "", set())
    ops = [("keep", 0, False), ("ins", 0), ("match", 1, 1), ("keep", 2, False)]
    assert _head_tail_rewrites(ops, snippet, orig, Counter(line.strip() for line in orig)) == \
        [("del", 0), ("ins", 0), ("match", 1, 1), ("keep", 2, False)]
    longer = ["one()\n", "two()\n", "three()\n"] + orig[1:]  # a head longer than the snippet's plus one stays
    ops = [("keep", 0, False), ("keep", 1, False), ("keep", 2, False), ("ins", 0), ("match", 1, 3), ("keep", 4, False)]
    assert _head_tail_rewrites(ops, snippet, longer, Counter(line.strip() for line in longer)) == ops


def test_no_head_rewrite_after_a_leading_marker():
    orig = ["old_header()\n", "anchor_line()\n"]
    snippet = _parse_snippet(["# ... existing code ...\n", "new_header()\n", "anchor_line()\n"], set(), "", set())
    ops = [("keep", 0, False), ("ins", 0), ("match", 1, 1)]
    assert _head_tail_rewrites(ops, snippet, orig, Counter(line.strip() for line in orig)) == ops


def test_a_header_written_on_one_line_takes_the_lines_of_its_parameters():
    orig = split_lines("def build(name,\n          path):\n    return name\n")
    snippet = _parse_snippet(["def build(name, path, verbose):\n", "    # ... existing code ...\n"], set(), "", set())
    header_end = _bracket_ends(orig, code_of("python"))
    ops = [("edit", 0, 0), ("keep", 1, False), ("keep", 2, False)]
    assert _rewritten_headers(ops, snippet, orig, header_end, code_of("python")) == \
        [("edit", 0, 0), ("del", 1), ("keep", 2, False)]


def test_lines_shown_after_a_header_made_one_line_are_the_originals_next_lines_not_new_ones():
    # `from typing import (` / `Any,` / `Dict,` / `)` made one line, then the file's next lines shown as
    # context: the alignment wrote those as new (matching them meant deleting the import's lines between
    # two snippet lines) and kept the originals under the marker after them, twice in the result.
    names = ["Any", "Callable", "Dict", "Iterable", "List", "Match", "Optional", "Tuple", "Type", "Union"]
    spread = "(\n" + "".join(f"    {name},\n" for name in names) + ")"
    original = f"import re\nfrom typing import {spread}\n\nif TYPE_CHECKING:\n    from .core import State\n"
    update = f"import re\nfrom typing import {', '.join(names)}\n\nif TYPE_CHECKING:\n# ... existing code ...\n"
    assert merge(original, update, "python").text == original.replace(spread, ", ".join(names))


def test_an_edit_that_takes_away_a_name_still_used_is_a_new_neighbour():
    orig = split_lines('PyDoc_STRVAR(old_doc, "x");\n{"f", f, METH_NOARGS, old_doc},\n')
    snippet = _parse_snippet(['PyDoc_STRVAR(new_doc, "y");\n', "// ... existing code ...\n"], set(), "", set())
    assert _dangling_edits([("edit", 0, 0), ("keep", 1, False)], snippet, orig) == [(0, 0)]
    # where the use goes too, it is a rename
    assert _dangling_edits([("edit", 0, 0), ("del", 1)], snippet, orig) == []


def test_a_doc_comment_shown_attached_after_a_marker_replaces_the_old_one():
    from apply_edit.merge import merge

    go = ("package x\n\nvar ErrNone = errors.New(\"none\")\n\n// filter returns every item.\n// It never fails.\n"
          "func filter(items []string) []string {\n\treturn items\n}\n")
    update = ("// ... existing code ...\n\n// filter returns the items that exist.\nfunc filter(items []string) []string {\n"
              "\treturn existing(items)\n}\n")
    expected = go.replace("// filter returns every item.\n// It never fails.\n", "// filter returns the items that exist.\n") \
        .replace("return items", "return existing(items)")
    merged = merge(go, update, "go")
    assert merged.text == expected
    # Shown with the old comment above it, the old comment is context and stays.
    kept = "// ... existing code ...\n// It never fails.\n// Cheap.\nfunc filter(items []string) []string {\n// ...\n"
    assert merge(go, kept, "go").text == go.replace("// It never fails.\n", "// It never fails.\n// Cheap.\n")


def test_a_new_function_after_a_class_does_not_take_the_class_closing_brace():
    from apply_edit.merge import merge

    rust = ("impl Help {\n    fn write(&mut self) {\n        if !self.next {\n            self.pad();\n        }\n    }\n}\n\n"
            "const INDENT: &str = \"  \";\n")
    # The marker stands flush left although it keeps lines of the method's body.
    update = ("// ... existing code ...\n    }\n}\n\nfn pluralize(n: usize) -> &'static str {\n    if n == 1 { \"\" } else { \"s\" }\n"
              "}\n\nconst INDENT: &str = \"  \";\n")
    expected = rust.replace("}\n\nconst", "}\n\nfn pluralize(n: usize) -> &'static str {\n    if n == 1 { \"\" } else { \"s\" }\n"
                                          "}\n\nconst")
    assert merge(rust, update, "rust").text == expected


def test_new_code_that_opens_a_hunk_is_set_apart_by_the_blank_line_it_was_placed_before():
    from apply_edit.merge import merge

    rb = ("class App\n  def a\n    1\n  end\n\n  # Says b.\n  def b\n    2\n  end\nend\n")
    update = ("  LIMIT = 3\n\n  # Says b.\n  def b\n    LIMIT\n  end\n  # ... existing code ...\n")
    expected = rb.replace("  end\n\n  # Says b.", "  end\n\n  LIMIT = 3\n\n  # Says b.").replace("    2\n", "    LIMIT\n")
    assert merge(rb, update, "ruby").text == expected
    # Shown right after the line it follows, new code stays there.
    shown = "  def a\n    1\n  end\n  LIMIT = 3\n\n  # Says b.\n  # ... existing code ...\n"
    assert merge(rb, shown, "ruby").text == rb.replace("  end\n\n  # Says b.", "  end\n  LIMIT = 3\n\n  # Says b.")



def test_new_code_that_closes_a_hunk_is_set_apart_by_the_blank_line_it_was_placed_after():
    from apply_edit.merge import merge

    cpp = "class A {\n    int f() {\n        return 1;\n    }\n\n    int h();\n\nprivate:\n    int x;\n};\n"
    new = "    int g() {\n        return 2;\n    }\n"
    update = "// ... existing code ...\n    int f() {\n        return 1;\n    }\n\n" + new + "// ... existing code ...\n"
    # The marker keeps what followed f, the blank line first: g sits between two blank lines.
    assert merge(cpp, update, "cpp").text == cpp.replace("    }\n\n    int h", "    }\n\n" + new + "\n    int h")
    # Two new methods in a row: the last one is set apart from the kept line too.
    two = new + "\n" + new.replace("g()", "k()")
    update = "// ... existing code ...\n    int f() {\n        return 1;\n    }\n\n" + two + "// ... existing code ...\n"
    assert merge(cpp, update, "cpp").text == cpp.replace("    }\n\n    int h", "    }\n\n" + two + "\n    int h")

def test_a_new_block_the_snippet_closes_is_not_an_edit_of_a_header_whose_body_stays():
    from apply_edit.merge import merge

    bash = ('pick() {\n\tcount=$(wc -l < list)\n\tif [[ $count == 0 ]]; then\n\t\tdie "none"\n\tfi\n\n'
            '\tif [[ $verbose == 1 ]]; then\n\t\tcat list\n\tfi\n}\n')
    update = ('pick() {\n\t# ... existing code ...\n\tif [[ $count == 0 ]]; then\n\t\tdie "none"\n\tfi\n\n'
              '\tif [[ -n $name ]]; then\n\t\treturn\n\tfi\n\n\t# ... existing code ...\n}\n')
    # Read as an edit of `if [[ $verbose == 1 ]]`: its body and `fi` would stay, headless.
    expected = bash.replace('\tif [[ $verbose', '\tif [[ -n $name ]]; then\n\t\treturn\n\tfi\n\n\tif [[ $verbose')
    assert merge(bash, update, "bash").text == expected


def test_a_statement_the_snippet_writes_on_one_line_replaces_its_head_a_marker_would_keep():
    from apply_edit.merge import merge

    js = ("function route(r, q) {\n  if (r.ok) {\n    send(r);\n  } else if (\n    r.retry &&\n    r.count < 3\n"
          "  ) {\n    q.push(r);\n  }\n  return q.length;\n}\n")
    update = ("// ... existing code ...\n  } else if (r.retry) {\n    if (r.count < 3) q.push(r);\n  }\n"
              "  return q.length;\n}\n// ... existing code ...\n")
    expected = js.replace("  } else if (\n    r.retry &&\n    r.count < 3\n  ) {\n    q.push(r);\n",
                          "  } else if (r.retry) {\n    if (r.count < 3) q.push(r);\n")
    assert merge(js, update, "javascript").text == expected
    # A new line that does not read as the statement joined is new code beside it: the head stays whole.
    other = update.replace("  } else if (r.retry) {\n", "  } else if (r.ok && r.fresh && r.late) {\n")
    assert "  } else if (\n    r.retry &&\n    r.count < 3\n" in merge(js, other, "javascript").text

"""Checks that need no expected file: what makes a rewrite untrustworthy, whoever wrote it."""

from hypothesis import given, settings
from hypothesis import strategies as st

from apply_edit.faces.cases import load_cases
from apply_edit.judging.checks import LineChecks, problems
from apply_edit.code.definitions import comment_lines, declared_twice_in
from apply_edit.code.instruction import deletion_notes
from apply_edit.merge import merge
from conftest import FIXTURES

ORIGINAL = "import os\n\n\ndef area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n    return 0\n"
UPDATE = "# ... existing code ...\ndef area(w, h, scale=1):\n    return w * h * scale\n# ... existing code ...\n"
GOOD = ORIGINAL.replace("def area(w, h):\n    return w * h\n", "def area(w, h, scale=1):\n    return w * h * scale\n")


def test_a_sound_rewrite_passes():
    assert problems(ORIGINAL, UPDATE, GOOD, "python") == []


def test_a_result_that_no_longer_parses_is_refused():
    found = problems(ORIGINAL, UPDATE, GOOD.replace("def main():", "def main(:"), "python")
    # A line under the marker changed, too: nothing in the snippet deletes `def main():`.
    assert found[0] == "it does not parse as python (the original does)"
    assert found[1].startswith("it deletes 3 line(s) the snippet keeps under a marker") and len(found) == 2


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


def test_a_name_declared_twice_in_one_scope_is_refused():
    # A replaced line kept beside its replacement: Java refuses the second field, TypeScript the second const.
    java = "class G {\n    private Map names = new HashMap();\n    private int size;\n}\n"
    new = "    private final Map<String, Option> names = new LinkedHashMap<>();\n"
    update = "class G {\n" + new + "    // ... existing code ...\n}\n"
    kept_both = java.replace("    private Map", new + "    private Map")
    assert problems(java, update, kept_both, "java") == ["it declares `names` twice in one scope (the original does not)"]
    ts = "function reset() {\n  const end = this.start;\n  if (now < end) {\n    run(end);\n  }\n}\n"
    update = "function reset() {\n  const end = new Date(this.start.getTime());\n  // ... existing code ...\n}\n"
    kept_both = ts.replace("  const end = this.start;\n", "  const end = new Date(this.start.getTime());\n  const end = this.start;\n")
    assert "it declares `end` twice in one scope (the original does not)" in problems(ts, update, kept_both, "typescript")
    # A constructor reformatted, kept beside the old one: Java refuses a second method of one signature.
    java = "class F {\n    public F( List<String> names )\n    {\n        this.names = names;\n    }\n}\n"
    new = "    public F(List<String> names) {\n        this.names = names;\n    }\n"
    update = "class F {\n" + new + "}\n"
    kept_both = java.replace("class F {\n", "class F {\n" + new)
    assert "it declares `F(List<String>)` twice in one scope (the original does not)" in problems(
        java, update, kept_both, "java")
    # A C++ function kept beside its rewritten copy: one declarator (name, parameters, qualifiers) twice.
    cpp = "int Box::size() const {\n  return n;\n}\n"
    new = "int Box::size() const {\n  return n_;\n}\n"
    assert problems(cpp, new, new + "\n" + cpp, "cpp") == [
        "it declares `Box::size()const` twice in one scope (the original does not)"]
    # Go has no overloads: a method of one name twice is a duplicate whatever its parameters.
    assert declared_twice_in("package p\n\nfunc (s *S) f(a int) {\n}\n\nfunc (s *S) f(b string) {\n}\n", "go")
    # An import rewritten at the top of a module kept beside the old one: JavaScript refuses the second binding.
    ts = "import { codegenNativeComponent } from 'react-native';\nimport type { ViewProps } from './utils';\n\nexport const a = 1;\n"
    update = "import codegenNativeComponent from 'react-native/codegen';\nimport * as utils from './utils';\n// ... existing code ...\n"
    kept_both = update.replace("// ... existing code ...\n", "") + ts
    assert problems(ts, update, kept_both, "typescript") == [
        "it declares `codegenNativeComponent` twice in one scope (the original does not)"]


def test_names_a_language_lets_repeat_are_not_duplicates():
    # A getter and its setter, Python's @property and @x.setter, the same const in two blocks, Java overloads.
    java = "class F {\n    void put(String k) {\n    }\n}\n"
    both = java.replace("}\n}", "}\n\n    void put(String k, int v) {\n    }\n}")
    assert problems(java, "// ... existing code ...\n    void put(String k, int v) {\n    }\n}\n", both, "java") == []
    js = "class P {\n  get x() {\n    return this._x\n  }\n}\n"
    both = js.replace("  }\n}\n", "  }\n\n  set x(v) {\n    this._x = v\n  }\n}\n")
    assert problems(js, "// ... existing code ...\n  set x(v) {\n    this._x = v\n  }\n}\n", both, "javascript") == []
    py = "class P:\n    @property\n    def x(self):\n        return self._x\n"
    both = py + "\n    @x.setter\n    def x(self, v):\n        self._x = v\n"
    assert problems(py, "# ... existing code ...\n    @x.setter\n    def x(self, v):\n        self._x = v\n", both, "python") == []
    # C++ overloads: by parameters, and by a method's `const` (`get()` beside `get() const`).
    both = ("class A {\n  int& get() {\n    return a;\n  }\n  int get() const {\n    return a;\n  }\n"
            "  int get(long k) const {\n    return k;\n  }\n};\n")
    assert not declared_twice_in(both, "cpp")
    assert declared_twice_in(both.replace("int get(long k)", "int get()"), "cpp")
    ts = "if (a) {\n  const v = 1\n  use(v)\n}\n"
    both = ts + "if (b) {\n  const v = 2\n  use(v)\n}\n"
    assert problems(ts, "// ... existing code ...\nif (b) {\n  const v = 2\n  use(v)\n}\n", both, "typescript") == []


def test_a_definition_shown_whole_must_be_as_shown():
    # A new method's header read as an edit of the next one's: the next one's body ends up in it.
    py = "class C:\n    def put(self, k, v):\n        self.d[k] = v\n"
    update = "class C:\n    def peek(self, k):\n        return self.d.get(k)\n\n    # ... existing code ...\n"
    good = "class C:\n    def peek(self, k):\n        return self.d.get(k)\n\n    def put(self, k, v):\n        self.d[k] = v\n"
    assert problems(py, update, good, "python") == []
    interleaved = "class C:\n    def peek(self, k):\n        return self.d.get(k)\n        self.d[k] = v\n"
    assert "it has `peek` with other lines than the snippet shows whole" in problems(py, update, interleaved, "python")
    # A flush-left marker after a blank line may hold the rest of the last method's body, and the class's.
    flush = "class C:\n    def put(self, k, v):\n        self.d[k] = v\n\n# ... existing code ...\n"
    longer = "class C:\n    def put(self, k, v):\n        self.d[k] = v\n        self.n += 1\n"
    assert problems(longer, flush, longer, "python") == []


def test_a_marker_after_a_definition_leaves_whole_in_doubt_for_every_check():
    # A marker at the function's own depth after a blank line: the next definition's place, or the rest of
    # this body. The evidence cannot tell, so the whole-definition check does not hold the result to either
    # reading: the result that keeps the rest of the body passes (before, one check failed each way).
    original = "def load(path):\n    data = read(path)\n    check(data)\n    return data\n\n\ndef save(path, data):\n    write(path, data)\n"
    update = "def load(path):\n    data = read(path, strict=True)\n\n# ... existing code ...\n"
    kept = original.replace("read(path)", "read(path, strict=True)")
    assert problems(original, update, kept, "python") == []
    gone = "def load(path):\n    data = read(path, strict=True)\n\n\ndef save(path, data):\n    write(path, data)\n"
    assert problems(original, update, gone, "python")[0].startswith("it deletes 3 line(s) the snippet keeps under a marker")


def test_a_name_the_instruction_removes_must_be_gone():
    go = ("package w\n\nimport \"net/http\"\n\ntype fw struct{ http.ResponseWriter }\n\n"
          "var _ http.CloseNotifier = &fw{}\nvar _ http.Flusher = &fw{}\nvar _ http.Hijacker = &fw{}\n")
    update = "// ...\n\nvar _ http.Flusher = &fw{}\nvar _ http.Hijacker = &fw{}\n"
    ask = "Stop depending on the deprecated http.CloseNotifier."
    assert "it still has `http.CloseNotifier`, which the instruction or a note in the snippet asks to remove" in \
        problems(go, update, go, "go", instruction=ask)
    assert problems(go, update, go.replace("var _ http.CloseNotifier = &fw{}\n", ""), "go", instruction=ask) == []
    # A plain word is not a code name; a name the snippet shows is kept on purpose.
    assert not any("asks to remove" in p for p in problems(go, update, go, "go", instruction="Remove the old comment."))


def test_a_removed_name_is_read_in_code_only_and_from_was_removed_too():
    cpp = "void f() {\n    std::random_shuffle(v.begin(), v.end());\n}\n"
    update = "// std::random_shuffle was removed in C++17\nvoid f() {\n    std::shuffle(v.begin(), v.end(), rng);\n}\n"
    ask = "std::random_shuffle was removed in C++17, so use std::shuffle."
    kept = update.split("\n", 1)[0] + "\n" + cpp.replace("}\n", "    std::shuffle(v.begin(), v.end(), rng);\n}\n")
    # The snippet's comment names it, its code does not: a result still calling it is refused ...
    assert any("which the instruction or a note in the snippet asks to remove" in p for p in problems(cpp, update, kept, "cpp", instruction=ask))
    # ... and one that keeps only the comment passes.
    assert problems(cpp, update, update, "cpp", instruction=ask) == []


def test_a_deletion_note_is_not_a_line_to_find_and_the_name_it_removes_must_be_gone():
    js = "function oldApi() {\n  return 2;\n}\n\nfunction other() {\n  return 3;\n}\n"
    update = "// removed oldApi()\n\nfunction other() {\n  return 30;\n}\n"
    assert problems(js, update, "function other() {\n  return 30;\n}\n", "javascript") == []
    assert problems(js, update, js.replace("return 3", "return 30"), "javascript") == [
        "it still has `oldApi`, which the instruction or a note in the snippet asks to remove"]
    # A comment that says what goes is a note even where it names nothing the original has; the merge
    # reads it so, and says that it chose that reading.
    noted = merge(js, "// removed the cache\n" + update, "javascript")
    assert "// removed the cache" not in noted.text and not noted.report.confident


def test_a_bare_ellipsis_the_snippet_uses_as_a_marker_is_a_marker_in_the_result_and_so_is_a_written_note():
    py = "def parse(x):\n    return x\n\n\ndef dump(x):\n    return str(x)\n"
    update = "...\ndef dump(x):\n    return repr(x)\n"
    assert problems(py, update, py.replace("str(x)", "repr(x)"), "python") == []
    assert problems(py, update, "...\n" + py.replace("str(x)", "repr(x)"), "python") == [
        "it writes 1 marker line(s) (`... existing code ...`) the original does not have"]
    # A stub body the snippet writes as code is no marker.
    stub = "class P:\n    def f(self):\n        ...\n"
    assert problems(stub, "class P:\n    def f(self):\n        ...\n\n    def g(self):\n        ...\n",
                    "class P:\n    def f(self):\n        ...\n\n    def g(self):\n        ...\n", "python") == []
    js = "function old() {\n  return 1;\n}\n\nfunction keep() {\n  return 2;\n}\n"
    note = "// removed old()\n\nfunction keep() {\n  return 2;\n}\n"
    assert "it writes 1 of the snippet's note(s) (`// removed ...`, `// changed: ...`) as code" in problems(
        js, note, "// removed old()\n\nfunction keep() {\n  return 2;\n}\n", "javascript")


def test_a_rust_struct_literal_naming_a_field_twice_and_a_noted_name_kept_in_a_string_are_refused():
    rs = "fn h(file: F, is_std: bool) -> H {\n    H {\n        file,\n        is_std: is_std,\n    }\n}\n"
    update = "fn h(file: F, is_std: bool) -> H {\n    H {\n        file,\n        is_std,\n    }\n}\n"
    assert problems(rs, update, update, "rust") == []
    kept = "fn h(file: F, is_std: bool) -> H {\n    H {\n        file,\n        is_std,\n        is_std: is_std,\n    }\n}\n"
    assert "it declares `is_std` twice in one scope (the original does not)" in problems(rs, update, kept, "rust")
    kt = ('class M {\n  fun definition() = Module {\n    AsyncFunction("getPermissionsAsync") { old() }\n\n'
          '    AsyncFunction("getForegroundAsync") { fg() }\n  }\n}\n')
    note = ('class M {\n  fun definition() = Module {\n    // removed deprecated getPermissionsAsync\n\n'
            '    AsyncFunction("getForegroundAsync") { fg() }\n  }\n}\n')
    assert problems(kt, note, kt.replace('    AsyncFunction("getPermissionsAsync") { old() }\n\n', ""), "kotlin") == []
    assert problems(kt, note, kt, "kotlin") == [
        "it still has `getPermissionsAsync`, which the instruction or a note in the snippet asks to remove"]


CASES = load_cases(FIXTURES)


@settings(max_examples=120, deadline=None)
@given(case=st.sampled_from(CASES), which=st.sampled_from(["expected", "update", "original", "merged"]), data=st.data())
def test_line_checks_read_line_by_line_say_of_the_whole_what_they_said_of_its_start(case, which, data):
    # The snippet itself as a result copies its markers; the original keeps what an instruction removes.
    merged = merge(case.original, case.update, case.language, case.instruction).text
    text = merged if which == "merged" else getattr(case, which)
    ends = sorted(data.draw(st.sets(st.sampled_from([i + 1 for i, c in enumerate(text) if c == "\n"] or [0]))))
    notes = deletion_notes(case.original, case.update, case.language)
    by_line = LineChecks(case.original, case.update, case.language, case.instruction, notes)
    failed_at = None
    for start, end in zip([0, *ends], [*ends, len(text)]):
        by_line.feed(text[start:end])
        assert by_line.failed == bool(by_line.problems())
        failed_at = failed_at if failed_at is not None or not by_line.failed else end
    whole = LineChecks(case.original, case.update, case.language, case.instruction, notes)
    whole.feed(text)
    assert by_line.problems() == whole.problems()
    assert set(whole.problems()) <= set(problems(case.original, case.update, text, case.language, merged, case.instruction))
    assert failed_at is None or whole.failed  # a start that fails: the whole fails too


def test_where_the_original_does_not_parse_the_result_may_not_add_parse_errors():
    # A macro tree-sitter cannot read: the original has a parse error already.
    cpp = ("#define GUARDED_BY(x)\nclass C {\n  int usage_ GUARDED_BY(mutex_);\n};\n\nC::C()\n    : usage_(0),\n"
           "      last_(0) {\n  init();\n}\n")
    update = "C::C()\n    : usage_(0) {\n  // ...\n}\n"
    kept = cpp.replace("    : usage_(0),\n", "    : usage_(0) {\n")  # the old initializer kept under the new one
    assert problems(cpp, update, cpp.replace("    : usage_(0),\n      last_(0) {\n", "    : usage_(0) {\n"), "cpp") == []
    assert "it has 2 more parse error(s) as cpp than the original" in problems(cpp, update, kept, "cpp")


def test_no_fixtures_expected_file_is_flagged():
    # A check that flags a correct file sends a right merge to the model and may refuse a right answer.
    flagged = {c.name: found for c in CASES
               if (found := problems(c.original, c.update, c.expected, c.language, instruction=c.instruction))}
    assert flagged == {}


def test_a_definition_shown_whole_with_a_change_note_is_held_without_the_note():
    original = "def f(x):\n    return x\n\n\ndef g(x):\n    return x * 2\n"
    update = "def f(x):\n    # changed: doubled\n    return 2 * x\n\n\n# ... existing code ...\n"
    result = original.replace("    return x\n\n", "    return 2 * x\n\n", 1)
    assert problems(original, update, result, "python") == []


def test_a_note_does_not_remove_the_definition_whose_lines_it_stands_among():
    php = ("<?php\nclass Twig\n{\n    public function render($page)\n    {\n        $vars['content'] = $page->content();\n\n"
           "        // disable the cache when params are set\n        if ($page->params()) {\n            $this->cache = false;\n"
           "        }\n\n        $template = $this->template($page);\n        return $template->render($vars);\n    }\n}\n")
    update = ("<?php\n// ... existing code ...\n        $vars['content'] = $page->content();\n\n"
              "        // removed: no longer disable the Twig cache when params are set\n\n"
              "        $template = $this->template($page);\n// ... existing code ...\n")
    assert deletion_notes(php, update, "php") == {4: set()}  # a note, naming nothing it removes
    expected = php.replace("        // disable the cache when params are set\n        if ($page->params()) {\n"
                           "            $this->cache = false;\n        }\n\n", "")
    assert merge(php, update, "php").text == expected
    assert problems(php, update, expected, "php") == []


def test_a_line_the_grammar_misreads_in_the_snippet_too_is_no_parse_error_of_the_merge():
    # tree-sitter's cpp grammar cannot read `__has_include(<x>)`: the snippet's own parse errs on that line.
    cpp = "#include <string>\n\nint f() {\n  return 1;\n}\n\nint g() {\n  return 2;\n}\n"
    hunk = "#  if __has_include(<optional>)\n#    include <optional>\n#  endif\n"
    update = "#include <string>\n" + hunk + "\n// ... existing code ...\n"
    result = cpp.replace("#include <string>\n", "#include <string>\n" + hunk)
    assert problems(cpp, update, result, "cpp") == []
    # An error on a line the snippet parses cleanly is still the result's.
    broken = result.replace("int g() {\n", "int g() {\n  int x = ;\n")
    assert problems(cpp, update, broken, "cpp") == ["it does not parse as cpp (the original does)"]
    # Old lines err in a snippet for want of what its markers hide (a fragment's closers): never excused.
    from apply_edit.judging.checks import _lines_the_grammar_misreads
    from apply_edit.code.regions import parser_for

    js = "it('x', function(done) {\n\tlet t = table({\n\t\tajax: serve,\n\t\tinit: function(s) {\n\t\t\tdone();\n\t\t}\n\t});\n});\n"
    fragment = ("// ... existing code ...\n\t\tdeferRender: true,\n\t\tajax: serve,\n\t\tinit: function(s) {\n"
                "\t\t\tdone();\n\t\t}\n\t});\n// ... existing code ...\n")
    tree = parser_for("javascript").parse(fragment.encode()).root_node
    assert {"});", "ajax: serve,"} <= {e[0] for e in _lines_the_grammar_misreads(tree, fragment, "")}  # all new
    assert _lines_the_grammar_misreads(tree, fragment, js) == frozenset()


def test_a_new_line_erring_in_the_snippet_for_want_of_hidden_lines_is_no_excuse_for_another_error():
    # The snippet begins inside an `if`: its new `} else if (...) {` errs there for want of the hidden head,
    # and the merge that keeps the old condition's first lines before it errs on it otherwise.
    js = ("function route(r, q) {\n  if (r.ok) {\n    send(r);\n  } else if (\n    r.retry &&\n    r.count < 3\n"
          "  ) {\n    q.push(r);\n  }\n  return q.length;\n}\n")
    update = ("// ... existing code ...\n  } else if (r.retry) {\n    if (r.count < 3) q.push(r);\n  }\n"
              "  return q.length;\n}\n// ... existing code ...\n")
    # The old condition's first lines kept before the new one (a merge that keeps the statement's head).
    broken = js.replace("  ) {\n    q.push(r);\n", "  } else if (r.retry) {\n    if (r.count < 3) q.push(r);\n")
    assert "it does not parse as javascript (the original does)" in problems(js, update, broken, "javascript")
    right = js.replace("  } else if (\n    r.retry &&\n    r.count < 3\n  ) {\n    q.push(r);\n",
                       "  } else if (r.retry) {\n    if (r.count < 3) q.push(r);\n")
    assert not any("parse" in p for p in problems(js, update, right, "javascript"))


def test_a_marker_in_a_new_block_must_stand_for_some_code():
    # Code moved into a new function, shown by a marker there: a merge in file order cannot fetch it, and a
    # result whose new function holds only the snippet's lines has lost it.
    js = ("function route(r, q) {\n  if (r.ok) {\n    const body = JSON.stringify(r.payload);\n"
          "    transport.send(r.id, body);\n  } else {\n    q.push(r);\n  }\n}\n")
    update = ("function deliver(r) {\n  // ... the lines that sent the request in route ...\n}\n\n"
              "function route(r, q) {\n  if (r.ok) {\n    deliver(r);\n  } else {\n// ... existing code ...\n")
    moved = ("function deliver(r) {\n  const body = JSON.stringify(r.payload);\n  transport.send(r.id, body);\n}\n\n"
             + js.replace("    const body = JSON.stringify(r.payload);\n    transport.send(r.id, body);\n", "    deliver(r);\n"))
    lost = moved.replace("  const body = JSON.stringify(r.payload);\n  transport.send(r.id, body);\n", "")
    assert "a marker in the new block `function deliver(r) {` stands for code it does not have" in \
        problems(js, update, lost, "javascript")
    assert not any("marker in the new block" in p for p in problems(js, update, moved, "javascript"))


def test_each_hunk_of_a_snippet_with_markers_is_one_piece_of_the_result():
    c = ("void flush(Slirp *s)\n{\n    send(s);\n}\n\n/*\n * Send one packet.\n */\nvoid start(Slirp *s)\n{\n"
         "    next(s);\n}\n")
    update = "// ... existing code ...\n    send(s);\n}\n\nvoid start(Slirp *s)\n{\n// ... existing code ...\n"
    right = c.replace("/*\n * Send one packet.\n */\n", "")  # the snippet shows the comment gone
    assert problems(c, update, right, "c") == []
    found = problems(c, update, c, "c")  # the comment kept inside the hunk
    assert "1 of the snippet's hunks come apart in it, from `send(s);` on (lines between that the snippet does " \
           "not show)" in found
    # Without markers, two definitions shown whole may keep the code between them.
    whole = "void flush(Slirp *s)\n{\n    send(s);\n}\n\nvoid start(Slirp *s)\n{\n    next(s);\n}\n"
    assert not any("come apart" in p for p in problems(c, whole, c, "c"))


def test_a_comment_line_the_original_has_is_never_a_note_whatever_it_says():
    rust = ("struct Store {\n    /// Roots stay borrowed until this cache is dropped.\n    roots: Vec<Root>,\n}\n\n"
            "impl Store {\n    fn cache(&self) -> &Cache {\n        &self.c\n    }\n}\n")
    # It names `cache`, which the original defines and the snippet's code does not use: a deletion note's shape.
    update = ("struct Store {\n    /// Roots stay borrowed until this cache is dropped.\n    roots: Vec<Root>,\n"
              "    hits: u64,\n}\n// ... existing code ...\n")
    assert deletion_notes(rust, update, "rust") == {}
    result = rust.replace("    roots: Vec<Root>,\n", "    roots: Vec<Root>,\n    hits: u64,\n")
    assert problems(rust, update, result, "rust") == []


def test_comment_lines_are_the_lines_only_a_comment_covers():
    text = "/*\n * Licence\n */\n#include <x.h>\nint x = 1; // y\n// z\n  /* a */ int b;\n"
    assert comment_lines(text, "c") == {0, 1, 2, 5}
    assert comment_lines("// a\n/// b\nfn x() {} // c\n/* d\n e */\n", "rust") == {0, 1, 3, 4}
    assert comment_lines("# a\nx = 1  # b\n    # c\n", "python") == {0, 2}


def test_a_reading_that_replaces_the_licence_block_may_drop_its_comment_lines_but_not_code():
    licence = "/*\n" + "".join(f" * licence line {i}\n" for i in range(12)) + " */\n"
    code = "".join(f"int f{i}(void)\n{{\n\treturn {i};\n}}\n\n" for i in range(3))
    original = licence + "\n" + code
    header_gone = "// SPDX-License-Identifier: MIT\n\n" + code
    update = "// SPDX-License-Identifier: MIT\n\nint f0(void)\n// ... existing code ...\n"
    # The licence is 13 of the file's 22 non-blank lines: as lost code, too many to drop.
    assert any("drops 14 of the original's" in p for p in problems(original, update, header_gone, "c", original))
    assert problems(original, update, header_gone, "c", original, comments_may_go=True) == []
    code_gone = licence + "\n" + "int f0(void)\n{\n\treturn 0;\n}\n"
    assert any("drops" in p for p in problems(original, update, code_gone, "c", original, comments_may_go=True))


def test_a_result_that_deletes_a_definition_the_snippets_new_code_calls_is_refused():
    original = ("class Buffer {\npublic:\n  size_t size() const {\n    return _size;\n  }\n"
                "  bool isOwner() const {\n    return true;\n  }\n};\n")
    update = "// ... existing code ...\n  size_t memorySize() const {\n    return size();\n  }\n// ... existing code ...\n"
    # Read as an edit of `size()` (a similar line found once), the new method takes its place: its call
    # to `size()` is left without the definition it needs.
    renamed = original.replace("size_t size() const {\n    return _size;", "size_t memorySize() const {\n    return size();")
    assert any("deletes the definition of `size`" in p for p in problems(original, update, renamed, "cpp", original))
    added = original.replace("  bool isOwner", "  size_t memorySize() const {\n    return size();\n  }\n  bool isOwner")
    assert problems(original, update, added, "cpp", original) == []
    # A call through an object names another's method: `other.size()` needs no definition of this file.
    through = update.replace("return size();", "return other.size();")
    assert not any("deletes the definition" in p for p in problems(
        original, through, renamed.replace("return size();", "return other.size();"), "cpp", original))

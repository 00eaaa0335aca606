"""Definitions paired between the snippet and the original (`apply_edit.merge.pairs`)."""

from collections import Counter

from apply_edit.code.definitions import definitions, snippet_definitions
from apply_edit.merge import merge
from apply_edit.merge.pairs import _apart, _beside_namesakes, _keep_between_whole_definitions, _pairs
from apply_edit.merge.snippet import _read

ORIGINAL = ("def load(path):\n    with open(path) as f:\n        return f.read()\n\n\n"
            "def save(path, text):\n    with open(path, 'w') as f:\n        f.write(text)\n")


def definitions_of(original, update, language):
    orig, update_lines, counts, snippet, _ = _read(original, update, language)
    top_level = [n for n in snippet.markers if not update_lines[n][:1].isspace()]
    return orig, counts, snippet, snippet_definitions("".join(update_lines), language, top_level), \
        definitions(original, language)


def test_a_definition_shown_whole_pairs_with_its_namesake():
    update = "# ... existing code ...\ndef save(path, text):\n    print(text)\n"
    orig, _, snippet, in_snippet, in_original = definitions_of(ORIGINAL, update, "python")
    # snippet lines 0..1 replace original lines 5..7, whole (no marker inside)
    assert _pairs(snippet, in_snippet, in_original, set(), orig) == [(0, 1, 5, 7, True)]


def test_a_method_every_class_has_pairs_with_the_one_in_the_class_the_snippet_shows_it_in():
    """`__init__` twice in the file: the snippet's, shown inside `class Reader:`, is Reader's. A new method
    after it, at the class's end, goes before the two blank lines that set the next class apart. Both
    readings had kept the old body under the new method: a wrong file called sure."""
    original = ("import os\n\n\nclass Reader:\n    def __init__(self, path):\n        if path:\n"
                "            self.path = path\n        else:\n            self.path = os.getcwd()\n\n\n"
                "class Writer:\n    def __init__(self):\n        self.lines = []\n")
    update = ("# ... existing code ...\nclass Reader:\n    def __init__(self, path):\n"
              "        self.path = path or os.getcwd()\n\n    def read(self):\n        with open(self.path) as f:\n"
              "            return f.read()\n# ... existing code ...\n")
    orig, _, snippet, in_snippet, in_original = definitions_of(original, update, "python")
    assert (1, 2, 4, 8, True) in _pairs(snippet, in_snippet, in_original, set(), orig)
    expected = original.replace("        if path:\n            self.path = path\n        else:\n"
                                "            self.path = os.getcwd()\n",
                                "        self.path = path or os.getcwd()\n\n    def read(self):\n"
                                "        with open(self.path) as f:\n            return f.read()\n")
    assert merge(original, update, "python").text == expected


def test_a_definition_with_a_marker_inside_pairs_only_when_its_closing_line_is_shown():
    js = "function a() {\n  one();\n  two();\n}\n\nfunction b() {\n  return 2;\n}\n"
    closed = "function a() {\n  // ... existing code ...\n  three();\n}\n"
    orig, _, snippet, in_snippet, in_original = definitions_of(js, closed, "javascript")
    assert _pairs(snippet, in_snippet, in_original, set(), orig) == [(0, 2, 0, 3, False)]
    open_ended = "function a() {\n  zero();\n  // ... existing code ...\n"
    orig, _, snippet, in_snippet, in_original = definitions_of(js, open_ended, "javascript")
    assert _pairs(snippet, in_snippet, in_original, set(), orig) == []


def test_a_definition_shown_from_its_name_line_leaves_the_lines_above_it():
    # C's return type on a line of its own, and a macro the grammar takes into the declaration: the
    # snippet shows `main(void) {` after a marker, which keeps them.
    c = "int f(void) {\n\treturn 1;\n}\nTEST_END\n\nint\nmain(void) {\n\treturn test(\n\t    f);\n}\n"
    update = "// ... existing code ...\nmain(void) {\n\treturn test(f);\n}\n"
    assert merge(c, update, "cpp").text == c.replace("test(\n\t    f)", "test(f)")


def test_a_c_function_shown_without_its_return_type_line_is_named_by_its_name():
    # C's grammar reads `beep(void) {` as type `beep`, declarator `(void)`: named `void`, it was a new
    # definition kept apart from the original's `beep`, and written beside it.
    c = "#ifdef BELL\nint\nlouder(void)\n{\n\treturn ring (1);\n}\n\nint\nbeep(void)\n{\n\treturn ring (0);\n}\n#endif\n"
    update = "// ... existing code ...\n\nbeep(void)\n{\n\treturn ring(0);\n}\n#endif\n"
    assert [d.name for d in snippet_definitions(update, "c", [0])] == ["beep"]
    # A macro that defines a function (`DEF_PRIMITIVE(list_swap) {`) is named by what it declares.
    assert [d.name for d in definitions("DEF_PRIMITIVE(list_swap)\n{\n  return 1;\n}\n", "c")] == ["list_swap"]
    assert merge(c, update, "c").text == c.replace("ring (0)", "ring(0)")


def test_a_new_definition_stays_apart_from_the_old_ones_unless_it_renames_one():
    new = "# ... existing code ...\ndef append(path, text):\n    with open(path, 'a') as f:\n        f.write(text)\n"
    orig, counts, snippet, in_snippet, in_original = definitions_of(ORIGINAL, new, "python")
    apart = _apart(snippet, in_snippet, in_original, orig, counts, set())
    assert sorted(apart) == [0, 1, 2]  # each of its lines
    assert apart[0].tolist() == [True, True, True, False, False, True, True, True]  # not `load`'s or `save`'s
    renamed = "# ... existing code ...\ndef store(path, text):\n    with open(path, 'w') as f:\n        f.write(text)\n"
    orig, counts, snippet, in_snippet, in_original = definitions_of(ORIGINAL, renamed, "python")
    apart = _apart(snippet, in_snippet, in_original, orig, counts, set())
    assert not apart[0][5:].any()  # most of `save`'s body is its body: it may be `save` renamed
    assert apart[0][:3].all()


def test_code_between_two_definitions_shown_whole_is_kept_in_a_snippet_without_markers():
    original = ORIGINAL.replace("\n\n\ndef save", "\n\n\nLIMIT = 10\n\n\ndef save")
    update = ("def load(path):\n    return open(path).read()\n\n\n"
              "def save(path, text):\n    open(path, 'w').write(text)\n")
    orig, _, snippet, in_snippet, in_original = definitions_of(original, update, "python")
    pairs = _pairs(snippet, in_snippet, in_original, set(), orig)
    assert [p[4] for p in pairs] == [True, True]
    _keep_between_whole_definitions(snippet, pairs, orig, lambda key: key.startswith("#"))
    assert snippet.reach[2] == 0 and snippet.reach.count(None) == len(snippet.reach) - 1  # a marker's gap after `load`
    assert Counter(snippet.reach)[0] == 1


def test_a_flush_left_marker_after_a_blank_line_may_stand_for_the_rest_of_a_method():
    from apply_edit.merge import merge

    py = ("class T:\n  def test_a(self):\n    code = 1\n    expected = 2\n    self.check(code, expected)\n\n"
          "  def test_b(self):\n    pass\n")
    update = "# ... existing code ...\n  def test_a(self):\n    code = 10\n\n# ... existing code ...\n"
    assert merge(py, update, "python").text == py.replace("code = 1\n", "code = 10\n")
    # At the method's own depth, after a blank line, the marker is the next method's place: shown whole.
    whole = "class T:\n  def test_a(self):\n    code = 10\n\n  # ... existing code ...\n"
    assert merge(py, whole, "python").text == py.replace("    code = 1\n    expected = 2\n    self.check(code, expected)\n",
                                                         "    code = 10\n")


def test_a_definition_whose_last_shown_line_opens_a_body_is_not_shown_whole():
    # `if obj == 0:` with no body after it: the marker after it, at the function's depth or flush left,
    # holds that body; the function is not shown whole, and the body stays.
    py = ("def on_disconnect(mqttc, obj):\n    mqttc.user_data_set(obj)\n    if obj == 0:\n        mqttc.reconnect()\n"
          "\n\ndef on_log(mqttc, obj):\n    print(obj)\n")
    update = "def on_disconnect(mqttc, obj):\n    mqttc.user_data_set(obj + 1)\n    if obj == 0:\n\n# ... existing code ...\n"
    assert merge(py, update, "python").text == py.replace("user_data_set(obj)", "user_data_set(obj + 1)")
    lua = "function f(x)\n  log(x)\n  if x then\n    g(x)\n  end\nend\n\nreturn f\n"
    update = "function f(x)\n  log(x + 1)\n  if x then\n\n-- ... existing code ...\n"
    assert merge(lua, update, "lua").text == lua.replace("log(x)", "log(x + 1)")


JAVA = ("class Repo {\n    public void open() {\n        connect();\n    }\n\n"
        "    /**\n     * Finds an item by its id.\n     */\n    public Item find(int id) {\n        return items.get(id);\n    }\n}\n")


def test_a_definition_its_context_places_beside_its_namesake_is_a_new_overload():
    overload = ("    public Item find(String name) {\n        return byName.get(name);\n    }\n")
    update = ("// ... existing code ...\n        connect();\n    }\n\n" + overload
              + "\n    /**\n     * Finds an item by its id.\n// ... existing code ...\n")
    orig, counts, snippet, in_snippet, in_original = definitions_of(JAVA, update, "java")
    assert [d.name for d in _beside_namesakes(snippet, in_snippet, in_original, orig, counts)] == ["find"]
    assert merge(JAVA, update, "java").text == JAVA.replace("\n    /**", "\n" + overload + "\n    /**")
    # Shown after the namesake's doc comment, the same definition replaces it.
    replace = "// ... existing code ...\n     * Finds an item by its id.\n     */\n" + overload + "}\n"
    orig, counts, snippet, in_snippet, in_original = definitions_of(JAVA, replace, "java")
    assert not _beside_namesakes(snippet, in_snippet, in_original, orig, counts)


def test_a_class_ending_in_a_method_not_shown_whole_is_not_shown_whole():
    py = ("class Service:\n    def __init__(self, session):\n        self.session = session\n\n"
          "    def url(self, endpoint):\n        params = {'p': 1}\n        params.update(self.extra)\n"
          "        return make(endpoint, params)\n\n    def channel(self, name):\n        return self.url(name)\n\n\n"
          "def main():\n    run()\n")
    # The flush-left marker after `params.update(...)` may hold the rest of `url`, and so of the class.
    update = ("# ... existing code ...\nclass Service:\n    def __init__(self, session, codecs=None):\n"
              "        self.session = session\n        self.codecs = codecs\n\n    def url(self, endpoint):\n"
              "        params = {'p': 1, 'codecs': self.codecs}\n        params.update(self.extra)\n\n# ... existing code ...\n")
    orig, _, snippet, in_snippet, in_original = definitions_of(py, update, "python")
    whole = {snippet.lines[first].strip() for first, *_, is_whole in _pairs(snippet, in_snippet, in_original, set(), orig)
             if is_whole}
    assert whole == {"def __init__(self, session, codecs=None):"}  # not the class, nor `url`
    expected = py.replace("(self, session):\n        self.session = session\n",
                          "(self, session, codecs=None):\n        self.session = session\n        self.codecs = codecs\n")
    assert merge(py, update, "python").text == expected.replace("{'p': 1}", "{'p': 1, 'codecs': self.codecs}")


def test_a_statement_is_no_definition_where_a_snippet_lacks_its_class():
    # Without the class around it, tree-sitter recovers `if (...) {...}` as a method named `if`.
    update = ("  public async close(fn?: () => void): Promise<void> {\n    // ... existing code ...\n\n"
              "    if (this.server) {\n      return new Promise<void>((resolve) => {\n        resolve();\n      });\n"
              "    }\n  }\n")
    assert "if" not in {d.name for d in snippet_definitions(update, "typescript", [])}


def test_a_c_header_at_its_own_depth_until_the_body_opens_still_pairs_by_its_closing_line():
    # GNU style: the return type on a line of its own, the name and `{` at the same depth. Shown with a
    # marker inside and its `}`, it pairs with its namesake: the old `int` line is its first line, edited.
    c = "int\nsum(int a, int b)\n{\n    int s = a + b;\n    return s;\n}\n\nint\nmain(void)\n{\n    return sum(1, 2);\n}\n"
    update = "// ... existing code ...\n\nstatic int\nsum(int a, int b)\n{\n    // ... existing code ...\n}\n// ... existing code ...\n"
    assert merge(c, update, "c").text == "static " + c


def test_a_closing_line_after_a_marker_that_would_keep_nothing_of_its_definition_closes_a_later_one():
    original = ("// A returns a.\nfunc A() map[string]interface{} {\n\treturn cast(a)\n}\n\n"
                "// B returns b.\nfunc B() int {\n\treturn b\n}\n\n"
                "// C returns c.\nfunc C() int {\n\tx := c\n\treturn x\n}\n\n"
                "// D unmarshals.\nfunc D(raw interface{}) error {\n\treturn decode(raw)\n}\n")
    # `A` is shown with its last line, a marker, then a `}`: the marker stands for some code, so not for
    # the nothing left of `A`'s body: for `B` and `C`, which the `}` after it ends (they stay).
    update = ("// ... existing code ...\nfunc A() map[string]any {\n\treturn cast(a)\n// ... existing code ...\n}\n\n"
              "// D unmarshals.\nfunc D(raw any) error {\n\treturn decode(raw)\n}\n")
    assert merge(original, update, "go").text == original.replace("interface{}", "any")

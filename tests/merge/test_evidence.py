"""merge.evidence: each run of original lines a result deletes must have the snippet's evidence."""

from apply_edit.merge import unexplained_deletions

PY = ("def load(path):\n    with open(path) as f:\n        text = f.read()\n    return text\n\n\n"
      "def save(path, text):\n    with open(path, 'w') as f:\n        f.write(text)\n")


def runs(update, result, language="python", instruction=""):
    return [(run.line, run.count) for run in unexplained_deletions(PY, update, result, language, instruction)]


def test_lines_shown_around_a_deletion_are_its_evidence_and_a_marker_keeps_what_it_stands_for():
    update = "def load(path):\n    with open(path) as f:\n        text = f.read()\n# ... existing code ...\n"
    assert runs(update, PY.replace("    return text\n", "")) == [(4, 1)]  # under the marker: kept
    shown = "def load(path):\n    with open(path) as f:\n        text = f.read()\n\n\ndef save(path, text):\n# ...\n"
    assert runs(shown, PY.replace("    return text\n", "")) == []


def test_an_edit_next_to_a_marker_is_evidence_one_line_for_one_or_joined():
    update = "# ... existing code ...\ndef save(path, text, mode='w'):\n    # ... existing code ...\n"
    assert runs(update, PY.replace("def save(path, text):", "def save(path, text, mode='w'):")) == []
    split = "def save(path,\n         text):"
    joined = PY.replace("def save(path, text):", split)
    assert [(r.line, r.count) for r in unexplained_deletions(joined, update, PY.replace(
        "def save(path, text):", "def save(path, text, mode='w'):"), "python")] == []


def test_a_new_block_is_not_an_edit_of_the_header_whose_body_the_marker_keeps():
    bash = ('check() {\n  if [ -z "$1" ]; then\n    exit 1\n  fi\n\n  if [ "$verbose" = 1 ]; then\n    echo "$1"\n'
            '  fi\n}\n')
    update = ('check() {\n  if [ -z "$1" ]; then\n    exit 1\n  fi\n\n  if [ -n "$2" ]; then\n    echo "$2"\n  fi\n\n'
              '  # ... existing code ...\n}\n')
    # Read as an edit of `if [ "$verbose" = 1 ]`: the block's body and `fi` stay, orphaned.
    wrong = bash.replace('  if [ "$verbose" = 1 ]; then\n', '  if [ -n "$2" ]; then\n    echo "$2"\n  fi\n\n')
    assert [r.line for r in unexplained_deletions(bash, update, wrong, "bash")] == [6]
    right = bash.replace('  if [ "$verbose" = 1 ]', '  if [ -n "$2" ]; then\n    echo "$2"\n  fi\n\n  if [ "$verbose" = 1 ]')
    assert unexplained_deletions(bash, update, right, "bash") == []


def test_a_removal_by_name_and_a_definition_shown_whole_are_evidence():
    update = "# ... existing code ...\n"
    assert runs(update, PY.split("\n\n\n")[0] + "\n", instruction="Remove the save function.") == []
    shown = "def load(path):\n    return open(path).read()\n\n\ndef save(path, text):\n# ... existing code ...\n"
    assert runs(shown, PY.replace("    with open(path) as f:\n        text = f.read()\n    return text\n",
                                  "    return open(path).read()\n")) == []



def table(lib):
    return (f'  defaults.patterns = {{\n    bin = {{ "?.exe" }},\n    lib = {{ "{lib}" }},\n    include = {{ "?.h" }},\n'
            '    share = { "?.txt" }\n  }\n')


LUA = ('if linux then\n' + table("lib?.so") + 'end\n\nif unix then\n  defaults.lib = "so"\nend\n\n'
       'if msys then\n  -- msys is cygwin made of mingw\n' + table("lib?.so") + '  defaults.shell = "sh"\nend\n')


def test_a_look_alike_table_elsewhere_is_not_what_a_deleted_run_is_read_against():
    update = ('-- ... existing code ...\nif unix then\n  defaults.lib = "so"\n' + table("cyg?.dll")
              + 'end\n\nif msys then\n-- ... existing code ...\n')
    right = LUA.replace('  defaults.lib = "so"\n', '  defaults.lib = "so"\n' + table("cyg?.dll"))
    assert unexplained_deletions(LUA, update, right, "lua") == []
    # The table written into the unix block, msys's own deleted: a plain diff pairs the new table's
    # lines with msys's and reads `end` / `if msys then` as deleted, between lines the snippet shows.
    wrong = right.replace('  -- msys is cygwin made of mingw\n' + table("lib?.so"), "")
    assert [r.line for r in unexplained_deletions(LUA, update, wrong, "lua")] == [15]


def test_words_put_in_front_of_a_line_edit_it_however_short_it_is():
    c = "int\nsum(int a, int b)\n{\n    return a + b;\n}\n"
    update = "// ... existing code ...\nstatic int\nsum(int a, int b)\n// ... existing code ...\n"
    assert unexplained_deletions(c, update, "static " + c, "c") == []
    # Not any longer line that ends the same: `return_int` is not `int` qualified.
    other = "// ... existing code ...\nreturn_int\nsum(int a, int b)\n// ... existing code ...\n"
    assert [r.line for r in unexplained_deletions(c, other, "return_" + c, "c")] == [1]

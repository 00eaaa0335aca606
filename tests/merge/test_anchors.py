"""How snippet lines relate to original lines (`apply_edit.merge.anchors`)."""

from collections import Counter

from apply_edit.merge.anchors import (_attached_lines, _closes, _comment_line, _ends_index, _identity,
                                      _names_nothing, _rare_identities, _sharing_ends, _similar, _trivial)
from apply_edit.merge.snippet import _parse_snippet


def test_trivial_and_nameless_lines():
    assert _trivial("}") and _trivial("});") and _trivial("end") and not _trivial("return x")
    assert _names_nothing("return nil") and _names_nothing("} else {") and _names_nothing("break;")
    assert not _names_nothing("return err") and not _names_nothing('return "x"') and not _names_nothing("return 0")


def test_a_closing_line_only_closes():
    assert _closes("}") and _closes("});") and _closes("]") and _closes("end")
    assert not _closes("} else {") and not _closes("}, {") and not _closes("") and not _closes("x")


def test_similar_lines_share_most_of_a_start_and_an_end():
    assert _similar("result = compute(alpha, beta)", "result = compute(alpha, beta, gamma)")
    assert _similar("    log.info('starting the server')", "log.info('starting the web server')")
    assert not _similar("x = 1", "x = 2")  # too little in common to say
    assert not _similar("result = compute(alpha)", "print(other_things_entirely)")
    assert not _similar("", "anything")


def test_what_a_line_is_about():
    assert _identity("async def build(name, path):") == ("defines", "build")
    assert _identity("let mut count = 0;") == ("declares", "count")
    assert _identity("x, err := run()") == ("declares", "x, err")
    assert _identity("self.total = a + b") == ("assigns", "self.total")
    assert _identity("private final Map<String, Option> optionMap = new HashMap<>();") == ("declares", "optionMap")
    assert _identity("if (!write_bignum(out, x))") == ("calls", "write_bignum")
    assert _identity("return f(x);") is None and _identity("print(x)") is None  # short names say nothing


def test_rare_identities_are_those_on_one_or_two_lines():
    keys = ["log_message(a)", "log_message(b)", "log_message(c)", "def build():", "resolve_path(x)",
            "y = resolve_path(z)"]
    assert _rare_identities(keys) == {("defines", "build"): {3}, ("calls", "resolve_path"): {4},
                                      ("assigns", "y"): {5}}


def test_the_ends_index_finds_lines_sharing_a_start_or_an_end():
    index = _ends_index(["alpha = 1", None, "beta = 2", "gamma = 3"])
    assert _sharing_ends(index, "alpha = 9") == {0}
    assert _sharing_ends(index, "delta = 2") == {2}
    assert _sharing_ends(index, "other") == set()


def test_comment_lines_by_language():
    python, rust = _comment_line("python"), _comment_line("rust")
    assert python("# a note") and not python("x = 1  # a note") and not python("#[test]")
    assert rust("/// docs") and rust("* middle of a block") and not rust("*p = 0;") and not rust("#[test]")


def test_a_decorator_goes_with_the_definition_after_it():
    snippet = _parse_snippet(["@cache\n", "def fresh():\n", "    return 1\n"], set(), "", set())
    old = ["@cache", "def stale():", "    return 0", "", "@cache", "def fresh():", "    return 0"]
    attached = _attached_lines(snippet, old, Counter(old), "python")
    assert list(attached) == [0]  # only the decorator attaches
    # The lines followed by `def fresh():` (decorators and blank lines skipped): of the two `@cache`
    # lines, only the one above `def fresh` may match, not the one above `def stale`.
    assert attached[0].tolist() == [False, False, True, True, True, False, False]

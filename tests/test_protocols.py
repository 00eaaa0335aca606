"""What the HTTP face reads out of editors' requests, without a model: Morph's tagged message, stop
strings over streamed text, and the language of code sent without a path."""

import pytest

from apply_edit.request.chat import StopText
from apply_edit.code.regions import guess_language
from apply_edit.faces.service.http import parse_apply_message


def test_morph_message_with_either_instruction_spelling():
    for tag in ("instruction", "instructions"):
        text = f"<{tag}>Rename it</{tag}>\n<code>def f():\n    pass\n</code>\n<update>def g():\n    pass\n</update>"
        assert parse_apply_message(text) == ("Rename it", "def f():\n    pass\n", "def g():\n    pass\n")


def test_a_file_that_contains_the_tags_themselves_is_read_whole():
    html = "<p>use <code>x</code> here</p>\n"
    text = f"<code>{html}</code>\n<update><p>use <code>y</code> here</p>\n</update>"
    assert parse_apply_message(text) == ("", html, "<p>use <code>y</code> here</p>\n")


def test_one_newline_after_an_opening_tag_is_layout():
    assert parse_apply_message("<code>\nx = 1\n</code>\n<update>\nx = 2\n</update>") == ("", "x = 1\n", "x = 2\n")


@pytest.mark.parametrize("text", ["just a question", "<code>x</code> and no update", "<update>x</update> alone"])
def test_other_messages_are_not_applies(text):
    assert parse_apply_message(text) is None


def test_stop_strings_are_never_streamed_even_in_pieces():
    stop = StopText(("\nEND",))
    out = [stop.push(piece) for piece in ["a\nb", "\nE", "N", "D and more"]]
    assert out == ["a\nb", "", "", ""] and stop.stopped
    stop = StopText(("\nEND",))
    out = [stop.push(piece) for piece in ["a\nE", "Nx"]] + [stop.finish()]
    assert "".join(out) == "a\nENx" and not stop.stopped


@pytest.mark.parametrize("code, language", [
    ("def f(x):\n    return x + 1\n", "python"),
    ("package main\n\nfunc main() {\n\tprintln(1)\n}\n", "go"),
    ("fn main() {\n    let x: u32 = 1;\n    println!(\"{}\", x);\n}\n", "rust"),
    ("function f(a: number): string {\n  return String(a);\n}\n", "typescript"),
    ("const f = (a) => a + 1;\nmodule.exports = { f };\n", "javascript"),
    ("<?php\necho 'hi';\n", "php"),
    ("", ""),
])
def test_the_language_of_code_sent_without_a_path(code, language):
    assert guess_language(code) == language

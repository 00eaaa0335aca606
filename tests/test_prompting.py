import random

import pytest
from hypothesis import given, settings, strategies as st

from apply_edit.code.languages import language_of
from apply_edit.merge import merge
from apply_edit.judging.prompting import FORMATS, IncrementalDetokenizer, OutputExtractor, TextStop, build_prompt
from conftest import ByteTokenizer


def stream(extractor, text, cuts):
    out = ""
    last = 0
    for cut in sorted(set(cuts)) + [len(text)]:
        out += extractor.push(text[last:cut])
        last = cut
    return out + extractor.finish()


@settings(max_examples=300, deadline=None)
@given(body=st.text(alphabet="ab<\n/ed", max_size=40), cuts=st.lists(st.integers(0, 80), max_size=8),
       tail=st.text(alphabet="xy\n", max_size=5))
def test_extractor_stops_at_the_closing_line_however_the_text_is_split(body, cuts, tail):
    close = "</ed>"
    text = body + "\n" + close + tail
    ex = OutputExtractor(close)
    out = stream(ex, text, [c for c in cuts if c <= len(text)])
    first = ("\n" + text).find("\n" + close)
    assert out == text[:first]  # everything up to and including the newline before the delimiter
    assert close not in out or not ("\n" + out).count("\n" + close)


def test_extractor_never_streams_a_delimiter_fragment():
    ex = OutputExtractor("</updated-code>")
    pieces = [ex.push(p) for p in ["x = 1\n", "</upd", "ated-code>", "junk"]]
    assert pieces == ["x = 1\n", "", "", ""]
    assert ex.done


def test_extractor_text_that_only_looks_like_the_delimiter_is_released():
    ex = OutputExtractor("</updated-code>")
    assert ex.push("a\n</upd") == "a\n"
    assert ex.push("ate me>\n") == "</update me>\n"


def test_extractor_without_final_newline():
    ex = OutputExtractor("</c>", keep_final_newline=False)
    assert ex.push("a\nb\n</c>") == "a\nb"
    ex = OutputExtractor("</c>", keep_final_newline=False)
    assert ex.push("a\nb\n") + ex.finish() == "a\nb"


def test_extractor_finish_releases_held_text_when_generation_ends_early():
    ex = OutputExtractor("</c>")
    assert ex.push("a\n</") == "a\n"
    assert ex.finish() == "</"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from apply_edit.models.registry import provision

    return AutoTokenizer.from_pretrained(provision("smollm2-135m"))


@pytest.mark.model
@pytest.mark.parametrize("text", [
    "def f(x):\n    return x  # naïve café ☕ 日本語 🎉\n",
    "emoji only 🎉🎉🎉 and CRLF\r\nline two\r\n",
    "".join(chr(c) for c in range(0x4e00, 0x4e40)),
])
def test_incremental_detokenizer_concatenates_to_the_full_text(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    rng = random.Random(0)
    for _ in range(5):
        detok, pieces, i = IncrementalDetokenizer(tokenizer), [], 0
        while i < len(ids):
            n = rng.randint(1, 4)
            pieces.append(detok.push(ids[i:i + n]))
            i += n
        assert all("\ufffd" not in p for p in pieces)
        assert "".join(pieces) == text


@pytest.mark.model
def test_text_stop_finds_the_token_that_completes_the_marker(tokenizer):
    body = "x = 1\ny = 2\n"
    ids = tokenizer.encode(body + "</updated-code>\nmore", add_special_tokens=False)
    stop = TextStop(tokenizer, "\n</updated-code>")
    keep = None
    for end in range(1, len(ids) + 1, 3):
        keep = stop(ids[:end])
        if keep is not None:
            break
    assert keep is not None
    assert "</updated-code>" in tokenizer.decode(ids[:keep])
    assert "</updated-code>" not in tokenizer.decode(ids[:keep - 1])


@pytest.mark.model
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_prompt_holds_the_inputs_and_ends_with_the_answer_opening(tokenizer, name):
    fmt = FORMATS[name]
    prompt = build_prompt(tokenizer, fmt, "a = 1\n", "a = 2\n", "bump a", "python", merged="a = 2\n").text
    assert "a = 1\n" in prompt and "a = 2\n" in prompt and "bump a" in prompt
    assert prompt.endswith(fmt.answer_open.format(lang="python"))


def test_language_from_extension():
    assert language_of("src/x.TS") == "typescript"
    assert language_of("a.unknown") == ""
    assert language_of(None) == ""


@pytest.mark.model
def test_detokenizer_flush_releases_a_character_cut_by_the_token_limit(tokenizer):
    ids = tokenizer.encode("ok 🎉", add_special_tokens=False)
    detok = IncrementalDetokenizer(tokenizer)
    text = "".join(detok.push([i]) for i in ids[:-1])  # the emoji's last byte never comes
    text += detok.flush()
    assert text == tokenizer.decode(ids[:-1])


def test_draft_prompt_shows_the_merge_candidate():
    original = "import os\n\n\ndef area(w, h):\n    return w * h\n"
    update = "# ... existing code ...\ndef area(w, h, scale=1):\n    return w * h * scale\n"
    merged = merge(original, update, "python").text
    prompt = build_prompt(ByteTokenizer(), FORMATS["tags-draft"], original, update, merged=merged).text
    draft = prompt[prompt.index("<draft>\n") + len("<draft>\n"):prompt.index("</draft>")]
    assert draft == "import os\n\n\ndef area(w, h, scale=1):\n    return w * h * scale\n"
    with pytest.raises(ValueError, match="shows the merge"):
        build_prompt(ByteTokenizer(), FORMATS["tags-draft"], original, update)


def test_the_prompt_knows_where_its_documents_are_and_its_words_are_the_rest():
    # A one-character snippet that also occurs in the template's words ("existing") stays one document.
    prompt = build_prompt(ByteTokenizer(), FORMATS["tags-draft"], "x = 1", "e", "bump x", merged="x = 2\n")
    assert {name: prompt.text[a:b] for name, (a, b) in prompt.documents.items()} == \
        {"original": "x = 1\n", "update": "e\n", "merged": "x = 2\n"}
    words = prompt.words()
    (a0, b0), (a1, b1), (a2, b2) = sorted(prompt.documents.values())
    assert "".join(words) == prompt.text[:a0] + prompt.text[b0:a1] + prompt.text[b1:a2] + prompt.text[b2:]
    assert "existing code" in words[0] and words[0].endswith("<code>\n")
    assert words[1:] == ["</code>\n\n<instruction>bump x</instruction>\n\n<update>\n", "</update>\n\n<draft>\n",
                         words[-1]]
    assert words[-1].startswith("</draft>") and words[-1].endswith("<updated-code>\n")


def test_an_instruction_cannot_pass_for_a_document_slot():
    prompt = build_prompt(ByteTokenizer(), FORMATS["tags"], "a\n", "b\n", "\ue0001\ue001")
    assert "<instruction>\ue0001\ue001</instruction>" in prompt.text
    assert [prompt.text[a:b] for a, b in prompt.documents.values()] == ["a\n", "b\n"]

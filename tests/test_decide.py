"""The pipeline's choice between the model's output and the merge, streamed through a real `ApplyRun`
(a character tokenizer stands in for the model's, the blocks for its verified tokens)."""

import pytest

from apply_edit.request.runs import ApplyRun, ApplyStats
from apply_edit.judging.decide import ApplyRefused, Judge, first_difference_line
from apply_edit.merge import merge
from apply_edit.judging.prompting import IncrementalDetokenizer, OutputExtractor

ORIGINAL = "import os\n\n\ndef area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n"
UPDATE = "# ... existing code ...\ndef area(w, h, scale=1):\n    return w * h * scale\n# ... existing code ...\n"
MERGED = ORIGINAL.replace("def area(w, h):\n    return w * h\n", "def area(w, h, scale=1):\n    return w * h * scale\n")


class Chars:
    """A tokenizer whose ids are the characters' code points."""

    @staticmethod
    def decode(ids, **_):
        return "".join(map(chr, ids))


class Blocks:
    """The model's output as blocks of 8 tokens, then the closing tag; records how far it was read."""

    def __init__(self, text: str):
        ids = [ord(c) for c in text + "</updated-code>\n"]
        self.blocks = [ids[i:i + 8] for i in range(0, len(ids), 8)]
        self.read = 0
        self.closed = False

    def __iter__(self):
        try:
            for block in self.blocks:
                self.read += 1
                yield block
        finally:
            self.closed = True


def run(model_text: str, update: str = UPDATE, instruction: str = "",
        blocks: Blocks | None = None) -> tuple[ApplyRun, Blocks, list[str]]:
    blocks = blocks or Blocks(model_text)
    candidate = merge(ORIGINAL, update, "python")
    judge = Judge(ORIGINAL, update, "python", candidate, instruction)
    apply_run = ApplyRun(iter(blocks), IncrementalDetokenizer(Chars()), OutputExtractor("</updated-code>"),
                         ApplyStats(), 0.0, candidate=candidate.text, judge=judge)
    pieces = []
    try:
        for piece in apply_run:
            pieces.append(piece)
    finally:
        apply_run.close()
    return apply_run, blocks, pieces


def test_the_checked_pipeline_answers_a_sound_merge_without_the_model():
    candidate = merge(ORIGINAL, UPDATE, "python")
    r = ApplyRun.sound_merge(Judge(ORIGINAL, UPDATE, "python", candidate), ApplyStats(), 0.0)
    assert list(r) == [MERGED] and r.text == MERGED and r.model_text == ""
    assert (r.outcome.path, r.stats.path, r.stats.disagreement_line, r.stats.decode.target_passes) == ("merge", "merge", 0, 0)
    assert r.outcome.reason == "the merge (structurally sure) passes the checks" and r.stats.ttft_s > 0


def test_where_the_merge_fails_the_checks_the_model_output_that_passes_them_is_the_answer():
    model = ORIGINAL.replace("return w * h\n", "return w * h * 2\n")
    r, _, pieces = run(model, update="", instruction="double the area")  # only the model reads instructions
    assert r.text == "".join(pieces) == model and r.outcome.path == "model"
    assert r.outcome.problems == {"model": [],
                                  "merge": ["it is the original unchanged, but the instruction asks for an edit"]}


def test_nothing_sound_is_refused_with_the_reasons():
    with pytest.raises(ApplyRefused, match="no sound result.*unchanged, but the instruction asks for an edit"):
        run(ORIGINAL, update="", instruction="rename area to surface")


def test_the_model_is_stopped_at_the_first_line_no_ending_can_make_sound():
    # A copied marker on line 2: whatever follows, the output keeps it; the rest is not decoded.
    model = "import os\n# ... existing code ...\n" + ORIGINAL * 20
    blocks = Blocks(model)
    with pytest.raises(ApplyRefused, match=r"stopped after its line 2: no ending can pass\) it writes 1 marker line"):
        run(model, update="", instruction="rename area to surface", blocks=blocks)
    assert blocks.closed and blocks.read <= 5 < len(blocks.blocks)
    # A name the instruction removes, still in code (`def main():`, line 8): stopped there too.
    model = ORIGINAL * 20
    blocks = Blocks(model)
    with pytest.raises(ApplyRefused, match=r"stopped after its line 8: no ending can pass\) it still has `main`"):
        run(model, update="", instruction="remove main", blocks=blocks)
    assert blocks.read < len(blocks.blocks) // 2


def test_first_difference_line_counts_from_one():
    assert first_difference_line("a\nb\nc\n", "a\nb\nX\n") == 3
    assert first_difference_line("a\n", "a\n") == 2


def test_an_unsure_merge_says_which_reading_it_chose():
    from apply_edit.judging.decide import Judge

    js = "function oldApi() {\n  return 2;\n}\n\nfunction other() {\n  return 3;\n}\n"
    update = "// removed the old helper\n\nfunction other() {\n  return 30;\n}\n"
    judge = Judge(js, update, "javascript", merge(js, update, "javascript"))
    assert judge.without_model().reason == ("the merge (placed without full certainty: snippet line 1 "
                                            "(`// removed the old helper`) read as a note, not code) passes the checks")


def test_the_merge_pipeline_answers_or_refuses_without_the_model():
    from apply_edit.request.runs import ApplyOptions, ApplyRequest, merge_answer

    sound = merge_answer(ApplyRequest(ORIGINAL, UPDATE, language="python"), ApplyOptions(pipeline="merge"))
    assert sound.result() == MERGED and sound.stats.path == "merge" and not sound.needs_model
    broken = merge_answer(ApplyRequest(ORIGINAL, "def area(w, h:\n    return w * h\n", language="python"),
                          ApplyOptions(pipeline="merge"))
    with pytest.raises(ApplyRefused, match="without the model"):
        broken.result()
    assert broken.stats.path == "refused" and broken.text == ""


def test_an_edit_nothing_in_the_snippet_places_is_refused_in_every_judged_pipeline_without_the_model():
    from apply_edit.request.runs import ApplyOptions, ApplyRequest, merge_answer

    impl = ("impl Validate for {name} {{\n    fn evaluate(\n        &self,\n        instance: &Value,\n    ) -> Result {{\n"
            "        self.inner.evaluate(\n            instance,\n            tracker,\n        )\n    }}\n\n"
            "    fn name(&self) -> &str {{\n        \"{name}\"\n    }}\n}}\n")
    original = "use crate::Value;\n\n" + impl.format(name="RefValidator") + "\n" + impl.format(name="DynamicRefValidator")
    body = ("    fn evaluate(\n        &self,\n        instance: &Value,\n    ) -> Result {\n"
            "        self.inner.evaluate(instance, tracker)\n    }\n")
    # The two impls have the same method: no line the snippet shows is found once, and the two readings
    # edit different copies. Either text is a guess: refused, with what would settle it.
    update = "// ... existing code ...\n\n" + body + "// ... existing code ...\n"
    request = ApplyRequest(original, update, language="rust")
    assert request.judge.merge_sound and "none of them is found once" in request.judge.unplaced
    assert "it edits line 8 or line 24" in request.judge.unplaced  # each impl's `self.inner.evaluate(`
    for pipeline in ("checked", "merge", "verify"):
        run = merge_answer(request, ApplyOptions(pipeline=pipeline))
        with pytest.raises(ApplyRefused, match="no sure place for the edit"):
            run.result()
        assert run.stats.path == "refused" and run.text == "" and not run.needs_model
    # Only new lines between markers: no line of the file at all.
    floating = ApplyRequest(original, "// ... existing code ...\nconst LIMIT: usize = 64;\n// ... existing code ...\n",
                            language="rust")
    assert "no line of the file" in floating.judge.unplaced
    # The impl's header, a line found once, places it.
    placed = ApplyRequest(original, "// ... existing code ...\nimpl Validate for DynamicRefValidator {\n" + body
                          + "// ... existing code ...\n", language="rust")
    assert placed.judge.unplaced == ""
    assert merge_answer(placed, ApplyOptions(pipeline="merge")).result().endswith(
        "impl Validate for DynamicRefValidator {\n" + body + "\n    fn name(&self) -> &str {\n"
        "        \"DynamicRefValidator\"\n    }\n}\n")


def test_a_merge_failing_outside_any_region_of_its_own_is_refused_at_once_in_the_default():
    """Its failure is the file's, not a region's (a new method read as the rename of the one it calls), so
    no region is there for the model to write, and the whole file the 0.5B would write instead was right in
    none of the measured applies: refused before any model is loaded, saying how to have it write anyway."""
    from apply_edit.request.runs import ApplyOptions, ApplyRequest, merge_answer

    original = ("class Buffer {\n public:\n  size_t size() const {\n    return length_;\n  }\n\n"
                "  void clear() {\n    length_ = 0;\n  }\n\n private:\n  size_t length_ = 0;\n};\n")
    update = ("// ... existing code ...\n  size_t externalSize() const {\n    return size();\n  }\n"
              "// ... existing code ...\n")
    request = ApplyRequest(original, update, language="cpp")
    assert "it deletes the definition of `size`" in request.judge.merge_problems[0] and request.failing_regions == []
    run = merge_answer(request, ApplyOptions())
    with pytest.raises(ApplyRefused, match="--pipeline model"):
        run.result()
    assert run.stats.path == "refused" and not run.needs_model
    assert merge_answer(request, ApplyOptions(pipeline="model")) is None  # asked for, the model writes the file

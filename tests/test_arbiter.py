"""The target decides the readings the merge leaves open (`apply_edit.judging.arbiter`): windows, exact scores, and
the default pipeline's answers on edits written for the purpose."""

import threading

import pytest
import torch

from apply_edit.request.apply import Applier
from apply_edit.request.runs import ApplyOptions, ApplyRequest
from apply_edit.judging.arbiter import WEIGHED, window
from apply_edit.merge.report import READING_KINDS
from apply_edit.models import FunctionModel
from apply_edit.engine.api import Interrupted

LINES = [f"line {i}\n" for i in range(40)]


def test_the_window_is_the_lines_two_texts_differ_in_with_context_on_each_side():
    other = LINES[:20] + ["new\n"] + LINES[21:]
    w = window(LINES, other, list(range(40)), 40, context=3)
    assert (w.start, w.end_merge, w.end_other) == (17, 24, 24)
    assert (w.original_start, w.original_end) == (17, 24)
    longer = LINES[:20] + ["a\n", "b\n"] + LINES[20:]
    w = window(LINES, longer, list(range(40)), 40, context=3)
    assert (w.start, w.end_merge, w.end_other) == (17, 23, 25)


def test_a_window_at_the_files_edge_shows_the_original_from_its_edge():
    # The merge dropped the original's first line; the other text keeps it.
    merged, origin = LINES[1:], list(range(1, 40))
    w = window(merged, LINES, origin, 40, context=2)
    assert (w.start, w.end_merge, w.end_other, w.original_start) == (0, 2, 3, 0)


def test_likelihoods_are_the_log_probabilities_of_each_answer_after_what_they_share():
    vocab = 7
    def fn(seq):
        weights = [1.0 + ((len(seq) + t) % 3) for t in range(vocab)]
        return [w / sum(weights) for w in weights]
    model = FunctionModel(fn)
    applier = Applier(model, tokenizer=object())
    prompt, answers = [1, 2, 3], [[4, 5, 6], [4, 6]]
    scores = applier.likelihoods(prompt, answers)
    for answer, score in zip(answers, scores):
        seq = prompt + answer
        # The first answer token is shared by both: its probability is the same for each and left out.
        expected = sum(torch.log(torch.tensor(fn(seq[:n])[seq[n]], dtype=torch.float64)) for n in range(4, len(seq)))
        assert score == pytest.approx(float(expected))


def test_a_cancelled_scoring_raises_interrupted():
    applier = Applier(FunctionModel(lambda seq: [0.5, 0.5]), tokenizer=object())
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Interrupted):
        applier.likelihoods([1], [[0], [1]], cancel)


@pytest.fixture(scope="module")
def applier():
    from apply_edit.models.transformers_target import TransformersTarget

    return Applier(TransformersTarget.load("qwen2.5-coder-0.5b", dtype="fp32"))


@pytest.mark.model
class TestOnARealModel:
    def test_the_scores_equal_a_full_forward_pass(self, applier):
        ids = applier.tokenizer.encode("def area(w, h):\n    return w * h\n", add_special_tokens=False)
        answers = [applier.tokenizer.encode(t, add_special_tokens=False) for t in ("\n\ndef f():\n", "\n\nclass A:\n")]
        scores = applier.likelihoods(ids, answers)
        for answer, score in zip(answers, scores):
            seq = ids + answer
            with torch.inference_mode():
                rows = torch.log_softmax(applier.target.model(input_ids=torch.tensor([seq])).logits[0].double(), -1)
            shared = len(ids) + 1  # both answers begin with the same token (two newlines)
            full = sum(float(rows[n - 1, seq[n]]) for n in range(shared, len(seq)))
            assert score == pytest.approx(full, abs=1e-3)

    def test_the_shared_tokens_are_read_once(self, applier):
        fed = []
        hook = applier.target.model.register_forward_pre_hook(
            lambda _, args, kwargs: fed.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
        try:
            ids = list(range(1000, 1040))
            applier.likelihoods(ids, [[5, 6, 7], [8, 9]])
        finally:
            hook.remove()
        assert fed == [43, 3]  # the prompt with the first answer; then from its last token, the second

    def test_a_rewritten_last_line_replaces_the_old_one(self, applier):
        original = "".join(f"function f{i}() {{\n  return {i};\n}}\n\n" for i in range(5)) + "module.exports = f4;\n"
        update = "// ... existing code ...\n  return 4;\n}\n\nexport default f4;\n"
        request = ApplyRequest(original, update, language="javascript")
        # The merge adds the new export and keeps the old one: a reading the checks leave open.
        assert request.merged.text.endswith("export default f4;\nmodule.exports = f4;\n")
        assert [r.kind for r, _ in request.judge.open_readings(WEIGHED)] == ["edge"]
        run = applier.stream(request, ApplyOptions())
        assert run.result() == original.replace("module.exports = f4;", "export default f4;")
        assert run.stats.path == "merge+target" and run.stats.readings_taken_other_way == 1
        assert 0 < run.stats.arbiter_tokens < 1000 and "taken the other way" in run.stats.verdicts[0]

    def test_two_first_lines_the_snippets_first_line_joins_go(self, applier):
        original = ("from . import errors\nfrom . import utils\nfrom .types import Stream\n\n\nclass Api:\n"
                    "    def run(self):\n        return utils.run()\n\n"
                    "    def stop(self):\n        raise errors.Stopped()\n")
        update = "from . import errors, utils\nfrom .types import Stream\n\n\n# ... existing code ...\n"
        run = applier.stream(ApplyRequest(original, update, language="python"), ApplyOptions())
        assert run.result() == original.replace("from . import errors\nfrom . import utils\n",
                                                "from . import errors, utils\n")
        assert run.stats.path == "merge+target" and run.stats.readings_taken_other_way == 1

    def test_a_licence_block_the_snippets_first_lines_replace_goes(self, applier):
        licence = "/*\n * Copyright (c) 2019 The Example Authors.\n *\n" + "".join(f" * {line}\n" for line in (
            "Permission is hereby granted, free of charge, to any person obtaining a copy",
            "of this software and associated documentation files (the \"Software\"), to deal",
            "in the Software without restriction, including without limitation the rights",
            "to use, copy, modify, merge, publish, distribute, sublicense, and/or sell",
            "copies of the Software, and to permit persons to whom the Software is",
            "furnished to do so, subject to the following conditions:", "",
            "The above copyright notice and this permission notice shall be included in",
            "all copies or substantial portions of the Software.")) + " */\n"
        code = "#include <stdio.h>\n#include \"buffer.h\"\n" + "".join(
            f"\nint buffer_{name}(struct buffer *b)\n{{\n\treturn b->{name};\n}}\n" for name in ("size", "used", "free"))
        update = ("// SPDX-License-Identifier: MIT\n\n#include <stdio.h>\n// ... existing code ...\n"
                  "int buffer_free(struct buffer *b)\n{\n\treturn b->size - b->used;\n}\n")
        request = ApplyRequest(licence + "\n" + code, update, language="c")
        # The merge keeps the licence under the new first line; the other way drops it: 13 comment lines of
        # a 31-line file, which as lost code would be too many for the checks, so the target weighs it.
        assert request.merged.text.startswith(licence)
        assert [r.kind for r, _ in request.judge.open_readings(WEIGHED)] == ["edge"]
        run = applier.stream(request, ApplyOptions())
        expected = "// SPDX-License-Identifier: MIT\n\n" + code.replace("return b->free;", "return b->size - b->used;")
        assert run.result() == expected
        assert run.stats.path == "merge+target" and run.stats.readings_taken_other_way == 1

    def test_a_long_deletion_the_snippet_shows_stays_deleted_without_the_model(self, applier):
        original = "".join(f"def check_{name}(value):\n    if value is None:\n        raise ValueError('{name}')\n"
                           f"    return value\n\n\n" for name in ("host", "port", "user", "password"))
        update = ("def check_host(value):\n    if value is None:\n        raise ValueError('host')\n    return value\n"
                  "\n\ndef check_password(value):\n# ... existing code ...\n")
        request = ApplyRequest(original, update, language="python")
        # A reading of the merge's (a long deletion, or a forgotten marker), but the other way breaks up the
        # hunk the snippet shows (`return value`, then `def check_password`) and fails the checks; the
        # target's evidence does not tell the two apart anyway (arbiter.WEIGHED): the merge's reading stands.
        assert [r.kind for r in request.merged.report.readings] == ["deletion"]
        assert request.judge.open_readings(READING_KINDS) == []
        run = applier.stream(request, ApplyOptions())
        text = run.result()
        assert run.stats.path == "merge" and not run.needs_model
        assert "check_port" not in text and "check_user" not in text and "check_password" in text

    def test_a_cancel_while_the_target_weighs_sends_only_what_every_reading_shares(self, applier):
        original = "".join(f"function f{i}() {{\n  return {i};\n}}\n\n" for i in range(5)) + "module.exports = f4;\n"
        request = ApplyRequest(original, "// ... existing code ...\n  return 4;\n}\n\nexport default f4;\n",
                               language="javascript")
        run = applier.stream(request, ApplyOptions())
        run.cancel()
        text = run.result()
        assert run.outcome is None and run.stats.readings_weighed == 0
        # Both readings have every line up to the new export; which of the old one stays is undecided.
        assert text.endswith("export default f4;\n") and "module.exports" not in text

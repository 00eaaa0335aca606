"""The whole request path without a model: prompt → drafting plan → engine → detokenizer → extractor →
judge, on a function target (`FunctionModel`) and a byte tokenizer. The target answers a chosen text
after the prompt's pre-filled `<updated-code>` line, as a model that knows the answer would; what is under
test is everything around it (the real model's path is in test_real_model.py)."""

import time
import types

import pytest

from apply_edit.request.apply import Applier
from apply_edit.request.runs import ApplyOptions
from apply_edit.faces.cases import load_case
from apply_edit.judging.decide import ApplyRefused
from apply_edit.judging.regions_to_rewrite import changed_regions
from apply_edit.merge import split_lines
from apply_edit.models import FunctionModel
from conftest import EOS, FIXTURES, ByteTokenizer

OPEN, CLOSE = b"<updated-code>\n", b"</updated-code>"


def answering(text: str) -> FunctionModel:
    """A target whose greedy answer after the prompt is `text`, the closing tag on a line of its own and
    end of turn."""
    answer = list(text.encode() + (b"" if text.endswith("\n") else b"\n") + CLOSE) + [EOS]

    def next_token(seq: list[int]) -> list[float]:
        data = bytes(t for t in seq if t < EOS)
        written = len(data) - (data.rfind(OPEN) + len(OPEN))
        dist = [0.1 / EOS] * (EOS + 1)
        dist[answer[written] if written < len(answer) else EOS] = 0.9
        return dist

    return FunctionModel(next_token, eos=[EOS])


def applier(text: str) -> Applier:
    return Applier(answering(text), ByteTokenizer())


def test_the_models_answer_streams_through_and_copy_drafting_saves_passes():
    case = load_case(FIXTURES / "py_add_method")
    run = applier(case.expected).stream(case.request(), ApplyOptions(pipeline="model"))
    pieces = list(run)
    assert "".join(pieces) == run.text == case.expected
    assert len(pieces) > 1  # streamed as verified, not at the end
    assert run.stats.decode.target_passes * 5 <= run.stats.decode.new_tokens  # the merge is the answer: copied in blocks
    plain = applier(case.expected).stream(case.request(), ApplyOptions(method="plain", pipeline="model"))
    assert plain.result() == case.expected and plain.tokens == run.tokens
    assert plain.stats.decode.target_passes == len(plain.tokens)


def test_the_judged_pipelines_on_a_function_target():
    case = load_case(FIXTURES / "py_add_method")
    # verify: the target reads each region the merge changed, from its window, and answers it.
    candidate = case.request().judge.candidate
    (region,) = changed_regions(candidate)
    merged = split_lines(candidate.text)
    ours = "".join(merged[region.start:region.end])
    verified = applier(ours).stream(case.request(), ApplyOptions(pipeline="verify"))
    pieces = list(verified)
    assert "".join(pieces) == verified.text == case.expected and verified.outcome.path == "model+merge"
    assert len(verified.stats.regions_written) == 1
    assert verified.stats.regions_written[0].startswith(f"read {region.describe()}: ")
    assert verified.stats.regions_written[0].endswith(", the merge's text")
    assert verified.outcome.reason.endswith("passes the checks; the target read 1 of the 1 region(s) it changed "
                                            "and wrote the merge's text in 1")
    # A target that writes another line of the new method: the answer is still the merge, with where it
    # departed (the region's unchanged first lines are given to it, not written).
    line = next(n for n in range(region.start, region.end) if "expired = [" in merged[n])
    other = ours.replace(merged[line], "        expired = []  # not the merge's line\n", 1)
    departed = applier(other).stream(case.request(), ApplyOptions(pipeline="verify"))
    assert departed.result() == case.expected and departed.outcome.path == "merge"
    assert departed.stats.disagreement_line == line + 1
    assert departed.stats.regions_written[0].endswith(f"departed from the merge at line {line + 1}")
    # The merge is sound, so the default answers without running the target at all.
    default = applier(case.expected).stream(case.request())
    assert default.result() == case.expected and default.outcome.path == "merge"
    assert default.stats.decode.target_passes == 0


def test_a_model_answer_that_fails_the_checks_is_refused_where_the_merge_is_unsound():
    case = load_case(FIXTURES / "py_instruction_only")  # an instruction, no snippet: nothing to merge
    room = ApplyOptions(max_new_tokens=4096)  # a byte a token: the default room is sized for real tokenizers
    written = applier(case.expected).stream(case.request(), room)
    assert written.result() == case.expected and written.outcome.path == "model"
    unchanged = applier(case.original).stream(case.request(), room)
    with pytest.raises(ApplyRefused, match="the original unchanged"):
        unchanged.result()


def test_a_model_run_that_cannot_read_its_prompt_within_the_bound_is_refused_before_any_pass():
    from apply_edit.engine.api import CostCurve

    case = load_case(FIXTURES / "py_instruction_only")  # the model writes the whole file
    slow = applier(case.expected)
    slow.target.cost_curve = lambda: CostCurve({0: {0: 1.0}}, prefill={100: 10.0})  # 10 tokens a second
    run = slow.stream(case.request(), ApplyOptions(max_new_tokens=4096, model_seconds=15))
    with pytest.raises(ApplyRefused, match=r"not started: reading its [\d,]+-token prompt alone takes about "
                                           r"[\d.]+ s on this target, beyond the 15 s bound"):
        run.result()
    assert slow.target.calls == 0 and run.stats.path == "refused"
    # Where the prefix store holds most of the prompt (a warmed-up file), only the rest is to be read.
    warm = applier(case.expected)
    warm.target.cost_curve = slow.target.cost_curve
    prompt_ids = warm.plan(case.request(), ApplyOptions(max_new_tokens=4096)).prompt_ids
    warm.target.prefix_cache = types.SimpleNamespace(most_reused=lambda ids: len(ids) - 100)  # 10 s left to read
    assert warm.too_slow(prompt_ids, 15, time.perf_counter()) == ""
    assert "(" + f"{len(prompt_ids) - 100:,}" + " of them stored) alone takes about 10.0 s" in \
        warm.too_slow(prompt_ids, 9, time.perf_counter())
    # Where the prompt can be read in time, the model writes as before.
    fast = applier(case.expected)
    fast.target.cost_curve = lambda: CostCurve({0: {0: 1.0}}, prefill={100_000: 1.0})
    assert fast.stream(case.request(), ApplyOptions(max_new_tokens=4096)).result() == case.expected


def test_a_plan_is_built_once_with_the_documents_placed_and_a_warm_up_needs_a_prefix_store():
    from apply_edit.request.runs import ApplyRequest, NoPrefixStore

    case = load_case(FIXTURES / "py_add_method")
    applier = Applier(answering(case.expected), ByteTokenizer())
    plan = applier.plan(case.request(), ApplyOptions(pipeline="model"))
    spans = plan.prompt.documents
    assert plan.prompt.text[slice(*spans["original"])] == case.original
    assert plan.prompt.text[slice(*spans["merged"])] == plan.candidate.text
    # The file comes first, so every apply to it shares the prompt's start up to its end.
    assert spans["original"] < spans["update"] < spans["merged"]
    assert plan.shared == len(plan.prompt.text[:spans["original"][1]].encode())  # where the prompt's reading cuts
    assert plan.prompt_ids == list(plan.prompt.text.encode()) and plan.drafting is not None
    assert plan.max_new == len(case.original.encode()) + len(case.update.encode()) + 64
    run = applier.run(plan)
    assert run.result() == case.expected and run.stats.ttft_s <= run.stats.total_s
    assert run.stats.decode.total_s <= run.stats.total_s  # the engine's clock starts later than the request's
    with pytest.raises(NoPrefixStore, match="keeps no prompt prefixes"):  # the server's setting, not the request
        applier.warm(ApplyRequest(case.original, ""))

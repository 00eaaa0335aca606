"""The real transformers path, on the small smollm2-135m (provisioned offline from its PyPI wheel)."""

import pytest
import torch

from apply_edit.request.apply import Applier
from apply_edit.request.runs import ApplyError, ApplyOptions
from apply_edit.faces.cases import load_case
from apply_edit.engine.api import Interrupted
from apply_edit.models.transformers_target import PREFILL_CHUNK, TransformersTarget
from conftest import FIXTURES

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def target():
    # fp32: batched verification and one-token decoding then agree to ~1e-6, so the exactness check
    # below is about the engine, not about bf16 near-ties (the bench measures those on the default model).
    return TransformersTarget.load("smollm2-135m", dtype="fp32")


def test_kv_cache_rollback_matches_a_fresh_pass(target):
    prompt = target.tokenizer.encode("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n")
    block = [11, 12, 13, 14, 15]
    target.reset()
    target.logits(prompt, block)  # caches prompt + block
    rolled = target.logits(prompt + block[:2], [99, 98])  # rolls back 3 tokens, adds 2 others
    target.reset()
    fresh = target.logits(prompt + block[:2], [99, 98])
    assert target.cached == prompt + block[:2] + [99, 98]
    torch.testing.assert_close(rolled, fresh, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("block", [[], [11, 12, 13, 14]], ids=["one token", "verify block"])
def test_packed_gqa_attention_gives_the_logits_of_transformers_sdpa(target, block):
    from apply_edit.models.attention import PACKED_GQA

    assert target.model.config.num_key_value_heads < target.model.config.num_attention_heads  # a GQA model
    assert target.model.config._attn_implementation == PACKED_GQA
    # Longer than a prefill pass: its second pass attends through the packed mask too.
    prompt = [(i * 7919) % 1000 + 100 for i in range(PREFILL_CHUNK + 200)]
    out = {}
    for impl in ("sdpa", PACKED_GQA):  # prefill, then one cached pass with transformers' mask
        target.model.set_attn_implementation(impl)
        target.reset()
        target.logits(prompt, [])
        out[impl] = target.logits(prompt + [5], block)
    target.reset()
    assert out[PACKED_GQA].shape == (len(block) + 1, target.model.config.vocab_size)
    torch.testing.assert_close(out[PACKED_GQA], out["sdpa"], rtol=1e-5, atol=1e-5)  # fp32


def test_one_pass_per_call_and_no_prefix_recomputation(target):
    calls = []
    hook = target.model.register_forward_pre_hook(lambda mod, args, kwargs: calls.append(kwargs["input_ids"].shape[1]),
                                                  with_kwargs=True)
    try:
        target.reset()
        prompt = list(range(100, 140))
        target.logits(prompt, [1, 2, 3])
        target.logits(prompt + [1, 2, 7], [4, 5])  # 7 replaces the rejected 3
    finally:
        hook.remove()
    assert calls == [43, 3]  # the second pass feeds only the corrected token and the new block


def long_prompt(n: int) -> list[int]:
    return [(i * 7919) % 1000 + 100 for i in range(n)]


def test_a_long_prompt_is_read_in_chunks_with_the_logits_of_one_pass(target):
    calls = []
    hook = target.model.register_forward_pre_hook(lambda mod, args, kwargs: calls.append(kwargs["input_ids"].shape[1]),
                                                  with_kwargs=True)
    prompt, block = long_prompt(2 * PREFILL_CHUNK + 100), [11, 12, 13]
    try:
        target.reset()
        chunked = target.logits(prompt, block)
    finally:
        hook.remove()
    assert calls == [PREFILL_CHUNK, PREFILL_CHUNK, 100 + len(block)]
    target.reset()
    one_pass = target.model(input_ids=torch.tensor([prompt + block]), logits_to_keep=len(block) + 1).logits[0]
    torch.testing.assert_close(chunked, one_pass, rtol=1e-4, atol=1e-4)


def test_an_interrupted_prompt_leaves_a_cache_the_next_call_can_use(target):
    prompt = long_prompt(3 * PREFILL_CHUNK)
    reads = []
    target.reset()
    target.interrupt = lambda: len(reads) > 0
    hook = target.model.register_forward_pre_hook(lambda *_: reads.append(1))
    try:
        with pytest.raises(Interrupted):
            target.logits(prompt, [])
    finally:
        hook.remove()
        target.interrupt = lambda: False
    assert len(reads) == 1 and target.cached == prompt[:PREFILL_CHUNK]
    resumed = target.logits(prompt, [5])  # reads on from the first chunk
    target.reset()
    torch.testing.assert_close(resumed, target.logits(prompt, [5]), rtol=1e-4, atol=1e-4)
    target.reset()


@pytest.fixture(scope="module")
def applier(target):
    return Applier(target)


def test_speculative_equals_plain_greedy_with_far_fewer_passes(applier):
    case = load_case(FIXTURES / "py_add_method")
    plain = applier.stream(case.request(), ApplyOptions(method="plain", max_new_tokens=150))
    plain.result()
    adaptive = applier.stream(case.request(), ApplyOptions(max_new_tokens=150, pipeline="model"))
    adaptive.result()
    assert adaptive.tokens == plain.tokens
    # The adaptive policy minimises time, not passes (fp32 drafts are costly); fixed k shows the saving.
    spec = applier.stream(case.request(), ApplyOptions(method="spec-fixed", k=32, max_new_tokens=150))
    spec.result()
    assert spec.tokens == plain.tokens and spec.text == plain.text
    assert plain.stats.decode.target_passes == len(plain.tokens)
    assert spec.stats.decode.target_passes * 3 <= plain.stats.decode.target_passes, \
        (spec.stats.decode.target_passes, plain.stats.decode.target_passes)


def test_streamed_pieces_concatenate_to_the_text(applier):
    case = load_case(FIXTURES / "ts_add_interface_field")
    run = applier.stream(case.request(), ApplyOptions(max_new_tokens=200, pipeline="model"))
    pieces = list(run)
    assert len(pieces) > 1 and "".join(pieces) == run.text
    assert "</updated-code>" not in run.text
    assert run.stats.ttft_s <= run.stats.total_s


def test_abandoned_stream_releases_the_cache(applier, target):
    case = load_case(FIXTURES / "py_add_method")
    run = applier.stream(case.request(), ApplyOptions(max_new_tokens=200))
    it = iter(run)
    next(it)
    it.close()  # a client went away mid-stream
    assert target.cached == [] and target._cache is None


def test_cancel_while_the_prompt_is_read_stops_within_a_chunk(applier, target):
    case = load_case(FIXTURES / "py_add_method")  # a 2,000-token prompt: several chunks
    run = applier.stream(case.request(), ApplyOptions(method="plain", max_new_tokens=50))
    assert run.stats.prompt_tokens > 2 * PREFILL_CHUNK
    reads = []

    def read(*_):
        reads.append(1)
        run.cancel()

    hook = target.model.register_forward_pre_hook(read)
    try:
        assert list(run) == [] and run.cancelled
    finally:
        hook.remove()
    assert len(reads) == 1  # the first chunk, then the cancel was seen
    assert target.cached == [] and target._cache is None


def test_request_too_long_for_the_context_is_refused(applier):
    case = load_case(FIXTURES / "py_add_method")
    with pytest.raises(ApplyError, match="too long"):
        applier.stream(case.request(), ApplyOptions(max_new_tokens=10**6, pipeline="model"))
    # A sound merge needs no context: the default answers it whatever the model's limit.
    assert applier.stream(case.request(), ApplyOptions(max_new_tokens=10**6)).result() == case.expected


def test_prompt_lookup_baseline_runs_on_the_same_model(applier):
    case = load_case(FIXTURES / "py_add_method")
    run = applier.stream(case.request(), ApplyOptions(method="prompt-lookup", max_new_tokens=60))
    text = run.result()
    plain = applier.stream(case.request(), ApplyOptions(method="plain", max_new_tokens=60)).result()
    assert text and run.stats.decode.target_passes >= 1
    assert text[:100] == plain[:100]


def test_a_sound_merge_is_the_answer_whatever_the_model_does(applier):
    """smollm2 cannot apply this edit itself; the merge passes the checks, so it is the answer: by
    default at once, with no target pass; with `--pipeline verify` streamed as the model reads the region
    the merge changed, from its window, and says where it departs."""
    case = load_case(FIXTURES / "py_add_method")
    run = applier.stream(case.request(), ApplyOptions())
    assert run.result() == case.expected and run.stats.path == "merge" and run.stats.decode.target_passes == 0
    run = applier.stream(case.request(), ApplyOptions(pipeline="verify"))
    pieces = list(run)
    assert run.text == "".join(pieces) == case.expected
    assert run.outcome.path in ("merge", "model+merge") and run.stats.path == run.outcome.path
    (read,) = run.stats.regions_written  # one region, read with a prompt of its window, not the file
    assert read.startswith("read lines ") and run.model_text
    if run.outcome.path == "merge":
        assert run.stats.disagreement_line >= 1 and read.endswith(f"line {run.stats.disagreement_line}")


def test_the_default_never_hands_back_a_result_that_fails_the_checks(applier):
    """An instruction with no snippet: the merge is the unchanged file, which cannot be the answer; what
    the model writes is handed back only if it passes the checks, and otherwise the apply is refused."""
    from apply_edit.judging.checks import problems
    from apply_edit.judging.decide import ApplyRefused

    case = load_case(FIXTURES / "py_instruction_only")
    run = applier.stream(case.request(), ApplyOptions(max_new_tokens=400))
    try:
        text = run.result()
    except ApplyRefused as refused:
        assert run.outcome.path == "refused" and "no sound result" in str(refused)
        assert run.outcome.problems["merge"] == ["it is the original unchanged, but the instruction asks for an edit"]
    else:
        assert run.outcome.path == "model"
        assert problems(case.original, case.update, text, case.language, instruction=case.instruction) == []


@pytest.fixture(scope="module")
def plain_tokens(applier):
    """Plain greedy's tokens for ts_add_interface_field, decoded once for every drafting mode's test."""
    plain = applier.stream(load_case(FIXTURES / "ts_add_interface_field").request(),
                           ApplyOptions(method="plain", max_new_tokens=120))
    plain.result()
    return plain.tokens


@pytest.mark.parametrize("drafting", ["merge", "copy"])
def test_every_drafting_mode_equals_plain_greedy(applier, plain_tokens, drafting):
    case = load_case(FIXTURES / "ts_add_interface_field")
    spec = applier.stream(case.request(), ApplyOptions(drafting=drafting, max_new_tokens=120, pipeline="model"))
    spec.result()
    assert spec.tokens == plain_tokens
    assert (spec.candidate is not None) == (drafting == "merge")


def test_the_model_writing_the_whole_file_is_bounded_in_time(applier):
    from apply_edit.judging.decide import ApplyRefused
    from apply_edit.request.runs import ApplyRequest

    # An instruction alone: the default has the model write the whole file (a merge failing outside any
    # region of its own is refused before that, `runs.merge_answer`).
    request = ApplyRequest("def f():\n    return 1\n", "", "Make f return 2.", language="python")
    assert not request.judge.merge_sound  # the model has to write it
    run = applier.stream(request, ApplyOptions(model_seconds=0.01))
    with pytest.raises(ApplyRefused, match=r"(not finished within|beyond the) 0.01 s"):
        run.result()
    assert run.stats.path == "refused"

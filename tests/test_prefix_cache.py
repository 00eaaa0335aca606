"""The prefix store (models/prefix_cache.py): prefixes reused only as far as both readings ended their passes
alike, bounded in bytes, least recently used out; and on the real model, a request read from a stored prefix
gets bit for bit the logits of a cold one."""

import pytest
import torch

from apply_edit.models.prefix_cache import PrefixCache


def layers_for(n: int, fill: float = 1.0, layers: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Keys and values of n positions: [batch 1, 2 heads, n, dim 8], fp32 (2 x 64 bytes per position)."""
    return [(torch.full((1, 2, n, 8), fill), torch.full((1, 2, n, 8), -fill)) for _ in range(layers)]


def every4(n: int) -> list[int]:
    """Pass ends of a reading in passes of 4 tokens, up to n."""
    return list(range(4, n + 1, 4))


def test_the_longest_prefix_ending_where_both_readings_end_a_pass_is_found_and_copied():
    cache = PrefixCache(max_bytes=1 << 20)
    cache.store(list(range(12)), every4(12), layers_for(12))
    assert cache.lookup(list(range(10)) + [99, 98], every4(12))[0] == 8  # 10 in common: two passes' worth
    assert cache.lookup(list(range(12)), every4(9))[0] == 8  # at most the request's own last pass end
    assert cache.lookup([5] + list(range(11)), every4(12)) == (0, None)
    found, layers = cache.lookup(list(range(20)), every4(20))
    assert found == 12 and layers[0][0].shape == (1, 2, 12, 8)
    assert (cache.hits, cache.lookups, cache.tokens_reused) == (3, 4, 8 + 8 + 12)


def test_a_prefix_is_reused_only_as_far_as_both_read_it_alike():
    # Stored: read in passes ending at 4, 6 (a cut: where the file ended), 10. A request whose file ends at
    # 6 too reads it the same way; one without that cut read [4, 8) in one pass: only [0, 4) is the same.
    cache = PrefixCache(max_bytes=1 << 20)
    cache.store(list(range(10)), [4, 6, 10], layers_for(10))
    assert cache.lookup(list(range(12)), [4, 6, 10])[0] == 10
    assert cache.lookup(list(range(6)) + [99] * 6, [4, 6, 10])[0] == 6  # another snippet for the same file
    assert cache.lookup(list(range(12)), [4, 8, 12])[0] == 4


def test_the_most_a_reading_may_be_spared_is_told_without_a_lookup():
    cache = PrefixCache(max_bytes=1 << 20)
    assert cache.most_reused(list(range(12))) == 0
    cache.store(list(range(10)), [4, 6, 10], layers_for(10), tag=1)
    assert cache.most_reused(list(range(8)) + [99] * 4) == 8  # whatever the pass ends: at least a lookup's 6
    assert cache.most_reused(list(range(20))) == 10 and cache.most_reused([5, 6]) == 0
    assert (cache.hits, cache.lookups) == (0, 0)


def test_stored_tensors_are_copies_of_the_prefix_only():
    cache = PrefixCache(max_bytes=1 << 20)
    source = layers_for(10)
    cache.store(list(range(8)), every4(8), source)
    source[0][0].fill_(7.0)  # the caller's cache moves on
    _, layers = cache.lookup(list(range(8)), every4(8))
    assert layers[0][0].shape[2] == 8 and bool((layers[0][0] == 1.0).all())
    assert cache.bytes_held == 2 * 2 * 8 * 2 * 8 * 4  # layers x (keys, values) x positions x heads x dim x fp32


def test_bounded_in_bytes_least_recently_used_first():
    per_prefix = 2 * 2 * 8 * 2 * 8 * 4  # 8 positions
    cache = PrefixCache(max_bytes=2 * per_prefix)
    a, b, c = [1] * 8, [2] * 8, [3] * 8
    cache.store(a, every4(8), layers_for(8))
    cache.store(b, every4(8), layers_for(8))
    cache.lookup(a, every4(8))  # a is used again: b is now the least recent
    cache.store(c, every4(8), layers_for(8))
    assert cache.bytes_held == 2 * per_prefix and len(cache) == 2
    assert cache.lookup(b, every4(8))[0] == 0 and cache.lookup(a, every4(8))[0] == 8 and cache.lookup(c, every4(8))[0] == 8
    cache.store([4] * 24, every4(24), layers_for(24))  # larger than the whole budget: the passes that fit are kept
    assert len(cache) == 1 and cache.bytes_held == 2 * per_prefix and cache.lookup([4] * 24, every4(24))[0] == 16
    small = PrefixCache(max_bytes=per_prefix // 2 - 1)  # not one pass
    assert small.store(a, every4(8), layers_for(8)) == 0 and len(small) == 0 and small.bytes_held == 0


def test_a_longer_prefix_replaces_the_stored_prefix_it_extends():
    cache = PrefixCache(max_bytes=1 << 20)
    cache.store(list(range(4)), [4], layers_for(4))
    cache.store(list(range(8)), [4, 8], layers_for(8))
    assert len(cache) == 1 and cache.lookup(list(range(8)), every4(8))[0] == 8
    cache.store(list(range(6)), [2, 6], layers_for(6))  # read another way: both stay
    assert len(cache) == 2
    with pytest.raises(ValueError, match="ends where a pass ended"):
        cache.store(list(range(6)), [4], layers_for(6))


def test_only_prefixes_of_the_same_tag_are_read():
    # the target tags entries with torch's thread count: in fp32 it changes the keys' and values' last bits
    cache = PrefixCache(max_bytes=1 << 20)
    cache.store(list(range(8)), every4(8), layers_for(8), tag=1)
    assert cache.lookup(list(range(8)), every4(8), tag=2) == (0, None)
    cache.store(list(range(8)), every4(8), layers_for(8, fill=2.0), tag=2)  # does not replace the other tag's
    assert len(cache) == 2
    assert cache.lookup(list(range(8)), every4(8), tag=1)[1][0][0][0, 0, 0, 0] == 1.0
    assert cache.lookup(list(range(8)), every4(8), tag=2)[1][0][0][0, 0, 0, 0] == 2.0


@pytest.fixture(scope="module")
def target():
    from apply_edit.models.transformers_target import TransformersTarget

    return TransformersTarget.load("smollm2-135m", dtype="fp32")


def long_prompt(n: int, seed: int = 0) -> list[int]:
    return [(i * 7919 + seed) % 1000 + 100 for i in range(n)]


@pytest.mark.model
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("file_end", [False, True], ids=["chunks", "cut-at-file-end"])
def test_a_prompt_read_from_a_stored_prefix_gets_the_logits_of_a_cold_read_bit_for_bit(target, dtype, file_end,
                                                                                      monkeypatch):
    from apply_edit.models import transformers_target

    # Chunks of 128 tokens, not 512: the same passes and cuts at a quarter of the length (bf16 without AMX
    # reads ~40 tokens a second here).
    C = 128
    monkeypatch.setattr(transformers_target, "PREFILL_CHUNK", C)
    target.model.to(dtype)
    try:
        shared = 2 * C + 30  # a file's prompt start (system, file): two chunks and 30 tokens
        first = long_prompt(3 * C + 50)
        second = first[:shared] + long_prompt(C // 2, seed=5)  # another snippet for the same file
        cuts = (shared,) if file_end else ()  # the applier cuts a pass where the file ends
        block = [11, 12, 13]
        target.keep_prefixes(0)
        target.reset(cuts)
        cold = target.logits(second, block)
        target.keep_prefixes(1 << 30)
        target.reset(cuts)
        target.logits(first, [])  # stores what it read in whole passes
        assert target.prefix_cache.lookups == 1  # an empty store is looked in too
        target.reset(cuts)
        reads = []
        hook = target.model.register_forward_pre_hook(
            lambda mod, args, kwargs: reads.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
        try:
            warm = target.logits(second, block)
        finally:
            hook.remove()
        reused = shared if file_end else 2 * C
        assert target.reused == reused and reads == [len(second) - reused + len(block)]
        assert torch.equal(warm, cold)
    finally:
        target.keep_prefixes(0)
        target.reset()
        target.model.to(torch.float32)


@pytest.mark.model
def test_a_warm_up_stores_all_of_a_prompt_start(target):
    from apply_edit.models.transformers_target import PREFILL_CHUNK as C

    with pytest.raises(ValueError, match="keep_prefixes"):
        target.prefill(long_prompt(2 * C))
    target.keep_prefixes(1 << 30)
    try:
        assert target.prefill(long_prompt(C // 2)) == C // 2  # shorter than a chunk: one pass, stored
        per_token = target.prefix_cache.bytes_held // (C // 2)
        assert target.prefill(long_prompt(2 * C + 10)) == 2 * C + 10
        assert target.cached == [] and target.prefix_cache.lookups == 2  # the request's cache is free again
        target.reset(cuts=(2 * C + 10,))  # an apply to the same file: its reading cuts where the file ends
        target.logits(long_prompt(2 * C + 40), [1, 2])
        assert target.reused == 2 * C + 10
        target.reset()  # read without that cut, [2C, 2C + 10) was not a pass of its own: up to there only
        target.logits(long_prompt(2 * C + 40), [1, 2])
        assert target.reused == 2 * C
        target.keep_prefixes(per_token * (C + C // 2))  # too small for the whole start: the passes that fit
        assert target.prefill(long_prompt(2 * C + 10)) == C and target.prefix_cache.bytes_held == per_token * C
    finally:
        target.keep_prefixes(0)
        target.reset()

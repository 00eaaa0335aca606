"""The packed grouped-query attention's mask (`models/attention.py`), without a model."""

from types import SimpleNamespace

import pytest
import torch
from transformers.masking_utils import sdpa_mask

from apply_edit.models.attention import packed_gqa_mask

CONFIG = SimpleNamespace(num_attention_heads=14, num_key_value_heads=2)  # Qwen2.5-0.5B's groups of 7


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("q_len", [1, 9])
def test_the_packed_mask_is_sdpas_own_reading_of_the_boolean_mask_for_every_head_of_a_group(dtype, q_len):
    # A pass of q_len tokens after 11 cached ones: each query sees the cache and the tokens up to its own.
    shape = dict(batch_size=1, q_length=q_len, kv_length=11 + q_len, q_offset=11, kv_offset=0)
    boolean = sdpa_mask(**shape, allow_is_causal_skip=False)
    packed = packed_gqa_mask(**shape, allow_is_causal_skip=False, config=CONFIG, dtype=dtype)
    assert packed.dtype == dtype and packed.shape == (1, 1, 7 * q_len if q_len > 1 else 1, 11 + q_len)
    torch.manual_seed(0)
    query = torch.randn(1, 2, 7 * q_len, 64, dtype=dtype)
    key, value = torch.randn(2, 1, 2, 11 + q_len, 64, dtype=dtype)
    rows = boolean.repeat(1, 1, 7, 1) if q_len > 1 else boolean  # what the attention did per layer before
    attend = torch.nn.functional.scaled_dot_product_attention
    assert torch.equal(attend(query, key, value, attn_mask=packed), attend(query, key, value, attn_mask=rows))


def test_where_sdpa_reads_causality_itself_there_is_no_mask():
    assert packed_gqa_mask(batch_size=1, q_length=9, kv_length=9, config=CONFIG, dtype=torch.float32) is None

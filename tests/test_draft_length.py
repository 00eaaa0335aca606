import json
import random

import pytest

from apply_edit.engine.decoding import Decoding, greedy_decode
from apply_edit.drafting.draft_length import MIN_CAP, AdaptiveK, RegionAdaptiveK, best_k, expected_tokens
from apply_edit.engine.api import CostCurve, Draft
from apply_edit.models.cost import cached_cost, measure_cost
from apply_edit.drafting.proposers import SuffixArrayProposer
from conftest import oracle, random_model

# Shaped like the default model's bf16 curve here: long drafts cost little more than short ones.
FLAT = CostCurve({1000: {0: 0.080, 1: 0.081, 4: 0.096, 16: 0.119, 32: 0.145, 64: 0.172}})
# Shaped like fp32: every drafted token costs real time.
STEEP = CostCurve({1000: {0: 0.10, 1: 0.11, 4: 0.21, 16: 0.27, 32: 0.35, 64: 0.62}})


def test_expected_tokens():
    assert expected_tokens(0.0, 8) == 1.0
    assert expected_tokens(1.0, 8) == 9.0
    assert expected_tokens(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)


def test_cost_curve_interpolates_and_extrapolates():
    assert FLAT(16) == pytest.approx(0.119)
    assert FLAT(24) == pytest.approx((0.119 + 0.145) / 2)
    assert FLAT(96) > FLAT(64)
    assert FLAT(16, context=9000) == FLAT(16)  # one context measured: no slope to follow


# Measured shape (packed GQA, bf16): long drafts grow costly with context, single tokens barely.
BY_CONTEXT = CostCurve({1000: {0: 0.06, 16: 0.09, 64: 0.20}, 6000: {0: 0.07, 16: 0.15, 64: 0.40}})


def test_cost_curve_follows_context_linearly_and_beyond():
    assert BY_CONTEXT(64, context=500) == pytest.approx(0.20)  # flat below the first measured context
    assert BY_CONTEXT(64, context=3500) == pytest.approx(0.30)
    assert BY_CONTEXT(64, context=11000) == pytest.approx(0.60)  # the measured slope, extrapolated
    assert BY_CONTEXT(40, context=6000) == pytest.approx(0.275)
    assert best_k(0.95, BY_CONTEXT, context=12000) < best_k(0.95, BY_CONTEXT, context=1000)


def test_best_k_follows_acceptance_and_cost():
    assert best_k(0.99, FLAT) == 64  # the copy is right: draft long
    assert best_k(0.3, FLAT) <= 4  # inside an edit: draft short
    assert best_k(0.9, STEEP) < best_k(0.9, FLAT)  # costly drafts: shorter
    assert best_k(0.99, FLAT, limit=16) == 16


def test_adaptive_k_shrinks_after_rejections_and_grows_back():
    policy = AdaptiveK(FLAT)
    start = policy.next_k()
    for _ in range(4):
        policy.feedback(Draft([0] * policy.next_k()), 0)
    low = policy.next_k()
    for _ in range(10):
        k = policy.next_k()
        policy.feedback(Draft([0] * k), k)
    assert low < start and policy.next_k() > low


def test_adaptive_policy_keeps_the_engine_exact():
    rng = random.Random(0)
    plain = greedy_decode(random_model(5, 6), [1], 80)

    def sometimes_right(seq, k):
        good = oracle(plain, 1)(seq, k)
        return [t if rng.random() < 0.85 else (t + 1) % 6 for t in good]

    run = Decoding(random_model(5, 6), sometimes_right, [1], 80, k=AdaptiveK(FLAT))
    assert run.run() == plain
    assert run.stats.target_passes < 80


def copied(k: int, source: int | None = None, match: int = 0) -> Draft:
    """A draft of k tokens copied from `source` after `match` tokens of output matched there."""
    return Draft([0] * k, source=source, match=match)


def test_region_policy_keeps_one_estimate_per_region():
    region_of = [0] * 1000 + [1] * 1000 + [2] * 1000  # region 1 is edited
    policy = RegionAdaptiveK(FLAT, region_of, edited=[False, True, False])
    for pos in range(0, 90, 10):  # untouched region 0 copies perfectly: long drafts
        k = policy.next_k()
        policy.feedback(copied(k, pos, 50), k)
    long_k = policy.next_k()
    assert long_k == 64
    policy.feedback(copied(long_k, 1200, 2), 0)  # a miss, realigned in the edited region: its own, more careful estimate
    edited_k = policy.next_k()
    assert edited_k < long_k
    for _ in range(4):
        policy.feedback(copied(policy.next_k()), 0)
    assert policy.next_k() <= 4
    policy.feedback(copied(policy.next_k(), 2500, 50), 0)  # untouched region 2 starts from what untouched code has shown
    assert policy.next_k() == 64


def test_a_long_unbroken_copy_lifts_a_pessimistic_region_estimate():
    policy = RegionAdaptiveK(FLAT, [0] * 5000, edited=[True])
    for _ in range(6):  # misses drive the region's estimate down
        policy.feedback(copied(policy.next_k(), 100, 2), 0)
    assert policy.next_k() <= 4
    match = 2
    for _ in range(8):  # then the copy holds, pass after pass: the run itself is the evidence
        match += 64
        k = policy.next_k()
        policy.feedback(copied(k, 100, match), k)
    assert policy.next_k() == 64


def test_region_policy_caps_drafts_after_a_short_match():
    policy = RegionAdaptiveK(FLAT, [0] * 5000, edited=[False])
    for _ in range(10):  # the copy has been right all along
        policy.feedback(copied(64), 64)
    policy.feedback(copied(2, 10, 1), 2)  # the match behind the next draft: 3 tokens
    assert policy.next_k() == MIN_CAP
    policy.feedback(copied(2, 10, 30), 2)
    assert policy.next_k() == 64



def test_region_policy_keeps_the_engine_exact():
    plain = greedy_decode(random_model(9, 6), [1], 80)
    noisy = [t if i % 7 else (t + 1) % 6 for i, t in enumerate(plain)]
    proposer = SuffixArrayProposer([noisy])
    policy = RegionAdaptiveK(FLAT, [i // 20 for i in range(len(noisy))],
                             edited=[i % 2 == 1 for i in range(5)])
    run = Decoding(random_model(9, 6), proposer, [1], 80, k=policy)
    assert run.run() == plain
    assert run.stats.target_passes < 80


class TimedStub:
    """Just enough of a target for measure_cost: a context limit and a logits() that costs nothing."""

    def __init__(self, max_position_embeddings: int | None = None):
        self.limit = max_position_embeddings

    def context_limit(self):
        return self.limit

    def reset(self, cuts=()):
        pass

    def logits(self, prefix, block):
        pass


def test_measure_cost_covers_the_contexts_the_model_can_hold():
    assert sorted(measure_cost(TimedStub(), repeats=1).points) == [1000, 6000]  # no stated limit
    assert sorted(measure_cost(TimedStub(max_position_embeddings=4096), repeats=1).points) == [1000]
    assert sorted(measure_cost(TimedStub(max_position_embeddings=512), repeats=1).points) == [1000]  # least there is


def test_measure_cost_times_the_reading_of_each_context_as_a_prompt():
    assert sorted(measure_cost(TimedStub(), repeats=1).prefill) == [1000, 6000]


def test_a_prompts_reading_time_is_interpolated_from_the_prompts_measured():
    curve = CostCurve({1000: {0: 0.1}}, prefill={1000: 7.0, 6000: 47.0})
    assert curve.read_seconds(500) == pytest.approx(3.5)
    assert curve.read_seconds(3500) == pytest.approx(27.0)
    assert curve.read_seconds(11000) == pytest.approx(87.0)  # beyond: the last slope
    assert CostCurve({1000: {0: 0.1}}).read_seconds(5000) == 0.0  # not measured: nothing is known


def test_a_cost_file_without_prompt_reading_times_is_measured_again(tmp_path):
    kept = tmp_path / "cost.json"
    kept.write_text(json.dumps({"1000": {"0": 0.1, "64": 0.9}}))  # as written before reading times were kept
    curve = cached_cost(TimedStub(), kept)
    assert sorted(curve.prefill) == [1000, 6000]
    assert cached_cost(TimedStub(), kept) == curve  # now read back as measured

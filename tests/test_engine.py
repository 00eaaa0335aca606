"""The engine is exact: speculative output equals plain decoding for any proposer, and sampled
speculation keeps the target's distribution."""

import itertools
import math
import random

import pytest
import torch
from hypothesis import given, settings, strategies as st

from apply_edit.engine.decoding import Decoding, greedy_decode, sample_decode, speculative_greedy, speculative_sample
from apply_edit.engine.api import Draft, no_draft
from apply_edit.engine.sampling import Sampling
from apply_edit.models import FunctionModel
from apply_edit.drafting.proposers import draft_model_proposer
from conftest import oracle, random_model


proposer_kinds = st.sampled_from(["random", "oracle", "corrupted-oracle", "too-long", "empty", "repeat"])


def make_proposer(kind, rng, vocab, plain, prompt_len):
    if kind == "random":
        return lambda seq, k: [rng.randrange(vocab) for _ in range(rng.randint(0, k))]
    if kind == "oracle":
        return oracle(plain, prompt_len)
    if kind == "corrupted-oracle":
        good = oracle(plain, prompt_len)
        return lambda seq, k: [t if rng.random() < 0.8 else rng.randrange(vocab) for t in good(seq, k)]
    if kind == "too-long":  # returns more than asked: the engine must cut it to k
        return lambda seq, k: [rng.randrange(vocab) for _ in range(k + 3)]
    if kind == "repeat":  # copies the last tokens, like a lookup drafter stuck in a loop
        return lambda seq, k: list(seq[-k:]) if k else []
    return no_draft


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), vocab=st.integers(2, 9), k=st.integers(0, 9), max_new=st.integers(0, 30),
       kind=proposer_kinds, use_eos=st.booleans(), prompt=st.lists(st.integers(0, 1), min_size=1, max_size=4))
def test_speculative_greedy_equals_plain_greedy(seed, vocab, k, max_new, kind, use_eos, prompt):
    eos = 0 if use_eos else None
    plain_model = random_model(seed, vocab)
    plain = greedy_decode(plain_model, prompt, max_new, eos=eos)
    assert len(plain) <= max_new
    assert plain_model.calls == len(plain)  # plain decoding: one pass per token

    spec_model = random_model(seed, vocab)
    proposer = make_proposer(kind, random.Random(seed), vocab, plain, len(prompt))
    assert speculative_greedy(spec_model, proposer, prompt, max_new, k=k, eos=eos) == plain
    assert spec_model.calls <= max(len(plain), 0)
    if use_eos and plain and 0 in plain:
        assert plain.index(0) == len(plain) - 1  # eos ends generation and is the last token


def test_oracle_proposer_needs_few_passes():
    plain_model, spec_model = random_model(7, 5), random_model(7, 5)
    plain = greedy_decode(plain_model, [1], 40)
    out = speculative_greedy(spec_model, oracle(plain, 1), [1], 40, k=8)
    assert out == plain
    assert spec_model.calls == math.ceil(40 / 9)  # k drafted + 1 bonus per pass


def test_stop_callback_cuts_inside_a_block():
    model = random_model(3, 4)
    plain = greedy_decode(random_model(3, 4), [0], 20)
    cut_at = 7
    run = Decoding(model, oracle(plain, 1), [0], 20, k=10, stop=lambda toks: cut_at if len(toks) >= cut_at else None)
    assert run.run() == plain[:cut_at]
    assert run.stats.new_tokens == cut_at


def test_stats_count_blocks_and_tokens():
    model = random_model(11, 6)
    plain = greedy_decode(random_model(11, 6), [2], 25)
    run = Decoding(model, oracle(plain, 1), [2], 25, k=4)
    blocks = list(run)
    assert sum(blocks, []) == plain == run.tokens
    s = run.stats
    assert s.target_passes == len(s.blocks) == len(blocks) == model.calls
    assert s.new_tokens == 25 and s.accepted_tokens == s.drafted_tokens
    assert s.tokens_per_pass == pytest.approx(25 / s.target_passes)
    assert 0 < s.ttft_s <= s.total_s


def test_draft_model_proposer_is_greedy_from_the_draft():
    draft = random_model(5, 4)
    out = draft_model_proposer(draft)([1, 2], 3)
    assert out == greedy_decode(random_model(5, 4), [1, 2], 3)
    assert draft.calls == 3


def test_score_block_is_one_pass_with_len_plus_one_rows():
    model = random_model(1, 3)
    rows = model.score_block([0, 1], [2, 0])
    assert model.calls == 1 and len(rows) == 3
    assert rows[1] == model.next_dist([0, 1, 2])


# --- Sampling: the speculative output distribution is the target's. ---


def exact_distribution(model_fn, prompt, length, sampling):
    """P(sequence) under plain sampling from the warped target, by enumeration."""
    vocab = len(model_fn(list(prompt)))
    dist = {}
    for seq in itertools.product(range(vocab), repeat=length):
        p, ctx = 1.0, list(prompt)
        for tok in seq:
            row = sampling.probs(torch.log(torch.tensor(model_fn(ctx), dtype=torch.float64)))
            p *= float(row[tok])
            ctx.append(tok)
        dist[seq] = p
    return dist


def chi_square_ok(counts, dist, n):
    """Pearson chi-square against the exact distribution at a 0.1% false-alarm level."""
    cells = [(counts.get(s, 0), p * n) for s, p in dist.items() if p * n >= 5]
    stat = sum((o - e) ** 2 / e for o, e in cells)
    df = len(cells) - 1
    z = 3.09  # one-sided 0.999 quantile of the normal; Wilson–Hilferty approximation of chi-square
    critical = df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3
    return stat, critical


@pytest.mark.parametrize("drafter", ["draft-model", "copy", "wrong-copy"])
@pytest.mark.parametrize("sampling", [Sampling(temperature=1.0), Sampling(temperature=0.7, top_p=0.8)])
def test_speculative_sampling_matches_target_distribution(drafter, sampling):
    vocab, length, n, k = 3, 3, 6000, 3
    target_fn = random_model(21, vocab, sharp=2.0).fn
    draft_fn = random_model(99, vocab).fn
    prompt = [0]
    rng = random.Random(1234)
    counts = {}
    for _ in range(n):
        target = FunctionModel(target_fn)
        if drafter == "draft-model":
            out = speculative_sample(target, FunctionModel(draft_fn), prompt, length, k, rng,
                                     temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            # A copy drafter proposes deterministically (point mass q): right or wrong, the output
            # distribution must not move.
            fixed = [1, 1, 2] if drafter == "copy" else [2, 0, 0]
            proposer = lambda seq, kk: fixed[len(seq) - 1:][:kk]
            out = Decoding(target, proposer, prompt, length, k=k, sampling=sampling, rng=rng).run()
        counts[tuple(out)] = counts.get(tuple(out), 0) + 1
    dist = exact_distribution(target_fn, prompt, length, sampling)
    stat, critical = chi_square_ok(counts, dist, n)
    assert stat < critical, (stat, critical)


def test_plain_sampling_is_reproducible_by_seed():
    model = random_model(4, 5)
    a = sample_decode(model, [1], 20, random.Random(9))
    b = sample_decode(model, [1], 20, random.Random(9))
    assert a == b and len(a) == 20


def test_draft_probabilities_are_used_for_acceptance():
    # q = p exactly: every sampled draft token must be accepted (ratio p/q = 1).
    model = random_model(8, 4)

    class SameAsTarget:
        def draft(self, seq, k):
            probs = torch.tensor(model.fn(list(seq)), dtype=torch.float64)
            return Draft([int(probs.argmax())], probs.unsqueeze(0))

    run = Decoding(model, SameAsTarget(), [0], 30, k=1, sampling=Sampling(temperature=1.0), rng=random.Random(0))
    run.run()
    assert run.stats.accepted_tokens == run.stats.drafted_tokens


def test_typical_acceptance_accepts_likely_drafts_and_is_off_by_default():
    # Sharp model: the argmax carries most mass, the runner-up some. A drafter that always proposes the
    # runner-up is rejected by exact decoding and accepted by typical acceptance at a low threshold.
    plain = greedy_decode(random_model(4, 5, sharp=3.0), [1], 30)

    def runner_up(seq, k):
        out, seq = [], list(seq)
        for _ in range(k):
            dist = random_model(4, 5, sharp=3.0).next_dist(seq)
            tok = sorted(range(5), key=dist.__getitem__)[-2]
            out.append(tok)
            seq.append(tok)
        return out

    exact = Decoding(random_model(4, 5, sharp=3.0), runner_up, [1], 30, k=4)
    assert exact.run() == plain and exact.stats.accepted_tokens == 0
    loose = Decoding(random_model(4, 5, sharp=3.0), runner_up, [1], 30, k=4, typical_threshold=0.01)
    assert loose.run() != plain and loose.stats.accepted_tokens > 0
    strict = Decoding(random_model(4, 5, sharp=3.0), runner_up, [1], 30, k=4, typical_threshold=1.0)
    assert strict.run() == plain
    with pytest.raises(ValueError):
        Decoding(random_model(4, 5), runner_up, [1], 30, sampling=Sampling(temperature=1.0), typical_threshold=0.5)

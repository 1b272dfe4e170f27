"""The debugging checks (minitransformer.checks.debugging): the faulty function of each exercise fails its check
with the message that describes the fault, the usual half-fixes fail with theirs, and the fixed function passes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from minitransformer.checks import debugging as D
from minitransformer.checks import (check_fault, check_fixed_attention, check_fixed_bleu, check_fixed_encoder_layer,
                                    check_fixed_lm_loss, check_fixed_multi_head, check_fixed_paired_interval,
                                    check_fixed_positional_encoding, check_fixed_skipgram_step,
                                    check_fixed_smoothed_loss, check_fixed_teacher_forcing)


# The fixed functions, as a learner writes them in the exercises (the worked solutions hold the same code).

def skipgram_fixed(W, C, centre, context):
    n = centre.numel()
    scores = W[centre] @ C.T
    p = torch.softmax(scores, dim=-1)
    loss = -torch.log(p[torch.arange(n), context]).mean()
    d_scores = (p - F.one_hot(context, C.size(0))) / n
    grad_C = d_scores.T @ W[centre]
    grad_W = torch.zeros_like(W).index_add_(0, centre, d_scores @ C)
    return loss, grad_W, grad_C


def skipgram_overwrites(W, C, centre, context):
    loss, _, grad_C = skipgram_fixed(W, C, centre, context)
    n = centre.numel()
    d_scores = (torch.softmax(W[centre] @ C.T, dim=-1) - F.one_hot(context, C.size(0))) / n
    grad_W = torch.zeros_like(W)
    grad_W[centre] = d_scores @ C
    return loss, grad_W, grad_C


def pe_fixed(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    div = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position / div)
    pe[:, 1::2] = torch.cos(position / div)
    return pe


def pe_swapped(max_len, d_model):
    pe = pe_fixed(max_len, d_model)
    return torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).reshape(max_len, d_model)


def attention_fixed(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def attention_renormalised(query, key, value, mask=None):  # a right fix too: renormalise after zeroing
    _, weights = D._faulty_attention(query, key, value, mask)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights @ value, weights


def attention_over_queries(query, key, value, mask=None):
    weights = D._attention(query, key, value, mask, dim=-2)
    return weights @ value, weights


def multi_head_fixed(mha, query, key, value, mask=None):
    B, Tq, D_ = query.shape
    H, d_k = mha.n_heads, mha.d_k
    q = mha.w_q(query).view(B, Tq, H, d_k).transpose(1, 2)
    k = mha.w_k(key).view(B, key.size(1), H, d_k).transpose(1, 2)
    v = mha.w_v(value).view(B, value.size(1), H, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return mha.w_o(out.transpose(1, 2).reshape(B, Tq, D_))


def multi_head_calls_the_package(mha, query, key, value, mask=None):
    return mha(query, key, value, mask)[0]


def encoder_fixed(layer, x, mask=None):
    x = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
    return layer.norm2(x + layer.feed_forward(x))


def teacher_forcing_fixed(model, src, tgt_in, pad_id):
    src_mask = (src != pad_id)[:, None, None, :]
    size = tgt_in.size(1)
    causal = torch.ones(size, size, dtype=torch.bool).tril()[None, None]
    tgt_mask = (tgt_in != pad_id)[:, None, None, :] & causal
    memory = model.encode(src, src_mask)
    return model.generator(model.decode(tgt_in, memory, src_mask, tgt_mask))


def teacher_forcing_calls_the_model(model, src, tgt_in, pad_id):
    return model(src, tgt_in)


def smoothed_fixed(logits, target, epsilon, pad_id):
    V = logits.size(-1)
    log_probs = torch.log_softmax(logits, dim=-1)
    q = torch.full_like(log_probs, epsilon / (V - 2))
    q[..., pad_id] = 0.0
    q = q.scatter(-1, target[..., None], 1.0 - epsilon)
    loss = -(q * log_probs).sum(-1)
    return loss[target != pad_id].mean()


def bleu_fixed(hyps, refs):
    return D._bleu(hyps, refs)


def lm_loss_fixed(logits, tokens, pad_id):
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1), ignore_index=pad_id)


def interval_fixed(variant, baseline):
    from scipy import stats

    n = len(variant)
    diffs = [v - b for v, b in zip(variant, baseline)]
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


CASES = [  # check, faulty, fixed, words of the faulty function's message
    (check_fixed_skipgram_step, D._faulty_skipgram_step, skipgram_fixed, "holds one pair's contribution"),
    (check_fixed_positional_encoding, D._faulty_positional_encoding, pe_fixed, "do not form a pair"),
    (check_fixed_attention, D._faulty_attention, attention_fixed, "hidden keys get 0, but row"),
    (check_fixed_multi_head, D._faulty_multi_head, multi_head_fixed, "output at position 0 changes"),
    (check_fixed_encoder_layer, D._faulty_encoder_layer, encoder_fixed, "a post-LN layer ends with a LayerNorm"),
    (check_fixed_teacher_forcing, D._faulty_teacher_forcing, teacher_forcing_fixed, "depend on the target tokens after"),
    (check_fixed_smoothed_loss, D._faulty_smoothed_loss, smoothed_fixed, "probability on <pad>"),
    (check_fixed_bleu, D._faulty_bleu, bleu_fixed, "gains them (above 100!)"),
    (check_fixed_lm_loss, D._faulty_lm_loss, lm_loss_fixed, "a token it can read"),
    (check_fixed_paired_interval, D._faulty_paired_interval, interval_fixed, "which the pairing cancels"),
]


@pytest.mark.parametrize("check, faulty, fixed, words", CASES, ids=[c[0].__name__ for c in CASES])
def test_the_faulty_function_fails_and_the_fixed_one_passes(check, faulty, fixed, words, capsys):
    with pytest.raises(AssertionError, match="the same .*as the given function's") as err:
        check(faulty, task=9)
    assert words in str(err.value)
    check(fixed, task=9)
    assert "✓ Task 9 passed" in capsys.readouterr().out


@pytest.mark.parametrize("check, wrong, words", [
    (check_fixed_skipgram_step, skipgram_overwrites, "and so does `grad_W[centre] = rows`"),
    (check_fixed_positional_encoding, pe_swapped, "column 2i holds the sine"),
    (check_fixed_attention, attention_over_queries, "Your columns sum to 1"),
    (check_fixed_multi_head, lambda mha, q, k, v, m=None: D._mha(mha, q, k, v, m, fixed="q"), "fix all three"),
    (check_fixed_multi_head, multi_head_calls_the_package, "your code calls minitransformer's MultiHeadAttention"),
    (check_fixed_encoder_layer, lambda layer, x, m=None: D._encoder(layer, x, m, order="both"), "normalises only the sum"),
    (check_fixed_encoder_layer, lambda layer, x, m=None: D._encoder(layer, x, m, order="first-only"), "still pre-LN"),
    (check_fixed_teacher_forcing, teacher_forcing_calls_the_model, "your code calls minitransformer's Transformer"),
    (check_fixed_teacher_forcing, lambda model, s, t, p: D._teacher_forced(model, s, t, p, None), "no causal mask"),
    (check_fixed_smoothed_loss, lambda lg, t, e, p: D._smoothed(lg, t, e, p, share=1, pad_mass=False), "V - 2 tokens"),
    (check_fixed_bleu, lambda h, r: D._bleu(h, r, penalty="long"), "short hypotheses unpenalised"),
    (check_fixed_bleu, lambda h, r: D._bleu(h, r, penalty="none"), "short hypotheses unpenalised"),
    (check_fixed_bleu, lambda h, r: D._bleu(h, r, penalty="always"), "only when the hypotheses are shorter"),
    (check_fixed_lm_loss, lambda lg, t, p: D._lm_loss(lg, t, p, shift="wrong-way"), "shifted the wrong way"),
    (check_fixed_lm_loss, lambda lg, t, p: D._lm_loss(lg, t, p, ignore=False), "padding targets count"),
    (check_fixed_paired_interval, lambda v, b: D._interval(v, b, quantile="z"), "not the normal 1.96"),
    (check_fixed_paired_interval, lambda v, b: D._interval(v, b, ddof=0), "divides by n - 1"),
])
def test_a_half_fix_is_named(check, wrong, words):
    with pytest.raises(AssertionError) as err:
        check(wrong, task=9)
    assert words in str(err.value)


def test_a_trivial_edit_does_not_pass():
    with pytest.raises(AssertionError):
        check_fixed_attention(lambda q, k, v, m=None: (torch.zeros(*q.shape[:-1], v.size(-1)),
                                                       torch.zeros(*q.shape[:-1], k.size(-2))), task=9)
    with pytest.raises(AssertionError):
        check_fixed_paired_interval(lambda v, b: (0.0, 0.0, 0.0), task=9)


def test_the_renormalised_attention_is_a_right_fix_too():
    check_fixed_attention(attention_renormalised, task=9)


def test_an_unwritten_fix_raises_not_implemented():
    def stub(*args):
        raise NotImplementedError("Task 9: the fixed function")

    for check, *_ in CASES:
        with pytest.raises(NotImplementedError):
            check(stub, task=9)


@pytest.mark.parametrize("key", sorted(D.FAULTS))
def test_naming_the_fault(key, capsys):
    fault = D.FAULTS[key]
    check_fault(key, fault.correct.lower(), task=9)
    assert "✓ Task 9 passed" in capsys.readouterr().out
    for letter in "ABCD":
        if letter != fault.correct:
            with pytest.raises(AssertionError, match="not yet") as err:
                check_fault(key, letter, task=9)
            assert f'"{fault.correct}"' not in str(err.value) and f"'{fault.correct}'" not in str(err.value)
    with pytest.raises(AssertionError, match="set `fault`"):
        check_fault(key, None, task=9)
    with pytest.raises(AssertionError, match="one letter"):
        check_fault(key, "AB", task=9)

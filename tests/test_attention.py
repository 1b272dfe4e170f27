import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from minitransformer import (KVCache, MultiHeadAttention, make_causal_mask, make_padding_mask, mha_to_torch,
                             scaled_dot_product_attention, to_torch_nn_mask)

TOL = dict(atol=1e-5, rtol=1e-5)


def test_explicit_attention_equals_pytorch_sdpa_with_and_without_mask():
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL)
    assert_close(weights.sum(-1), torch.ones(2, 3, 5), **TOL)
    mask = make_padding_mask(torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0, 0]]), 0)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL)


def test_masked_keys_get_exactly_zero_weight():
    q = torch.randn(2, 4, 6, 8)
    tokens = torch.tensor([[3, 4, 5, 0, 0, 0], [3, 4, 5, 6, 7, 0]])
    mask = make_padding_mask(tokens, 0) & make_causal_mask(6)
    _, weights = scaled_dot_product_attention(q, q, q, mask)
    assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0)
    assert_close(weights.sum(-1), torch.ones(2, 4, 6), **TOL)


def test_fully_masked_query_gets_zeros_not_nan():
    q = torch.randn(1, 1, 2, 4)
    mask = torch.tensor([[True, False], [False, False]])
    _, weights = scaled_dot_product_attention(q, q, q, mask)
    assert not torch.isnan(weights).any()
    assert weights[0, 0, 1].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("use_mask", [False, True])
def test_multi_head_attention_equals_torch_nn(use_mask):
    mha = MultiHeadAttention(d_model=32, n_heads=4).eval()
    theirs = mha_to_torch(mha).eval()
    x, memory = torch.randn(3, 5, 32), torch.randn(3, 7, 32)
    src = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5])
    pad = make_padding_mask(src, 0) if use_mask else None
    ours, our_weights = mha(x, memory, memory, mask=pad, need_weights=True)
    ref, ref_weights = theirs(x, memory, memory, key_padding_mask=to_torch_nn_mask(pad) if use_mask else None,
                              need_weights=True, average_attn_weights=False)
    assert_close(ours, ref, **TOL)
    assert_close(our_weights, ref_weights, **TOL)
    # Self-attention with a causal mask as well.
    causal = make_causal_mask(5)
    ours, _ = mha(x, x, x, mask=causal)
    ref, _ = theirs(x, x, x, attn_mask=to_torch_nn_mask(causal), need_weights=False)
    assert_close(ours, ref, **TOL)


def test_fused_and_explicit_paths_agree():
    mha = MultiHeadAttention(d_model=16, n_heads=2).eval()
    x = torch.randn(2, 6, 16)
    mask = make_padding_mask(torch.tensor([[1, 1, 1, 1, 0, 0], [1] * 6]), 0) & make_causal_mask(6)
    fused, none = mha(x, x, x, mask)
    explicit, weights = mha(x, x, x, mask, need_weights=True)
    assert none is None and weights.shape == (2, 2, 6, 6)
    assert_close(fused, explicit, **TOL)


def test_attention_errors_name_the_shapes():
    mha = MultiHeadAttention(d_model=16, n_heads=2)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match=r"mask has shape \(2, 7\) but the scores are \(2, 2, 5, 5\)"):
        mha(x, x, x, mask=torch.ones(2, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match="d_model=10 and n_heads=4"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="same last dimension d_k"):
        scaled_dot_product_attention(torch.randn(1, 2, 4), torch.randn(1, 2, 3), torch.randn(1, 2, 3))


def test_batch_equal_to_heads_with_a_3d_mask_is_refused_not_misapplied():
    # The case of issue 12: B == n_heads == 8 and a (B, 1, S) mask from another tutorial.
    mha = MultiHeadAttention(d_model=32, n_heads=8).eval()
    x = torch.randn(8, 10, 32)
    lengths = torch.arange(3, 11)  # (B,): sentence b has 3 + b real tokens
    keep = torch.arange(10)[None, :] < lengths[:, None]  # (B, S)
    for need_weights in (False, True):
        with pytest.raises(ValueError, match=r"mask has shape \(8, 1, 10\).*use mask\[:, None\]"):
            mha(x, x, x, mask=keep[:, None, :], need_weights=need_weights)
    out, weights = mha(x, x, x, mask=keep[:, None, None, :], need_weights=True)
    for b in range(8):  # each sentence's own padding, in every head
        assert torch.all(weights[b, :, :, lengths[b]:] == 0)


def test_non_finite_inputs_are_not_checked_and_spread_as_documented():
    # Documented: no check (it would cost a synchronisation per call); NaN reaches the output,
    # even from a masked key, because its weight 0 times NaN is NaN.
    q = torch.randn(1, 1, 2, 4)
    v = torch.randn(1, 1, 3, 4)
    v[0, 0, 2] = float("nan")
    mask = torch.tensor([True, True, False])[None, :].expand(2, 3)  # (Tq, Tk): key 2 hidden
    out, weights = scaled_dot_product_attention(q, torch.randn(1, 1, 3, 4), v, mask)
    assert torch.all(weights[..., 2] == 0)
    assert torch.isnan(out).all()


def test_the_layer_checks_what_only_it_can_see():
    # The mask against its scores, cached keys included, and the dtype of its weights; the rest is the model's job.
    mha = MultiHeadAttention(d_model=8, n_heads=2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"mask has shape \(3, 3, 3\)"):
        mha(x, x, x, torch.ones(3, 3, 3, dtype=torch.bool))  # 3-D
    with pytest.raises(TypeError, match=r"key has dtype torch.float64 but the layer's weights are torch.float32"):
        mha(x, x.double(), x)
    with pytest.raises(TypeError, match="value must be a floating-point tensor"):
        mha(x, x, x.long())
    cache = KVCache()
    mha(x, x, x, cache=cache)
    with pytest.raises(ValueError, match=r"scores are \(2, 2, 1, 4\)"):
        mha(x[:, :1], x[:, :1], x[:, :1], torch.ones(1, 1, dtype=torch.bool), cache=cache)  # 3 cached keys + 1 new

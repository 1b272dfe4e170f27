import pytest
import torch
from torch import nn
from torch.testing import assert_close

from minitransformer import (DecoderLayer, EncoderLayer, LayerNorm, PositionwiseFeedForward, decoder_layer_to_torch,
                             encoder_layer_to_torch, make_causal_mask, make_padding_mask, to_torch_nn_mask)

TOL = dict(atol=1e-5, rtol=1e-5)


def _randomize(module: nn.Module) -> None:
    # Non-trivial LayerNorm gains and biases so that copying them is really tested.
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if p.dim() == 1 and p.numel() > 0 else 0.0))


def test_layer_norm_equals_torch():
    ours, theirs = LayerNorm(12), nn.LayerNorm(12)
    _randomize(ours)
    theirs.load_state_dict(ours.state_dict())
    for shape in [(1, 12), (4, 3, 12), (2, 5, 7, 12)]:
        x = torch.randn(shape) * 3 + 1
        assert_close(ours(x), theirs(x), **TOL)


def test_layer_norm_computes_the_formula_of_lesson_05():
    # The module calls the fused F.layer_norm; the lesson derives it by hand, as here.
    norm = LayerNorm(12, eps=1e-5)
    _randomize(norm)
    x = torch.randn(4, 3, 12, dtype=torch.float64) * 3 + 1
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # biased, as in the paper by Ba et al.
    by_hand = (x - mean) / torch.sqrt(var + 1e-5) * norm.weight.double() + norm.bias.double()
    assert_close(norm.double()(x), by_hand, atol=1e-6, rtol=1e-6)
    assert_close(norm.float()(x.float()), by_hand.float(), atol=1e-6, rtol=1e-6)


def test_feed_forward_is_position_wise():
    ff = PositionwiseFeedForward(8, 32, dropout=0.0)
    x = torch.randn(2, 5, 8)
    out = ff(x)
    assert out.shape == (2, 5, 8)
    assert_close(out[:, 3], ff(x[:, 3:4])[:, 0], **TOL)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch(norm_first):
    layer = EncoderLayer(32, 4, 64, dropout=0.0, norm_first=norm_first).eval()
    _randomize(layer)
    theirs = encoder_layer_to_torch(layer).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 0], [5, 6, 7, 0, 0, 0]])
    x = torch.randn(2, 6, 32)
    pad = make_padding_mask(src, 0)
    assert_close(layer(x, pad), theirs(x, src_key_padding_mask=to_torch_nn_mask(pad)), **TOL)
    assert_close(layer(x), theirs(x), **TOL)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch(norm_first):
    layer = DecoderLayer(32, 4, 64, dropout=0.0, norm_first=norm_first).eval()
    _randomize(layer)
    theirs = decoder_layer_to_torch(layer).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 0, 0], [5, 6, 7, 0, 0, 0, 0]])
    tgt = torch.tensor([[1, 4, 4, 4, 0], [1, 4, 4, 4, 4]])
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    src_mask, tgt_pad, causal = make_padding_mask(src, 0), make_padding_mask(tgt, 0), make_causal_mask(5)
    ours = layer(x, memory, src_mask=src_mask, tgt_mask=tgt_pad & causal)
    ref = theirs(x, memory, tgt_mask=to_torch_nn_mask(causal), tgt_key_padding_mask=to_torch_nn_mask(tgt_pad),
                 memory_key_padding_mask=to_torch_nn_mask(src_mask))
    assert_close(ours, ref, **TOL)


def test_dropout_is_active_only_in_training():
    layer = EncoderLayer(16, 2, 32, dropout=0.5)
    x = torch.randn(2, 4, 16)
    layer.train()
    assert not torch.allclose(layer(x), layer(x))
    layer.eval()
    assert_close(layer(x), layer(x))


def test_need_weights_returns_the_same_output_and_the_weights():
    enc, dec = EncoderLayer(16, 2, 32, dropout=0.0).eval(), DecoderLayer(16, 2, 32, dropout=0.0).eval()
    x, memory, causal = torch.randn(2, 5, 16), torch.randn(2, 7, 16), make_causal_mask(5)
    out, weights = enc(x, causal, need_weights=True)
    assert_close(out, enc(x, causal), **TOL)
    assert weights.shape == (2, 2, 5, 5) and torch.all(weights[..., 0, 1:] == 0)  # the first query sees itself only
    out, self_weights, cross_weights = dec(x, memory, tgt_mask=causal, need_weights=True)
    assert_close(out, dec(x, memory, tgt_mask=causal), **TOL)
    assert self_weights.shape == (2, 2, 5, 5) and cross_weights.shape == (2, 2, 5, 7)

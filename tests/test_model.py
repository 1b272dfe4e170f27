import pytest
import torch
from torch.testing import assert_close

from minitransformer import Transformer, TransformerConfig, make_padding_mask

TOL = dict(atol=1e-5, rtol=1e-5)


def _model(**overrides) -> Transformer:
    config = TransformerConfig.tiny(30, d_model=32, n_heads=4, d_ff=64, dropout=0.0, **overrides)
    return Transformer(config).eval()


def test_forward_shapes_and_weight_tying():
    model = _model()
    src, tgt = torch.randint(3, 30, (2, 7)), torch.randint(3, 30, (2, 5))
    assert model(src, tgt).shape == (2, 5, 30)
    assert model.encode(src).shape == (2, 7, 32)
    assert model.generator.weight.data_ptr() == model.src_embed.weight.data_ptr()


def test_xavier_initialization():
    model = _model(tie_embeddings=False)
    w = model.encoder.layers[0].feed_forward.linear1.weight  # (d_ff, d_model)
    bound = (6 / (w.size(0) + w.size(1))) ** 0.5
    assert w.abs().max() <= bound and w.abs().max() > 0.8 * bound
    assert torch.all(model.encoder.layers[0].feed_forward.linear1.bias == 0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_future_target_tokens_do_not_change_earlier_outputs(norm_first):
    model = _model(norm_first=norm_first)
    src = torch.randint(3, 30, (2, 6))
    tgt = torch.randint(3, 30, (2, 8))
    changed = tgt.clone()
    t = 4
    changed[:, t + 1:] = torch.randint(3, 30, (2, 8 - t - 1))
    a, b = model(src, tgt), model(src, changed)
    assert_close(a[:, :t + 1], b[:, :t + 1], **TOL)
    assert not torch.allclose(a[:, t + 1:], b[:, t + 1:])


def test_content_under_padding_changes_nothing():
    model = _model()
    src = torch.tensor([[5, 6, 7, 0, 0], [8, 9, 10, 11, 0]])
    tgt = torch.randint(3, 30, (2, 4))
    mask = make_padding_mask(src, 0)
    scrambled = src.clone()
    scrambled[src == 0] = torch.randint(3, 30, (int((src == 0).sum()),))
    # Same mask, different (hidden) tokens under the padding: every output is unchanged.
    assert_close(model(src, tgt, src_mask=mask), model(scrambled, tgt, src_mask=mask), **TOL)


def test_final_norm_only_with_pre_ln():
    assert _model().encoder.norm is None and _model().decoder.norm is None
    pre = _model(norm_first=True)
    assert pre.encoder.norm is not None and pre.decoder.norm is not None


def test_attention_maps_shapes():
    model = _model()
    maps = model.attention_maps(torch.randint(3, 30, (2, 7)), torch.randint(3, 30, (2, 5)))
    assert [m.shape for m in maps["encoder"]] == [(2, 4, 7, 7)] * 2
    assert [m.shape for m in maps["decoder_self"]] == [(2, 4, 5, 5)] * 2
    assert [m.shape for m in maps["cross"]] == [(2, 4, 5, 7)] * 2


def test_bad_input_is_explained():
    model = _model()
    with pytest.raises(ValueError, match=r"src must be token ids of shape \(B, S\), got shape \(7,\)"):
        model.encode(torch.randint(3, 30, (7,)))
    with pytest.raises(TypeError, match="integer tensor of token ids, got dtype torch.float32"):
        model(torch.rand(2, 3), torch.randint(3, 30, (2, 3)))
    with pytest.raises(ValueError, match="same batch size, got 2 and 3"):
        model(torch.randint(3, 30, (2, 4)), torch.randint(3, 30, (3, 4)))
    with pytest.raises(ValueError, match="longer than max_len=512"):
        model(torch.randint(3, 30, (1, 513)), torch.randint(3, 30, (1, 4)))
    with pytest.raises(TypeError, match="config must be a TransformerConfig"):
        Transformer({"d_model": 4})  # type: ignore[arg-type]

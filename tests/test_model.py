import pytest
import torch
from torch.testing import assert_close

from minitransformer import DecoderCache, Transformer, TransformerConfig, make_padding_mask

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


def test_memory_mask_defaults_to_the_source_padding_mask():
    model = _model()
    src = torch.tensor([[5, 6, 7, 0, 0], [8, 9, 10, 11, 0]])
    tgt = torch.randint(3, 30, (2, 4))
    per_query = make_padding_mask(src, 0).expand(2, 1, 4, 5)  # (B, 1, T, S): the same row for every query
    assert_close(model(src, tgt, memory_mask=per_query), model(src, tgt), **TOL)
    per_head = make_padding_mask(src, 0).expand(2, 4, 4, 5)  # (B, H, T, S)
    assert_close(model(src, tgt, memory_mask=per_head), model(src, tgt), **TOL)


@pytest.mark.parametrize("norm_first", [False, True])
def test_per_query_memory_mask_hides_what_each_query_may_not_read(norm_first):
    model = _model(norm_first=norm_first)
    src, tgt = torch.randint(3, 30, (2, 5)), torch.randint(3, 30, (2, 4))
    memory = model.encode(src)  # (B, S, D)
    # Target position t may read source positions 0..t only: a (B, 1, T, S) mask, one row per query.
    memory_mask = torch.ones(4, 5, dtype=torch.bool).tril()[None, None].expand(2, 1, 4, 5)
    changed = memory.clone()
    changed[:, 2:] = torch.randn(2, 3, 32)  # positions 0 and 1 kept
    a = model.decode(tgt, memory, memory_mask=memory_mask)
    b = model.decode(tgt, changed, memory_mask=memory_mask)
    assert_close(a[:, :2], b[:, :2], **TOL)  # queries 0 and 1 never read positions >= 2
    assert not torch.allclose(a[:, 2:], b[:, 2:])
    # forward uses it for cross-attention and src_mask (default: padding) for the encoder.
    logits = model(src, tgt, memory_mask=memory_mask)
    assert_close(logits, model.generator(a), **TOL)


def test_per_query_source_mask_needs_a_memory_mask():
    model = _model()
    src, tgt = torch.randint(3, 30, (2, 5)), torch.randint(3, 30, (2, 4))
    src_mask = torch.ones(2, 1, 5, 5, dtype=torch.bool)  # (B, 1, S, S): one row per source position
    with pytest.raises(ValueError, match=r"src_mask has shape \(2, 1, 5, 5\), one row per source position.*memory_mask"):
        model(src, tgt, src_mask=src_mask)
    memory_mask = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    assert_close(model(src, tgt, src_mask=src_mask, memory_mask=memory_mask), model(src, tgt), **TOL)
    with pytest.raises(ValueError, match="either src_mask .* or memory_mask"):
        model.decode(tgt, model.encode(src), src_mask=make_padding_mask(src, 0), memory_mask=memory_mask)


def test_masks_of_the_model_are_named_in_errors():
    model = _model()  # n_heads = 4
    src, tgt = torch.randint(3, 30, (4, 6)), torch.randint(3, 30, (4, 3))
    with pytest.raises(ValueError, match=r"src_mask has shape \(4, 1, 6\).*use mask\[:, None\]"):
        model(src, tgt, src_mask=torch.ones(4, 1, 6, dtype=torch.bool))  # B == n_heads
    with pytest.raises(ValueError, match=r"tgt_mask has shape \(4, 1, 3, 4\).*covers 4 keys but there are Tk = 3"):
        model(src, tgt, tgt_mask=torch.ones(4, 1, 3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"memory_mask has shape \(4, 1, 3, 5\).*covers 5 keys but there are Tk = 6"):
        model(src, tgt, memory_mask=torch.ones(4, 1, 3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"memory is for 4 sentences but tgt has B = 2"):
        model.decode(tgt[:2], model.encode(src))


def test_decode_checks_the_memory_it_is_given_once_for_all_layers():
    from minitransformer import Transformer, TransformerConfig

    model = Transformer(TransformerConfig.tiny(20))
    tgt = torch.tensor([[1, 5, 6]])
    memory = model.encode(torch.tensor([[4, 5, 2]]))
    with pytest.raises(TypeError, match="memory must be the encoder's output.*float32.*float64"):
        model.decode(tgt, memory.double())  # float64 memory for float32 weights
    with pytest.raises(TypeError, match="memory must be the encoder's output.*int64"):
        model.decode(tgt, memory.long())
    assert model.decode(tgt, memory).shape == (1, 3, 64)
    with pytest.raises(ValueError, match="cache has 3 layers but the decoder has 2"):
        model.decode(tgt, memory, cache=DecoderCache(3))

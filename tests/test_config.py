import pytest
import torch

from minitransformer import Transformer, TransformerConfig


def test_presets_follow_table_3():
    base = TransformerConfig.base(37000)
    assert (base.n_encoder_layers, base.d_model, base.d_ff, base.n_heads, base.d_k, base.dropout) == (6, 512, 2048, 8, 64, 0.1)
    big = TransformerConfig.big(37000)
    assert (big.n_encoder_layers, big.d_model, big.d_ff, big.n_heads, big.d_k, big.dropout) == (6, 1024, 4096, 16, 64, 0.3)
    assert base.tie_embeddings and big.tie_embeddings
    assert TransformerConfig.tiny(50, d_model=32).d_model == 32


@pytest.mark.parametrize(
    "preset, paper_millions",
    [(TransformerConfig.base, 65.0), (TransformerConfig.big, 213.0)],
)
def test_parameter_counts_match_table_3(preset, paper_millions):
    # Shared 37,000-token BPE vocabulary as for WMT14 EN-DE. We count 63.08M (base) and
    # 214.25M (big); the paper rounds and does not list every detail, so allow 5%.
    model = Transformer(preset(37000))
    millions = model.num_parameters() / 1e6
    assert abs(millions - paper_millions) / paper_millions < 0.05, millions


def test_tied_matrix_is_counted_once():
    tied = Transformer(TransformerConfig.tiny(100))
    untied = Transformer(TransformerConfig.tiny(100, tie_embeddings=False))
    assert untied.num_parameters() - tied.num_parameters() == 2 * 100 * 64
    assert tied.generator.weight is tied.src_embed.weight is tied.tgt_embed.weight


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=100, n_heads=8), "d_model=100 and n_heads=8"),
        (dict(d_model=0), "d_model must be an integer of at least 1, got 0"),
        (dict(n_heads=-2), "n_heads must be an integer of at least 1, got -2"),
        (dict(d_ff=0), "d_ff must be an integer of at least 1, got 0"),
        (dict(n_encoder_layers=0), "n_encoder_layers must be an integer of at least 1, got 0"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\), got 1.0"),
        (dict(dropout=-0.1), r"dropout must be in \[0, 1\), got -0.1"),
        (dict(inner_dropout=1.0), r"inner_dropout must be None \(the same as dropout\) or in \[0, 1\), got 1.0"),
        (dict(inner_dropout="0"), r"inner_dropout must be None .* got '0'"),
        (dict(src_vocab_size=10, tgt_vocab_size=12, tie_embeddings=True),
         "src_vocab_size=10 and tgt_vocab_size=12"),
        (dict(pad_id=20), r"pad_id must be a token id of both vocabularies, in \[0, 20\), got 20"),
    ],
)
def test_invalid_values_are_named(kwargs, message):
    values = dict(src_vocab_size=20, tgt_vocab_size=20)
    values.update(kwargs)
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**values)


def test_config_is_frozen_and_round_trips():
    config = TransformerConfig.tiny(30)
    with pytest.raises(AttributeError):
        config.d_model = 8  # type: ignore[misc]
    assert TransformerConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown TransformerConfig fields"):
        TransformerConfig.from_dict({**config.to_dict(), "heads": 3})


def _dropout_rates(model: Transformer) -> dict[str, set[float]]:
    """The rates of the model's dropouts by place: residual (sub-layer outputs, embedding sums) and inner."""
    rates: dict[str, set[float]] = {"residual": set(), "inner": set()}
    for name, module in model.named_modules():
        if hasattr(module, "w_q"):  # a MultiHeadAttention: its rate on the attention weights
            rates["inner"].add(module.dropout)
        elif isinstance(module, torch.nn.Dropout):
            inner = name.endswith(("feed_forward.dropout", "attn_dropout"))  # the weights' mask of the by-hand path
            rates["inner" if inner else "residual"].add(module.p)
    return rates


def test_inner_dropout_moves_only_the_attention_weights_and_feed_forward_rates():
    assert _dropout_rates(Transformer(TransformerConfig.tiny(30, dropout=0.2))) == {"residual": {0.2}, "inner": {0.2}}
    paper = Transformer(TransformerConfig.tiny(30, dropout=0.2, inner_dropout=0.0))  # the paper's places only
    assert _dropout_rates(paper) == {"residual": {0.2}, "inner": {0.0}}
    # a checkpoint's config written before the field existed loads with the rates it trained with
    old = {k: v for k, v in TransformerConfig.tiny(30, dropout=0.2).to_dict().items() if k != "inner_dropout"}
    assert TransformerConfig.from_dict(old).inner_dropout is None

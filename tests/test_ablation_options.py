"""The package options behind lesson 10's ablations: each does what its docstring says.

Positions (sinusoidal, learned, none), the sqrt(d_k) scaling, the width of queries and keys
(Table 3 row B), weight sharing, pre-LN, and the constant learning rate (no warm-up); the
defaults stay the paper's, and checkpoints written before these options existed still load.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from minitransformer import (LearnedPositionalEmbedding, MultiHeadAttention, NoPositionalEncoding,
                             PositionalEncoding, Transformer, TransformerConfig, greedy_decode, make_positional)
from minitransformer.ablations import VARIANTS, SIZES, job_settings
from minitransformer.data import SharedTokenizer, load_dates
from minitransformer.training import TrainOptions, load_model, save_checkpoint, transformer_lr, transformer_scheduler
from minitransformer.training.schedule import ConstantAtPeak


def _config(**changes) -> TransformerConfig:
    sizes = dict(d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0)
    return TransformerConfig.tiny(40, **{**sizes, **changes})


def _model(**changes) -> Transformer:
    torch.manual_seed(0)
    return Transformer(_config(**changes)).eval()


def test_defaults_are_the_papers() -> None:
    c = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10)
    assert (c.positional, c.scale_attention, c.d_qk, c.norm_first) == ("sinusoidal", True, None, False)
    assert TransformerConfig.base(100).tie_embeddings
    assert TrainOptions().resolved().lr_schedule == "inverse_sqrt" and TrainOptions().clip_norm == 1.0
    model = _model()
    assert isinstance(model.positional, PositionalEncoding)
    assert all(layer.self_attn.scaled and layer.self_attn.d_qk == 8 for layer in model.encoder.layers)


@pytest.mark.parametrize("changes, error, message", [
    (dict(positional="rotary"), ValueError, r"positional must be one of \('sinusoidal', 'learned', 'none'\), "
                                            r"got 'rotary'"),
    (dict(scale_attention="no"), TypeError, r"scale_attention must be a bool \(True or False\), got str 'no'"),
    (dict(d_qk=0), ValueError, r"d_qk must be None \(d_model / n_heads\) or a positive int, got 0"),
    (dict(d_qk=2.5), ValueError, r"d_qk must be None .* got 2.5"),
])
def test_bad_values_are_refused_with_a_clear_message(changes, error, message) -> None:
    with pytest.raises(error, match=message):
        _config(**changes)
    with pytest.raises(AttributeError):  # frozen
        _config().positional = "learned"  # type: ignore[misc]


def test_make_positional_names_the_kinds() -> None:
    assert isinstance(make_positional("learned", 8, 16, 0.0), LearnedPositionalEmbedding)
    assert isinstance(make_positional("none", 8, 16, 0.0), NoPositionalEncoding)
    with pytest.raises(ValueError, match="positional must be one of"):
        make_positional("alibi", 8)


def test_learned_positions_are_a_trained_table_added_per_position() -> None:
    model = _model(positional="learned")
    table = model.positional.embedding.weight
    assert table.shape == (model.config.max_len, 32) and table.requires_grad
    assert "positional.embedding.weight" in model.state_dict()
    x = torch.zeros(1, 5, 32)
    torch.testing.assert_close(model.positional(x), table[:5][None])
    torch.testing.assert_close(model.positional(x[:, :2], offset=3), table[3:5][None])  # decoding one step at a time
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    model(src, tgt).sum().backward()
    assert table.grad is not None and table.grad[:4].abs().sum() > 0 and table.grad[4:].abs().sum() == 0
    with pytest.raises(ValueError, match="longer than max_len"):
        model.positional(torch.zeros(1, model.config.max_len + 1, 32))


@pytest.mark.parametrize("positional", ["learned", "none", "sinusoidal"])
def test_cached_decoding_gives_the_same_tokens_with_every_kind_of_position(positional) -> None:
    model = _model(positional=positional)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    with_cache = greedy_decode(model, src, 8, bos_id=1, eos_id=2)
    without = greedy_decode(model, src, 8, bos_id=1, eos_id=2, use_cache=False)
    assert torch.equal(with_cache, without)


def test_without_positions_the_encoder_sees_a_bag_of_tokens() -> None:
    src = torch.tensor([[5, 6, 7, 8, 9]])
    order = torch.tensor([3, 0, 4, 1, 2])
    bag = _model(positional="none")
    torch.testing.assert_close(bag.encode(src[:, order]), bag.encode(src)[:, order])  # permutation-equivariant
    sinus = _model()
    assert not torch.allclose(sinus.encode(src[:, order]), sinus.encode(src)[:, order], atol=1e-4)


def test_unscaled_attention_is_softmax_of_the_raw_dot_products() -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2, scaled=False).eval()
    x = torch.randn(2, 5, 16)
    out, weights = mha(x, x, x, need_weights=True)
    q, k, v = (mha.split_heads(w(x)) for w in (mha.w_q, mha.w_k, mha.w_v))
    expected = torch.softmax(q @ k.transpose(-2, -1), dim=-1)  # no / sqrt(d_k)
    torch.testing.assert_close(weights, expected)
    fused, _ = mha(x, x, x)  # PyTorch's kernel with scale=1.0
    torch.testing.assert_close(fused, out)
    # The same as the scaled module whose queries are sqrt(d_k) times larger.
    scaled = MultiHeadAttention(16, 2).eval()
    scaled.load_state_dict(mha.state_dict())
    with torch.no_grad():
        scaled.w_q.weight.mul_(math.sqrt(8))
        scaled.w_q.bias.mul_(math.sqrt(8))
    torch.testing.assert_close(scaled(x, x, x)[0], out)
    assert not _model(scale_attention=False).encoder.layers[0].self_attn.scaled
    assert "unscaled" in repr(mha)


def test_d_qk_shrinks_queries_and_keys_only() -> None:
    model = _model(d_qk=2)
    attn = model.decoder.layers[0].cross_attn
    assert attn.w_q.weight.shape == attn.w_k.weight.shape == (4 * 2, 32)
    assert attn.w_v.weight.shape == attn.w_o.weight.shape == (32, 32)
    assert model.num_parameters() < _model().num_parameters()
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    assert model(src, tgt).shape == (1, 3, 40)
    x = torch.randn(1, 4, 32)
    slow, weights = attn(x, x, x, need_weights=True)
    torch.testing.assert_close(attn(x, x, x)[0], slow)  # fused kernel with E=2 for q and k, 8 for v
    assert weights.shape == (1, 4, 4, 4)
    assert torch.equal(greedy_decode(model, src, 6, 1, 2), greedy_decode(model, src, 6, 1, 2, use_cache=False))


def test_untied_and_pre_ln_options() -> None:
    untied = _model(tie_embeddings=False)
    assert untied.generator.weight is not untied.src_embed.weight
    tied = _model()
    assert tied.generator.weight is tied.src_embed.weight is tied.tgt_embed.weight
    pre = _model(norm_first=True)
    assert pre.encoder.norm is not None and all(layer.norm_first for layer in pre.encoder.layers)


def _scheduled_rates(schedule: str, d_model: int, warmup: int, factor: float,
                     steps: int) -> tuple[list[float], torch.optim.Optimizer]:
    """The rate the package's scheduler gives at each of the first ``steps`` updates, and its optimizer."""
    optimizer = torch.optim.Adam(torch.nn.Linear(2, 2).parameters())
    scheduler = transformer_scheduler(optimizer, d_model, warmup, factor, schedule=schedule)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates, optimizer


def test_constant_schedule_is_the_warmup_peak_from_the_first_step() -> None:
    d_model, warmup, factor = 64, 50, 0.5
    peak = transformer_lr(warmup, d_model, warmup, factor)
    assert math.isclose(peak, max(transformer_lr(s, d_model, warmup, factor) for s in range(1, 500)))
    rates, optimizer = _scheduled_rates("constant", d_model, warmup, factor, 5)
    assert rates == pytest.approx([peak] * 5, rel=1e-12)
    assert ConstantAtPeak(d_model, warmup, factor)(1000) == pytest.approx(peak)
    with pytest.raises(ValueError, match=r"schedule must be one of \('inverse_sqrt', 'constant', 'decay_only', "
                                         r"'linear_decay'\), got 'cosine'"):
        transformer_scheduler(optimizer, d_model, warmup, schedule="cosine")


def test_decay_only_removes_the_warm_up_and_keeps_the_decay() -> None:
    d_model, warmup, factor = 64, 50, 0.5
    rates, _ = _scheduled_rates("decay_only", d_model, warmup, factor, 200)
    peak = transformer_lr(warmup, d_model, warmup, factor)
    assert rates[:warmup] == pytest.approx([peak] * warmup, rel=1e-12)  # no ramp: the peak from step 1
    paper = [transformer_lr(step, d_model, warmup, factor) for step in range(1, 201)]
    assert rates[warmup - 1:] == pytest.approx(paper[warmup - 1:], rel=1e-12)  # the paper's decay after it
    assert rates[0] == pytest.approx(warmup * paper[0])  # where the two differ: warmup times the paper's first rate


def test_lr_schedule_is_a_training_option_and_a_flag() -> None:
    from minitransformer.cli import _given_train_arguments

    assert TrainOptions(lr_schedule="constant").lr_schedule == "constant"
    assert TrainOptions.from_dict({"dataset": "dates"}).resolved().lr_schedule == "inverse_sqrt"  # older option dicts
    with pytest.raises(ValueError, match=r"lr_schedule must be one of \('inverse_sqrt', 'constant', 'decay_only', "
                                         r"'linear_decay'\), got 'x'"):
        TrainOptions(lr_schedule="x")
    assert _given_train_arguments(["--lr-schedule", "constant"]) == {"lr_schedule": "constant"}


def test_a_checkpoint_without_the_optional_fields_loads_with_their_defaults(tmp_path: Path) -> None:
    tokenizer = SharedTokenizer.train(load_dates("train", n_train=100, n_validation=0, n_test=0), vocab_size=200)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(tokenizer.vocab_size, d_model=16, n_heads=2, d_ff=32,
                                               n_encoder_layers=1, n_decoder_layers=1)).eval()
    path = save_checkpoint(tmp_path / "old.pt", model, tokenizer, step=1)
    raw = torch.load(path, weights_only=True)
    for name in ("positional", "scale_attention", "d_qk", "embedding_init"):
        del raw["config"][name]
    torch.save(raw, path)
    loaded, _, _ = load_model(path)
    assert (loaded.config.positional, loaded.config.scale_attention, loaded.config.d_qk,
            loaded.config.embedding_init) == ("sinusoidal", True, None, "normal")
    src, tgt = torch.tensor([[5, 6, 2]]), torch.tensor([[1, 7]])
    torch.testing.assert_close(loaded(src, tgt), model(src, tgt))


@pytest.mark.parametrize("tied", [True, False])
def test_the_default_embedding_init_normal_draws_the_token_tables_from_n_0_1_over_d_model(tied: bool) -> None:
    d_model, vocab = 64, 3000
    torch.manual_seed(0)
    xavier = Transformer(TransformerConfig.tiny(vocab, d_model=d_model, tie_embeddings=tied, embedding_init="xavier"))
    torch.manual_seed(0)
    normal = Transformer(TransformerConfig.tiny(vocab, d_model=d_model, tie_embeddings=tied))
    assert normal.config.embedding_init == "normal"  # the default: the token tables at the sinusoid's size
    for model, std in ((xavier, math.sqrt(2 / (vocab + d_model))), (normal, d_model ** -0.5)):
        for table in (model.src_embed.weight, model.tgt_embed.weight):
            assert table.std().item() == pytest.approx(std, rel=0.02)
    # Times sqrt(d_model), a normal-initialised token vector has entries of spread 1, the Xavier one far less.
    assert (normal.src_embed.weight * math.sqrt(d_model)).std().item() == pytest.approx(1.0, rel=0.02)
    assert (xavier.src_embed.weight * math.sqrt(d_model)).std().item() == pytest.approx(8 * math.sqrt(2 / 3064), rel=0.02)  # 0.20
    # Everything else starts the same (same seed, same draws in the same order, the tables last).
    skip = ("src_embed", "tgt_embed") + (("generator",) if tied else ())
    for (name, a), (_, b) in zip(xavier.named_parameters(), normal.named_parameters()):
        if not name.startswith(skip):
            assert torch.equal(a, b), name
    assert (normal.generator.weight is normal.src_embed.weight) == tied
    with pytest.raises(ValueError, match=r"embedding_init must be one of \('xavier', 'normal'\), got 'zeros'"):
        TransformerConfig.tiny(vocab, embedding_init="zeros")


def test_table_3_rows_are_scaled_in_the_papers_ratios() -> None:
    size = SIZES["cpu"]
    assert (size.d_model, size.n_heads, size.d_ff) == (128, 8, 512)  # the paper's 8 heads; d_model and d_ff / 4
    settings = {name: v.settings(size) for name, v in VARIANTS.items()}
    assert [settings[f"heads_{h}"]["n_heads"] for h in (1, 4, 16, 32)] == [1, 4, 16, 32]  # row A
    assert settings["dk_quarter"] == {"d_qk": 4}  # row B: d_k 64 -> 16 in the paper, 16 -> 4 here
    assert settings["d_model_half"] == {"d_model": 64} and settings["d_model_double"] == {"d_model": 256}  # row C
    assert settings["d_ff_half"] == {"d_ff": 256} and settings["d_ff_double"] == {"d_ff": 1024}  # d_ff kept above
    assert settings["no_warmup"] == {"lr_schedule": "decay_only"} and settings["constant_lr"] == {"lr_schedule": "constant"}
    for name, v in VARIANTS.items():
        if v.group in "ABCDE" and v.name != "no_pos":
            assert v.paper is not None and v.paper["row"].startswith(v.group), name
    with pytest.raises(ValueError, match=r"n_heads must be a multiple of the paper's 8 .* got d_model=128, n_heads=4"):
        SIZES["cpu"].__class__(n_heads=4)


def test_every_variant_is_one_setting_away_from_its_reference() -> None:
    size = SIZES["cpu"]
    base_config, base_training = job_settings(size, "baseline")
    assert base_training == {"label_smoothing": 0.1, "clip_norm": 1.0, "lr_schedule": "inverse_sqrt"}
    for name, v in VARIANTS.items():
        config, training = job_settings(size, name)
        changed = {k for k, value in {**config.to_dict(), **training}.items()
                   if value != {**base_config.to_dict(), **base_training}[k]}
        assert changed == set(v.settings(size)), name
        assert (name == "baseline") == (not changed)
    with pytest.raises(ValueError, match="unknown ablation variant 'bigger'"):
        job_settings(size, "bigger")

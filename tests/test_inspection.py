import pytest
import torch

from minitransformer import Transformer, TransformerConfig
from minitransformer.data import SharedTokenizer
from minitransformer.inspection import save_attention_maps, sentence_attention


@pytest.fixture(scope="module")
def tiny():
    pairs = [("Monday, May 1, 2000", "Montag, 1. Mai 2000"), ("Friday, June 2, 1999", "Freitag, 2. Juni 1999")]
    tokenizer = SharedTokenizer.train(pairs * 5, vocab_size=300, min_frequency=1)
    config = TransformerConfig.tiny(tokenizer.vocab_size, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=2,
                                    n_decoder_layers=2, dropout=0.0)
    return Transformer(config).eval(), tokenizer


def test_maps_have_one_row_per_token_and_rows_sum_to_one(tiny):
    model, tokenizer = tiny
    attention = sentence_attention(model, tokenizer, "Monday, May 1, 2000", target="Montag, 1. Mai 2000")
    s, t = len(attention.src_tokens), len(attention.tgt_tokens)
    assert attention.tgt_tokens[0] == tokenizer.id_to_token(tokenizer.bos_id)
    assert [m.shape for m in attention.maps["encoder"]] == [(2, s, s)] * 2
    assert [m.shape for m in attention.maps["decoder_self"]] == [(2, t, t)] * 2
    assert [m.shape for m in attention.maps["cross"]] == [(2, t, s)] * 2
    for layers in attention.maps.values():
        for m in layers:
            torch.testing.assert_close(m.sum(-1), torch.ones(m.shape[:-1]))
    # The decoder's self-attention never looks ahead.
    assert torch.all(attention.maps["decoder_self"][0].triu(diagonal=1) == 0)


def test_files_are_written_per_kind_and_layer(tiny, tmp_path):
    model, tokenizer = tiny
    attention = sentence_attention(model, tokenizer, "Friday, June 2, 1999")  # the model's own translation
    paths = save_attention_maps(attention, tmp_path)
    assert sorted(p.name for p in paths) == sorted(
        f"{kind}_layer{n}.png" for kind in ("encoder", "decoder_self", "cross") for n in (1, 2))
    assert all(p.stat().st_size > 1000 for p in paths)
    with pytest.raises(ValueError, match="kinds must be among"):
        save_attention_maps(attention, tmp_path, kinds=("self",))


def test_labels_spell_tokens_as_the_tokenizer_does(tiny):
    """One spelling of the BPE marker in figures, printed tokens and lesson text (lesson 08)."""
    model, tokenizer = tiny
    attention = sentence_attention(model, tokenizer, "Monday, May 1, 2000", target="Montag, 1. Mai 2000")
    assert attention.src_tokens[:-1] == tokenizer.tokens("Monday, May 1, 2000")
    assert "\u2581May" in attention.src_tokens and not any("_" in t for t in attention.src_tokens)

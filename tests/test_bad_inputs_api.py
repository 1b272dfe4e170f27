"""Bad inputs to the model and decoding API: each gives one clear error that names the argument.

The table of issue 14 ("poor errors" and "silent wrong results" that concern the package API)
and issue 12 (masks). Each row: the callable, the bad input, the exception type and a
regex of the message it must show.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest
import torch

from minitransformer import (MultiHeadAttention, Transformer, TransformerConfig, beam_search, greedy_decode,
                             make_padding_mask)
from minitransformer.decoding import length_penalty
from minitransformer.masks import make_causal_mask
from minitransformer.training import LabelSmoothingLoss, label_smoothed_nll

VOCAB, TABLE = 30, 16  # both vocabularies; positional table (config.max_len)
VALID: dict[str, Any] = dict(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=32, n_heads=4, d_ff=64,
                             n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=TABLE)
MODEL = Transformer(TransformerConfig(**VALID)).eval()  # pad 0; decoding uses bos 1, eos 2
SRC = torch.tensor([[5, 6, 7, 8, 9], [4, 5, 6, 0, 0], [3, 4, 5, 6, 0], [7, 7, 7, 7, 7]])  # (B, S), B == n_heads
TGT = torch.tensor([[1, 5, 6], [1, 4, 0], [1, 3, 4], [1, 7, 7]])  # (B, T)


def config(**bad: Any) -> TransformerConfig:
    return TransformerConfig(**{**VALID, **bad})


def forward(src: torch.Tensor = SRC, tgt: torch.Tensor = TGT, **kwargs: Any) -> torch.Tensor:
    return MODEL(src, tgt, **kwargs)


def greedy(src: torch.Tensor = SRC, max_len: int = 5, bos_id: int = 1, eos_id: int | None = 2,
           **kwargs: Any) -> torch.Tensor:
    return greedy_decode(MODEL, src, max_len, bos_id, eos_id, **kwargs)


def beam(src: torch.Tensor = SRC, bos_id: int = 1, eos_id: int | None = 2, **kwargs: Any) -> torch.Tensor:
    return beam_search(MODEL, src, bos_id, eos_id, **kwargs)


def attention(mask: torch.Tensor) -> Any:
    x = torch.randn(8, 10, 32)  # B == n_heads == 8
    return MultiHeadAttention(32, 8)(x, x, x, mask=mask)


def mha(dtype: torch.dtype) -> Any:
    x = torch.ones(2, 3, 32, dtype=dtype)
    return MultiHeadAttention(32, 4)(x, x, x)


def with_token(tokens: torch.Tensor, token: int) -> torch.Tensor:
    tokens = tokens.clone()
    tokens[1, 1] = token
    return tokens


IN_VOCAB = r"in \[0, 30\) \(a token id of the target vocabulary, tgt_vocab_size=30\)"
CASES = [
    # The config: types are checked, not only values.
    (config, dict(dropout="0.1"), TypeError, r"TransformerConfig\.dropout must be a float, got str '0\.1'"),
    (config, dict(norm_first="no"), TypeError, r"TransformerConfig\.norm_first must be a bool \(True or False\), got str 'no'"),
    (config, dict(tie_embeddings=1), TypeError, r"TransformerConfig\.tie_embeddings must be a bool .*got int 1"),
    (config, dict(d_model=32.0), TypeError, r"TransformerConfig\.d_model must be an int, got float 32\.0"),
    (config, dict(pad_id="0"), TypeError, r"TransformerConfig\.pad_id must be an int, got str '0'"),
    (config, dict(dropout=math.nan), ValueError, r"dropout must be in \[0, 1\), got nan"),
    (TransformerConfig.from_dict, dict(values="hello"), TypeError,
     r"from_dict expects a mapping of field names to values .*got str 'hello'"),
    (TransformerConfig.from_dict, dict(values=["d_model"]), TypeError, r"from_dict expects a mapping .*got list"),
    (TransformerConfig.from_dict, dict(values={"d_model": 32}), ValueError,
     r"missing required fields \['src_vocab_size', 'tgt_vocab_size'\]"),
    (Transformer, dict(config="hello"), TypeError, r"config must be a TransformerConfig, got str"),
    # Token ids and empty sequences.
    (forward, dict(src=with_token(SRC, 30)), ValueError,
     r"src holds token id 30, but src_vocab_size is 30: token ids must be in \[0, 30\)"),
    (forward, dict(src=with_token(SRC, -1)), ValueError, r"src holds token id -1, but src_vocab_size is 30"),
    (forward, dict(tgt=with_token(TGT, 99)), ValueError, r"tgt holds token id 99, but tgt_vocab_size is 30"),
    (forward, dict(src=SRC[:, :0]), ValueError, r"src is empty, shape \(4, 0\): every sentence needs at least one token \(S >= 1\)"),
    (forward, dict(tgt=TGT[:, :0]), ValueError, r"tgt is empty, shape \(4, 0\): every sentence needs at least the start token"),
    (MODEL.encode, dict(src=torch.zeros(2, 0, dtype=torch.long)), ValueError, r"src is empty"),
    (greedy, dict(src=with_token(SRC, 31)), ValueError, r"src holds token id 31"),
    # Masks: the documented shapes, bool only.
    (forward, dict(src_mask=make_padding_mask(SRC, 0)[:, 0]), ValueError,
     r"src_mask has shape \(4, 1, 5\) .*a padding mask is \(B, 1, 1, S\): use mask\[:, None\]"),
    (forward, dict(src_mask=make_padding_mask(SRC, 0).float()), TypeError,
     r"src_mask must have dtype torch\.bool \(True = may attend\), got torch\.float32: convert it with src_mask\.bool\(\)"),
    (forward, dict(src_mask=make_padding_mask(SRC, 0)[:2]), ValueError,
     r"src_mask has shape \(2, 1, 1, 5\) .*mask is for 2 sentences but the batch has B = 4"),
    (attention, dict(mask=torch.ones(8, 1, 10, dtype=torch.bool)), ValueError,
     r"mask has shape \(8, 1, 10\) .*use mask\[:, None\]"),
    # Decoding: ids inside the vocabulary, the start token not the pad id, lengths within the table.
    (greedy, dict(bos_id=30), ValueError, r"bos_id must be " + IN_VOCAB + r", got 30"),
    (greedy, dict(bos_id=-1), ValueError, r"bos_id must be " + IN_VOCAB + r", got -1"),
    (greedy, dict(eos_id=30), ValueError, r"eos_id must be " + IN_VOCAB + r", got 30"),
    (beam, dict(bos_id=99), ValueError, r"bos_id must be " + IN_VOCAB + r", got 99"),
    (greedy, dict(bos_id=0), ValueError, r"bos_id=0 is also the model.s pad id"),
    (greedy, dict(banned_ids=[0, 2]), ValueError, r"eos_id=2 is in banned_ids \[0, 2\]: no sentence could ever end"),
    (greedy, dict(banned_ids=[31]), ValueError, r"each of banned_ids must be " + IN_VOCAB),
    (greedy, dict(banned_ids="0"), TypeError, r"banned_ids must be a sequence of token ids or None, got str"),
    (greedy, dict(max_len=TABLE + 1), ValueError,
     r"max_len=17 is longer than the model's positional table \(config\.max_len=16\)"),
    (beam, dict(max_len=40), ValueError, r"max_len=40 is longer than the model's positional table \(config\.max_len=16\)"),
    (greedy, dict(max_len=0), ValueError, r"max_len must be at least 1, got 0"),
    (greedy, dict(max_len=2.5), TypeError, r"max_len must be an int, got float 2\.5"),
    (beam, dict(alpha=math.nan), ValueError, r"alpha, the length penalty exponent, must be a finite number >= 0 .*got nan"),
    (beam, dict(alpha=math.inf), ValueError, r"alpha, the length penalty exponent, must be a finite number .*got inf"),
    (beam, dict(alpha="0.6"), TypeError, r"alpha must be a float, got str '0\.6'"),
    (beam, dict(beam_size=0), ValueError, r"beam_size must be at least 1, got 0"),
    (beam, dict(beam_size=2.0), TypeError, r"beam_size must be an int, got float 2\.0"),
    (beam, dict(max_extra_len=-5), ValueError, r"max_extra_len must be at least 0, got -5"),
    (greedy_decode, dict(model=torch.nn.Linear(2, 2), src=SRC, max_len=5, bos_id=1, eos_id=2), TypeError,
     r"model must be a minitransformer Transformer, got Linear"),
    # Issue 19: sizes that cannot fit, padding-only sources, dtypes, NaN.
    (greedy, dict(src=torch.tensor([[5, 6, 7], [0, 0, 0]])), ValueError,
     r"src row\(s\) 1 hold only padding \(pad_id=0\): there is no source to translate"),
    (beam, dict(src=torch.tensor([[0, 0, 0]])), ValueError, r"src row\(s\) 0 hold only padding"),
    (length_penalty, dict(length=3, alpha=math.nan), ValueError, r"alpha, the length penalty exponent, must be a "
     r"finite number >= 0 .*got nan"),
    (make_causal_mask, dict(size=10**6), MemoryError, r"make_causal_mask\(size=1,000,000\) .* would need 931\.3 GiB"),
    (Transformer, dict(config=config(src_vocab_size=2**33, tgt_vocab_size=2**33)), MemoryError,
     r"vocabulary size 8,589,934,592 x d_model=32 .*would need 3,072\.0 GiB (of memory)?"),
    (Transformer, dict(config=config(d_model=65536, n_heads=2)), MemoryError,
     r"d_model=65,536, d_ff=64 and 1\+1 layers .*would need \d+\.\d GiB"),
    (mha, dict(dtype=torch.float64), TypeError, r"query has dtype torch\.float64 but the layer's weights are "
     r"torch\.float32: convert the input with \.to\(torch\.float32\), or the layer with \.to\(torch\.float64\)"),
    (mha, dict(dtype=torch.int64), TypeError, r"query must be a floating-point tensor .* got dtype torch\.int64"),
    (LabelSmoothingLoss, dict(epsilon=0.1, pad_id=-1), ValueError,
     r"pad_id must be a token id >= 0, or None when the targets hold no padding, got -1"),
    (label_smoothed_nll, dict(logits=torch.zeros(2, 5), target=torch.tensor([1, 2]), pad_id=5), ValueError,
     r"pad_id must be a token id in \[0, 5\) \(the logits have V=5\), or None"),
]


def _case_id(fn: Callable[..., Any], bad: dict[str, Any]) -> str:
    name = getattr(fn, "__name__", type(fn).__name__)
    return f"{name}-{'-'.join(bad)}"


@pytest.mark.parametrize("fn, bad, error, message",
                         [pytest.param(*case, id=_case_id(case[0], case[1])) for case in CASES])
def test_bad_input_gives_a_clear_error(fn, bad, error, message):
    with pytest.raises(error, match=message):
        fn(**bad)


def test_the_valid_calls_of_the_table_work():
    # The rows differ from these calls only in the bad argument.
    assert forward().shape == (4, 3, VOCAB)
    assert greedy().size(1) <= 6 and beam(max_len=5).size(1) <= 6
    assert greedy(max_len=TABLE, eos_id=None).shape == (4, 1 + TABLE)
    assert TransformerConfig.from_dict(config().to_dict()) == config()
    assert config(dropout=0).dropout == 0  # an int is a fine float


def test_beam_search_caps_the_beam_at_the_vocabulary() -> None:
    src = SRC[:2]
    assert torch.equal(beam(src=src, beam_size=10**8, max_len=5), beam(src=src, beam_size=VOCAB, max_len=5))


def test_multi_head_attention_runs_in_float64_when_the_layer_does() -> None:
    torch.manual_seed(0)
    layer = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 3, 32)
    out, _ = layer.double()(x.double(), x.double(), x.double())
    torch.testing.assert_close(out.float(), layer.float()(x, x, x)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask", [None, "padding", "causal"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_nan_spreads_from_a_query_in_both_attention_paths(need_weights: bool, mask: str | None) -> None:
    # Without a mask the fused path adds 0 * sum(q); with one it relies on the kernel: both are checked.
    torch.manual_seed(0)
    layer = MultiHeadAttention(32, 4).eval()
    x = torch.randn(1, 3, 32)
    q = x.clone()
    q[0, 0, 0] = float("nan")
    masks = {None: None, "padding": torch.tensor([[[[True, True, False]]]]), "causal": make_causal_mask(3)}
    out, _ = layer(q, x, x, masks[mask], need_weights=need_weights)
    assert torch.isnan(out[0, 0]).all() and torch.isfinite(out[0, 1:]).all()  # as the docstring says

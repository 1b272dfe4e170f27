"""The exercise checks (minitransformer.checks), as a learner meets them in a notebook.

* every check passes a correct implementation (the package's own, with its anti-cheat sentinels off)
  and fails on the package's own when they are on, however it was imported;
* every check fails, with the expected explanation, on the usual wrong implementations.

The generator of the exercises and the grader are tested with the grader (grader/tests/).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import re
from pathlib import Path
from typing import Any, Callable

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minitransformer.checks as G
from minitransformer import (EncoderLayer, LayerNorm, MultiHeadAttention, PositionwiseFeedForward, greedy_decode,
                             make_causal_mask, make_padding_mask, make_target_mask, scaled_dot_product_attention,
                             sinusoidal_positional_encoding)
from minitransformer.checks import compare
from minitransformer.checks.lesson06 import _greedy_by_hand

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_sentinels(monkeypatch):
    """The package's own pieces, which the checks normally refuse, allowed (to test the checks themselves)."""
    monkeypatch.setattr(compare, "_sentinels", lambda *a, **k: contextlib.nullcontext())
    monkeypatch.setattr(compare, "JUDGE", False)  # nor are the operations they run judged


# ----------------------------------------------------------------------------------------------
# Correct implementations pass
# ----------------------------------------------------------------------------------------------

def _smoothed_by_formula(target: torch.Tensor, vocab: int, eps: float, pad: int) -> torch.Tensor:
    q = F.one_hot(target, vocab).float() * (1 - eps - eps / (vocab - 2)) + eps / (vocab - 2)
    q[..., pad] = 0.0
    return q * (target != pad)[..., None]


CORRECT: list[tuple[Callable[..., None], Any]] = [
    (G.check_positional_encoding, sinusoidal_positional_encoding),
    (G.check_scaled_dot_product_attention, scaled_dot_product_attention),
    (G.check_padding_mask, make_padding_mask),
    (G.check_causal_mask, make_causal_mask),
    (G.check_target_mask, make_target_mask),
    (G.check_multi_head_attention, MultiHeadAttention),
    (G.check_layer_norm, LayerNorm),
    (G.check_layer_norm, nn.LayerNorm),
    (G.check_feed_forward, PositionwiseFeedForward),
    (G.check_encoder_layer, EncoderLayer),
    (G.check_label_smoothing_target, _smoothed_by_formula),
    (G.check_greedy_decode, greedy_decode),
]


@pytest.mark.parametrize("check, implementation", CORRECT, ids=lambda x: getattr(x, "__name__", str(x)))
def test_the_package_passes_its_own_checks(check, implementation, capsys, no_sentinels):
    check(implementation, task=7)
    assert capsys.readouterr().out.startswith("✓ Task 7 passed: ")


def test_a_check_leaves_the_random_state_alone(capsys, no_sentinels):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    G.check_multi_head_attention(MultiHeadAttention)
    G.check_greedy_decode(greedy_decode)
    assert torch.equal(torch.rand(3), expected)
    assert capsys.readouterr().out.count("✓ passed: ") == 2


# ----------------------------------------------------------------------------------------------
# Typical wrong implementations fail with a message that names the mistake
# ----------------------------------------------------------------------------------------------

def _pe_swapped(max_len: int, d_model: int) -> torch.Tensor:
    pe = sinusoidal_positional_encoding(max_len, d_model)
    return torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).reshape(max_len, d_model)


def _pe_halves(max_len: int, d_model: int) -> torch.Tensor:
    pe = sinusoidal_positional_encoding(max_len, d_model)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1)


def _pe_no_factor_two(max_len: int, d_model: int) -> torch.Tensor:
    i = torch.arange(d_model // 2)
    angle = torch.arange(max_len)[:, None] / 10000 ** (i / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model)


def _attention(scale: Callable[[int], float] = math.sqrt, dim: int = -1, invert: bool = False) -> Callable[..., Any]:
    def wrong_attention(query, key, value, mask=None):
        scores = query @ key.transpose(-2, -1) / scale(query.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask if invert else ~mask, -1e9)
        weights = torch.softmax(scores, dim=dim)
        return weights @ value, weights
    return wrong_attention


def _mha(mistake: str) -> type[nn.Module]:
    class WrongMultiHeadAttention(nn.Module):
        def __init__(self, d_model: int, n_heads: int) -> None:
            super().__init__()
            self.h, self.d_k = n_heads, d_model // n_heads
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

        def forward(self, query, key, value, mask=None):
            B, Tq, D = query.shape

            def split(x):
                if mistake == "split":  # straight to (B, H, T, d_k): positions and heads mixed
                    return x.reshape(B, self.h, x.size(1), self.d_k)
                return x.view(B, x.size(1), self.h, self.d_k).transpose(1, 2)

            q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
            scores = q @ k.transpose(-2, -1) / math.sqrt(D if mistake == "scale" else self.d_k)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            heads = torch.softmax(scores, dim=-1) @ v
            concat = heads.transpose(1, 2).reshape(B, Tq, D)
            return concat if mistake == "no_w_o" else self.w_o(concat)

    return WrongMultiHeadAttention


def _layer_norm(mistake: str) -> type[nn.Module]:
    class WrongLayerNorm(nn.Module):
        def __init__(self, d_model: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d_model))
            self.bias = nn.Parameter(torch.zeros(d_model))

        def forward(self, x):
            mean = x.mean(-1, keepdim=True)
            var = x.var(-1, keepdim=True, unbiased=mistake == "unbiased")
            if mistake == "eps_outside":
                return (x - mean) / (var.sqrt() + 1e-5) * self.weight + self.bias
            return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias

    return WrongLayerNorm


class _FeedForwardWithoutReLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.linear1(x))


class _EncoderWithoutResiduals(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)

    def forward(self, x, src_mask=None):
        x = self.norm1(self.self_attn(x, x, x, src_mask)[0])
        return self.norm2(self.feed_forward(x))


def _torch_style_smoothing(target, vocab, eps, pad):
    return F.one_hot(target, vocab) * (1 - eps) + eps / vocab


def _greedy_not_stopping(model, src, max_len, bos_id, eos_id):
    out = greedy_decode(model, src, max_len, bos_id, eos_id)
    fill = torch.full((src.size(0), 1 + max_len - out.size(1)), model.config.pad_id)
    return torch.cat([out, fill], dim=1)  # runs on for max_len steps after everyone has finished


def _greedy_first_position(model, src, max_len, bos_id, eos_id):
    return _greedy_by_hand(model, src, max_len, bos_id, eos_id, first_position=True)


WRONG = [
    ("pe swapped", G.check_positional_encoding, _pe_swapped, "swapped sin and cos"),
    ("pe halves", G.check_positional_encoding, _pe_halves, "Interleave"),
    ("pe exponent", G.check_positional_encoding, _pe_no_factor_two, "needs the factor 2"),
    ("pe transposed", G.check_positional_encoding, lambda n, d: sinusoidal_positional_encoding(n, d).T, "transpose"),
    ("attention unscaled", G.check_scaled_dot_product_attention, _attention(scale=lambda d: 1.0),
     "divided by sqrt(d_k)"),
    ("attention by d_k", G.check_scaled_dot_product_attention, _attention(scale=float), "not by d_k"),
    ("attention softmax dim", G.check_scaled_dot_product_attention, _attention(dim=-2),
     "did you apply the softmax over the last dimension"),
    ("attention mask inverted", G.check_scaled_dot_product_attention, _attention(invert=True),
     "exactly where the mask is True"),
    ("attention weights only", G.check_scaled_dot_product_attention,
     lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask)[1], "expected a pair (output, weights)"),
    ("padding inverted", G.check_padding_mask, lambda t, p: (t == p)[:, None, None, :], "`tokens != pad_id`"),
    ("padding hard-coded 0", G.check_padding_mask, lambda t, p: (t != 0)[:, None, None, :], "not with 0"),
    ("padding 2-D", G.check_padding_mask, lambda t, p: t != p, "(B, S) -> (B, 1, 1, S)"),
    ("padding int", G.check_padding_mask, lambda t, p: (t != p).long()[:, None, None, :], "must be torch.bool"),
    ("causal upper", G.check_causal_mask, lambda n: torch.ones(n, n, dtype=torch.bool).triu()[None, None],
     "see the future"),
    ("causal no diagonal", G.check_causal_mask, lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1)[None, None],
     "attend to itself"),
    ("causal inverted", G.check_causal_mask, lambda n: ~torch.ones(n, n, dtype=torch.bool).tril()[None, None],
     "inverted"),
    ("target or", G.check_target_mask, lambda t, p: make_padding_mask(t, p) | make_causal_mask(t.size(1)),
     "with & (and)"),
    ("target query padding", G.check_target_mask,
     lambda t, p: (t != p)[:, None, :, None] & make_causal_mask(t.size(1)), "not (B, 1, T, 1)"),
    ("mha heads split wrong", G.check_multi_head_attention, _mha("split"), "view or reshape to (B, n_heads, T, d_k)"),
    ("mha scaled by d_model", G.check_multi_head_attention, _mha("scale"), "not by sqrt(d_model)"),
    ("mha without w_o", G.check_multi_head_attention, _mha("no_w_o"), "output projection w_o"),
    ("layer norm unbiased", G.check_layer_norm, _layer_norm("unbiased"), "unbiased variance"),
    ("layer norm eps outside", G.check_layer_norm, _layer_norm("eps_outside"), "inside the square root"),
    ("ffn without relu", G.check_feed_forward, _FeedForwardWithoutReLU, "ReLU between the two layers is missing"),
    ("encoder pre-LN", G.check_encoder_layer, lambda d, h, f: EncoderLayer(d, h, f, norm_first=True), "pre-LN"),
    ("encoder no residual", G.check_encoder_layer, _EncoderWithoutResiduals, "residual connections are missing"),
    ("encoder bad attention", G.check_encoder_layer,
     lambda d, h, f: _with_part(EncoderLayer(d, h, f), "self_attn", _mha("scale")(d, h)), "(task 1)"),
    ("smoothing like torch", G.check_label_smoothing_target, _torch_style_smoothing, "F.cross_entropy's"),
    ("smoothing pad rows kept", G.check_label_smoothing_target,
     lambda t, v, e, p: _smoothed_by_formula(t, v, e, p) + (t == p)[..., None] / v, "counts for nothing"),
    ("greedy never stops", G.check_greedy_decode, _greedy_not_stopping, "Stop as soon as"),
    ("greedy first position", G.check_greedy_decode, _greedy_first_position, "LAST position"),
]


def _with_part(module: nn.Module, name: str, part: nn.Module) -> nn.Module:
    setattr(module, name, part)
    return module


@pytest.mark.parametrize("check, implementation, message", [w[1:] for w in WRONG], ids=[w[0] for w in WRONG])
def test_a_wrong_implementation_is_explained(check, implementation, message, capsys, no_sentinels):
    with pytest.raises(AssertionError, match=re.escape(message)):
        check(implementation, task=1)
    assert "passed" not in capsys.readouterr().out


def test_the_learners_own_error_names_the_call():
    def broken_attention(query, key, value, mask=None):
        return query @ value, None  # (Tq, d_k) @ (Tk, d_v): wrong shapes

    with pytest.raises(AssertionError, match=r"broken_attention\(query \(2, 4, 8\).*raised RuntimeError"):
        G.check_scaled_dot_product_attention(broken_attention)


def test_a_stub_raises_its_not_implemented_error():
    def stub(max_len, d_model):
        raise NotImplementedError("Task 1: build the table")

    with pytest.raises(NotImplementedError, match="Task 1"):
        G.check_positional_encoding(stub)


# The review's findings: each mistake has its own message.

def _attention_scaled_after_softmax(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1) / math.sqrt(query.size(-1))
    return weights @ value, weights


class _LayerNormIgnoringEps(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias


class _FeedForwardDropoutAlwaysOn(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1, self.linear2, self.p = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), dropout

    def forward(self, x):
        return self.linear2(F.dropout(torch.relu(self.linear1(x)), self.p))  # training=True: on in eval mode too


def _causal_one_row_too_far(n):
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    if n > 4:
        mask[3, 4] = True
    return mask[None, None]


REVIEW = [
    ("causal row 3 sees 4", G.check_causal_mask, _causal_one_row_too_far, "Row 3 of your causal mask lets position 3 "
     "see position 4"),
    ("causal tril(1)", G.check_causal_mask, lambda n: torch.ones(n, n, dtype=torch.bool).tril(1)[None, None], "tril(1)"),
    ("attention scaled after softmax", G.check_scaled_dot_product_attention, _attention_scaled_after_softmax,
     "after the softmax"),
    ("layer norm ignores eps", G.check_layer_norm, _LayerNormIgnoringEps, "ignores its eps argument"),
    ("feed-forward dropout on in eval", G.check_feed_forward, _FeedForwardDropoutAlwaysOn, "dropout stays on"),
]


@pytest.mark.parametrize("check, implementation, message", [w[1:] for w in REVIEW], ids=[w[0] for w in REVIEW])
def test_the_reviews_mistakes_are_named(check, implementation, message):
    with pytest.raises(AssertionError, match=re.escape(message)):
        check(implementation, task=1)


def test_id_3_is_not_an_ordinary_token_in_the_checks_and_exercises():
    source = (ROOT / "minitransformer/checks/lesson06.py").read_text(encoding="utf-8")
    assert "torch.randint(4, 11," in source and "torch.randint(3, 11," not in source
    lesson06 = (ROOT / "solutions" / "06_decoder_and_masking.ipynb").read_text(encoding="utf-8")
    assert "torch.randint(4, VOCAB," in lesson06 and "torch.randint(3, VOCAB," not in lesson06
    for name in ("06_decoder_and_masking", "07_training"):
        assert "`<unk>` = 3" in (ROOT / "solutions" / f"{name}.ipynb").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------------------------
# The package's own piece is refused by behaviour, however it was imported
# ----------------------------------------------------------------------------------------------

def _alias_built_from_strings():
    found = getattr(importlib.import_module("minitransformer"), "scaled_" + "dot_product_attention")

    def my_attention(query, key, value, mask=None):
        return found(query, key, value, mask)  # a closure: no name of the package in sight
    return my_attention


def _layer_norm_subclass():
    class MyLayerNorm(nn.LayerNorm):
        pass
    return MyLayerNorm


REFERENCE_USES = [
    ("attention by alias", G.check_scaled_dot_product_attention, scaled_dot_product_attention,
     "minitransformer's scaled_dot_product_attention"),
    ("attention by strings", G.check_scaled_dot_product_attention, _alias_built_from_strings(),
     "minitransformer's scaled_dot_product_attention"),
    ("attention from torch", G.check_scaled_dot_product_attention,
     lambda q, k, v, mask=None: (F.scaled_dot_product_attention(q, k, v, None if mask is None else mask), None),
     "torch's scaled_dot_product_attention"),
    ("layer norm subclass", G.check_layer_norm, _layer_norm_subclass(), "torch's LayerNorm"),
    ("greedy decoding", G.check_greedy_decode, greedy_decode, "minitransformer's greedy_decode"),
    ("target mask", G.check_target_mask, lambda t, p: make_target_mask(t, p), "make_target_mask"),
]


@pytest.mark.parametrize("check, implementation, message", [w[1:] for w in REFERENCE_USES],
                         ids=[w[0] for w in REFERENCE_USES])
def test_the_packages_own_piece_is_refused_with_the_right_task(check, implementation, message, capsys):
    with pytest.raises(AssertionError, match=r"^Task 5: your code calls .*" + re.escape(message)):
        check(implementation, task=5)
    assert "passed" not in capsys.readouterr().out
    # Afterwards the package works as before: the sentinels are gone.
    out, weights = scaled_dot_product_attention(torch.ones(1, 2, 4), torch.ones(1, 2, 4), torch.ones(1, 2, 4))
    assert torch.allclose(weights, torch.full((1, 2, 2), 0.5))
    assert isinstance(nn.LayerNorm(4)(torch.randn(2, 4)), torch.Tensor)


def test_a_package_piece_the_task_allows_is_not_refused(capsys):
    # The encoder layer of exercise 05 may use the package's MultiHeadAttention.
    solution = nbformat.read(ROOT / "solutions" / "05_add_norm_and_feed_forward.ipynb", as_version=4)
    space: dict[str, Any] = {}
    for cell in solution.cells:
        if cell.cell_type == "code" and not cell.metadata["nbgrader"]["grade"] and "encoder = " not in cell.source:
            exec(cell.source, space)
    G.check_encoder_layer(space["MyEncoderLayer"], task=3)
    assert "✓ Task 3 passed" in capsys.readouterr().out


def test_the_nan_row_question_explains_wrong_answers():
    G.check_answer("03-nan-rows", "bc", task=3)
    for wrong, words in [("C", "hides keys (columns) or queries (rows)"), ("BCD", "returns no NaN"),
                         ("ABC", "never empties a row")]:  # "not yet" and the idea to check, never the letter
        with pytest.raises(AssertionError, match=re.escape(words)):
            G.check_answer("03-nan-rows", wrong, task=3)


def test_the_nan_row_question_agrees_with_the_package_and_a_plain_softmax():
    x = torch.randn(2, 3, 8)

    def plain(mask):
        scores = (x @ x.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1)

    tokens = torch.tensor([[5, 7, 0], [6, 0, 0]])
    assert not plain((tokens != 0)[:, None, :]).isnan().any()  # A
    assert plain((tokens != 0)[:, :, None]).isnan().any()  # B
    assert plain((torch.tensor([[5, 7, 0], [0, 0, 0]]) != 0)[:, None, :]).isnan().any()  # C
    # The package checks that a mask covers every key, so the query mask is spelled out as (B, Tq, Tk).
    query_mask = (tokens != 0)[:, :, None].expand(2, 3, 3)  # (B, Tq, Tk)
    assert not scaled_dot_product_attention(x, x, x, query_mask)[1].isnan().any()  # D

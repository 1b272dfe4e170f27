"""Checks for exercises 02: multi-head attention, LayerNorm, feed-forward, encoder layer (lessons 04 and 05)."""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import MultiHeadAttention
from ..layers import EncoderLayer, PositionwiseFeedForward
from ..masks import make_causal_mask
from ._common import (_build, _call, _call_text, _close, _compare, _expect_shape, _expect_tensor, _fill_parameters,
                      _first_output, _isolated, _linear_like, _name, _passed, _rand, _rng, _shape)

__all__ = ["check_encoder_layer", "check_feed_forward", "check_layer_norm", "check_multi_head_attention"]


def _mha_by_hand(ref: MultiHeadAttention, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, *,
                 scale: str | None = "d_k", split: str = "right", merge: str = "right", softmax_dim: int = -1,
                 use_w_o: bool = True, invert_mask: bool = False, n_heads: int | None = None) -> Tensor:
    """Multi-head attention from ``ref``'s weights, with one of the usual mistakes switched on."""
    batch, _, d_model = query.shape
    h = n_heads or ref.n_heads
    d_k = d_model // h

    def heads(x: Tensor) -> Tensor:
        length = x.size(1)
        if split == "no_transpose":
            return x.reshape(batch, h, length, d_k)  # (B, H, T, Dk), mixing positions
        if split == "interleaved":
            return x.view(batch, length, d_k, h).permute(0, 3, 1, 2)  # head i takes features i, i+H, ...
        return x.view(batch, length, h, d_k).transpose(1, 2)  # (B, H, T, Dk)

    q, k, v = heads(ref.w_q(query)), heads(ref.w_k(key)), heads(ref.w_v(value))
    scores = q @ k.transpose(-2, -1)  # (B, H, Tq, Tk)
    if scale is not None:
        scores = scores / math.sqrt(d_k if scale == "d_k" else d_model)
    if mask is not None:
        scores = scores.masked_fill(mask if invert_mask else ~mask, float("-inf"))
    out = torch.softmax(scores, dim=softmax_dim) @ v  # (B, H, Tq, Dk)
    length = out.size(2)
    if merge == "no_transpose":
        concat = out.reshape(batch, length, d_model)
    elif merge == "interleaved":
        concat = out.permute(0, 2, 3, 1).reshape(batch, length, d_model)
    else:
        concat = out.transpose(1, 2).reshape(batch, length, d_model)  # (B, Tq, D)
    return ref.w_o(concat) if use_w_o else concat


_SPLIT_HINT = ("Split each projection into heads by viewing it as (B, T, n_heads, d_k) and then transposing to "
               "(B, n_heads, T, d_k); a direct view or reshape to (B, n_heads, T, d_k) mixes the positions.")
_MERGE_HINT = ("Concatenate the heads by transposing (B, n_heads, T, d_k) back to (B, T, n_heads, d_k) before "
               "reshaping to (B, T, d_model).")


def _mha_mistakes(ref: MultiHeadAttention, q: Tensor, k: Tensor, v: Tensor,
                  mask: Tensor | None) -> list[tuple[str, Callable[[], Tensor]]]:
    d_k, d_model = ref.d_k, ref.d_model

    def wrong(**kw: Any) -> Callable[[], Tensor]:
        return lambda: _mha_by_hand(ref, q, k, v, mask, **kw)

    mistakes = [
        ("The scores of each head must be divided by sqrt(d_k); yours are not scaled.", wrong(scale=None)),
        (f"Divide by sqrt(d_k) = sqrt(d_model / n_heads) = {math.sqrt(d_k):.3f}, the width of one head, "
         f"not by sqrt(d_model) = {math.sqrt(d_model):.3f}.", wrong(scale="d_model")),
        (_SPLIT_HINT + " " + _MERGE_HINT, wrong(split="no_transpose", merge="no_transpose")),
        (_SPLIT_HINT, wrong(split="no_transpose")),
        (_MERGE_HINT, wrong(merge="no_transpose")),
        ("Head i takes the contiguous block of features i*d_k ... (i+1)*d_k - 1: view the projections as "
         "(B, T, n_heads, d_k), not (B, T, d_k, n_heads).", wrong(split="interleaved", merge="interleaved")),
        ("Apply the output projection w_o to the concatenated heads.", wrong(use_w_o=False)),
        ("Apply the softmax over the keys (the last dimension), not over the queries.", wrong(softmax_dim=-2)),
        ("Your output is that of one single head over all d_model features: split the projections into "
         "n_heads heads of d_k features each.", wrong(n_heads=1, scale="d_model")),
    ]
    if mask is not None:
        mistakes += [
            ("True in the mask means 'may attend': your mask hides the keys it should keep.", wrong(invert_mask=True)),
            ("The mask has no effect on your output: pass it to the attention of every head "
             "(scores.masked_fill(~mask, float('-inf'))); it broadcasts over the heads axis.",
             lambda: _mha_by_hand(ref, q, k, v, None)),
        ]
    return mistakes


def _copy_linear(target: nn.Module, source: nn.Linear) -> None:
    target.weight.copy_(source.weight)  # type: ignore[operator]
    target.bias.copy_(source.bias)  # type: ignore[operator,union-attr]


def _mha_cases(g: torch.Generator) -> list[tuple[str, int, int, Tensor, Tensor, Tensor | None]]:
    keep = torch.tensor([[True, True, True, True, False], [True, True, False, False, False]])
    return [
        ("self-attention, d_model=8, n_heads=2", 8, 2, _rand(g, 2, 3, 8), _rand(g, 2, 3, 8), None),
        ("cross-attention with a padding mask, d_model=12, n_heads=3", 12, 3, _rand(g, 2, 2, 12), _rand(g, 2, 5, 12),
         keep[:, None, None, :]),
        ("self-attention with a causal mask, d_model=8, n_heads=2", 8, 2, _rand(g, 2, 4, 8), _rand(g, 2, 4, 8),
         make_causal_mask(4)),
        ("one head, d_model=8, n_heads=1", 8, 1, _rand(g, 1, 3, 8), _rand(g, 1, 3, 8), None),
        ("d_k = 1, d_model=4, n_heads=4", 4, 4, _rand(g, 2, 3, 4), _rand(g, 2, 2, 4), None),
    ]


@_isolated(avoid=("minitransformer.attention:MultiHeadAttention", "torch.nn:MultiheadAttention"))
def check_multi_head_attention(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a multi-head attention class against :class:`MultiHeadAttention` with the same weights.

    ``cls(d_model, n_heads)`` must hold four ``nn.Linear(d_model, d_model)`` named ``w_q``, ``w_k``,
    ``w_v``, ``w_o``; its ``forward(query, key, value, mask=None)`` returns (B, Tq, d_model) (or a
    tuple whose first element is that). The package's weights are copied in, the outputs compared
    (section 3.2.2, lesson 04).

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    for case, d_model, n_heads, query, memory, mask in _mha_cases(g):
        mine = _build(cls, d_model, n_heads)
        owner = f"{_name(cls)}({d_model}, {n_heads})"
        ref = MultiHeadAttention(d_model, n_heads).eval()
        _fill_parameters(ref, g)
        for name in ("w_q", "w_k", "w_v", "w_o"):
            _copy_linear(_linear_like(mine, name, d_model, d_model, owner), getattr(ref, name))
        key = value = memory
        args = (query, key, value) if mask is None else (query, key, value, mask)
        text = _call_text(mine, *args, names=("query", "key", "value", "mask")).replace(
            _name(mine), f"{owner}.forward", 1) + f" [{case}]"
        out = _expect_tensor(_first_output(_call(mine, *args, text=text)), text, "as the output")
        expected = ref(query, key, value, mask)[0]
        _expect_shape(out, expected.shape, text, "output")
        _compare(out, expected, text, "output", _mha_mistakes(ref, query, key, value, mask))
    _passed(task, "multi-head attention, 5 cases (self- and cross-attention, padding and causal masks, "
                  "1 to 4 heads, d_k from 1 to 8)")


def _layer_norm_variant(x: Tensor, weight: Tensor, bias: Tensor, eps: float, *, correction: int = 0,
                        eps_outside: bool = False, dim: int = -1, affine: bool = True, swap: bool = False) -> Tensor:
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, correction=correction)
    normed = (x - mean) / (var.sqrt() + eps) if eps_outside else (x - mean) / torch.sqrt(var + eps)
    if not affine:
        return normed
    return normed * bias + weight if swap else normed * weight + bias


@_isolated(avoid=("minitransformer.layers:LayerNorm", "torch.nn:LayerNorm", "torch.nn.functional:layer_norm"))
def check_layer_norm(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a LayerNorm class against ``F.layer_norm`` (the package's :class:`LayerNorm` computes the same).

    ``cls(d_model)`` must hold parameters ``weight`` (gamma, ones at first) and ``bias`` (beta, zeros)
    of shape (d_model,) and use eps = 1e-5; ``forward(x)`` normalises each position over its last
    dimension with the biased variance (lesson 05).

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    d_model, eps = 6, 1e-5
    norm = _build(cls, d_model)
    owner = f"{_name(cls)}({d_model})"
    params = dict(norm.named_parameters())
    for name, start, role in (("weight", 1.0, "gamma"), ("bias", 0.0, "beta")):
        if name not in params:
            found = ", ".join(params) or "none"
            plain = isinstance(getattr(norm, name, None), Tensor)
            raise AssertionError(
                f"{owner} has no parameter `{name}`" + (
                    f": self.{name} is a plain tensor; wrap it in nn.Parameter so the optimizer learns it" if plain
                    else f" (its parameters: {found}): name {role} `{name}`, as nn.LayerNorm does")
            )
        p = params[name]
        if tuple(p.shape) != (d_model,):
            raise AssertionError(f"{owner}.{name} has shape {_shape(p)}; expected ({d_model},), one {role} per feature")
        if not torch.allclose(p, torch.full_like(p, start)):
            raise AssertionError(f"{owner}.{name} ({role}) should start at {start:g} everywhere, so that a new layer "
                                 f"only normalises; it starts at {p.detach().flatten()[:3].tolist()}...")
    weight, bias = 1.0 + _rand(g, d_model, scale=0.5), _rand(g, d_model, scale=0.5)
    params["weight"].copy_(weight)
    params["bias"].copy_(bias)
    constant = _rand(g, 2, 3, d_model)
    constant[0, 1] = 0.7  # a position whose features are all equal: variance 0
    cases = [
        ("(B, T, D) input with a mean far from 0", 3.0 + 2.0 * _rand(g, 2, 3, d_model)),
        ("(T, D) input", _rand(g, 4, d_model)),
        ("small variance, where eps matters", 0.01 * _rand(g, 2, 3, d_model)),
        ("a position with variance 0", constant),
    ]
    for case, x in cases:
        text = f"{owner}.forward(x {_shape(x)}) [{case}]"
        out = _expect_tensor(_call(norm, x, text=text), text, f"of shape {_shape(x)}")
        expected = F.layer_norm(x, (d_model,), weight, bias, eps)
        if out.shape == expected.shape and torch.isnan(out).any():
            raise AssertionError(f"{text}: your output contains NaN. A position whose features are all equal has "
                                 "variance 0; eps inside the square root, sqrt(var + eps), keeps it finite.")

        def variant(**kw: Any) -> Callable[[], Tensor]:
            return lambda: _layer_norm_variant(x, weight, bias, eps, **kw)

        mistakes = [
            ("Your output matches the unbiased variance (dividing by d_model - 1, torch.var's default): layer "
             "normalization uses the biased one, x.var(dim=-1, unbiased=False) or ((x - mean)**2).mean(-1).",
             variant(correction=1)),
            ("Put eps inside the square root, sqrt(var + eps), not after it.", variant(eps_outside=True)),
            ("eps is missing: divide by sqrt(var + eps) with eps = 1e-5.",
             lambda: _layer_norm_variant(x, weight, bias, 0.0)),
            ("Normalise each position over its d_model features, the last dimension (dim=-1), not over the batch.",
             variant(dim=0)),
            ("Normalise each position over its d_model features, the last dimension (dim=-1), not over the positions.",
             variant(dim=-2)),
            ("After normalising, multiply by self.weight (gamma) and add self.bias (beta).", variant(affine=False)),
            ("gamma (self.weight) multiplies and beta (self.bias) is added: you swapped them.", variant(swap=True)),
        ]
        _compare(out, expected, text, "output", mistakes, atol=1e-4, rtol=1e-4)
    # A non-default eps must be used, not only accepted.
    x = 0.05 * _rand(g, 2, 3, d_model)
    text = f"{_name(cls)}({d_model}, eps=0.1).forward(x {_shape(x)}) [eps=0.1 on an input of small variance]"
    wide = _call(lambda: cls(d_model, eps=0.1), text=f"{_name(cls)}({d_model}, eps=0.1)")
    out = _expect_tensor(_call(wide.eval(), x, text=text), text, f"of shape {_shape(x)}")
    expected = F.layer_norm(x, (d_model,), None, None, 0.1)
    _compare(out, expected, text, "output", [
        ("Your layer ignores its eps argument: store it in __init__ (self.eps = eps) and use self.eps in forward.",
         lambda: F.layer_norm(x, (d_model,), None, None, eps)),
    ], atol=1e-4, rtol=1e-4)
    _passed(task, "layer normalization, 5 inputs (3-D, 2-D, small variance, a constant position, eps=0.1), "
                  "gamma and beta used")


def _expect_no_dropout_in_eval(cls: type[nn.Module], args: tuple[int, ...], ref: nn.Module, x: Tensor,
                               owner: str) -> None:
    """Built with dropout=0.5 and put in eval mode, the learner's module must compute exactly what ``ref`` does."""
    __tracebackhide__ = True
    built = f"{_name(cls)}({', '.join(map(str, args))}, dropout=0.5)"
    module = _call(lambda: cls(*args, dropout=0.5), text=built)
    if not isinstance(module, nn.Module):
        raise AssertionError(f"{built} built a {type(module).__name__}; expected a subclass of nn.Module")
    module.load_state_dict(ref.state_dict(), strict=False)
    module.eval()
    text = f"{built}.eval().forward(x {_shape(x)})"
    expected = _first_output(ref(x))
    for _ in range(2):
        out = _expect_tensor(_first_output(_call(module, x, text=text)), text, f"of shape {_shape(x)}")
        if not _close(out, expected, 1e-4, 1e-4):
            raise AssertionError(
                f"{text}: in eval mode your output changes from call to call or differs from the one without "
                "dropout: dropout stays on. Use nn.Dropout (a module that .eval() switches off), or "
                "F.dropout(x, p, training=self.training), not F.dropout(x, p)."
            )


@_isolated(avoid=("minitransformer.layers:PositionwiseFeedForward",))
def check_feed_forward(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a position-wise feed-forward class against :class:`PositionwiseFeedForward`.

    ``cls(d_model, d_ff)`` must hold ``linear1 = nn.Linear(d_model, d_ff)`` and
    ``linear2 = nn.Linear(d_ff, d_model)``; ``forward(x)`` computes max(0, x W1 + b1) W2 + b2 at
    every position (section 3.3, lesson 05). It is called in eval mode, so dropout is off.

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    d_model, d_ff = 8, 32
    ffn = _build(cls, d_model, d_ff)
    owner = f"{_name(cls)}({d_model}, {d_ff})"
    ref = PositionwiseFeedForward(d_model, d_ff, dropout=0.0).eval()
    _fill_parameters(ref, g, scale=1.0)
    _copy_linear(_linear_like(ffn, "linear1", d_model, d_ff, owner), ref.linear1)
    _copy_linear(_linear_like(ffn, "linear2", d_ff, d_model, owner), ref.linear2)
    for case, x in (("(B, T, D)", _rand(g, 2, 5, d_model)), ("(T, D)", _rand(g, 3, d_model)),
                    ("one position", _rand(g, 1, 1, d_model))):
        text = f"{owner}.forward(x {_shape(x)}) [{case}]"
        out = _expect_tensor(_call(ffn, x, text=text), text, f"of shape {_shape(x)}")
        expected = ref(x)
        mistakes = [
            ("The ReLU between the two layers is missing: max(0, x W1 + b1) W2 + b2.",
             lambda: ref.linear2(ref.linear1(x))),
            ("Only one ReLU, between the two layers: the output of linear2 is not passed through it.",
             lambda: torch.relu(ref(x))),
            ("The paper's activation is the ReLU, max(0, .), not the GELU.",
             lambda: ref.linear2(F.gelu(ref.linear1(x)))),
            ("The ReLU comes after linear1, not before it.", lambda: ref.linear2(ref.linear1(torch.relu(x)))),
        ]
        _compare(out, expected, text, "output", mistakes)
    _expect_no_dropout_in_eval(cls, (d_model, d_ff), ref, _rand(g, 2, 5, d_model), owner)
    _passed(task, "position-wise feed-forward, 3 inputs ((B, T, D), (T, D), one position), dropout off in eval mode")


def _encoder_by_hand(ref: EncoderLayer, x: Tensor, mask: Tensor | None, *, order: str = "post",
                     swap_norms: bool = False, use_mask: bool = True) -> Tensor:
    """An encoder layer from ``ref``'s parts, wired right (``order="post"``) or in a usual wrong way."""
    def attn(h: Tensor) -> Tensor:
        return ref.self_attn(h, h, h, mask if use_mask else None)[0]

    ffn = ref.feed_forward
    n1, n2 = (ref.norm2, ref.norm1) if swap_norms else (ref.norm1, ref.norm2)
    if order == "pre":
        x = x + attn(n1(x))
        return x + ffn(n2(x))
    if order == "no_residual":
        return n2(ffn(n1(attn(x))))
    if order == "no_norm":
        x = x + attn(x)
        return x + ffn(x)
    if order == "norm_inside":
        x = x + n1(attn(x))
        return x + n2(ffn(x))
    x = n1(x + attn(x))
    return n2(x + ffn(x))


@_isolated(avoid=("minitransformer.layers:EncoderLayer", "torch.nn:TransformerEncoderLayer"))
def check_encoder_layer(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a post-LN encoder layer against :class:`EncoderLayer` with the same weights.

    ``cls(d_model, n_heads, d_ff)`` must hold ``self_attn`` (with ``w_q``, ``w_k``, ``w_v``, ``w_o``),
    ``feed_forward`` (with ``linear1``, ``linear2``), ``norm1`` and ``norm2`` (with ``weight`` and
    ``bias``); ``forward(x, src_mask=None)`` computes x = LayerNorm(x + SelfAttention(x)), then
    LayerNorm(x + FFN(x)) (section 3.1, lesson 05). Called in eval mode, so dropout is off.

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    d_model, n_heads, d_ff = 8, 2, 16
    layer = _build(cls, d_model, n_heads, d_ff)
    owner = f"{_name(cls)}({d_model}, {n_heads}, {d_ff})"
    ref = EncoderLayer(d_model, n_heads, d_ff, dropout=0.0).eval()
    _fill_parameters(ref, g)
    mine = dict(layer.named_parameters())
    missing = [name for name in dict(ref.named_parameters()) if name not in mine]
    if missing:
        raise AssertionError(
            f"{owner} has no parameter {', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}: name its parts "
            "self_attn (holding w_q, w_k, w_v, w_o), feed_forward (holding linear1, linear2), norm1 and norm2 "
            "(holding weight and bias), so the package's weights can be copied in. Its parameters are: "
            f"{', '.join(sorted(mine)) or 'none'}."
        )
    for name, p in ref.named_parameters():
        if mine[name].shape != p.shape:
            raise AssertionError(f"{owner}: parameter {name} has shape {_shape(mine[name])} but the package's has {_shape(p)}")
        mine[name].copy_(p)

    # The parts first, so that a bug in an earlier task is reported as such.
    x = _rand(g, 2, 5, d_model)
    parts: list[tuple[str, Callable[[], Any], Tensor, str]] = [
        ("self_attn", lambda: _first_output(layer.self_attn(x, x, x)), ref.self_attn(x, x, x)[0], "multi-head attention (task 1)"),
        ("feed_forward", lambda: layer.feed_forward(x), ref.feed_forward(x), "the feed-forward network (task 3)"),
        ("norm1", lambda: layer.norm1(x), ref.norm1(x), "layer normalization (task 2)"),
    ]
    for part, run, expected, what in parts:
        text = f"{owner}.{part}(x {_shape(x)})"
        got = _call(run, text=text)
        if not isinstance(got, Tensor) or not _close(got, expected, 1e-4, 1e-4):
            raise AssertionError(f"{text} does not compute {what} like the package: make that task pass first, "
                                 "or use the package's class for this part.")

    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    for case, x, mask in (("no mask", _rand(g, 2, 5, d_model), None),
                          ("a padding mask (B, 1, 1, S)", _rand(g, 2, 5, d_model), keep[:, None, None, :]),
                          ("one position", _rand(g, 1, 1, d_model), None)):
        args = (x,) if mask is None else (x, mask)
        text = f"{owner}.forward(" + ", ".join(f"{n} {_shape(a)}" for n, a in zip(("x", "src_mask"), args)) + f") [{case}]"
        out = _expect_tensor(_first_output(_call(layer, *args, text=text)), text, f"of shape {_shape(x)}")
        expected = ref(x, mask)

        def variant(x: Tensor = x, mask: Tensor | None = mask, **kw: Any) -> Callable[[], Tensor]:
            return lambda: _encoder_by_hand(ref, x, mask, **kw)

        mistakes = [
            ("Your layer is pre-LN, x + Sublayer(LayerNorm(x)); the paper (and this task) is post-LN: "
             "x = LayerNorm(x + Sublayer(x)).", variant(order="pre")),
            ("LayerNorm goes after the residual addition: LayerNorm(x + Sublayer(x)), not x + LayerNorm(Sublayer(x)).",
             variant(order="norm_inside")),
            ("The residual connections are missing: add the sub-layer's input to its output, LayerNorm(x + Sublayer(x)).",
             variant(order="no_residual")),
            ("The LayerNorms are missing: x = LayerNorm(x + Sublayer(x)) after each sub-layer.", variant(order="no_norm")),
            ("norm1 belongs to the attention sub-layer and norm2 to the feed-forward one: you swapped them.",
             variant(swap_norms=True)),
            ("The mask has no effect: pass src_mask to the self-attention.", variant(use_mask=False)),
        ]
        _compare(out, expected, text, "output", mistakes)
    _expect_no_dropout_in_eval(cls, (d_model, n_heads, d_ff), ref, _rand(g, 2, 5, d_model), owner)
    _passed(task, "post-LN encoder layer, its parts and 3 inputs (no mask, a padding mask, one position), "
                  "dropout off in eval mode")

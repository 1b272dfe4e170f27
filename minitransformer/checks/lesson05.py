"""Checks for exercise 05: LayerNorm, the feed-forward network, the encoder layer (lesson 05)."""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..layers import EncoderLayer, PositionwiseFeedForward
from .operations import LINEAR, PIECES, SOFTMAX
from .compare import (build_learner, call_learner, all_close, compare, copy_linear, expect_tensor, fill_parameters, first_output,
                      isolated, linear_like, callable_name, report_passed, random_tensor, make_rng, shape_text)

__all__ = ["check_encoder_layer", "check_feed_forward", "check_layer_norm"]


def _layer_norm_variant(x: Tensor, weight: Tensor, bias: Tensor, eps: float, *, correction: int = 0,
                        eps_outside: bool = False, dim: int = -1, affine: bool = True, swap: bool = False) -> Tensor:
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, correction=correction)
    normed = (x - mean) / (var.sqrt() + eps) if eps_outside else (x - mean) / torch.sqrt(var + eps)
    if not affine:
        return normed
    return normed * bias + weight if swap else normed * weight + bias


@isolated(avoid=("minitransformer.layers:LayerNorm", "torch.nn:LayerNorm", "torch.nn.functional:layer_norm"),
          builds='layer normalization from a mean, a variance and a square root', allow=('var', 'std', 'var_mean'))
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
    g = make_rng()
    d_model, eps = 6, 1e-5
    norm = build_learner(cls, d_model)
    owner = f"{callable_name(cls)}({d_model})"
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
            raise AssertionError(f"{owner}.{name} has shape {shape_text(p)}; expected ({d_model},), one {role} per feature")
        if not torch.allclose(p, torch.full_like(p, start)):
            raise AssertionError(f"{owner}.{name} ({role}) should start at {start:g} everywhere, so that a new layer "
                                 f"only normalises; it starts at {p.detach().flatten()[:3].tolist()}...")
    weight, bias = 1.0 + random_tensor(g, d_model, scale=0.5), random_tensor(g, d_model, scale=0.5)
    params["weight"].copy_(weight)
    params["bias"].copy_(bias)
    constant = random_tensor(g, 2, 3, d_model)
    constant[0, 1] = 0.7  # a position whose features are all equal: variance 0
    cases = [
        ("(B, T, D) input with a mean far from 0", 3.0 + 2.0 * random_tensor(g, 2, 3, d_model)),
        ("(T, D) input", random_tensor(g, 4, d_model)),
        ("small variance, where eps matters", 0.01 * random_tensor(g, 2, 3, d_model)),
        ("a position with variance 0", constant),
    ]
    for case, x in cases:
        text = f"{owner}.forward(x {shape_text(x)}) [{case}]"
        out = expect_tensor(call_learner(norm, x, text=text), text, f"of shape {shape_text(x)}")
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
        compare(out, expected, text, "output", mistakes, atol=1e-4, rtol=1e-4)
    # A non-default eps must be used, not only accepted.
    x = 0.05 * random_tensor(g, 2, 3, d_model)
    text = f"{callable_name(cls)}({d_model}, eps=0.1).forward(x {shape_text(x)}) [eps=0.1 on an input of small variance]"
    wide = call_learner(lambda: cls(d_model, eps=0.1), text=f"{callable_name(cls)}({d_model}, eps=0.1)")
    out = expect_tensor(call_learner(wide.eval(), x, text=text), text, f"of shape {shape_text(x)}")
    expected = F.layer_norm(x, (d_model,), None, None, 0.1)
    compare(out, expected, text, "output", [
        ("Your layer ignores its eps argument: store it in __init__ (self.eps = eps) and use self.eps in forward.",
         lambda: F.layer_norm(x, (d_model,), None, None, eps)),
    ], atol=1e-4, rtol=1e-4)
    report_passed(task, "layer normalization, 5 inputs (3-D, 2-D, small variance, a constant position, eps=0.1), "
                  "gamma and beta used")


def _expect_no_dropout_in_eval(cls: type[nn.Module], args: tuple[int, ...], ref: nn.Module, x: Tensor,
                               owner: str) -> None:
    """Built with dropout=0.5 and put in eval mode, the learner's module must compute exactly what ``ref`` does."""
    __tracebackhide__ = True
    built = f"{callable_name(cls)}({', '.join(map(str, args))}, dropout=0.5)"
    module = call_learner(lambda: cls(*args, dropout=0.5), text=built)
    if not isinstance(module, nn.Module):
        raise AssertionError(f"{built} built a {type(module).__name__}; expected a subclass of nn.Module")
    module.load_state_dict(ref.state_dict(), strict=False)
    module.eval()
    text = f"{built}.eval().forward(x {shape_text(x)})"
    expected = first_output(ref(x))
    for _ in range(2):
        out = expect_tensor(first_output(call_learner(module, x, text=text)), text, f"of shape {shape_text(x)}")
        if not all_close(out, expected, 1e-4, 1e-4):
            raise AssertionError(
                f"{text}: in eval mode your output changes from call to call or differs from the one without "
                "dropout: dropout stays on. Use nn.Dropout (a module that .eval() switches off), or "
                "F.dropout(x, p, training=self.training), not F.dropout(x, p)."
            )


@isolated(avoid=("minitransformer.layers:PositionwiseFeedForward",),
          builds='the feed-forward network from two linear layers and a ReLU', allow=(*LINEAR, 'relu', 'dropout'))
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
    g = make_rng()
    d_model, d_ff = 8, 32
    ffn = build_learner(cls, d_model, d_ff)
    owner = f"{callable_name(cls)}({d_model}, {d_ff})"
    ref = PositionwiseFeedForward(d_model, d_ff, dropout=0.0).eval()
    fill_parameters(ref, g, scale=1.0)
    copy_linear(linear_like(ffn, "linear1", d_model, d_ff, owner), ref.linear1)
    copy_linear(linear_like(ffn, "linear2", d_ff, d_model, owner), ref.linear2)
    for case, x in (("(B, T, D)", random_tensor(g, 2, 5, d_model)), ("(T, D)", random_tensor(g, 3, d_model)),
                    ("one position", random_tensor(g, 1, 1, d_model))):
        text = f"{owner}.forward(x {shape_text(x)}) [{case}]"
        out = expect_tensor(call_learner(ffn, x, text=text), text, f"of shape {shape_text(x)}")
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
        compare(out, expected, text, "output", mistakes)
    _expect_no_dropout_in_eval(cls, (d_model, d_ff), ref, random_tensor(g, 2, 5, d_model), owner)
    report_passed(task, "position-wise feed-forward, 3 inputs ((B, T, D), (T, D), one position), dropout off in eval mode")


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


@isolated(avoid=("minitransformer.layers:EncoderLayer", "torch.nn:TransformerEncoderLayer"),
          builds='the encoder layer from attention, the feed-forward network, residuals and layer norms',
          allow=(*LINEAR, *SOFTMAX, 'relu', 'dropout', 'layer_norm', 'var', 'std', 'var_mean', 'scaled_dot_product_attention', *PIECES))
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
    g = make_rng()
    d_model, n_heads, d_ff = 8, 2, 16
    layer = build_learner(cls, d_model, n_heads, d_ff)
    owner = f"{callable_name(cls)}({d_model}, {n_heads}, {d_ff})"
    ref = EncoderLayer(d_model, n_heads, d_ff, dropout=0.0).eval()
    fill_parameters(ref, g)
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
            raise AssertionError(f"{owner}: parameter {name} has shape {shape_text(mine[name])} but the package's has {shape_text(p)}")
        mine[name].copy_(p)

    # The parts first, so that a bug in an earlier task is reported as such.
    x = random_tensor(g, 2, 5, d_model)
    parts: list[tuple[str, Callable[[], Any], Tensor, str]] = [
        ("self_attn", lambda: first_output(layer.self_attn(x, x, x)), ref.self_attn(x, x, x)[0], "multi-head attention (task 1)"),
        ("feed_forward", lambda: layer.feed_forward(x), ref.feed_forward(x), "the feed-forward network (task 3)"),
        ("norm1", lambda: layer.norm1(x), ref.norm1(x), "layer normalization (task 2)"),
    ]
    for part, run, expected, what in parts:
        text = f"{owner}.{part}(x {shape_text(x)})"
        got = call_learner(run, text=text)
        if not isinstance(got, Tensor) or not all_close(got, expected, 1e-4, 1e-4):
            raise AssertionError(f"{text} does not compute {what} like the package: make that task pass first, "
                                 "or use the package's class for this part.")

    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    for case, x, mask in (("no mask", random_tensor(g, 2, 5, d_model), None),
                          ("a padding mask (B, 1, 1, S)", random_tensor(g, 2, 5, d_model), keep[:, None, None, :]),
                          ("one position", random_tensor(g, 1, 1, d_model), None)):
        args = (x,) if mask is None else (x, mask)
        text = f"{owner}.forward(" + ", ".join(f"{n} {shape_text(a)}" for n, a in zip(("x", "src_mask"), args)) + f") [{case}]"
        out = expect_tensor(first_output(call_learner(layer, *args, text=text)), text, f"of shape {shape_text(x)}")
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
        compare(out, expected, text, "output", mistakes)
    _expect_no_dropout_in_eval(cls, (d_model, n_heads, d_ff), ref, random_tensor(g, 2, 5, d_model), owner)
    report_passed(task, "post-LN encoder layer, its parts and 3 inputs (no mask, a padding mask, one position), "
                  "dropout off in eval mode")

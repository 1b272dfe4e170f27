"""Checks for exercise 00: additive attention, alignment and context (lesson 00), layers to connect (lesson 00b)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .operations import MATMUL, SOFTMAX
from .compare import (call_learner, call_text, compare, describe, expect_shape, expect_tensor, isolated, known_mistake,
                      callable_name, report_passed, random_tensor, make_rng)

__all__ = ["check_additive_scores", "check_alignment_and_context", "check_layers_to_connect"]


def _additive(s: Tensor, h: Tensor, W: Tensor, U: Tensor, v: Tensor, *, tanh: bool = True,
              use_v: bool = True) -> Tensor:
    """e_tj = v^T tanh(W s + U h_j) for every j at once; the switches turn on the usual mistakes."""
    hidden = (s @ W.T)[:, None, :] + h @ U.T  # (B, 1, A) + (B, S, A) -> (B, S, A)
    if tanh:
        hidden = torch.tanh(hidden)
    return hidden @ v if use_v else hidden.sum(dim=-1)  # (B, S)


@isolated(builds='the additive scores from matrix products and tanh', allow=(*MATMUL, 'tanh'))
def check_additive_scores(fn: Callable[..., Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(s, h, W, U, v) -> e`` (B, S), the additive attention scores of Bahdanau et al. (lesson 00).

    e_tj = v^T tanh(W s_(t-1) + U h_j) with the decoder state ``s`` (B, Hd), the encoder states ``h``
    (B, S, He), ``W`` (A, Hd), ``U`` (A, He) and ``v`` (A,): one score per source position.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    cases = [
        ("B=2, S=5, decoder 4, encoder 6, attention 3", 2, 5, 4, 6, 3),
        ("one source word, S=1", 1, 1, 4, 6, 3),
        ("decoder and encoder states of the same width", 3, 4, 5, 5, 5),
    ]
    for case, batch, length, d_dec, d_enc, d_att in cases:
        s, h = random_tensor(g, batch, d_dec), random_tensor(g, batch, length, d_enc)
        W, U, v = random_tensor(g, d_att, d_dec, scale=0.7), random_tensor(g, d_att, d_enc, scale=0.7), random_tensor(g, d_att)
        args = (s, h, W, U, v)
        text = call_text(fn, *args, names=("s", "h", "W", "U", "v")) + f" [{case}]"
        try:
            e = call_learner(fn, *args, text=text)
        except AssertionError as err:
            if "RuntimeError" in str(err):
                raise AssertionError(f"{err}. The formula is written for one column vector; s and h hold ROW vectors "
                                     "(one per sentence and position), so W s becomes s @ W.T (B, A) and U h_j "
                                     "becomes h @ U.T (B, S, A).") from None
            raise
        e = expect_tensor(e, text, f"of shape ({batch}, {length})")
        expect_shape(e, (batch, length), text, "scores", {
            (batch, length, 1): "One score per source word: squeeze the last axis, (B, S, 1) -> (B, S).",
            (batch, length, d_att): "The vector tanh(W s + U h_j) still has to be turned into one number by "
                                    "the dot product with v.",
            (batch, batch, length): "W s is (B, A): add an axis for the source positions, (B, 1, A), so it "
                                    "broadcasts against U h (B, S, A) sentence by sentence.",
        })
        expected = _additive(*args)
        mistakes = [
            ("The tanh is missing: e_tj = v^T tanh(W s + U h_j).", lambda: _additive(*args, tanh=False)),
            ("The last step is a dot product with v, not a plain sum of the features.",
             lambda: _additive(*args, use_v=False)),
            ("The sum goes inside the tanh: tanh(W s + U h_j), not tanh(W s) + tanh(U h_j).",
             lambda: (torch.tanh(s @ W.T)[:, None, :] + torch.tanh(h @ U.T)) @ v),
            ("W multiplies the decoder state s and U the encoder states h: you swapped them.",
             lambda: _additive(s, h, U, W, v)),
            ("W is (A, Hd): as a column-vector formula, W s becomes s @ W.T for a batch of row vectors.",
             lambda: _additive(s, h, W.T, U.T, v)),
        ]
        compare(e, expected, text, "scores", mistakes)
    report_passed(task, "additive attention scores, 3 cases (different widths, one source word)")


def _alignment(scores: Tensor, h: Tensor, keep: Tensor, *, masked: bool = True, invert: bool = False,
               dim: int = -1, fill: float = float("-inf")) -> tuple[Tensor, Tensor]:
    hide = keep if invert else ~keep
    if masked:
        scores = scores.masked_fill(hide, fill)
    alpha = torch.softmax(scores, dim=dim)  # (B, S)
    return alpha, (alpha[:, :, None] * h).sum(dim=1)  # (B, S), (B, He)


@isolated(builds='the alignment weights and the context from a softmax and a weighted sum', allow=(*MATMUL, *SOFTMAX))
def check_alignment_and_context(fn: Callable[..., tuple[Tensor, Tensor]], *, task: int | str | None = None) -> None:
    """Check ``fn(scores, h, src_mask) -> (alpha, context)``: one step of attention in an RNN decoder (lesson 00).

    alpha (B, S) is the softmax of the scores over the source positions, with padding positions
    (``src_mask`` False) given weight exactly 0; context (B, He) = sum_j alpha_j h_j.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    cases = [
        ("a batch with padding", random_tensor(g, 3, 5, scale=2.0), random_tensor(g, 3, 5, 6),
         torch.tensor([[True] * 5, [True, True, True, False, False], [True, True, False, False, False]])),
        ("no padding", random_tensor(g, 2, 4, scale=2.0), random_tensor(g, 2, 4, 3), torch.ones(2, 4, dtype=torch.bool)),
        ("a one-word source", random_tensor(g, 2, 3), random_tensor(g, 2, 3, 4), torch.tensor([[True, False, False]] * 2)),
    ]
    for case, scores, h, keep in cases:
        args = (scores, h, keep)
        text = call_text(fn, *args, names=("scores", "h", "src_mask")) + f" [{case}]"
        result = call_learner(fn, *args, text=text, in_place="changed its inputs in place: compute new tensors "
                              "instead (masked_fill, not masked_fill_)")
        if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 2:
            raise AssertionError(f"{text} returned {describe(result)}; expected a pair (alpha, context)")
        alpha = expect_tensor(result[0], text, "as alpha")
        context = expect_tensor(result[1], text, "as the context")
        batch, length, width = h.shape
        expect_shape(alpha, (batch, length), text, "alignment weights alpha")
        expect_shape(context, (batch, width), text, "context vector", {
            (batch, length, width): "The context is the weighted SUM over the source positions: sum over dim 1.",
            (batch, 1, width): "Squeeze the source axis: one context vector (He,) per sentence.",
        })
        expected_alpha, expected_context = _alignment(scores, h, keep)
        if torch.isnan(alpha).any():
            raise AssertionError(f"{text}: your weights contain NaN; every sentence here has at least one real "
                                 "word, so the mask was probably applied the wrong way round (hide where it is False).")
        if not keep.all():
            leak = (~keep) & (alpha.abs() > 1e-6)
            if leak.any():
                b, j = (int(i) for i in leak.nonzero()[0])
                mistakes = [
                    ("True in src_mask marks a real word: you hid the real words and kept the padding.",
                     lambda: _alignment(scores, h, keep, invert=True)[0]),
                    ("Padding must be hidden: set its scores to -inf before the softmax "
                     "(scores.masked_fill(~src_mask, float('-inf'))).",
                     lambda: _alignment(scores, h, keep, masked=False)[0]),
                    ("A score of 0 still gets weight exp(0) > 0: fill the padding scores with -inf, not 0.",
                     lambda: _alignment(scores, h, keep, fill=0.0)[0]),
                ]
                hint = known_mistake(alpha, mistakes) or ("Set the padding scores to -inf before the softmax, so that "
                                                           "their weights are exactly 0.")
                raise AssertionError(f"{text}: sentence {b} gives weight {alpha[b, j].item():.3f} to source position "
                                     f"{j}, which is padding. {hint}")
        compare(alpha, expected_alpha, text, "alignment weights", [
            ("The softmax runs over the source positions (dim -1) of each sentence, not over the batch.",
             lambda: _alignment(scores, h, keep, dim=0)[0]),
        ])
        compare(context, expected_context, text, "context vector", [
            ("The context weights the states by alpha; you took their plain mean.",
             lambda: h.masked_fill(~keep[:, :, None], 0).sum(1) / keep.sum(1, keepdim=True)),
            ("The context is the weighted sum over the source positions, alpha @ h per sentence.",
             lambda: (expected_alpha[:, :, None] * h).mean(dim=1)),
        ])
    report_passed(task, "alignment weights and context vector, 3 batches (padding, none, a one-word source)")


def _layers_needed(n: int, kernel: int, dilated: bool, reach_per_unit: Callable[[int], int] | None = None,
                   target: int | None = None) -> int:
    """Stack layers until the last output's reach covers ``target`` (default n - 1) positions back."""
    side = reach_per_unit(kernel) if reach_per_unit else (kernel - 1) // 2
    target = n - 1 if target is None else target
    reach, layers, dilation = 0, 0, 1
    while reach < target:
        reach += side * dilation
        layers += 1
        dilation = 2 * dilation if dilated else 1
    return layers


def _reach_by_simulation(n: int, kernel: int, dilated: bool) -> int:
    """The same count, found by propagating which inputs each output depends on (no formula)."""
    depends = torch.zeros(n, dtype=torch.bool)
    depends[0] = True  # which positions depend on input 0 so far
    layers, dilation, half = 0, 1, kernel // 2
    while not depends[-1]:
        padded = torch.nn.functional.pad(depends[None, None].float(), (half * dilation, half * dilation))
        ones = torch.ones(1, 1, kernel)
        depends = torch.nn.functional.conv1d(padded, ones, dilation=dilation)[0, 0] > 0
        layers += 1
        dilation = 2 * dilation if dilated else 1
    return layers


@isolated(builds='the count from Python arithmetic', allow=())
def check_layers_to_connect(fn: Callable[[int, int, bool], int], *, task: int | str | None = None) -> None:
    """Check ``fn(n, kernel, dilated) -> layers``: the path length of a stack of centred 1-D convolutions.

    A centred convolution of odd kernel size k and dilation d lets output t read inputs t - d(k-1)/2
    ... t + d(k-1)/2. With ``dilated=False`` every layer has d = 1; with ``dilated=True`` layer l
    (from 0) has d = 2^l. The answer is the smallest number of layers whose output n-1 depends on
    input 0 (0 when n = 1). The references of the short sequences come from a simulation of which
    inputs each output depends on, those of the long ones from the formula (lesson 00b).

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    cases = [(9, 3, False), (17, 5, False), (33, 3, False), (10, 5, False), (2, 3, False), (1, 3, False),
             (2048, 3, False), (9, 3, True), (33, 3, True), (2048, 3, True), (100, 5, True), (101, 7, False)]
    for n, kernel, dilated in cases:
        text = f"{callable_name(fn)}(n={n}, kernel={kernel}, dilated={dilated})"
        got = call_learner(fn, n, kernel, dilated, text=text)
        if isinstance(got, Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, float) and got.is_integer():
            got = int(got)
        if not isinstance(got, int) or isinstance(got, bool):
            raise AssertionError(f"{text} returned {describe(got)}; expected a whole number of layers (an int)")
        expected = _reach_by_simulation(n, kernel, dilated) if n <= 200 else _layers_needed(n, kernel, dilated)
        if got == expected:
            continue
        side = (kernel - 1) // 2
        hints: list[tuple[int, str]] = [
            (_layers_needed(n + 1, kernel, dilated),
             f"Position n-1 is n-1 = {n - 1} steps from position 0, not n = {n}: count the distance, not the "
             "positions."),
            (_layers_needed(n, kernel, dilated, reach_per_unit=lambda k: k - 1),
             f"A centred kernel of size {kernel} reaches {side} position(s) to EACH side, (k-1)/2, not k-1: "
             "half of its window looks to the right."),
            (_layers_needed(n, kernel, dilated, reach_per_unit=lambda k: k),
             f"A kernel of size {kernel} reaches (k-1)/2 = {side} position(s) to each side, not k."),
            (_layers_needed(n, 3, dilated),
             f"A kernel of size {kernel} reaches (k-1)/2 = {side} positions to each side per layer; yours counts one "
             "position per layer, as a kernel of 3 would."),
            (_layers_needed(n, kernel, not dilated),
             "With dilated=True layer l skips 2^l - 1 inputs between its taps (its reach doubles every layer); "
             "with dilated=False every layer has dilation 1." if dilated else
             "With dilated=False every layer has dilation 1: the reach grows by the same (k-1)/2 per layer."),
        ]
        hint = next((h for value, h in hints if value == got), "")
        if n == 1 and got != 0:
            hint = "With one position, output 0 already depends on input 0: no layer is needed (0)."
        raise AssertionError(f"{text} returned {got} but {expected} layer(s) are needed."
                             + (f" {hint}" if hint else ""))
    report_passed(task, "layers to connect the ends, 12 cases (kernels 3 to 7, n from 1 to 2048, with and without dilation)")

"""Checks for the debugging task of every exercise (01-10): a given function with one silent fault.

Each exercise from 01 on ends with a function that runs without error and returns the right shapes,
but computes something else than the lesson's piece. The learner finds the fault with a small test
(an invariant of the lesson: rows that sum to 1, causality, a loss that ignores padding, ...), fixes
a copy of the function and names the fault with a letter. Two checks grade it:

* ``check_fixed_<piece>(fn)`` runs the learner's fixed copy on inputs where the fault shows and
  compares it with the package's piece; the faulty function fails it, and so do the usual half-fixes,
  each with a message that says what the result still does wrong;
* :func:`check_fault` compares the letter with the fault's key in :data:`FAULTS`; a wrong letter gets
  "not yet" and a pointer to the invariant to test, never the right letter.

The faulty functions themselves are written out in the exercise notebooks (and, as ``_faulty_*``,
here: the unit tests run them through the checks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ..attention import MultiHeadAttention, scaled_dot_product_attention
from ..embeddings import sinusoidal_positional_encoding
from ..layers import EncoderLayer
from ..masks import make_causal_mask, make_target_mask
from ..training.loss import label_smoothed_nll
from .compare import (all_close, as_number, call_learner, call_text, callable_name, compare, decoding_model,
                      describe, expect_shape, expect_tensor, fill_parameters, isolated, known_mistake, make_rng,
                      random_tensor,
                      report_passed)

__all__ = ["FAULTS", "check_fault", "check_fixed_attention", "check_fixed_bleu", "check_fixed_encoder_layer",
           "check_fixed_lm_loss", "check_fixed_multi_head", "check_fixed_paired_interval",
           "check_fixed_positional_encoding", "check_fixed_skipgram_step", "check_fixed_smoothed_loss",
           "check_fixed_teacher_forcing"]


# --- Naming the fault --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fault:
    """One debugging task's fault: its letter among the notebook's choices, and what to say."""

    title: str
    correct: str  # the letter
    why: str  # printed with the pass line
    not_yet: str  # any wrong letter: a pointer to the invariant, never the letter


FAULTS: dict[str, Fault] = {
    "01-skipgram": Fault(
        title="the fault in skipgram_step_under_test",
        correct="B",
        why="`grad_W[centre] += rows` reads, adds and writes back once per distinct index, so when a centre word "
            "occurs in several pairs only one pair's contribution reaches its row; index_add_ accumulates them",
        not_yet="Compare the function's grad_W with autograd's on a batch where one centre word occurs in several "
                "pairs, and look at which rows differ, and by how much.",
    ),
    "02-interleaving": Fault(
        title="the fault in positional_encoding_under_test",
        correct="B",
        why="the sines fill the first half of the columns and the cosines the second, so columns 2i and 2i+1 no "
            "longer share a frequency: the pairs are not points on the unit circle and no rotation M_k moves them",
        not_yet="Test the invariant of task 2: columns 2i and 2i+1 share one frequency, so for every position "
                "PE[p, 2i]^2 + PE[p, 2i+1]^2 = 1. Which pairs break it, and what do the columns hold instead?",
    ),
    "03-mask-after-softmax": Fault(
        title="the fault in attention_under_test",
        correct="B",
        why="the mask zeroes the hidden keys after the softmax has shared 1 among all keys, so a row with a hidden "
            "key sums to less than 1; hiding a key means a score of -inf before the softmax",
        not_yet="Give it a padding mask and test both invariants of attention weights: hidden keys get 0, and "
                "every row sums to 1. Which one holds, which one breaks, and in which rows?",
    ),
    "04-split-heads": Fault(
        title="the fault in multi_head_under_test",
        correct="A",
        why="`.view(B, H, T, d_k)` cuts the projected (B, T, D) tensor in the order of memory, so each head's "
            "rows mix features of several positions; (B, T, H, d_k) then transpose(1, 2) keeps each position's row",
        not_yet="Run it under a causal mask and change only the last token: a causal attention's first outputs "
                "must not move. If they do, follow one position's features through the split.",
    ),
    "05-pre-ln-wiring": Fault(
        title="the fault in encoder_layer_under_test",
        correct="A",
        why="the layer norms run before each sub-layer and nothing normalises the sum after it: that is pre-LN "
            "wiring, whose output is the residual stream, not LayerNorm(x + Sublayer(x))",
        not_yet="The last operation of a post-LN layer is a LayerNorm: with gains 1 and biases 0, each position "
                "of the output has mean 0 and standard deviation 1. Test that, then read the order of the steps.",
    ),
    "06-causal-mask": Fault(
        title="the fault in logits_under_test",
        correct="A",
        why="`.triu()` keeps the upper triangle, so each position reads itself and the future instead of itself "
            "and the past; the lower triangle, `.tril()`, is the causal mask",
        not_yet="Test causality: change only the last target token and compare the logits of the earlier "
                "positions. Then look at which keys row 0 of the decoder's mask lets position 0 read.",
    ),
    "07-smoothing-on-pad": Fault(
        title="the fault in smoothed_loss_under_test",
        correct="A",
        why="epsilon is spread over V - 1 tokens with <pad> among them, so the target asks for probability on "
            "padding and a model that never predicts <pad> pays for it; q(pad) = 0 and epsilon / (V - 2) elsewhere",
        not_yet="Compare it with the package's loss, then with a model whose <pad> logit is very low: a model that "
                "never predicts padding should not pay for it. Which entries of the target q are not what task 2 built?",
    ),
    "08-brevity-penalty": Fault(
        title="the fault in bleu_under_test",
        correct="C",
        why="the ratio is inverted: exp(1 - c / r) is above 1 for a short hypothesis, a reward instead of the "
            "penalty exp(1 - r / c); BLEU can then exceed 100",
        not_yet="Score a hypothesis that is the first half of its reference: every n-gram is right, so only the "
                "length can cost it. Is the result at most 100, and does cutting more words off lower it?",
    ),
    "09-unshifted-targets": Fault(
        title="the fault in lm_loss_under_test",
        correct="A",
        why="position t is scored on token t, which it can read, instead of token t + 1: a model that copies its "
            "input gets a loss near 0; the logits of positions 0..T-2 predict tokens 1..T-1",
        not_yet="Give it the logits of a model that copies its input (a large score on the token at the same "
                "position) and read the loss. Then ask which token the logits at position t should predict.",
    ),
    "10-unpaired-interval": Fault(
        title="the fault in paired_interval_under_test",
        correct="B",
        why="the interval adds the spread of each variant across seeds, so the luck that the two runs of a seed "
            "share is counted as noise; the paired interval uses the spread of the per-seed differences",
        not_yet="Make a variant that beats the baseline by exactly 0.5 on every seed and compute the interval. "
                "How wide should it be, and which spread does the function use?",
    ),
}


@isolated
def check_fault(key: str, fault: Any, *, task: int | str | None = None) -> None:
    """Check the letter ``fault`` that names the fault of a debugging task (a key of :data:`FAULTS`).

    Args:
        key: the task's key, as in the check cell (``"03-mask-after-softmax"``).
        fault: the learner's letter, e.g. ``"B"``.
        task: task number printed on success.

    Raises:
        AssertionError: the letter is missing or wrong, with the test that finds the fault (not the letter).
    """
    __tracebackhide__ = True
    if key not in FAULTS:
        raise KeyError(f"no debugging task {key!r}; known: {', '.join(sorted(FAULTS))}")
    f = FAULTS[key]
    if fault is None or fault is ...:
        raise AssertionError(f"Question '{f.title}': set `fault` to the letter of the fault first, e.g. fault = \"A\".")
    letters = [c for c in str(fault).upper() if c.isalpha()]
    if len(letters) != 1 or letters[0] not in "ABCD":
        raise AssertionError(f"Question '{f.title}': answer with one letter, A, B, C or D; got {fault!r}.")
    if letters[0] != f.correct:
        raise AssertionError(f"Question '{f.title}': {fault!r} is not it, not yet. {f.not_yet}")
    report_passed(task, f"{f.title}: {f.why}")


def _unchanged(given: Tensor, faulty: Callable[[], Tensor]) -> bool:
    try:
        return all_close(given, faulty(), 1e-5, 1e-4)
    except Exception:  # noqa: BLE001 - the faulty version does not apply to these inputs
        return False


def _clone_all(args: Sequence[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, Tensor) else a for a in args]


def _call_checked(fn: Callable[..., Any], args: Sequence[Any], text: str) -> Any:
    """Call the learner's function on copies, and fail if it changed them in place."""
    __tracebackhide__ = True
    given = _clone_all(args)
    result = call_learner(fn, *given, text=text)
    if any(isinstance(a, Tensor) and not torch.equal(a, b) for a, b in zip(given, args)):
        raise AssertionError(f"{text} changed its inputs in place: compute new tensors instead")
    return result


# --- 01: the skip-gram gradient ------------------------------------------------------------------------------------

def _skipgram(W: Tensor, C: Tensor, centre: Tensor, context: Tensor, *, mean: bool = True,
              accumulate: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    n = centre.numel()
    scores = W[centre] @ C.T  # (N, V)
    p = torch.softmax(scores, dim=-1)
    loss = -torch.log(p[torch.arange(n), context]).mean()
    d_scores = p - F.one_hot(context, C.size(0))  # (N, V)
    if mean:
        d_scores = d_scores / n
    grad_C = d_scores.T @ W[centre]  # (V, dim)
    rows = d_scores @ C  # (N, dim)
    grad_W = torch.zeros_like(W)
    if accumulate:
        grad_W.index_add_(0, centre, rows)
    else:
        grad_W[centre] += rows  # the fault: one write per distinct index
    return loss, grad_W, grad_C


def _faulty_skipgram_step(W: Tensor, C: Tensor, centre: Tensor, context: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return _skipgram(W, C, centre, context, accumulate=False)


@isolated(avoid=("torch.autograd:grad", "torch.autograd:backward"))
def check_fixed_skipgram_step(fn: Callable[..., tuple[Tensor, Tensor, Tensor]], *,
                              task: int | str | None = None) -> None:
    """Check the fixed ``skipgram_step_under_test(W, C, centre, context) -> (loss, grad_W, grad_C)`` (exercise 01).

    Compared with autograd's gradients on batches where a centre word occurs in several pairs, the
    only batches where the fault (``grad_W[centre] += rows``) shows.
    """
    __tracebackhide__ = True
    g = make_rng()
    cases = [
        ("centre word 4 in 3 of 5 pairs", torch.tensor([4, 9, 4, 4, 6]), torch.tensor([5, 4, 7, 8, 4])),
        ("every pair has the same centre", torch.tensor([2, 2, 2, 2]), torch.tensor([1, 3, 5, 7])),
        ("all centres different", torch.tensor([1, 3, 5]), torch.tensor([2, 4, 6])),
    ]
    for case, centre, context in cases:
        W, C = random_tensor(g, 10, 3, scale=0.5), random_tensor(g, 10, 3, scale=0.5)
        args = (W, C, centre, context)
        text = call_text(fn, *args, names=("W", "C", "centre", "context")) + f" [{case}]"
        result = _call_checked(fn, args, text)
        if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 3:
            raise AssertionError(f"{text} must return three things, (loss, grad_W, grad_C), as the given function does")
        grad_W = expect_tensor(result[1], text, "as grad_W")
        grad_C = expect_tensor(result[2], text, "as grad_C")
        with torch.enable_grad():
            w, c = W.clone().requires_grad_(), C.clone().requires_grad_()
            loss = F.cross_entropy(w[centre] @ c.T, context)
            want_W, want_C = torch.autograd.grad(loss, (w, c))
        given_loss = as_number(result[0], text, "the loss as a number")
        if not math.isclose(given_loss, loss.item(), rel_tol=1e-4, abs_tol=1e-5):
            raise AssertionError(f"{text}: the loss is {given_loss:.4f}, expected {loss.item():.4f}; the given "
                                 "function's loss was right, only a gradient was not.")
        expect_shape(grad_W, want_W.shape, text, "grad_W")
        if not all_close(grad_W, want_W, 1e-5, 1e-4):
            repeated = [int(i) for i in centre.unique() if int((centre == i).sum()) > 1]
            if _unchanged(grad_W, lambda: _faulty_skipgram_step(W, C, centre, context)[1]):
                raise AssertionError(
                    f"{text}: wrong grad_W, the same as the given function's: the row of centre word {repeated[0]}, "
                    f"which {int((centre == repeated[0]).sum())} pairs share, holds one pair's contribution, not "
                    "their sum. Indexed `+=` with a repeated index writes once per distinct index (and so does "
                    "`grad_W[centre] = rows`).")
            compare(grad_W, want_W, text, "grad_W", [
                ("Your rows of repeated centre words are right, but the gradient is that of the summed loss: the loss "
                 "is a mean over the N pairs, so divide by N (the given function did; keep it).",
                 lambda: _skipgram(W, C, centre, context, mean=False)[1]),
            ])
        compare(grad_C, want_C, text, "grad_C", [
            ("grad_C was right in the given function: only grad_W's rows of repeated centres were wrong.",
             lambda: _skipgram(W, C, centre, context, mean=False)[2]),
        ])
    report_passed(task, "the fixed skip-gram step equals autograd, also when a centre word occurs in several pairs")


# --- 02: the positional encoding -----------------------------------------------------------------------------------

def _pe_halves(max_len: int, d_model: int) -> Tensor:
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    div = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    half = d_model // 2
    pe = torch.zeros(max_len, d_model)
    pe[:, :half] = torch.sin(position / div)
    pe[:, half:] = torch.cos(position / div)
    return pe


def _faulty_positional_encoding(max_len: int, d_model: int) -> Tensor:
    return _pe_halves(max_len, d_model)


@isolated(avoid=("minitransformer.embeddings:sinusoidal_positional_encoding",
                 "minitransformer.embeddings:PositionalEncoding"))
def check_fixed_positional_encoding(fn: Callable[[int, int], Tensor], *, task: int | str | None = None) -> None:
    """Check the fixed ``positional_encoding_under_test(max_len, d_model) -> (max_len, d_model)`` (exercise 02)."""
    __tracebackhide__ = True
    for max_len, d_model in ((6, 8), (50, 16), (3, 4)):
        text = f"{callable_name(fn)}(max_len={max_len}, d_model={d_model})"
        pe = expect_tensor(call_learner(fn, max_len, d_model, text=text), text, f"of shape ({max_len}, {d_model})")
        expected = sinusoidal_positional_encoding(max_len, d_model)
        expect_shape(pe, expected.shape, text, "table")
        if all_close(pe, expected, 1e-5, 1e-4):
            continue
        radius = pe[:, 0::2].double() ** 2 + pe[:, 1::2].double() ** 2  # (max_len, d_model / 2)
        if _unchanged(pe, lambda: _faulty_positional_encoding(max_len, d_model)):
            bad = int((radius - 1).abs().amax(dim=0).argmax())
            raise AssertionError(
                f"{text}: the same table as the given function's: columns {2 * bad} and {2 * bad + 1} do not form a "
                f"pair, PE[p, {2 * bad}]^2 + PE[p, {2 * bad + 1}]^2 is not 1 for every position. Each pair of columns "
                "must hold the sine and the cosine of one frequency.")
        compare(pe, expected, text, "table", [
            ("The pairs are right but swapped: column 2i holds the sine, column 2i+1 the cosine.",
             lambda: expected.view(max_len, -1, 2).flip(-1).reshape(max_len, d_model)),
            ("The sines and cosines now alternate, but the frequency of pair i must be 1 / 10000^(2i / d_model), "
             "the frequency the given function used for it; yours moved.",
             lambda: _interleave_any(max_len, d_model, torch.arange(d_model // 2, dtype=torch.float32) / d_model)),
        ], fallback=lambda: ("Your pairs of columns are points on the unit circle; compare each column's frequency "
                             "with the formula.") if bool(torch.allclose(radius, torch.ones_like(radius), atol=1e-4))
                 else None)
    report_passed(task, "the fixed positional encoding equals the package's table: sine and cosine of each "
                        "frequency side by side (3 sizes)")


def _interleave_any(max_len: int, d_model: int, exponent: Tensor) -> Tensor:
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    angle = position / 10000.0 ** exponent
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).reshape(max_len, d_model)


# --- 03: attention -------------------------------------------------------------------------------------------------

def _attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, *, after: bool = False,
               dim: int = -1, invert: bool = False) -> Tensor:
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    hide = None if mask is None else (mask if invert else ~mask)
    if hide is not None and not after:
        scores = scores.masked_fill(hide, float("-inf"))
    weights = torch.softmax(scores, dim=dim)
    if hide is not None and after:
        weights = weights.masked_fill(hide, 0.0)
    return weights


def _faulty_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    weights = _attention(query, key, value, mask, after=True)
    return weights @ value, weights


@isolated(avoid=("minitransformer.attention:scaled_dot_product_attention", "minitransformer.attention:MultiHeadAttention",
                 "torch.nn.functional:scaled_dot_product_attention", "torch.nn:MultiheadAttention"))
def check_fixed_attention(fn: Callable[..., tuple[Tensor, Tensor]], *, task: int | str | None = None) -> None:
    """Check the fixed ``attention_under_test(query, key, value, mask=None) -> (output, weights)`` (exercise 03).

    Every case has a mask (the fault shows only there): padding, causal, and both.
    """
    __tracebackhide__ = True
    g = make_rng()
    keep = torch.tensor([[True, True, True, False, False], [True, True, True, True, False]])
    cases = [
        ("a padding mask (B, 1, 1, Tk)", random_tensor(g, 2, 1, 3, 8), random_tensor(g, 2, 1, 5, 8),
         random_tensor(g, 2, 1, 5, 6), keep[:, None, None, :]),
        ("a causal mask (1, 1, T, T)", random_tensor(g, 2, 2, 4, 8), random_tensor(g, 2, 2, 4, 8),
         random_tensor(g, 2, 2, 4, 8), make_causal_mask(4)),
        ("padding and causal masks combined", random_tensor(g, 2, 1, 5, 4), random_tensor(g, 2, 1, 5, 4),
         random_tensor(g, 2, 1, 5, 4), keep[:, None, None, :] & make_causal_mask(5)),
    ]
    for case, query, key, value, mask in cases:
        args = (query, key, value, mask)
        text = call_text(fn, *args, names=("query", "key", "value", "mask")) + f" [{case}]"
        result = _call_checked(fn, args, text)
        if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 2:
            raise AssertionError(f"{text} returned {describe(result)}; expected a pair (output, weights) as the given "
                                 "function returns")
        out = expect_tensor(result[0], text, "as the output")
        weights = expect_tensor(result[1], text, "as the weights")
        want_out, want_w = scaled_dot_product_attention(query, key, value, mask)
        expect_shape(weights, want_w.shape, text, "weights")
        expect_shape(out, want_out.shape, text, "output")
        if not all_close(weights, want_w, 1e-5, 1e-4):
            sums = weights.double().sum(dim=-1)
            if _unchanged(weights, lambda: _faulty_attention(query, key, value, mask)[1]):
                row = tuple(int(i) for i in ((sums - 1).abs() > 1e-4).nonzero()[0])
                raise AssertionError(
                    f"{text}: the same weights as the given function's: hidden keys get 0, but row {row} sums to "
                    f"{sums[row].item():.3f}, not 1. The weight the hidden keys had is lost, not shared among the "
                    "keys the query may read.")
            mistakes = [
                ("Hidden keys must get weight 0 and your weights put them where the mask is True: True means "
                 "'may attend', so hide the scores where the mask is False.",
                 lambda: _attention(query, key, value, mask, invert=True)),
                ("Your columns sum to 1: the softmax ran over the queries (dim -2). It must share 1 among the keys "
                 "of each query, the last dimension.",
                 lambda: _attention(query, key, value, mask, dim=-2)),
                ("The weights are a softmax of scores with -inf at the hidden keys, but the scores are no longer "
                 "divided by sqrt(d_k); the given function scaled them, keep it.",
                 lambda: torch.softmax((query @ key.transpose(-2, -1)).masked_fill(~mask, float("-inf")), dim=-1)),
            ]
            hint = known_mistake(weights, mistakes)
            if hint is not None:
                raise AssertionError(f"{text}: wrong weights. {hint}")
            if torch.isnan(weights).any():
                raise AssertionError(f"{text}: your weights contain NaN, although every query here may read a key. "
                                     "-inf after the softmax makes the product with the values NaN; hide the keys "
                                     "in the scores, before it.")
            compare(weights, want_w, text, "weights")
        compare(out, want_out, text, "output", [
            ("Your weights are right, but the output must be weights @ value with those weights.",
             lambda: _faulty_attention(query, key, value, mask)[0]),
        ])
    report_passed(task, "the fixed attention equals the package's with padding, causal and combined masks: hidden "
                        "keys get 0 and every row sums to 1")


# --- 04: multi-head attention --------------------------------------------------------------------------------------

def _mha(mha: MultiHeadAttention, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, *,
         fixed: str = "") -> Tensor:
    """Multi-head attention with the heads split correctly for the projections named in ``fixed`` ('qkv')."""
    batch, t_q, d_model = query.shape
    h, d_k = mha.n_heads, mha.d_k

    def split(x: Tensor, which: str) -> Tensor:
        t = x.size(1)
        if which in fixed:
            return x.view(batch, t, h, d_k).transpose(1, 2)  # (B, H, T, d_k)
        return x.view(batch, h, t, d_k)  # the fault: positions and features mixed

    q, k, v = split(mha.w_q(query), "q"), split(mha.w_k(key), "k"), split(mha.w_v(value), "v")
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (B, H, Tq, d_k)
    return mha.w_o(out.transpose(1, 2).reshape(batch, t_q, d_model))


def _faulty_multi_head(mha: MultiHeadAttention, query: Tensor, key: Tensor, value: Tensor,
                       mask: Tensor | None = None) -> Tensor:
    return _mha(mha, query, key, value, mask)


@isolated(avoid=("minitransformer.attention:MultiHeadAttention", "torch.nn:MultiheadAttention"))
def check_fixed_multi_head(fn: Callable[..., Tensor], *, task: int | str | None = None) -> None:
    """Check the fixed ``multi_head_under_test(mha, query, key, value, mask=None) -> (B, Tq, D)`` (exercise 04).

    ``mha`` is the package's :class:`MultiHeadAttention` with random weights; the fixed function uses its
    projections and must give what ``mha(query, key, value, mask)`` gives.
    """
    __tracebackhide__ = True
    g = make_rng()
    cases = [
        ("self-attention under a causal mask, T=5, D=8, H=2", 8, 2, 5, 5, make_causal_mask(5)),
        ("cross-attention, Tq=3, Tk=4, D=12, H=3, padding mask", 12, 3, 3, 4,
         torch.tensor([[True, True, True, False], [True, True, True, True]])[:, None, None, :]),
        ("self-attention without a mask, T=6, D=8, H=4", 8, 4, 6, 6, None),
    ]
    for case, d_model, heads, t_q, t_k, mask in cases:
        torch.manual_seed(d_model + heads)
        mha = MultiHeadAttention(d_model, heads, dropout=0.0).eval()
        fill_parameters(mha, g)
        query = random_tensor(g, 2, t_q, d_model)
        key = query if t_q == t_k else random_tensor(g, 2, t_k, d_model)
        args = (mha, query, key, key, mask)
        text = call_text(fn, *args, names=("mha", "query", "key", "value", "mask")) + f" [{case}]"
        out = call_learner(fn, *_clone_all(args), text=text)
        out = expect_tensor(out[0] if isinstance(out, (tuple, list)) else out, text, f"of shape (2, {t_q}, {d_model})")
        want = mha(query, key, key, mask)[0]
        expect_shape(out, want.shape, text, "output")
        if all_close(out, want, 1e-5, 1e-4):
            continue
        if _unchanged(out, lambda: _faulty_multi_head(mha, query, key, key, mask)):
            hint = (" Under this causal mask, the output at position 0 changes when a later token changes."
                    if mask is not None and mask.size(-2) > 1 and t_q == t_k else "")
            raise AssertionError(f"{text}: the same output as the given function's.{hint} Each head must see, for "
                                 "every position, d_k features of that position's projection only.")
        compare(out, want, text, "output", [
            ("The queries are split right now, but the keys and values still go through the same faulty split: "
             "fix all three.", lambda: _mha(mha, query, key, key, mask, fixed="q")),
            ("The queries and keys are split right now, but the values still go through the faulty split.",
             lambda: _mha(mha, query, key, key, mask, fixed="qk")),
        ])
    report_passed(task, "the fixed multi-head attention equals the package's (self-attention under a causal mask, "
                        "cross-attention with padding, 4 heads without a mask)")


# --- 05: the post-LN encoder layer ---------------------------------------------------------------------------------

def _encoder(layer: EncoderLayer, x: Tensor, mask: Tensor | None, *, order: str) -> Tensor:
    def attn(h: Tensor) -> Tensor:
        return layer.self_attn(h, h, h, mask)[0]

    if order == "pre":  # the fault
        x = x + attn(layer.norm1(x))
        return x + layer.feed_forward(layer.norm2(x))
    if order == "both":  # norms before and after
        x = layer.norm1(x + attn(layer.norm1(x)))
        return layer.norm2(x + layer.feed_forward(layer.norm2(x)))
    if order == "first-only":
        x = layer.norm1(x + attn(x))
        return x + layer.feed_forward(layer.norm2(x))
    if order == "second-only":
        x = x + attn(layer.norm1(x))
        return layer.norm2(x + layer.feed_forward(x))
    if order == "final":  # pre-LN sub-layers with one norm at the end
        x = x + attn(layer.norm1(x))
        return layer.norm2(x + layer.feed_forward(x))
    raise ValueError(order)


def _faulty_encoder_layer(layer: EncoderLayer, x: Tensor, mask: Tensor | None = None) -> Tensor:
    return _encoder(layer, x, mask, order="pre")


@isolated(avoid=("minitransformer.layers:EncoderLayer", "torch.nn:TransformerEncoderLayer"))
def check_fixed_encoder_layer(fn: Callable[..., Tensor], *, task: int | str | None = None) -> None:
    """Check the fixed ``encoder_layer_under_test(layer, x, mask=None) -> (B, S, D)`` (exercise 05).

    ``layer`` is the package's post-LN :class:`EncoderLayer` (eval mode, random weights and gains);
    the fixed function uses its sub-modules and must give what ``layer(x, mask)`` gives.
    """
    __tracebackhide__ = True
    g = make_rng()
    cases = [("no mask, S=4, D=8", 4, None),
             ("a padding mask", 5, torch.tensor([[True, True, True, False, False], [True] * 5])[:, None, None, :])]
    for case, length, mask in cases:
        torch.manual_seed(length)
        layer = EncoderLayer(8, 2, 16, dropout=0.1).eval()
        fill_parameters(layer, g)
        x = random_tensor(g, 2, length, 8, scale=2.0)
        args = (layer, x, mask)
        text = call_text(fn, *args, names=("layer", "x", "mask")) + f" [{case}]"
        out = call_learner(fn, *_clone_all(args), text=text)
        out = expect_tensor(out[0] if isinstance(out, (tuple, list)) else out, text, f"of shape (2, {length}, 8)")
        want = layer(x, mask)
        expect_shape(out, want.shape, text, "output")
        if all_close(out, want, 1e-5, 1e-4):
            continue
        if _unchanged(out, lambda: _faulty_encoder_layer(layer, x, mask)):
            raise AssertionError(
                f"{text}: the same output as the given function's: a post-LN layer ends with a LayerNorm, so with gains "
                f"1 and biases 0 every position would have mean 0 and standard deviation 1; here the last step is a "
                "sum. Where do the norms act in LayerNorm(x + Sublayer(x))?")
        compare(out, want, text, "output", [
            ("Each sub-layer now also reads the normalised input: post-LN normalises only the sum, "
             "LayerNorm(x + Sublayer(x)), and the sub-layer reads x itself.",
             lambda: _encoder(layer, x, mask, order="both")),
            ("The attention block is post-LN now, but the feed-forward block is still pre-LN: fix both.",
             lambda: _encoder(layer, x, mask, order="first-only")),
            ("The feed-forward block is post-LN now, but the attention block is still pre-LN: fix both.",
             lambda: _encoder(layer, x, mask, order="second-only")),
        ])
    report_passed(task, "the fixed encoder layer equals the package's post-LN layer: LayerNorm(x + Sublayer(x)) "
                        "twice")


# --- 06: the teacher-forced logits and the causal mask --------------------------------------------------------------

def _teacher_forced(model: Any, src: Tensor, tgt_in: Tensor, pad_id: int, causal: Tensor | None) -> Tensor:
    src_mask = (src != pad_id)[:, None, None, :]
    tgt_mask = (tgt_in != pad_id)[:, None, None, :]
    if causal is not None:
        tgt_mask = tgt_mask & causal
    memory = model.encode(src, src_mask)
    return model.generator(model.decode(tgt_in, memory, src_mask, tgt_mask))


def _faulty_teacher_forcing(model: Any, src: Tensor, tgt_in: Tensor, pad_id: int) -> Tensor:
    size = tgt_in.size(1)
    return _teacher_forced(model, src, tgt_in, pad_id, torch.ones(size, size, dtype=torch.bool).triu()[None, None])


@isolated(avoid=("minitransformer.model:Transformer",), serve=("minitransformer.masks:make_target_mask",))
def check_fixed_teacher_forcing(fn: Callable[..., Tensor], *, task: int | str | None = None) -> None:
    """Check the fixed ``logits_under_test(model, src, tgt_in, pad_id) -> (B, T, V)`` (exercise 06).

    Compared with the package's teacher-forced pass (padding mask on the source, padding and causal
    mask on the target) on a small random model, with padding in both.
    """
    __tracebackhide__ = True
    model = decoding_model(5)
    cases = [
        ("2 sentences, the second padded", torch.tensor([[5, 6, 7, 8], [9, 4, 0, 0]]),
         torch.tensor([[1, 6, 5, 9, 4], [1, 7, 8, 0, 0]])),
        ("1 sentence, T=6", torch.tensor([[4, 5, 6, 7, 8, 9]]), torch.tensor([[1, 10, 9, 8, 7, 6]])),
    ]
    for case, src, tgt_in in cases:
        args = (model, src, tgt_in, 0)
        text = call_text(fn, *args, names=("model", "src", "tgt_in")) + f" [{case}]"
        out = expect_tensor(call_learner(fn, *_clone_all(args), text=text), text, "(the logits)")
        memory = model.encode(src, (src != 0)[:, None, None, :])
        want = model.generator(model.decode(tgt_in, memory, (src != 0)[:, None, None, :], make_target_mask(tgt_in, 0)))
        expect_shape(out, want.shape, text, "logits")
        if all_close(out, want, 1e-5, 1e-4):
            continue
        if torch.isnan(out).any():
            raise AssertionError(f"{text}: your logits contain NaN: a position whose mask row is all False reads "
                                 "no key. Each position must see itself: keep the diagonal.")
        size = tgt_in.size(1)
        if _unchanged(out, lambda: _faulty_teacher_forcing(model, src, tgt_in, 0)):
            raise AssertionError(f"{text}: the same logits as the given function's: the logits at position 0 depend "
                                 "on the target tokens after it. Teacher forcing must not let a position read the "
                                 "tokens it is asked to predict.")
        compare(out, want, text, "logits", [
            ("Your logits read the whole target: with no causal mask, position t sees the tokens it must predict.",
             lambda: _teacher_forced(model, src, tgt_in, 0, None)),
            ("Each position sees the past but not itself (the diagonal is hidden): the causal mask keeps it, "
             "tril() with diagonal 0.",
             lambda: _teacher_forced(model, src, tgt_in, 0,
                                     torch.ones(size, size, dtype=torch.bool).tril(-1)[None, None])),
        ])
    report_passed(task, "the fixed teacher-forced logits equal the package's: each position reads itself and the "
                        "past, never the future")


# --- 07: the label-smoothed loss -----------------------------------------------------------------------------------

def _smoothed(logits: Tensor, target: Tensor, epsilon: float, pad_id: int, *, share: int, pad_mass: bool,
              sum_to: str = "mean") -> Tensor:
    vocab = logits.size(-1)
    log_probs = torch.log_softmax(logits, dim=-1)
    q = torch.full_like(log_probs, epsilon / (vocab - share))
    if not pad_mass:
        q[..., pad_id] = 0.0
    q = q.scatter(-1, target[..., None], 1.0 - epsilon)
    loss = -(q * log_probs).sum(-1)
    keep = target != pad_id
    return loss[keep].mean() if sum_to == "mean" else loss.mean()


def _faulty_smoothed_loss(logits: Tensor, target: Tensor, epsilon: float, pad_id: int) -> Tensor:
    return _smoothed(logits, target, epsilon, pad_id, share=1, pad_mass=True)


@isolated(avoid=("minitransformer.training.loss:label_smoothed_nll", "minitransformer.training.loss:LabelSmoothingLoss"))
def check_fixed_smoothed_loss(fn: Callable[[Tensor, Tensor, float, int], Any], *, task: int | str | None = None) -> None:
    """Check the fixed ``smoothed_loss_under_test(logits, target, epsilon, pad_id)`` (exercise 07).

    The mean label-smoothed cross-entropy per real token, compared with
    :func:`~minitransformer.training.loss.label_smoothed_nll`, also for a model whose <pad> logit is low.
    """
    __tracebackhide__ = True
    g = make_rng()
    target = torch.tensor([[5, 9, 7, 2, 0], [6, 4, 2, 0, 0]])
    low_pad = random_tensor(g, 2, 5, 11)
    low_pad[..., 0] = -30.0  # a model that never predicts padding
    cases = [("random logits, eps=0.1, pad 0", random_tensor(g, 2, 5, 11), target, 0.1, 0),
             ("a model that never predicts <pad>, eps=0.2", low_pad, target, 0.2, 0),
             ("pad id 1, eps=0.1", random_tensor(g, 2, 5, 11), torch.where(target == 0, 1, target), 0.1, 1)]
    for case, logits, tgt, eps, pad in cases:
        args = (logits, tgt, eps, pad)
        text = call_text(fn, *args, names=("logits", "target")) + f" [{case}]"
        given = torch.tensor(as_number(_call_checked(fn, args, text), text, "the loss as a number"),
                             dtype=torch.float64)
        loss_sum, _, count = label_smoothed_nll(logits, tgt, eps, pad)
        want = (loss_sum / count).double()
        if all_close(given, want, 1e-5, 1e-4):
            continue
        if _unchanged(given, lambda: _faulty_smoothed_loss(logits, tgt, eps, pad).double()):
            raise AssertionError(f"{text}: the same loss as the given function's, {given.item():.4f} instead of "
                                 f"{want.item():.4f}: the target q asks for some probability on <pad>, so a model "
                                 "that never predicts padding pays for it.")
        compare(given, want, text, "loss", [
            ("<pad> gets no mass now, but epsilon is still divided by V - 1: q's rows sum to less than 1. "
             "Spread epsilon over the V - 2 tokens that are neither gold nor padding.",
             lambda: _smoothed(logits, tgt, eps, pad, share=1, pad_mass=False).double()),
            ("q is right, but the mean must run over the real tokens only: positions whose target is padding "
             "count for nothing.",
             lambda: _smoothed(logits, tgt, eps, pad, share=2, pad_mass=False, sum_to="all").double()),
            ("Epsilon is divided by V - 2, but <pad> still gets its share: set q(pad) = 0.",
             lambda: _smoothed(logits, tgt, eps, pad, share=2, pad_mass=True).double()),
        ], atol=1e-5, rtol=1e-4)
    report_passed(task, "the fixed label-smoothed loss equals the package's: no mass on <pad>, epsilon over V - 2 "
                        "tokens, the mean over real tokens")


# --- 08: BLEU's brevity penalty ------------------------------------------------------------------------------------

def _bleu(hypotheses: Sequence[str], references: Sequence[str], *, penalty: str = "right") -> float:
    matches, totals = [0] * 4, [0] * 4
    c = r = 0
    for hyp, ref in zip(hypotheses, references):
        h, rr = hyp.split(), ref.split()
        c, r = c + len(h), r + len(rr)
        for n in range(1, 5):
            hc: dict[tuple[str, ...], int] = {}
            for i in range(len(h) - n + 1):
                hc[tuple(h[i:i + n])] = hc.get(tuple(h[i:i + n]), 0) + 1
            rc: dict[tuple[str, ...], int] = {}
            for i in range(len(rr) - n + 1):
                rc[tuple(rr[i:i + n])] = rc.get(tuple(rr[i:i + n]), 0) + 1
            totals[n - 1] += sum(hc.values())
            matches[n - 1] += sum(min(k, rc.get(gram, 0)) for gram, k in hc.items())
    if min(totals) == 0 or min(matches) == 0:
        return 0.0
    mean = math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / 4)
    if penalty == "right":
        bp = math.exp(1 - r / c) if c < r else 1.0
    elif penalty == "inverted":  # the fault
        bp = math.exp(1 - c / r) if c < r else 1.0
    elif penalty == "long":  # penalises long hypotheses instead of short ones
        bp = math.exp(1 - c / r) if c > r else 1.0
    elif penalty == "always":  # the penalty on every length
        bp = math.exp(1 - r / c)
    else:
        bp = 1.0
    return 100.0 * bp * mean


def _faulty_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    return _bleu(hypotheses, references, penalty="inverted")


@isolated(avoid=("sacrebleu:corpus_bleu", "sacrebleu:sentence_bleu", "minitransformer.evaluation:bleu"))
def check_fixed_bleu(fn: Callable[[list[str], list[str]], Any], *, task: int | str | None = None) -> None:
    """Check the fixed ``bleu_under_test(hypotheses, references) -> float`` (exercise 08): corpus BLEU, 0-100."""
    __tracebackhide__ = True
    ref = ["the small dog runs in the green park", "two men sit on a red bench in the snow"]
    cases = [
        ("hypotheses shorter than their references", ["the small dog runs in the", "two men sit on a red bench"], ref),
        ("the first half of the reference", ["a man with a red ball runs"],
         ["a man with a red ball runs on the grass in the park with his dog"]),
        ("hypotheses longer than their references", ["the small dog runs in the green park today",
                                                      "two men sit on a red bench in the snow and talk"], ref),
        ("equal lengths", ["the small dog runs in the grass park", "two men sit on a red bench in the snow"], ref),
    ]
    for case, hyps, refs in cases:
        text = f"{callable_name(fn)}({len(hyps)} hypotheses, {len(refs)} references) [{case}]"
        given = as_number(call_learner(fn, list(hyps), list(refs), text=text), text, "a BLEU score (0-100)")
        want = _bleu(hyps, refs)
        if math.isclose(given, want, rel_tol=1e-6, abs_tol=1e-6):
            continue
        if math.isclose(given, _faulty_bleu(hyps, refs), rel_tol=1e-6, abs_tol=1e-6):
            raise AssertionError(f"{text}: {given:.2f}, the same as the given function's; expected {want:.2f}. "
                                 "A hypothesis shorter than its reference must lose points for its length; this one "
                                 "gains them" + (" (above 100!)." if given > 100 else "."))
        for penalty, words in (("none", "Your score leaves these short hypotheses unpenalised: the brevity penalty "
                                        "exp(1 - r / c) applies when the hypotheses are shorter (c < r), and only then."),
                               ("long", "Your penalty hits hypotheses that are too long, not too short: BLEU "
                                        "penalises only brevity (the precisions already punish extra words)."),
                               ("always", "The penalty applies only when the hypotheses are shorter than the "
                                          "references (c < r); otherwise it is 1.")):
            if math.isclose(given, _bleu(hyps, refs, penalty=penalty), rel_tol=1e-6, abs_tol=1e-6):
                raise AssertionError(f"{text}: {given:.2f}, expected {want:.2f}. {words}")
        raise AssertionError(f"{text}: {given:.2f}, expected {want:.2f}. Only the brevity penalty was wrong; the "
                             "rest of the given function was right.")
    report_passed(task, "the fixed BLEU equals corpus BLEU on short, long and equal-length hypotheses: a short "
                        "hypothesis is penalised, never rewarded")


# --- 09: the language model's loss ---------------------------------------------------------------------------------

def _lm_loss(logits: Tensor, tokens: Tensor, pad_id: int, *, shift: str = "right", ignore: bool = True) -> Tensor:
    vocab = logits.size(-1)
    if shift == "right":
        logits, tokens = logits[:, :-1], tokens[:, 1:]
    elif shift == "wrong-way":
        logits, tokens = logits[:, 1:], tokens[:, :-1]
    return F.cross_entropy(logits.reshape(-1, vocab), tokens.reshape(-1), ignore_index=pad_id if ignore else -100)


def _faulty_lm_loss(logits: Tensor, tokens: Tensor, pad_id: int) -> Tensor:
    return _lm_loss(logits, tokens, pad_id, shift="none")


@isolated
def check_fixed_lm_loss(fn: Callable[[Tensor, Tensor, int], Any], *, task: int | str | None = None) -> None:
    """Check the fixed ``lm_loss_under_test(logits, tokens, pad_id)`` (exercise 09): next-token cross-entropy."""
    __tracebackhide__ = True
    g = make_rng()
    tokens = torch.tensor([[1, 5, 9, 7, 4, 2], [1, 6, 8, 2, 0, 0]])
    copying = 8.0 * F.one_hot(tokens, 10).float()  # a model that repeats the token it reads
    cases = [("random logits", random_tensor(g, 2, 6, 10), tokens, 0),
             ("a model that copies its input", copying, tokens, 0),
             ("pad id 3", random_tensor(g, 2, 6, 10), torch.where(tokens == 0, 3, tokens), 3)]
    for case, logits, toks, pad in cases:
        args = (logits, toks, pad)
        text = call_text(fn, *args, names=("logits", "tokens")) + f" [{case}]"
        given = torch.tensor(as_number(_call_checked(fn, args, text), text, "the loss as a number"), dtype=torch.float64)
        want = _lm_loss(logits, toks, pad).double()
        if all_close(given, want, 1e-5, 1e-4):
            continue
        if _unchanged(given, lambda: _faulty_lm_loss(logits, toks, pad).double()):
            raise AssertionError(
                f"{text}: the same loss as the given function's, {given.item():.4f} instead of {want.item():.4f}"
                + (": a model that only copies the token it reads gets a loss near 0, so the loss asks each position "
                   "for a token it can already see." if case.startswith("a model") else
                   ": each position is scored on a token it can read."))
        compare(given, want, text, "loss", [
            ("You shifted the wrong way: the logits at position t predict token t + 1, so drop the last position's "
             "logits and the first token, logits[:, :-1] with tokens[:, 1:].",
             lambda: _lm_loss(logits, toks, pad, shift="wrong-way").double()),
            ("The shift is right, but padding targets count now: ignore them (ignore_index=pad_id), as the given "
             "function did.",
             lambda: _lm_loss(logits, toks, pad, ignore=False).double()),
        ])
    report_passed(task, "the fixed loss scores the logits at position t on token t + 1: a copying model no longer "
                        "gets a loss near 0")


# --- 10: the paired interval ---------------------------------------------------------------------------------------

def _interval(variant: Sequence[float], baseline: Sequence[float], *, paired: bool = True, quantile: str = "t",
              ddof: int = 1, root: bool = True) -> tuple[float, float, float]:
    from scipy import stats

    n = len(variant)
    diffs = [v - b for v, b in zip(variant, baseline)]
    mean = sum(diffs) / n

    def var(xs: Sequence[float]) -> float:
        m = sum(xs) / len(xs)
        return sum((x - m) ** 2 for x in xs) / (len(xs) - ddof)

    spread = math.sqrt(var(diffs)) if paired else math.sqrt(var(variant) + var(baseline))
    factor = {"t": float(stats.t.ppf(0.975, n - 1)), "z": 1.959963984540054, "t-n": float(stats.t.ppf(0.975, n))}[quantile]
    half = factor * spread / (math.sqrt(n) if root else n)
    return mean, mean - half, mean + half


def _faulty_paired_interval(variant: Sequence[float], baseline: Sequence[float]) -> tuple[float, float, float]:
    return _interval(variant, baseline, paired=False)


@isolated(avoid=("minitransformer.ablation_stats:paired_difference",))
def check_fixed_paired_interval(fn: Callable[[list[float], list[float]], Any], *,
                                task: int | str | None = None) -> None:
    """Check the fixed ``paired_interval_under_test(variant, baseline) -> (mean, low, high)`` (exercise 10).

    The mean per-seed difference and its 95% Student-t interval (n - 1 degrees of freedom) from the
    spread of the differences, as :func:`minitransformer.ablation_stats.paired_difference` computes it.
    """
    __tracebackhide__ = True
    cases = [
        ("every seed 0.5 better", [5.1, 6.3, 4.8], [4.6, 5.8, 4.3]),
        ("3 seeds, noisy", [31.2, 29.8, 33.0], [30.1, 30.0, 31.5]),
        ("5 seeds, seed luck shared", [12.0, 15.5, 11.2, 14.1, 13.3], [11.1, 15.0, 10.9, 13.0, 12.6]),
    ]
    for case, variant, baseline in cases:
        text = f"{callable_name(fn)}(variant {variant}, baseline {baseline}) [{case}]"
        result = call_learner(fn, list(variant), list(baseline), text=text)
        if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 3:
            raise AssertionError(f"{text} returned {describe(result)}; expected (mean, low, high) as the given function")
        given = tuple(as_number(x, text, "three numbers (mean, low, high)") for x in result)
        want = _interval(variant, baseline)

        def same(other: tuple[float, float, float]) -> bool:
            return all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) for a, b in zip(given, other))

        if same(want):
            continue
        shown = f"({given[0]:.3f}, {given[1]:.3f}, {given[2]:.3f}), expected ({want[0]:.3f}, {want[1]:.3f}, {want[2]:.3f})"
        if same(_faulty_paired_interval(variant, baseline)):
            raise AssertionError(f"{text}: {shown}, the same as the given function's: its width comes from how much "
                                 "each variant varies across seeds, which the pairing cancels."
                                 + (" Here every seed moved by the same 0.5: the paired interval has width 0."
                                    if case.startswith("every") else ""))
        for words, other in (
                ("The spread is right, but the 95% interval of a mean of n = 3 to 5 differences uses Student's t with "
                 "n - 1 degrees of freedom, not the normal 1.96.", _interval(variant, baseline, quantile="z")),
                ("Student's t has n - 1 degrees of freedom here (the mean used one), not n.",
                 _interval(variant, baseline, quantile="t-n")),
                ("The standard deviation of the differences divides by n - 1 (the sample's), not by n.",
                 _interval(variant, baseline, ddof=0)),
                ("The standard error of a mean is sd / sqrt(n), not sd / n.", _interval(variant, baseline, root=False)),
        ):
            if same(other):
                raise AssertionError(f"{text}: {shown}. {words}")
        raise AssertionError(f"{text}: {shown}. The mean was right in the given function; only the spread was not.")
    report_passed(task, "the fixed interval is the paired one: it shrinks to 0 when every seed moves by the same "
                        "amount, and uses Student's t with n - 1 degrees of freedom")

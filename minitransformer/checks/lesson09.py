"""Checks for exercise 09: decoder-only logits, temperature and top-k, families (lesson 09), pooling (lesson 09b)."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

from ..variants import DecoderOnlyLM, masked_mean, next_token_probabilities
from .operations import LINEAR, SOFTMAX
from .compare import (call_learner, all_close, compare, expect_shape, expect_tensor, fill_parameters, isolated, callable_name,
                      report_passed, random_tensor, make_rng)

__all__ = ["APPLICATIONS", "FAMILIES", "check_decoder_only_logits", "check_family_choice", "check_masked_mean",
           "check_next_token_probabilities"]


def _logits_with_mask(model: DecoderOnlyLM, tokens: Tensor, mask: Tensor | None, *, scale: bool = True,
                      positions: bool = True, final_norm: bool = True) -> Tensor:
    """The model's logits computed with any mask, or without one of its steps: the usual mistakes."""
    x = model.embed(tokens) if scale else model.embed.embedding(tokens)  # (B, T, D)
    if positions:
        x = x + model.positional.pe[:tokens.size(1)]
    for layer in model.decoder.layers:
        x = layer(x, mask)
    if final_norm and model.decoder.norm is not None:
        x = model.decoder.norm(x)
    return x @ model.embed.embedding.weight.T  # (B, T, V)


# What a decoder-only model's logits may be assembled from: its sub-modules, not its own forward.
_LM_PIECES = ("minitransformer:make_causal_mask", *(f"minitransformer:{c}.forward" for c in (
    "TokenEmbedding", "PositionalEncoding", "Encoder", "EncoderLayer", "MultiHeadAttention", "PositionwiseFeedForward",
    "LayerNorm")))


@isolated(builds="the logits from the model's embedding, layers and tied output, not model(tokens)",
          allow=(*LINEAR, 'embedding', *_LM_PIECES))
def check_decoder_only_logits(fn: Callable[[DecoderOnlyLM, Tensor], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(model, tokens) -> logits`` (B, T, V): the decoder-only forward pass under a causal mask.

    Row t of the logits predicts token t + 1 from tokens 0..t, and the output layer is the embedding
    table, transposed (tied weights).

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    for norm_first, (batch, length) in ((False, (2, 6)), (True, (3, 5)), (False, (1, 1))):
        model = DecoderOnlyLM(13, d_model=8, n_heads=2, d_ff=16, n_layers=2, max_len=8, dropout=0.0,
                              norm_first=norm_first).eval()
        fill_parameters(model, g)
        tokens = torch.randint(0, 13, (batch, length), generator=g)
        text = f"{callable_name(fn)}(model ({'pre' if norm_first else 'post'}-LN), tokens ({batch}, {length}))"
        logits = expect_tensor(call_learner(fn, model, tokens, text=text), text, "(the logits)")
        expected = model(tokens)  # (B, T, V)
        if tuple(logits.shape) == (batch, 13) and length > 1:
            raise AssertionError(f"{text} returned only one row per sequence, shape ({batch}, 13): return the "
                                 f"logits of every position, (B, T, V) = ({batch}, {length}, 13); the last row, "
                                 "logits[:, -1], is the one generation uses")
        ones = torch.ones(length, length, dtype=torch.bool)
        mistakes = [
            ("No causal mask: every position reads the tokens after it, including the one it must predict. "
             "Pass a lower-triangular bool mask (1, 1, T, T) to every layer.",
             lambda: _logits_with_mask(model, tokens, None)),
            ("The mask is upside down: torch.triu keeps the future. Use the lower triangle (tril), diagonal included.",
             lambda: _logits_with_mask(model, tokens, ones.triu()[None, None])),
            ("The mask hides the diagonal: position t may read itself (tril with diagonal=0, not -1).",
             lambda: _logits_with_mask(model, tokens, ones.tril(-1)[None, None])),
            ("Missing the sqrt(d_model) scaling of the embeddings: model.embed(tokens) does it, "
             "model.embed.embedding(tokens) alone does not.",
             lambda: _logits_with_mask(model, tokens, ones.tril()[None, None], scale=False)),
            ("The positions are missing: add the positional encoding (model.positional) to the embeddings.",
             lambda: _logits_with_mask(model, tokens, ones.tril()[None, None], positions=False)),
            ("The final LayerNorm is missing: with pre-LN, model.decoder.norm normalises the last layer's output.",
             lambda: _logits_with_mask(model, tokens, ones.tril()[None, None], final_norm=False)),
        ]
        if length == 1:
            mistakes = []
        compare(logits, expected, text, "logits", mistakes, atol=1e-4, rtol=1e-4,
                 fallback=lambda: "The output layer is tied: logits = h @ model.embed.embedding.weight.T.")
    report_passed(task, "decoder-only logits, post-LN and pre-LN, causal at every position")


@isolated(builds='the probabilities from top-k, a temperature and a softmax', allow=(*SOFTMAX,))
def check_next_token_probabilities(fn: Callable[[Tensor, float, int | None], Tensor], *,
                                   task: int | str | None = None) -> None:
    """Check ``fn(logits, temperature, top_k) -> probs`` (B, V) against :func:`next_token_probabilities`.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    logits = random_tensor(g, 3, 10, scale=2.0)  # (B, V)
    cases = [(1.0, None), (0.5, None), (2.0, None), (1.0, 3), (0.7, 4), (0.0, None), (1.5, 1), (1.0, 10)]
    for temperature, top_k in cases:
        text = f"{callable_name(fn)}(logits (3, 10), temperature={temperature}, top_k={top_k})"
        probs = expect_tensor(call_learner(fn, logits.clone(), temperature, top_k, text=text), text, "(3, 10)")
        expected = next_token_probabilities(logits, temperature, top_k)
        if probs.shape == expected.shape and torch.isnan(probs).any():
            hint = ("Temperature 0 means greedy: put probability 1 on the argmax instead of dividing by 0."
                    if temperature == 0 else "Some probabilities are NaN.")
            raise AssertionError(f"{text} returned NaN. {hint}")
        if probs.shape == expected.shape and not all_close(probs.double().sum(-1), torch.ones(3, dtype=torch.float64),
                                                      1e-4, 1e-4):
            unnormalised = torch.softmax(logits / max(temperature, 1e-9), -1) * (expected > 0)
            if all_close(probs, unnormalised, 1e-5, 1e-4):
                raise AssertionError(f"{text}: the rows do not sum to 1. After keeping the top k, renormalise: "
                                     "apply the softmax to the filtered logits (the others set to -inf).")
            raise AssertionError(f"{text}: the rows must sum to 1 (a probability distribution over the next "
                                 f"token), got sums {probs.sum(-1).tolist()}. Return softmax(...), not the logits.")
        k = top_k if top_k is not None else 10

        def kept(keep: int, smallest: bool = False, tau: float = temperature) -> Tensor:
            values = logits.topk(keep, dim=-1, largest=not smallest).values
            bound = values[..., -1:]
            filtered = logits.masked_fill(logits > bound if smallest else logits < bound, float("-inf"))
            return torch.softmax(filtered / tau, dim=-1)

        mistakes: list[tuple[str, Callable[[], Tensor | None]]] = []
        if temperature not in (0.0, 1.0):
            mistakes.append(("The temperature multiplies the logits; it must divide them: softmax(logits / "
                             "temperature). Below 1 it sharpens the distribution, above 1 it flattens it.",
                             lambda: kept(k, tau=1.0 / temperature) if temperature else None))
            mistakes.append(("The temperature is ignored: divide the logits by it before the softmax.",
                             lambda: kept(k, tau=1.0)))
        if top_k is not None and 1 < top_k < 10:
            mistakes += [
                ("top_k is ignored: keep only the k largest logits, set the others to -inf, then softmax.",
                 lambda: torch.softmax(logits / temperature, dim=-1)),
                ("top_k kept the k smallest logits: keep the k largest (topk's default, largest=True).",
                 lambda: kept(k, smallest=True)),
                (f"Off by one: {k + 1} tokens kept instead of {k}. The threshold is the k-th largest logit, "
                 "topk(k).values[..., -1].", lambda: kept(k + 1)),
                (f"Off by one: {k - 1} tokens kept instead of {k}. Keep the logits >= the k-th largest, not >.",
                 lambda: kept(k - 1)),
            ]
        compare(probs, expected, text, "probabilities", mistakes, atol=1e-5, rtol=1e-4)
    report_passed(task, "temperature 0, 0.5, 0.7, 1, 1.5, 2 and top_k None, 1, 3, 4, V")


@isolated(builds='the masked mean from sums and a count', allow=())
def check_masked_mean(fn: Callable[[Tensor, Tensor], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(x, keep) -> pooled`` (B, D), the mean of each row's real positions, against :func:`masked_mean`.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    x = random_tensor(g, 3, 5, 4)  # (B, T, D)
    keep = torch.tensor([[True, True, True, False, False], [True] * 5, [True, False, False, False, False]])
    text = f"{callable_name(fn)}(x (3, 5, 4), keep (3, 5))"
    pooled = expect_tensor(call_learner(fn, x.clone(), keep.clone(), text=text), text, "(B, D) = (3, 4)")
    weights = keep.float()[..., None]  # (B, T, 1)
    expect_shape(pooled, (3, 4), text, "pooled vectors", {
        (3, 5): "That is one value per position: the mean runs over the feature axis. Average over the positions, "
                "dim=1 of (B, T, D).",
        (3, 1, 4): "Drop the length axis: one vector per sequence, (B, D) (keepdim=False, or squeeze(1)).",
    })
    compare(pooled, masked_mean(x, keep), text, "pooled vectors", [
        ("Padding is included: x.mean(dim=1) averages all T positions. Multiply by the mask and divide by the "
         "number of real tokens per row.", lambda: x.mean(dim=1)),
        ("The sum is not divided: divide by the number of real tokens of each row, keep.sum(dim=1).",
         lambda: (x * weights).sum(dim=1)),
        ("Divided by T, the padded length: divide by the number of real tokens of each row instead.",
         lambda: (x * weights).sum(dim=1) / x.size(1)),
        ("The mask is inverted: keep is True for the real tokens, those are the ones to average.",
         lambda: (x * (1 - weights)).sum(dim=1) / (1 - weights).sum(dim=1).clamp(min=1)),
    ])
    empty = torch.tensor([[False, False, False, False, False], [True, True, False, False, False]])
    text = f"{callable_name(fn)}(x (2, 5, 4), keep with a row of padding only)"
    pooled = expect_tensor(call_learner(fn, x[:2].clone(), empty, text=text), text, "(2, 4)")
    if pooled.shape == (2, 4) and not torch.isfinite(pooled).all():
        raise AssertionError(f"{text} gave NaN for the row with no real token (0 / 0): clamp the count to at "
                             "least 1, so that such a row pools to zeros.")
    compare(pooled, masked_mean(x[:2], empty), text, "pooled vectors")
    report_passed(task, "masked mean of 3 rows (3, 5 and 1 real tokens) and an all-padding row")


FAMILIES = ("encoder-only", "decoder-only", "encoder-decoder")
# application -> (the family, or the families, that fit it; why)
_APPLICATIONS: dict[str, tuple[str | tuple[str, ...], str]] = {
    "label a film review as positive or negative":
        ("encoder-only", "the whole review is known in advance and the answer is one label: read it in both "
                         "directions and classify a pooled vector"),
    "mark each word of a sentence as a person's name or not":
        ("encoder-only", "one label per input word, and each label depends on the words on both sides: a head on "
                         "every encoder position"),
    "continue a line of code as the programmer types":
        ("decoder-only", "the task is 'write what comes next in this same text', the next-token objective "
                         "under a causal mask"),
    # Two families fit: lesson 09's question on summarisation accepts either family for the same reason.
    "write a story from a one-line prompt":
        (("decoder-only", "encoder-decoder"),
         "a decoder-only model treats the prompt and the story as one text to continue; an encoder-decoder reads "
         "the prompt as a separate input and writes the story while cross-attending to it; both fit, while an "
         "encoder-only model writes no text"),
    "translate an English caption into German":
        ("encoder-decoder", "a separate source sentence is read once, in both directions, and a new sentence in "
                            "another language is generated while cross-attending to it: the paper's own task"),
}
APPLICATIONS = tuple(_APPLICATIONS)


@isolated(builds='the answer, in Python', allow=())
def check_family_choice(fn: Callable[[str], str], *, task: int | str | None = None) -> None:
    """Check ``fn(application) -> family`` for the applications of :data:`APPLICATIONS`.

    Args:
        fn: the learner's function, answering one of :data:`FAMILIES` for each application. The story
            prompt accepts two families (decoder-only or encoder-decoder): both are defensible.
        task: task number printed on success.

    Raises:
        AssertionError: the first wrong answer, and why another family fits better.
    """
    __tracebackhide__ = True
    for application, (family, why) in _APPLICATIONS.items():
        accepted = (family,) if isinstance(family, str) else family
        text = f"{callable_name(fn)}({application!r})"
        answer: Any = call_learner(fn, application, text=text)
        if not isinstance(answer, str) or answer.strip().lower() not in FAMILIES:
            raise AssertionError(f"{text} returned {answer!r}; expected one of {', '.join(map(repr, FAMILIES))}")
        if answer.strip().lower() not in accepted:
            raise AssertionError(f"{text} returned {answer!r}, but {' or '.join(accepted)} fits better: {why}.")
    report_passed(task, f"{len(_APPLICATIONS)} applications matched with their family")


"""Lesson 09: temperature and top-k, on the next-token distribution and on sampled text.

T < 1 sharpens softmax(logits / T) (T -> 0 is greedy), T > 1 flattens it; top-k gives every token outside the
k best probability 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from matplotlib.figure import Figure, SubFigure
from torch import Tensor

from ..variants import DecoderOnlyLM, next_token_probabilities
from ..utils import check_int
from .controls import check_figure, figure_size

__all__ = ["NextTokenDistribution", "TextTokenizer", "draw_next_token", "draw_sampling", "lm_next_token_logits",
           "next_token_distribution", "sample_texts"]


class TextTokenizer(Protocol):
    """What the sampling views need of a tokenizer (the package's ``CharTokenizer`` has it)."""

    def encode(self, text: str) -> Any: ...

    def decode(self, ids: Any) -> str: ...


@dataclass(frozen=True)
class NextTokenDistribution:
    """What :func:`next_token_distribution` computed."""

    probs: Tensor
    plain: Tensor
    entropy: float
    kept: int
    temperature: float
    top_k: int | None


def next_token_distribution(logits: Tensor, temperature: float = 1.0,
                            top_k: int | None = None) -> NextTokenDistribution:
    """The next-token distribution after temperature and top-k, from the package's sampling code.

    Shape:
        ``probs`` and ``plain`` are (V,).
    """
    if not isinstance(logits, Tensor) or logits.dim() != 1 or logits.numel() < 1:
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"logits must be one row of scores of shape (V,), got {shape}")
    probs = next_token_probabilities(logits, temperature, top_k)  # (V,); checks temperature and top_k
    plain = next_token_probabilities(logits)  # (V,)
    entropy = -(probs * probs.clamp_min(1e-30).log()).sum().item()
    return NextTokenDistribution(probs, plain, max(entropy, 0.0), int((probs > 0).sum()), float(temperature), top_k)


def _ids(tokenizer: TextTokenizer, prompt: str) -> Tensor:
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt must be a non-empty string to continue, got {prompt!r}")
    return torch.as_tensor(tokenizer.encode(prompt), dtype=torch.long).flatten()  # (T,)


@torch.no_grad()
def lm_next_token_logits(model: DecoderOnlyLM, tokenizer: TextTokenizer, prompt: str) -> Tensor:
    """Logits (V,) that ``model`` gives the token after ``prompt`` (its last ``max_len`` tokens).

    The model is put in eval mode (no dropout).
    """
    model.eval()
    ids = _ids(tokenizer, prompt)[-model.max_len:]  # (T,)
    device = next(model.parameters()).device
    return model(ids[None].to(device))[0, -1].float().cpu()  # (V,)


def sample_texts(model: DecoderOnlyLM, tokenizer: TextTokenizer, prompt: str, temperature: float = 1.0,
                 top_k: int | None = None, n_samples: int = 2, max_new_tokens: int = 60, seed: int = 0) -> list[str]:
    """``n_samples`` continuations of ``prompt`` drawn with :meth:`DecoderOnlyLM.generate`, seeded."""
    check_int(n_samples, "n_samples", 1, at_most=16)
    check_int(max_new_tokens, "max_new_tokens", 0, at_most=2000)
    ids = _ids(tokenizer, prompt)[-model.max_len:]  # (T,)
    device = next(model.parameters()).device
    batch = ids[None].repeat(n_samples, 1).to(device)  # (n, T)
    out = model.generate(batch, max_new_tokens, temperature=temperature, top_k=top_k, seed=seed)  # (n, T + new)
    return [tokenizer.decode(row[ids.numel():].tolist()) for row in out.cpu()]


def _show(token: str) -> str:
    return {"\n": r"\n", " ": "␣", "\t": r"\t"}.get(token, token)


@figure_size(7.0, 3.4)
def draw_next_token(fig: Figure | SubFigure, logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                    labels: Sequence[str] | None = None, shown: int = 20) -> NextTokenDistribution:
    """Bars of the ``shown`` most likely tokens, after temperature and top-k, over the plain softmax: 1 axes."""
    check_figure(fig, "draw_next_token")
    view = next_token_distribution(logits, temperature, top_k)
    if labels is not None and len(labels) != view.probs.numel():
        raise ValueError(f"expected one label per token, {view.probs.numel()}, got {len(labels)}")
    _bars(fig.subplots(), view, labels, check_int(shown, "shown", 1))
    return view


def _bars(ax: Any, view: NextTokenDistribution, labels: Sequence[str] | None, shown: int) -> None:
    order = view.plain.argsort(descending=True)[:shown]  # the most likely tokens at temperature 1
    x = torch.arange(order.numel())
    ax.bar(x, view.plain[order].numpy(), color="lightgray", label="temperature 1, all tokens")
    ax.bar(x, view.probs[order].numpy(), width=0.5, color="C0",
           label=f"temperature {view.temperature:g}, top-k {view.top_k if view.top_k else 'all'}")
    names = [_show(labels[i]) if labels is not None else str(int(i)) for i in order.tolist()]
    ax.set_xticks(x.tolist(), names, fontsize=8)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("probability of the next token")
    ax.set_title(f"entropy {view.entropy:.2f} nats; {view.kept} token(s) can be drawn", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")


@figure_size(12.0, 3.6)
def draw_sampling(fig: Figure | SubFigure, model: DecoderOnlyLM, tokenizer: TextTokenizer, prompt: str,
                  temperature: float = 1.0, top_k: int | None = None, n_samples: int = 2, max_new_tokens: int = 60,
                  seed: int = 0, shown: int = 20) -> NextTokenDistribution:
    """The next-token distribution after ``prompt``, and seeded samples of the continuation: 2 axes."""
    check_figure(fig, "draw_sampling")
    logits = lm_next_token_logits(model, tokenizer, prompt)  # (V,)
    view = next_token_distribution(logits, temperature, top_k)
    texts = sample_texts(model, tokenizer, prompt, temperature, top_k, n_samples, max_new_tokens, seed)
    labels = [tokenizer.decode([i]) for i in range(logits.numel())]
    bar_ax, text_ax = fig.subplots(1, 2, width_ratios=(1, 1.3))
    _bars(bar_ax, view, labels, check_int(shown, "shown", 1))
    text_ax.axis("off")
    body = "\n\n".join(f"[{k + 1}] {prompt}|{t}" for k, t in enumerate(texts))
    text_ax.text(0.0, 1.0, body, va="top", ha="left", family="monospace", fontsize=7.5, wrap=True,
                 transform=text_ax.transAxes)
    text_ax.set_title(f"{n_samples} samples (seed {seed}); '|' marks the end of the prompt", fontsize=10)
    return view

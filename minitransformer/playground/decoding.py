"""Lesson 08b's Try it: what beam search (lesson 08) keeps, and how the length penalty
lp(L) = ((5 + L) / 6)^alpha ranks it.

A larger ``alpha`` favours longer outputs; ``alpha = 0`` ranks by log P(Y) alone, which favours short ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from matplotlib.figure import Figure, SubFigure
from torch import Tensor

from ..decoding import beam_search, length_penalty
from ..model import Transformer
from ..utils import check_int
from .controls import check_figure, figure_size

__all__ = ["BeamHypotheses", "Hypothesis", "SentenceTokenizer", "beam_hypotheses", "draw_beam_search",
           "sentence_beams"]


class SentenceTokenizer(Protocol):
    """What :func:`sentence_beams` needs of a tokenizer (the package's ``SharedTokenizer`` has it)."""

    pad_id: int
    bos_id: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass(frozen=True)
class Hypothesis:
    """One finished hypothesis of beam search."""

    ids: list[int]
    log_prob: float
    length: int
    score: float
    ended: bool
    text: str | None = None


@dataclass(frozen=True)
class BeamHypotheses:
    """What :func:`beam_hypotheses` found."""

    hypotheses: list[Hypothesis]
    best: Hypothesis
    beam_size: int
    alpha: float
    steps: int


def beam_hypotheses(model: Transformer, src: Tensor, bos_id: int, eos_id: int | None, beam_size: int = 4,
                    alpha: float = 0.6, max_extra_len: int = 50, max_len: int | None = None,
                    banned_ids: Sequence[int] | None = None) -> BeamHypotheses:
    """Beam search on one sentence, keeping every finished hypothesis and its score.

    The arguments mean what they mean for :func:`~minitransformer.decoding.beam_search`.
    """
    if isinstance(src, Tensor) and src.dim() == 1:
        src = src[None]  # (1, S)
    if isinstance(src, Tensor) and src.dim() == 2 and src.size(0) != 1:
        raise ValueError(f"beam_hypotheses follows one sentence: expected src of shape (S,) or (1, S), "
                         f"got {tuple(src.shape)}")
    finished: list[Hypothesis] = []

    def keep(_: int, ids: Tensor, log_prob: float, score: float, ended: bool) -> None:
        finished.append(Hypothesis(ids.tolist(), log_prob, ids.numel() - 1, score, ended))

    beam_search(model, src, bos_id, eos_id, beam_size, alpha, max_extra_len, max_len, banned_ids=banned_ids,
                on_finished=keep)
    # sorted() is stable, so among equal scores the hypothesis found first stays first, as in beam_search.
    ranked = sorted(finished, key=lambda h: -h.score)
    return BeamHypotheses(ranked, ranked[0], min(beam_size, model.config.tgt_vocab_size), float(alpha),
                          max(h.length for h in ranked))


def sentence_beams(model: Transformer, tokenizer: SentenceTokenizer, sentence: str, beam_size: int = 4,
                   alpha: float = 0.6, max_extra_len: int = 50) -> BeamHypotheses:
    """:func:`beam_hypotheses` for a sentence, as :func:`~minitransformer.evaluation.translate_sentences` encodes it."""
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"sentence must be a non-empty string to translate, got {sentence!r}")
    ids = list(tokenizer.encode(sentence))
    if len(ids) > model.config.max_len:
        raise ValueError(f"the sentence has {len(ids)} tokens but the model reads at most "
                         f"max_len={model.config.max_len}; shorten it")
    model.eval()
    device = next(model.parameters()).device
    src = torch.tensor(ids, dtype=torch.long, device=device)  # (S,)
    found = beam_hypotheses(model, src, tokenizer.bos_id, tokenizer.eos_id, beam_size, alpha, max_extra_len)
    texts = [Hypothesis(h.ids, h.log_prob, h.length, h.score, h.ended, tokenizer.decode(h.ids[1:]))
             for h in found.hypotheses]
    return BeamHypotheses(texts, texts[0], found.beam_size, found.alpha, found.steps)


@figure_size(12.0, 3.8)
def draw_beam_search(fig: Figure | SubFigure, model: Transformer, tokenizer: SentenceTokenizer, sentence: str,
                     beam_size: int = 4, alpha: float = 0.6, shown: int = 8, **options: Any) -> BeamHypotheses:
    """The finished hypotheses ranked by score, and their log P against length: 2 axes.

    The winner is red. On the right, each dashed curve holds the log P that a hypothesis of
    that length needs to tie the winner's score: points above it would win.
    """
    check_figure(fig, "draw_beam_search")
    found = sentence_beams(model, tokenizer, sentence, beam_size, alpha, **options)
    listed = found.hypotheses[: check_int(shown, "shown", 1)]
    bar_ax, scatter_ax = fig.subplots(1, 2, width_ratios=(1.8, 1))
    colors = ["C3" if h is found.best else "C0" for h in listed]
    bar_ax.barh(range(len(listed)), [h.score for h in listed], color=colors)
    labels = [f"{_shorten(h.text if h.text is not None else ' '.join(map(str, h.ids[1:])))}"
              f"{'' if h.ended else ' [cut]'}  (log P {h.log_prob:.2f}, |Y| {h.length})" for h in listed]
    bar_ax.set_yticks(range(len(listed)), labels, fontsize=8)
    bar_ax.invert_yaxis()
    bar_ax.set_xlabel(r"score = log P(Y) / lp(Y)")
    bar_ax.set_title(f"beam {found.beam_size}, alpha {found.alpha:g}: {len(found.hypotheses)} finished", fontsize=10)
    found_lengths = [h.length for h in found.hypotheses]
    lengths = torch.arange(max(1, min(found_lengths) - 4), max(found_lengths) + 3)  # around the hypotheses
    scatter_ax.plot(lengths.numpy(), (found.best.score * length_penalty(lengths, found.alpha)).numpy(), "--",
                    color="gray", lw=1, label="ties the winner")
    scatter_ax.scatter([h.length for h in found.hypotheses], [h.log_prob for h in found.hypotheses],
                       c=["C3" if h is found.best else "C0" for h in found.hypotheses], s=18, zorder=3)
    scatter_ax.set_xlabel("length |Y| (tokens, end token included)")
    scatter_ax.set_ylabel("log P(Y)")
    scatter_ax.legend(fontsize=8, loc="lower left")
    scatter_ax.grid(alpha=0.3)
    return found


def _shorten(text: str, width: int = 64) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"

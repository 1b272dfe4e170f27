"""Label-smoothed cross-entropy that ignores padding (paper, section 5.4; derived in lesson 07).

The target puts 1 - eps on the gold token, 0 on padding and eps / (V - 2) on every other token;
``F.cross_entropy(label_smoothing=...)`` spreads eps over all V tokens instead (tests/test_loss.py relates the two).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def check_pad_id(pad_id: object, vocab: int) -> int | None:
    """``pad_id`` if it is None ("no padding") or a token id in [0, vocab), else one clear error."""
    if pad_id is None:
        return None
    if isinstance(pad_id, bool) or not isinstance(pad_id, int):
        raise TypeError(f"pad_id must be a token id (int) or None for no padding, got {type(pad_id).__name__} "
                        f"{pad_id!r}")
    if not 0 <= pad_id < vocab:
        raise ValueError(f"pad_id must be a token id in [0, {vocab}) (the logits have V={vocab}), or None when the "
                         f"targets hold no padding, got {pad_id}")
    return pad_id


def label_smoothed_nll(
    logits: Tensor, target: Tensor, epsilon: float = 0.1, pad_id: int | None = 0
) -> tuple[Tensor, Tensor, Tensor]:
    """Summed label-smoothed loss, summed plain negative log-likelihood, and token count.

    Positions whose target is ``pad_id`` count for nothing. Sums (not means) let
    gradient accumulation and several processes divide by the true number of tokens.

    Shape:
        logits (..., V), target (...) with the same leading dimensions.
    """
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits must be (..., V) with the leading shape of the target, got logits "
            f"{tuple(logits.shape)} and target {tuple(target.shape)}"
        )
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"epsilon must be in [0, 1), got {epsilon}")
    vocab = logits.size(-1)
    check_pad_id(pad_id, vocab)
    n_others = vocab - 1 - (pad_id is not None)  # tokens that are neither gold nor padding
    if epsilon > 0 and n_others < 1:
        raise ValueError(f"label smoothing needs at least 3 tokens (gold, pad, another), got V={vocab}")
    log_probs = torch.log_softmax(logits.float(), dim=-1).reshape(-1, vocab)  # (N, V)
    target = target.reshape(-1)  # (N,)
    keep = target != pad_id if pad_id is not None else torch.ones_like(target, dtype=torch.bool)  # (N,)
    gold = log_probs.gather(1, target[:, None]).squeeze(1)  # (N,)
    nll = -gold
    if epsilon > 0:
        # sum over v not in {gold, pad} of log p(v), without building q; junk on padding rows,
        # which count for nothing.
        others = log_probs.sum(dim=1) - gold  # (N,)
        if pad_id is not None:
            pad = log_probs[:, pad_id]  # (N,)
            # Where log p(pad) is -inf, or so negative that the sum has lost the other terms' digits,
            # the pad column is left out of the sum instead of subtracted after it (the two slices are
            # views, nothing is copied). Elsewhere it is subtracted, bit for bit as before, so that
            # stored runs repeat exactly.
            left_out = log_probs[:, :pad_id].sum(dim=1) + log_probs[:, pad_id + 1:].sum(dim=1) - gold  # (N,)
            others = torch.where(pad > -1e4, others - pad, left_out)
        loss = (1.0 - epsilon) * nll - epsilon / n_others * others
    else:
        loss = nll
    zero = loss.new_zeros(())
    return torch.where(keep, loss, zero).sum(), torch.where(keep, nll, zero).sum(), keep.sum()


class LabelSmoothingLoss(nn.Module):
    """Label-smoothed cross-entropy over the non-padding target tokens.

    Shape:
        logits (B, T, V), target (B, T); returns a scalar (or the triple).
    """

    def __init__(self, epsilon: float = 0.1, pad_id: int | None = 0, reduction: str = "mean") -> None:
        super().__init__()
        if pad_id is not None and (isinstance(pad_id, bool) or not isinstance(pad_id, int) or pad_id < 0):
            raise ValueError(f"pad_id must be a token id >= 0, or None when the targets hold no padding, got {pad_id!r}")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        if not 0.0 <= epsilon < 1.0:
            raise ValueError(f"epsilon must be in [0, 1), got {epsilon}")
        self.epsilon = epsilon
        self.pad_id = pad_id
        self.reduction = reduction

    def forward(self, logits: Tensor, target: Tensor) -> Tensor | tuple[Tensor, Tensor, Tensor]:
        loss_sum, nll_sum, n_tokens = label_smoothed_nll(logits, target, self.epsilon, self.pad_id)
        if self.reduction == "none":
            return loss_sum, nll_sum, n_tokens
        if self.reduction == "sum":
            return loss_sum
        return loss_sum / n_tokens.clamp(min=1)

    def extra_repr(self) -> str:
        return f"epsilon={self.epsilon}, pad_id={self.pad_id}, reduction={self.reduction!r}"

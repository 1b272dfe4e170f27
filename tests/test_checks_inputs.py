"""Issue 42, item 3: a check owns its inputs. The learner's code gets copies, so changing them in place can
neither make the check's expected answer trivial nor go unnoticed (each attack below passed before)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minitransformer.checks import (check_additive_scores, check_layer_norm, check_padding_mask,
                                    check_split_and_merge_heads)


def _padding_mask(tokens, pad_id):  # no padding left, so "all True" is right
    tokens.fill_(pad_id + 1)
    return torch.ones(tokens.size(0), 1, 1, tokens.size(1), dtype=torch.bool)


def _additive_scores(s, h, W, U, v):  # v = 0 makes every score 0
    v.zero_()
    return torch.zeros(h.shape[:2])


class _LayerNorm(nn.Module):  # a constant row normalises to the bias
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        x.zero_()
        return self.bias.expand_as(x).clone()


def _split(x, n_heads):  # zeros in, zeros out
    x.zero_()
    return torch.zeros(x.size(0), n_heads, x.size(1), x.size(2) // n_heads)


def _merge(y):
    y.zero_()
    return torch.zeros(y.size(0), y.size(2), y.size(1) * y.size(3))


@pytest.mark.parametrize("run", [
    lambda: check_padding_mask(_padding_mask, task=2),
    lambda: check_additive_scores(_additive_scores, task=1),
    lambda: check_layer_norm(_LayerNorm, task=1),
    lambda: check_split_and_merge_heads(_split, _merge, task=1),
], ids=["03 padding mask", "00 additive scores", "05 layer norm", "04 split and merge heads"])
def test_changing_the_inputs_in_place_earns_nothing(run):
    with pytest.raises(AssertionError, match="in place"):
        run()

"""The checks' lists of allowed operations (issue 42, item 4), in a learner's own notebook.

A task lists what it allows (``minitransformer.checks.operations``); while its check calls the
learner's code, the operations that code runs are recorded and one outside the list fails the task
with a message that names what the task asks for and what the code called. The grader does the same
in its sandbox (``grader/tests/test_grading_allowed.py``).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minitransformer.checks import (check_layer_norm, check_logsumexp, check_masked_mean, check_stable_softmax,
                                    check_token_batches)
from minitransformer.checks.operations import ALWAYS, Recorder, outside


def _softmax(x, dim=-1):
    m = x.amax(dim, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(dim, keepdim=True)


def _logsumexp(x, dim=-1):
    m = x.amax(dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return (m + (x - m).exp().sum(dim, keepdim=True).log()).squeeze(dim)


def test_a_softmax_built_from_exp_and_sum_passes(capsys):
    check_stable_softmax(_softmax, task=4)
    check_logsumexp(_logsumexp, task=4)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize("ready, called", [
    (lambda x, dim=-1: x.softmax(dim), "Tensor.softmax"),
    (lambda x, dim=-1: getattr(torch.ops.aten, "_soft" + "max")(x, dim, False), "torch.ops.aten._softmax"),
    (lambda x, dim=-1: list(map(torch.Tensor.softmax, [x], [dim]))[0], "Tensor.softmax"),
    (lambda x, dim=-1: torch.exp(x - x.logsumexp(dim, keepdim=True)), "Tensor.logsumexp"),
])
def test_a_ready_made_softmax_fails_and_the_message_names_it(ready, called):
    with pytest.raises(AssertionError) as err:
        check_stable_softmax(ready, task=4)
    message = str(err.value)
    assert "this task asks you to build the softmax from max, exp and sum" in message, message
    assert called in message and "0 points" in message, message


def test_switching_the_recording_off_is_seen():
    def hidden(x, dim=-1):
        with torch._C.DisableTorchFunction():
            return x.logsumexp(dim)

    with pytest.raises(AssertionError, match="DisableTorchFunction"):
        check_logsumexp(hidden, task=4)


def test_the_package_s_own_pieces_are_named_as_functions_of_the_package():
    from minitransformer.data.batching import TokenBatchSampler
    from minitransformer.variants import masked_mean

    def batches(src, tgt, budget):
        return TokenBatchSampler(src, tgt, budget, shuffle=False).all_batches()

    with pytest.raises(AssertionError, match="minitransformer's TokenBatchSampler"):
        check_token_batches(batches, task=1)
    with pytest.raises(AssertionError, match="minitransformer's masked_mean"):
        check_masked_mean(lambda x, keep: masked_mean(x, keep), task=3)


def test_a_layer_norm_from_native_layer_norm_fails():
    class Ready(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps, self.weight, self.bias = eps, nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model))

        def forward(self, x):
            return torch.native_layer_norm(x, (x.size(-1),), self.weight, self.bias, self.eps)[0]

    with pytest.raises(AssertionError, match="torch.native_layer_norm"):
        check_layer_norm(Ready, task=1)


def test_the_recorder_sees_what_the_learner_calls_not_what_pytorch_runs_inside():
    recorder = Recorder()
    linear = nn.Linear(4, 3)
    recorder.call(lambda x: linear(x).relu(), torch.randn(2, 4))
    assert set(recorder.ops) == {"linear", "relu"}, recorder.ops  # nn.Linear is transparent, its init ran before
    assert outside(recorder.ops, frozenset({"linear"})) == ["Tensor.relu"]
    assert {"softmax", "logsumexp", "log_softmax", "layer_norm", "linear", "embedding"}.isdisjoint(ALWAYS)

"""The capstone's checks (exercise 11) on the worked solution's code and on its usual mistakes, without the grader.

The worked answers are read from solutions/11_capstone.ipynb and run here; each mistake is one edit of them,
and the check must name it. The full run (task 5) is checked on a model that never trained.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import nbformat
import pytest
import torch
from torch import nn

from minitransformer.checks import (check_capstone_loss, check_capstone_model, check_capstone_run,
                                    check_capstone_training, check_initial_loss, check_overfit_one_batch)

ROOT = Path(__file__).resolve().parents[1]


def _answers(edits: dict[str, str] | None = None) -> dict[str, Any]:
    """The solution's task cells 1-3 run in a fresh namespace, after the given (old -> new) edits of their text."""
    nb = nbformat.read(ROOT / "solutions" / "11_capstone.ipynb", as_version=4)
    source = "\n\n".join(c.source for c in nb.cells
                         if c.metadata["nbgrader"].get("grade_id") in ("task-1-code", "task-2-code", "task-3-code"))
    for old, new in (edits or {}).items():
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    space: dict[str, Any] = {"math": math, "random": random, "torch": torch, "nn": nn, "PAD": 0, "BOS": 1, "EOS": 2}
    exec(compile(source, "<capstone answers>", "exec"), space)
    return space


def test_the_worked_answers_pass_tasks_1_to_4(capsys):
    a = _answers()
    check_capstone_model(a["MyTransformer"], task=1)
    check_capstone_loss(a["my_loss"], task=2)
    check_initial_loss(a["MyTransformer"], a["my_expected_initial_loss"], task=2)
    check_capstone_training(a["MyTransformer"], a["my_collate"], a["my_train"], task=3)
    check_overfit_one_batch(a["MyTransformer"], a["my_train"],
                            dict(steps=150, warmup=20, lr_factor=0.5, label_smoothing=0.0), task=4)
    assert capsys.readouterr().out.count("✓ Task") == 5


@pytest.mark.parametrize("edit, said", [
    ({"return self.embedding(ids) * self.scale": "return self.embedding(ids)"}, "sqrt(d_model)"),
    ({" & torch.ones(T, T, dtype=torch.bool).tril()": ""}, "sees the future"),
    ({"self.cross_attn(x, memory, memory, src_mask)": "self.cross_attn(x, memory, memory)"}, "padding keys are attended"),
    ({"        self.generator.weight = self.src_embed.embedding.weight\n": ""}, "separate parameters"),
    ({"nn.Linear(d_model, vocab_size, bias=False)": "nn.Linear(d_model, vocab_size)"}, "generator.bias"),
    ({"self.norm1(x + self.self_attn(x, x, x, src_mask))": "x + self.self_attn(self.norm1(x), x, x, src_mask)"},
     "differ from the package"),
])
def test_the_model_check_names_the_mistake(edit, said):
    with pytest.raises(AssertionError, match=None) as caught:
        check_capstone_model(_answers(edit)["MyTransformer"], task=1)
    assert said in str(caught.value), str(caught.value)


def test_the_loss_checks_name_the_sum_and_a_wide_start():
    with pytest.raises(AssertionError, match="MEAN"):
        check_capstone_loss(_answers({"return per_position[target != pad_id].mean()":
                                      "return per_position[target != pad_id].sum()"})["my_loss"], task=2)
    wide = _answers({"nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)": "pass"})
    with pytest.raises(AssertionError, match="confidently wrong"):
        check_initial_loss(wide["MyTransformer"], wide["my_expected_initial_loss"], task=2)
    with pytest.raises(AssertionError, match="Natural logarithm"):
        check_initial_loss(wide["MyTransformer"], lambda v: math.log2(v), task=2)


@pytest.mark.parametrize("edit, said", [
    ({"enumerate(batches, start=1)": "enumerate(batches, start=0)"}, "raised ZeroDivisionError"),
    ({"my_learning_rate(step, d_model, warmup, lr_factor)": "my_learning_rate(step, d_model, warmup, 1.0)"},
     "ignores lr_factor"),
    ({"        optimizer.zero_grad()\n": ""}, "zero_grad"),
    ({"betas=(0.9, 0.98), eps=1e-9": "betas=(0.9, 0.999), eps=1e-8"}, "the paper's Adam"),
    ({"tgt_in[b, :len(t)] = torch.tensor([BOS, *t[:-1]])": "tgt_in[b, :len(t)] = torch.tensor(t)"}, "shifted right"),
])
def test_the_loop_check_names_the_mistake(edit, said):
    a = _answers(edit)
    with pytest.raises(AssertionError) as caught:
        check_capstone_training(a["MyTransformer"], a["my_collate"], a["my_train"], task=3)
    assert said in str(caught.value), str(caught.value)


@pytest.mark.parametrize("settings, said", [
    (dict(steps=150, warmup=20, lr_factor=0.5, label_smoothing=0.1), "cannot go to 0"),
    (dict(steps=60, warmup=20, lr_factor=1.5, label_smoothing=0.0), "too high"),
    (dict(steps=60, warmup=400, lr_factor=0.5, label_smoothing=0.0), "longer than the run"),
    (dict(steps=500, warmup=20, lr_factor=0.5, label_smoothing=0.0), "up to 300"),
])
def test_the_overfit_check_explains_settings_that_cannot_work(settings, said):
    a = _answers()
    with pytest.raises(AssertionError) as caught:
        check_overfit_one_batch(a["MyTransformer"], a["my_train"], settings, task=4)
    assert said in str(caught.value), str(caught.value)


def test_the_run_check_wants_a_trained_model():
    with pytest.raises(NotImplementedError, match="Task 5: train your model"):
        check_capstone_run(None, [], task=5)
    torch.manual_seed(0)
    untrained = _answers()["MyTransformer"](248, 32, 4, 128, 2)
    with pytest.raises(AssertionError, match="target is 95%"):
        check_capstone_run(untrained, [5.0] * 30, task=5)

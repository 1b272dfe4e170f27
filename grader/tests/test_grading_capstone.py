"""Exercise 11, the capstone, graded by the command: a ready-made model or loop costs the part that asks for it.

The worked solution's full marks, the blank exercise's 0 and nbgrader's agreement are tested with every exercise
(test_grading.py). Here each submission is the worked solution with one part swapped for a ready-made piece:
the package's model, PyTorch's ``nn.Transformer`` or its layers (task 1, the structure), the package's training
step (task 3, the loop). The full training run is left out of all of them (task 5 stays a stub), so a
submission grades in seconds; one control submission shows what the rest earns without a forbidden piece.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = "11_capstone"

PACKAGE_MODEL = '''
from minitransformer import Transformer, TransformerConfig


class MyTransformer(Transformer):
    """The package's model under the learner's name: its parameter names and numbers are the package's."""

    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        super().__init__(TransformerConfig.tiny(vocab_size, d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                                                n_encoder_layers=n_layers, n_decoder_layers=n_layers, dropout=0.0))
'''

NN_TRANSFORMER = '''
class MyTransformer(nn.Module):
    """PyTorch's encoder-decoder with embeddings and an output layer around it."""

    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.core = nn.Transformer(d_model, n_heads, n_layers, n_layers, d_ff, dropout=0.0, batch_first=True)
        self.generator = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, src, tgt_in):
        causal = self.core.generate_square_subsequent_mask(tgt_in.size(1))
        out = self.core(self.embed(src), self.embed(tgt_in), tgt_mask=causal, src_key_padding_mask=src == PAD,
                        memory_key_padding_mask=src == PAD)
        return self.generator(out)
'''

PACKAGE_LOOP = '''
def my_train(model, batches, *, d_model, warmup, lr_factor, label_smoothing, on_step=None):
    """The package's own step, Adam and schedule around the learner's model."""
    from minitransformer.data import collate_pairs
    from minitransformer.training import paper_adam, train_step, transformer_scheduler

    optimizer = paper_adam(model.parameters(), torch.device("cpu"))
    scheduler = transformer_scheduler(optimizer, d_model, warmup, lr_factor)
    losses = []
    for pairs in batches:
        batch = collate_pairs(pairs, PAD, BOS, EOS)
        total, _, _ = train_step(model, [batch], optimizer, scale=1 / batch.n_tgt_tokens,
                                 label_smoothing=label_smoothing, pad_id=PAD, scheduler=scheduler)
        losses.append(total.item() / batch.n_tgt_tokens)
    return losses
'''

HIDDEN_LOOP = '''
def my_train(model, batches, *, d_model, warmup, lr_factor, label_smoothing, on_step=None):
    """The package's step reached by a computed name, which the scan of the source cannot see."""
    import importlib

    step = getattr(importlib.import_module("minitransformer.training.step"), "train" + "_step")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    losses = []
    for k, pairs in enumerate(batches, start=1):
        for group in optimizer.param_groups:
            group["lr"] = my_learning_rate(k, d_model, warmup, lr_factor)
        src, tgt_in, tgt_out = my_collate(pairs)
        batch = type("Batch", (), {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out})()
        total, _, _ = step(model, [batch], optimizer, scale=1 / int((tgt_out != PAD).sum()),
                           label_smoothing=label_smoothing, pad_id=PAD)
        losses.append(total.item() / int((tgt_out != PAD).sum()))
    return losses
'''


def _solution_without_the_run() -> nbformat.NotebookNode:
    """The worked solution with task 5's run taken out (the learner's stub in its place): no training to wait for."""
    nb = nbformat.read(ROOT / "solutions" / f"{EXERCISE}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata["nbgrader"].get("grade_id") == "task-5-code")
    head, _, _ = cell.source.rpartition("### BEGIN SOLUTION")
    cell.source = head + "model = None\nlosses = []\nhistory = []\n"
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    return nb


def _with_cell(nb: nbformat.NotebookNode, grade_id: str, source: str) -> nbformat.NotebookNode:
    """``nb`` with the task cell ``grade_id`` replaced by ``source``."""
    cell = next(c for c in nb.cells if c.metadata["nbgrader"].get("grade_id") == grade_id)
    cell.source = source
    return nb


LAYER_NORM = '''class MyLayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
'''


def _model_cell(replace: dict[str, str]) -> str:
    """Task 1's worked answer with some of its lines changed."""
    nb = nbformat.read(ROOT / "solutions" / f"{EXERCISE}.ipynb", as_version=4)
    source = next(c for c in nb.cells if c.metadata["nbgrader"].get("grade_id") == "task-1-code").source
    for old, new in replace.items():
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


SUBMISSIONS = {
    "control": lambda nb: nb,
    "package-model": lambda nb: _with_cell(nb, "task-1-code", PACKAGE_MODEL),
    "nn-transformer": lambda nb: _with_cell(nb, "task-1-code", NN_TRANSFORMER),
    "torch-pieces": lambda nb: _with_cell(nb, "task-1-code", _model_cell({
        LAYER_NORM: "MyLayerNorm = nn.LayerNorm  # the same names (weight, bias) and numbers",
        "    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, H, Tq, Tk)":
            "    return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask)\n"
            "    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, H, Tq, Tk)",
    })),
    "package-loop": lambda nb: _with_cell(nb, "task-3-code", _loop_cell(PACKAGE_LOOP)),
    "hidden-loop": lambda nb: _with_cell(nb, "task-3-code", _loop_cell(HIDDEN_LOOP)),
}


def _loop_cell(train: str) -> str:
    """Task 3's worked answer with its my_train replaced by ``train``."""
    nb = nbformat.read(ROOT / "solutions" / f"{EXERCISE}.ipynb", as_version=4)
    source = next(c for c in nb.cells if c.metadata["nbgrader"].get("grade_id") == "task-3-code").source
    head, _, _ = source.partition("def my_train(")
    return head + train.lstrip("\n")


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("capstone")
    for student, make in SUBMISSIONS.items():
        folder = root / "submitted" / student / EXERCISE
        folder.mkdir(parents=True)
        nbformat.write(make(_solution_without_the_run()), folder / f"{EXERCISE}.ipynb")
    out = root / "grades.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "grader")])}
    command = [sys.executable, "-m", "minitransformer_grader", "grade", str(root / "submitted"), "--jobs", "2",
               "--json", str(out), "--csv", str(root / "grades.csv"), "--quiet"]
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert out.is_file(), run.stdout + run.stderr
    reports = json.loads(out.read_text(encoding="utf-8"))
    return {r["student"]: {t["grade_id"]: t for t in r["tasks"]} | {"report": r} for r in reports}


def _scores(graded: dict[str, dict[str, Any]], student: str) -> dict[str, float]:
    return {k: v["score"] for k, v in graded[student].items() if k.startswith("task-")}


def test_without_a_forbidden_piece_tasks_1_to_4_earn_their_points(graded):
    assert graded["control"]["report"]["error"] is None
    assert _scores(graded, "control") == {"task-1": 4, "task-2": 2, "task-3": 3, "task-4": 1, "task-5": 0}
    assert graded["control"]["task-5"]["message"].startswith("NotImplementedError: Task 5:")


@pytest.mark.parametrize("student, named", [("package-model", "minitransformer.Transformer"),
                                            ("nn-transformer", "torch.nn.Transformer"),
                                            ("torch-pieces", "torch.nn.LayerNorm")])
def test_a_ready_made_model_or_layer_scores_nothing_for_the_structure(graded, student, named):
    """The package's model, nn.Transformer, nn.LayerNorm and F.scaled_dot_product_attention: task 1 scores 0, and
    so does every task whose check builds the model (the loss at initialisation, the loop, one batch)."""
    scores = _scores(graded, student)
    assert scores["task-1"] == 0 and scores["task-3"] == 0 and scores["task-4"] == 0, scores
    assert named in graded[student]["task-1"]["message"], graded[student]["task-1"]["message"]
    if student == "torch-pieces":
        assert "torch.nn.functional.scaled_dot_product_attention" in graded[student]["task-1"]["message"]


@pytest.mark.parametrize("student", ["package-loop", "hidden-loop"])
def test_the_packages_training_step_scores_nothing_for_the_loop(graded, student):
    """Named in the source (the scan) or reached by a computed name (the sandbox's copy of the package has no
    train_step): the loop's task and the one that trains with it score 0; the model's and the loss's keep theirs."""
    scores = _scores(graded, student)
    assert scores == {"task-1": 4, "task-2": 2, "task-3": 0, "task-4": 0, "task-5": 0}, scores
    assert "train_step" in graded[student]["task-3"]["message"], graded[student]["task-3"]["message"]

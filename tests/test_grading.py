"""The exercise checks and the grader (minitransformer.grading).

* every check passes the package's own implementation (or a correct reference);
* every check fails, with the expected explanation, on the usual wrong implementations;
* the exercise and solution notebooks agree with each other and with the grader;
* the grading command gives the solutions full marks and the blank exercises 0, restores
  edited or deleted check cells, and notes code that borrows the package's version of a task.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minitransformer import (EncoderLayer, LayerNorm, MultiHeadAttention, PositionwiseFeedForward, greedy_decode,
                             make_causal_mask, make_padding_mask, make_target_mask, scaled_dot_product_attention,
                             sinusoidal_positional_encoding)
from minitransformer import grading as G
from minitransformer.grading.decoding_checks import _greedy_by_hand
from minitransformer.grading.notebooks import _package_uses

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["01_positional_encoding_and_attention", "02_multi_head_attention_and_layers",
         "03_decoding_and_label_smoothing"]


# ----------------------------------------------------------------------------------------------
# Correct implementations pass
# ----------------------------------------------------------------------------------------------

def _smoothed_by_formula(target: torch.Tensor, vocab: int, eps: float, pad: int) -> torch.Tensor:
    q = F.one_hot(target, vocab).float() * (1 - eps - eps / (vocab - 2)) + eps / (vocab - 2)
    q[..., pad] = 0.0
    return q * (target != pad)[..., None]


CORRECT: list[tuple[Callable[..., None], Any]] = [
    (G.check_positional_encoding, sinusoidal_positional_encoding),
    (G.check_scaled_dot_product_attention, scaled_dot_product_attention),
    (G.check_padding_mask, make_padding_mask),
    (G.check_causal_mask, make_causal_mask),
    (G.check_target_mask, make_target_mask),
    (G.check_multi_head_attention, MultiHeadAttention),
    (G.check_layer_norm, LayerNorm),
    (G.check_layer_norm, nn.LayerNorm),
    (G.check_feed_forward, PositionwiseFeedForward),
    (G.check_encoder_layer, EncoderLayer),
    (G.check_label_smoothing_target, _smoothed_by_formula),
    (G.check_greedy_decode, greedy_decode),
]


@pytest.mark.parametrize("check, implementation", CORRECT, ids=lambda x: getattr(x, "__name__", str(x)))
def test_the_package_passes_its_own_checks(check, implementation, capsys):
    check(implementation, task=7)
    assert capsys.readouterr().out.startswith("✓ Task 7 passed: ")


def test_a_check_leaves_the_random_state_alone(capsys):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    G.check_multi_head_attention(MultiHeadAttention)
    G.check_greedy_decode(greedy_decode)
    assert torch.equal(torch.rand(3), expected)
    assert capsys.readouterr().out.count("✓ passed: ") == 2


# ----------------------------------------------------------------------------------------------
# Typical wrong implementations fail with a message that names the mistake
# ----------------------------------------------------------------------------------------------

def _pe_swapped(max_len: int, d_model: int) -> torch.Tensor:
    pe = sinusoidal_positional_encoding(max_len, d_model)
    return torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).reshape(max_len, d_model)


def _pe_halves(max_len: int, d_model: int) -> torch.Tensor:
    pe = sinusoidal_positional_encoding(max_len, d_model)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1)


def _pe_no_factor_two(max_len: int, d_model: int) -> torch.Tensor:
    i = torch.arange(d_model // 2)
    angle = torch.arange(max_len)[:, None] / 10000 ** (i / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model)


def _attention(scale: Callable[[int], float] = math.sqrt, dim: int = -1, invert: bool = False) -> Callable[..., Any]:
    def wrong_attention(query, key, value, mask=None):
        scores = query @ key.transpose(-2, -1) / scale(query.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask if invert else ~mask, -1e9)
        weights = torch.softmax(scores, dim=dim)
        return weights @ value, weights
    return wrong_attention


def _mha(mistake: str) -> type[nn.Module]:
    class WrongMultiHeadAttention(nn.Module):
        def __init__(self, d_model: int, n_heads: int) -> None:
            super().__init__()
            self.h, self.d_k = n_heads, d_model // n_heads
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

        def forward(self, query, key, value, mask=None):
            B, Tq, D = query.shape

            def split(x):
                if mistake == "split":  # straight to (B, H, T, d_k): positions and heads mixed
                    return x.reshape(B, self.h, x.size(1), self.d_k)
                return x.view(B, x.size(1), self.h, self.d_k).transpose(1, 2)

            q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
            scores = q @ k.transpose(-2, -1) / math.sqrt(D if mistake == "scale" else self.d_k)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            heads = torch.softmax(scores, dim=-1) @ v
            concat = heads.transpose(1, 2).reshape(B, Tq, D)
            return concat if mistake == "no_w_o" else self.w_o(concat)

    return WrongMultiHeadAttention


def _layer_norm(mistake: str) -> type[nn.Module]:
    class WrongLayerNorm(nn.Module):
        def __init__(self, d_model: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d_model))
            self.bias = nn.Parameter(torch.zeros(d_model))

        def forward(self, x):
            mean = x.mean(-1, keepdim=True)
            var = x.var(-1, keepdim=True, unbiased=mistake == "unbiased")
            if mistake == "eps_outside":
                return (x - mean) / (var.sqrt() + 1e-5) * self.weight + self.bias
            return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias

    return WrongLayerNorm


class _FeedForwardWithoutReLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.linear1(x))


class _EncoderWithoutResiduals(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)

    def forward(self, x, src_mask=None):
        x = self.norm1(self.self_attn(x, x, x, src_mask)[0])
        return self.norm2(self.feed_forward(x))


def _torch_style_smoothing(target, vocab, eps, pad):
    return F.one_hot(target, vocab) * (1 - eps) + eps / vocab


def _greedy_not_stopping(model, src, max_len, bos_id, eos_id):
    out = greedy_decode(model, src, max_len, bos_id, eos_id)
    fill = torch.full((src.size(0), 1 + max_len - out.size(1)), model.config.pad_id)
    return torch.cat([out, fill], dim=1)  # runs on for max_len steps after everyone has finished


def _greedy_first_position(model, src, max_len, bos_id, eos_id):
    return _greedy_by_hand(model, src, max_len, bos_id, eos_id, first_position=True)


WRONG = [
    ("pe swapped", G.check_positional_encoding, _pe_swapped, "swapped sin and cos"),
    ("pe halves", G.check_positional_encoding, _pe_halves, "Interleave"),
    ("pe exponent", G.check_positional_encoding, _pe_no_factor_two, "needs the factor 2"),
    ("pe transposed", G.check_positional_encoding, lambda n, d: sinusoidal_positional_encoding(n, d).T, "transpose"),
    ("attention unscaled", G.check_scaled_dot_product_attention, _attention(scale=lambda d: 1.0),
     "divided by sqrt(d_k)"),
    ("attention by d_k", G.check_scaled_dot_product_attention, _attention(scale=float), "not by d_k"),
    ("attention softmax dim", G.check_scaled_dot_product_attention, _attention(dim=-2),
     "did you apply the softmax over the last dimension"),
    ("attention mask inverted", G.check_scaled_dot_product_attention, _attention(invert=True),
     "exactly where the mask is True"),
    ("attention weights only", G.check_scaled_dot_product_attention,
     lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask)[1], "expected a pair (output, weights)"),
    ("padding inverted", G.check_padding_mask, lambda t, p: (t == p)[:, None, None, :], "`tokens != pad_id`"),
    ("padding hard-coded 0", G.check_padding_mask, lambda t, p: (t != 0)[:, None, None, :], "not with 0"),
    ("padding 2-D", G.check_padding_mask, lambda t, p: t != p, "(B, S) -> (B, 1, 1, S)"),
    ("padding int", G.check_padding_mask, lambda t, p: (t != p).long()[:, None, None, :], "must be torch.bool"),
    ("causal upper", G.check_causal_mask, lambda n: torch.ones(n, n, dtype=torch.bool).triu()[None, None],
     "see the future"),
    ("causal no diagonal", G.check_causal_mask, lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1)[None, None],
     "attend to itself"),
    ("causal inverted", G.check_causal_mask, lambda n: ~torch.ones(n, n, dtype=torch.bool).tril()[None, None],
     "inverted"),
    ("target or", G.check_target_mask, lambda t, p: make_padding_mask(t, p) | make_causal_mask(t.size(1)),
     "with & (and)"),
    ("target query padding", G.check_target_mask,
     lambda t, p: (t != p)[:, None, :, None] & make_causal_mask(t.size(1)), "not (B, 1, T, 1)"),
    ("mha heads split wrong", G.check_multi_head_attention, _mha("split"), "view or reshape to (B, n_heads, T, d_k)"),
    ("mha scaled by d_model", G.check_multi_head_attention, _mha("scale"), "not by sqrt(d_model)"),
    ("mha without w_o", G.check_multi_head_attention, _mha("no_w_o"), "output projection w_o"),
    ("layer norm unbiased", G.check_layer_norm, _layer_norm("unbiased"), "unbiased variance"),
    ("layer norm eps outside", G.check_layer_norm, _layer_norm("eps_outside"), "inside the square root"),
    ("ffn without relu", G.check_feed_forward, _FeedForwardWithoutReLU, "ReLU between the two layers is missing"),
    ("encoder pre-LN", G.check_encoder_layer, lambda d, h, f: EncoderLayer(d, h, f, norm_first=True), "pre-LN"),
    ("encoder no residual", G.check_encoder_layer, _EncoderWithoutResiduals, "residual connections are missing"),
    ("encoder bad attention", G.check_encoder_layer,
     lambda d, h, f: _with_part(EncoderLayer(d, h, f), "self_attn", _mha("scale")(d, h)), "(task 1)"),
    ("smoothing like torch", G.check_label_smoothing_target, _torch_style_smoothing, "F.cross_entropy's"),
    ("smoothing pad rows kept", G.check_label_smoothing_target,
     lambda t, v, e, p: _smoothed_by_formula(t, v, e, p) + (t == p)[..., None] / v, "counts for nothing"),
    ("greedy never stops", G.check_greedy_decode, _greedy_not_stopping, "Stop as soon as"),
    ("greedy first position", G.check_greedy_decode, _greedy_first_position, "LAST position"),
]


def _with_part(module: nn.Module, name: str, part: nn.Module) -> nn.Module:
    setattr(module, name, part)
    return module


@pytest.mark.parametrize("check, implementation, message", [w[1:] for w in WRONG], ids=[w[0] for w in WRONG])
def test_a_wrong_implementation_is_explained(check, implementation, message, capsys):
    with pytest.raises(AssertionError, match=re.escape(message)):
        check(implementation, task=1)
    assert "passed" not in capsys.readouterr().out


def test_the_learners_own_error_names_the_call():
    def broken_attention(query, key, value, mask=None):
        return query @ value, None  # (Tq, d_k) @ (Tk, d_v): wrong shapes

    with pytest.raises(AssertionError, match=r"broken_attention\(query \(2, 4, 8\).*raised RuntimeError"):
        G.check_scaled_dot_product_attention(broken_attention)


def test_a_stub_raises_its_not_implemented_error():
    def stub(max_len, d_model):
        raise NotImplementedError("Task 1: build the table")

    with pytest.raises(NotImplementedError, match="Task 1"):
        G.check_positional_encoding(stub)


# ----------------------------------------------------------------------------------------------
# The notebooks
# ----------------------------------------------------------------------------------------------

def _read(folder: str, name: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / folder / f"{name}.ipynb", as_version=4)


def test_exercises_and_solutions_come_in_pairs():
    assert sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb")) == NAMES
    assert sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_exercise_and_solution_differ_only_in_the_stubs(name: str):
    exercise, solution = _read("exercises", name), _read("solutions", name)
    assert exercise.metadata["grading"] == solution.metadata["grading"] == {"exercise": name}
    assert len(exercise.cells) == len(solution.cells)
    tasks = [c.metadata["grading"] for c in exercise.cells if "grading" in c.metadata]
    assert [t["grade_id"] for t in tasks] == [f"task-{n}" for n in range(1, len(tasks) + 1)]
    assert 3 <= len(tasks) <= 5
    for index, (ex, sol) in enumerate(zip(exercise.cells, solution.cells)):
        assert ex.cell_type == sol.cell_type and ex.metadata.get("grading") == sol.metadata.get("grading")
        if ex.cell_type == "code":
            assert not ex.outputs and ex.execution_count is None, f"{name}: exercise cell {index} has outputs"
        stub = ex.cell_type == "code" and "raise NotImplementedError" in ex.source
        if stub:
            task = re.search(r'NotImplementedError\("Task (\d+):', ex.source)
            assert task, f"{name}: a stub must say which task it belongs to"
            assert "NotImplementedError" not in sol.source, f"{name}: solution cell {index} is still a stub"
        elif index > 0:  # the title cell of a solution carries a banner
            assert ex.source == sol.source, f"{name}: cell {index} differs between exercise and solution"


@pytest.mark.parametrize("name", NAMES)
def test_solutions_do_not_borrow_the_package_pieces_they_implement(name: str):
    assert _package_uses(_read("solutions", name)) == []


def test_the_look_alike_note_can_fire():
    notebook = _read("solutions", NAMES[0])
    stub = next(c for c in notebook.cells if "def my_attention" in c.source)
    stub.source = "from minitransformer import scaled_dot_product_attention as my_attention"
    assert _package_uses(notebook) == [
        "task-2: the code uses scaled_dot_product_attention, the package's own version of what this task asks for"
    ]


# ----------------------------------------------------------------------------------------------
# The grading command, run once over the solutions, the blank exercises and a tampered submission
# ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("submissions")
    # A learner's copy: a bug in task 2 hidden by a check cell replaced with a fake success,
    # and the check cell of task 4 deleted.
    notebook = _read("solutions", NAMES[0])
    attention = next(c for c in notebook.cells if "def my_attention" in c.source)
    attention.source = attention.source.replace(" / math.sqrt(d_k)", "")
    check2 = next(c for c in notebook.cells if c.metadata.get("grading", {}).get("grade_id") == "task-2")
    check2.source = 'print("✓ Task 2 passed")'
    notebook.cells = [c for c in notebook.cells if c.metadata.get("grading", {}).get("grade_id") != "task-4"]
    nbformat.write(notebook, folder / "alice.ipynb")

    out = folder / "grades.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "minitransformer.grading", "solutions", "exercises", str(folder),
               "--jobs", "2", "--timeout", "60", "--json", str(out)]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    reports = json.loads(out.read_text(encoding="utf-8"))
    by_name = {str(Path(r["path"]).relative_to(folder) if r["path"].startswith(str(folder)) else r["path"]): r
               for r in reports}
    by_name["stdout"] = {"text": run.stdout}
    return by_name


@pytest.mark.parametrize("name", NAMES)
def test_the_solutions_get_full_marks(graded, name: str):
    report = graded[f"solutions/{name}.ipynb"]
    assert report["error"] is None and report["notes"] == []
    assert report["score"] == report["max_score"] > 0, [t["message"] for t in report["tasks"]]
    assert all(t["message"].startswith(f"✓ Task {t['grade_id'][5:]} passed") for t in report["tasks"])


@pytest.mark.parametrize("name", NAMES)
def test_the_blank_exercises_get_nothing(graded, name: str):
    report = graded[f"exercises/{name}.ipynb"]
    assert report["error"] is None and report["score"] == 0 and report["max_score"] > 0
    for task in report["tasks"]:
        assert task["message"].startswith(f"NotImplementedError: Task {task['grade_id'][5:]}:"), task


def test_edited_and_deleted_check_cells_are_restored(graded):
    report = graded["alice.ipynb"]
    results = {t["grade_id"]: t for t in report["tasks"]}
    assert results["task-2"]["passed"] is False
    assert "divided by sqrt(d_k)" in results["task-2"]["message"]
    assert results["task-4"]["passed"] is True  # restored at the end, where my_causal_mask exists
    assert (report["score"], report["max_score"]) == (4, 7)
    assert any("task-2 was edited" in n for n in report["notes"])
    assert any("task-4 was missing" in n for n in report["notes"])


def test_the_command_prints_a_table_per_submission_and_a_summary(graded):
    text = graded["stdout"]["text"]
    assert "task    title" in text and "total" in text
    assert re.search(r"solutions/02_multi_head_attention_and_layers\.ipynb +9/9", text)
    assert re.search(r"exercises/03_decoding_and_label_smoothing\.ipynb +0/6", text)


def test_the_command_refuses_a_missing_path(capsys):
    with pytest.raises(SystemExit) as exit_info:
        G.main(["no/such/notebook.ipynb"])
    assert exit_info.value.code == 2
    assert "no such notebook or folder" in capsys.readouterr().err

"""The exercise checks, the exercise generator and the grader (minitransformer.grading).

* every check passes a correct implementation (the package's own, with its anti-cheat sentinels off)
  and fails on the package's own when they are on, however it was imported;
* every check fails, with the expected explanation, on the usual wrong implementations;
* the committed exercises and reference are what the generator makes of the solutions, whose
  nbgrader metadata is valid;
* the grading command gives the solutions full marks and the blank exercises 0, and survives the
  hostile submissions (one shared run over a class folder, module-scoped: it starts processes).
"""

from __future__ import annotations

import contextlib
import copy
import csv
import importlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
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
from minitransformer.grading import _common
from minitransformer.grading.decoding_checks import _greedy_by_hand
from minitransformer.grading.generate import exercise_from_solution, make_exercises

ROOT = Path(__file__).resolve().parents[1]
NAMES = sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
# Exercise 03 (most of the grading tests below): tasks 1-4 earn 3, 1, 1 and 2 points.
FULL_03 = sum(task["points"] for task in G.load_references()["03_self_attention"]["tasks"])
MINE = ["02_positional_encoding", "03_self_attention", "04_multi_head_attention", "05_add_norm_and_feed_forward",
        "06_decoder_and_masking", "07_training"]


@pytest.fixture
def no_sentinels(monkeypatch):
    """The package's own pieces, which the checks normally refuse, allowed (to test the checks themselves)."""
    monkeypatch.setattr(_common, "_sentinels", lambda *a, **k: contextlib.nullcontext())


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
def test_the_package_passes_its_own_checks(check, implementation, capsys, no_sentinels):
    check(implementation, task=7)
    assert capsys.readouterr().out.startswith("✓ Task 7 passed: ")


def test_a_check_leaves_the_random_state_alone(capsys, no_sentinels):
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
def test_a_wrong_implementation_is_explained(check, implementation, message, capsys, no_sentinels):
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


# The review's findings: each mistake has its own message.

def _attention_scaled_after_softmax(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1) / math.sqrt(query.size(-1))
    return weights @ value, weights


class _LayerNormIgnoringEps(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias


class _FeedForwardDropoutAlwaysOn(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1, self.linear2, self.p = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), dropout

    def forward(self, x):
        return self.linear2(F.dropout(torch.relu(self.linear1(x)), self.p))  # training=True: on in eval mode too


def _causal_one_row_too_far(n):
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    if n > 4:
        mask[3, 4] = True
    return mask[None, None]


REVIEW = [
    ("causal row 3 sees 4", G.check_causal_mask, _causal_one_row_too_far, "Row 3 of your causal mask lets position 3 "
     "see position 4"),
    ("causal tril(1)", G.check_causal_mask, lambda n: torch.ones(n, n, dtype=torch.bool).tril(1)[None, None], "tril(1)"),
    ("attention scaled after softmax", G.check_scaled_dot_product_attention, _attention_scaled_after_softmax,
     "after the softmax"),
    ("layer norm ignores eps", G.check_layer_norm, _LayerNormIgnoringEps, "ignores its eps argument"),
    ("feed-forward dropout on in eval", G.check_feed_forward, _FeedForwardDropoutAlwaysOn, "dropout stays on"),
]


@pytest.mark.parametrize("check, implementation, message", [w[1:] for w in REVIEW], ids=[w[0] for w in REVIEW])
def test_the_reviews_mistakes_are_named(check, implementation, message):
    with pytest.raises(AssertionError, match=re.escape(message)):
        check(implementation, task=1)


def test_id_3_is_not_an_ordinary_token_in_the_checks_and_exercises():
    source = (ROOT / "minitransformer/grading/decoding_checks.py").read_text(encoding="utf-8")
    assert "torch.randint(4, 11," in source and "torch.randint(3, 11," not in source
    lesson06 = (ROOT / "solutions" / "06_decoder_and_masking.ipynb").read_text(encoding="utf-8")
    assert "torch.randint(4, VOCAB," in lesson06 and "torch.randint(3, VOCAB," not in lesson06
    for name in ("06_decoder_and_masking", "07_training"):
        assert "`<unk>` = 3" in (ROOT / "solutions" / f"{name}.ipynb").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------------------------
# The package's own piece is refused by behaviour, however it was imported
# ----------------------------------------------------------------------------------------------

def _alias_built_from_strings():
    found = getattr(importlib.import_module("minitransformer"), "scaled_" + "dot_product_attention")

    def my_attention(query, key, value, mask=None):
        return found(query, key, value, mask)  # a closure: no name of the package in sight
    return my_attention


def _layer_norm_subclass():
    class MyLayerNorm(nn.LayerNorm):
        pass
    return MyLayerNorm


REFERENCE_USES = [
    ("attention by alias", G.check_scaled_dot_product_attention, scaled_dot_product_attention,
     "minitransformer's scaled_dot_product_attention"),
    ("attention by strings", G.check_scaled_dot_product_attention, _alias_built_from_strings(),
     "minitransformer's scaled_dot_product_attention"),
    ("attention from torch", G.check_scaled_dot_product_attention,
     lambda q, k, v, mask=None: (F.scaled_dot_product_attention(q, k, v, None if mask is None else mask), None),
     "torch's scaled_dot_product_attention"),
    ("layer norm subclass", G.check_layer_norm, _layer_norm_subclass(), "torch's LayerNorm"),
    ("greedy decoding", G.check_greedy_decode, greedy_decode, "minitransformer's greedy_decode"),
    ("target mask", G.check_target_mask, lambda t, p: make_target_mask(t, p), "make_target_mask"),
]


@pytest.mark.parametrize("check, implementation, message", [w[1:] for w in REFERENCE_USES],
                         ids=[w[0] for w in REFERENCE_USES])
def test_the_packages_own_piece_is_refused_with_the_right_task(check, implementation, message, capsys):
    with pytest.raises(AssertionError, match=r"^Task 5: your code calls .*" + re.escape(message)):
        check(implementation, task=5)
    assert "passed" not in capsys.readouterr().out
    # Afterwards the package works as before: the sentinels are gone.
    out, weights = scaled_dot_product_attention(torch.ones(1, 2, 4), torch.ones(1, 2, 4), torch.ones(1, 2, 4))
    assert torch.allclose(weights, torch.full((1, 2, 2), 0.5))
    assert isinstance(nn.LayerNorm(4)(torch.randn(2, 4)), torch.Tensor)


def test_a_package_piece_the_task_allows_is_not_refused(capsys):
    # The encoder layer of exercise 05 may use the package's MultiHeadAttention.
    solution = nbformat.read(ROOT / "solutions" / "05_add_norm_and_feed_forward.ipynb", as_version=4)
    space: dict[str, Any] = {}
    for cell in solution.cells:
        if cell.cell_type == "code" and not cell.metadata["nbgrader"]["grade"] and "encoder = " not in cell.source:
            exec(cell.source, space)
    G.check_encoder_layer(space["MyEncoderLayer"], task=3)
    assert "✓ Task 3 passed" in capsys.readouterr().out


def test_the_nan_row_question_explains_wrong_answers():
    G.check_answer("03-nan-rows", "bc", task=3)
    for wrong, words in [("C", "hides whole ROWS"), ("BCD", "sets the weights of masked keys to 0"),
                         ("ABC", "never a whole row")]:
        with pytest.raises(AssertionError, match=re.escape(words)):
            G.check_answer("03-nan-rows", wrong, task=3)


def test_the_nan_row_question_agrees_with_the_package_and_a_plain_softmax():
    x = torch.randn(2, 3, 8)

    def plain(mask):
        scores = (x @ x.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1)

    tokens = torch.tensor([[5, 7, 0], [6, 0, 0]])
    assert not plain((tokens != 0)[:, None, :]).isnan().any()  # A
    assert plain((tokens != 0)[:, :, None]).isnan().any()  # B
    assert plain((torch.tensor([[5, 7, 0], [0, 0, 0]]) != 0)[:, None, :]).isnan().any()  # C
    # The package checks that a mask covers every key, so the query mask is spelled out as (B, Tq, Tk).
    query_mask = (tokens != 0)[:, :, None].expand(2, 3, 3)  # (B, Tq, Tk)
    assert not scaled_dot_product_attention(x, x, x, query_mask)[1].isnan().any()  # D


# ----------------------------------------------------------------------------------------------
# The generator and the nbgrader format
# ----------------------------------------------------------------------------------------------

def _read(folder: str, name: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / folder / f"{name}.ipynb", as_version=4)


def test_the_committed_exercises_are_what_the_generator_makes(tmp_path):
    stale = make_exercises(ROOT / "solutions", ROOT / "exercises", ROOT / "minitransformer/grading/reference", check=True)
    assert stale == [], "run `python -m minitransformer.grading make-exercises`: " + ", ".join(stale)


def test_make_exercises_says_in_one_line_when_nothing_is_out_of_date(tmp_path, capsys, monkeypatch):
    from minitransformer.grading.generate import main as make

    monkeypatch.chdir(tmp_path)
    folders = ["--solutions", str(ROOT / "solutions"), "--exercises", "exercises", "--reference", "reference",
               "--example-class", "class"]
    assert make(folders) == 0 and capsys.readouterr().out.count("wrote: ") == 2 * len(NAMES) + 3
    assert make([*folders, "--check"]) == 0
    assert capsys.readouterr().out == (f"exercises/: all {len(NAMES)} exercises, the grader's reference and the example "
                                       "class are up to date\n")
    assert make(folders) == 0
    assert capsys.readouterr().out.endswith("were already up to date\n")
    (tmp_path / "exercises" / f"{NAMES[0]}.ipynb").write_text("{}")
    assert make([*folders, "--check"]) == 1
    assert capsys.readouterr().out == f"out of date: exercises/{NAMES[0]}.ipynb\n"


def test_every_lesson_of_mine_has_an_exercise():
    assert set(MINE) <= set(NAMES)
    assert sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_the_nbgrader_metadata_is_valid(name: str):
    """What nbgrader's generate_assignment requires (schema version 3), checked here without nbgrader."""
    solution = _read("solutions", name)
    assert solution.metadata["minitransformer"]["exercise"] == name
    ids = []
    for cell in solution.cells:
        info = cell.metadata["nbgrader"]
        assert info["schema_version"] == 3 and {"grade", "solution", "locked", "grade_id"} <= set(info)
        assert re.fullmatch(r"[A-Za-z0-9_-]+", info["grade_id"]), info["grade_id"]
        ids.append(info["grade_id"])
        if info["grade"]:
            assert cell.cell_type == "code" and info["locked"] and not info["solution"]
            assert isinstance(info["points"], (int, float)) and info["points"] > 0
        if info["solution"]:
            assert not info["locked"] and cell.source.count("### BEGIN SOLUTION") == cell.source.count("### END SOLUTION") > 0
        if not info["grade"] and not info["solution"]:
            assert info["locked"]
    assert len(ids) == len(set(ids)), "grade_id must be unique"


@pytest.mark.parametrize("name", NAMES)
def test_an_exercise_hides_the_solutions_and_the_hidden_tests(name: str):
    exercise = _read("exercises", name)
    text = "\n".join(c.source for c in exercise.cells)
    for marker in ("### BEGIN SOLUTION", "### END SOLUTION", "HIDDEN TESTS", "### HINT", "### STUB", "> **Solutions.**"):
        assert marker not in text, marker
    for cell in exercise.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None
        if cell.metadata["nbgrader"]["solution"] and "answer" not in cell.source:
            task = cell.metadata["nbgrader"]["grade_id"].split("-")[1]
            assert f'raise NotImplementedError("Task {task}: ' in cell.source


def test_the_generator_keeps_the_stub_signature_and_indentation():
    solution = _read("solutions", "04_multi_head_attention")
    stub = next(c for c in exercise_from_solution(solution).cells if "class MyMultiHeadAttention" in c.source)
    assert "    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor," in stub.source
    assert '        raise NotImplementedError("Task 2: project, split into heads' in stub.source
    ast_tree = __import__("ast").parse(stub.source)  # still valid Python
    assert ast_tree.body


def test_the_reference_ships_as_package_data():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"minitransformer.grading" = ["reference/*.json"]' in text
    refs = G.load_references()
    assert set(MINE) <= set(refs)
    pe = refs["02_positional_encoding"]["tasks"][0]
    assert "sizes=((256, 512)" in pe["source"] and "256" not in pe["visible"] and pe["parts"] == [1, 1]


def test_without_a_reference_the_grader_refuses(tmp_path):
    with pytest.raises(FileNotFoundError, match="will not grade with the submissions' own check cells"):
        G.load_references(tmp_path)


# ----------------------------------------------------------------------------------------------
# The grading command on a class folder: solutions, blank exercises, mistakes and hostile submissions
# ----------------------------------------------------------------------------------------------

def _code_cell(source: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source)


def _insert_after(nb: nbformat.NotebookNode, needle: str, source: str) -> None:
    index = next(i for i, c in enumerate(nb.cells) if needle in c.source)
    nb.cells.insert(index + 1, _code_cell(source))


def _replace(nb: nbformat.NotebookNode, needle: str, old: str, new: str) -> None:
    cell = next(c for c in nb.cells if needle in c.source)
    assert old in cell.source
    cell.source = cell.source.replace(old, new)


def _class_folder(root: Path) -> Path:
    """submitted/<student>/<exercise>/<exercise>.ipynb, as nbgrader collects them, plus a few loose files."""
    def put(student: str, nb: nbformat.NotebookNode, name: str = "03_self_attention") -> None:
        folder = root / "submitted" / student / name
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / f"{name}.ipynb")

    for name in NAMES:
        put(f"solution-{name[:2]}", _read("solutions", name), name)
        put(f"blank-{name[:2]}", _read("exercises", name), name)

    # (student, the notebook it starts from, the cell after which a cell is added, that cell's code)
    added = [
        ("cheat-redefines", "exercises", "import math",  # a blank notebook that fakes its checks
         'def check_scaled_dot_product_attention(*args, **kwargs):\n    print("✓ Task 1 passed")\n\n'
         'check_padding_mask = lambda *args, **kwargs: print("✓ Task 2 passed")'),
        ("cheat-rebinds", "solutions", "import math", "import types\nminitransformer = types.SimpleNamespace()"),
        ("cheat-patches", "exercises", "import math",
         "import minitransformer.grading._common as c\nc._compare = lambda *args, **kwargs: None"),
        ("hostile-kills-parent", "solutions", "def my_padding_mask", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"),
        ("hostile-loops", "solutions", "def my_padding_mask",
         "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"),
    ]
    for student, kind, after, source in added:
        nb = _read(kind, "03_self_attention")
        _insert_after(nb, after, source)
        put(student, nb)

    strings = _read("solutions", "03_self_attention")
    _replace(strings, "def my_attention", "    d_k = query.size(-1)",
             "    import importlib\n"
             "    f = getattr(importlib.import_module('minitransformer'), 'scaled_' + 'dot_product_attention')\n"
             "    return f(query, key, value, mask)\n    d_k = query.size(-1)")
    put("cheat-strings", strings)

    victim = root / "victim.txt"
    victim.write_text("another student's work")
    deleter = _read("solutions", "03_self_attention")
    _insert_after(deleter, "import math", "import os\nfor p in ('../victim.txt', '../../victim.txt', "
                                          "'../../../victim.txt', '../../../../victim.txt', 'victim.txt'):\n"
                                          "    try:\n        os.remove(p)\n    except OSError:\n        pass")
    put("hostile-deletes", deleter)

    rewriter = _read("exercises", "03_self_attention")
    _insert_after(rewriter, "import math", (
        "import json, pathlib, minitransformer.grading as g\n"
        "folder = pathlib.Path(g.__file__).parent\n"
        "for path in [folder / 'reference' / '03_self_attention.json', folder / 'attention_checks.py']:\n"
        "    try:\n"
        "        path.chmod(0o644)\n"
        "        path.write_text(path.read_text().replace('raise AssertionError', 'return None or print'))\n"
        "    except OSError as err:\n"
        "        print('refused', err)"))
    put("hostile-rewrites", rewriter)
    put("blank-after-rewrite", _read("exercises", "03_self_attention"))

    broken = _read("solutions", "03_self_attention")
    _replace(broken, "def my_padding_mask", "return (tokens != pad_id)[:, None, None, :]",
             "return (tokens != pad_id)[:, None, None, :]]")
    put("syntax-error", broken)

    edited = _read("solutions", "03_self_attention")  # a bug hidden by a faked check, and a deleted check cell
    _replace(edited, "def my_attention", " / math.sqrt(d_k)", "")
    check1 = next(c for c in edited.cells if c.metadata["nbgrader"].get("grade_id") == "task-1")
    check1.source = 'print("✓ Task 1 passed")'
    edited.cells = [c for c in edited.cells if c.metadata["nbgrader"].get("grade_id") != "task-2"]
    put("edits-checks", edited)

    unreadable = root / "submitted" / "unreadable" / "03_self_attention"
    unreadable.mkdir(parents=True)
    (unreadable / "03_self_attention.ipynb").write_text("{ this is not a notebook")

    mystery = _read("solutions", "03_self_attention")
    mystery.metadata = {}
    for cell in mystery.cells:
        cell.metadata = {}
    nbformat.write(mystery, root / "mystery.ipynb")
    return root


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, Any]:
    root = _class_folder(tmp_path_factory.mktemp("class"))
    reference = (ROOT / "minitransformer/grading/reference/03_self_attention.json").read_bytes()
    checks = (ROOT / "minitransformer/grading/attention_checks.py").read_bytes()
    out = root / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "minitransformer.grading", "grade", str(root / "submitted"), str(root / "mystery.ipynb"),
               "--jobs", "2", "--timeout", "30", "--json", str(out / "grades.json"), "--csv", str(out / "grades.csv"),
               "--quiet"]
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    reports = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    return {"run": run, "root": root, "reports": {(r["student"], r["exercise"]): r for r in reports},
            "csv": (out / "grades.csv").read_text(encoding="utf-8"),
            "feedback": (out / "grades_feedback.csv").read_text(encoding="utf-8"),
            "reference_intact": (ROOT / "minitransformer/grading/reference/03_self_attention.json").read_bytes() == reference
            and (ROOT / "minitransformer/grading/attention_checks.py").read_bytes() == checks}


def _tasks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["grade_id"]: t for t in report["tasks"]}


@pytest.mark.parametrize("name", NAMES)
def test_the_solutions_get_full_marks(graded, name: str):
    report = graded["reports"][(f"solution-{name[:2]}", name)]
    assert report["error"] is None and report["notes"] == [], report
    assert report["score"] == report["max_score"] > 0, [t["message"] for t in report["tasks"]]
    assert all(t["message"].startswith("✓ Task") for t in report["tasks"])


@pytest.mark.parametrize("name", NAMES)
def test_the_blank_exercises_get_nothing(graded, name: str):
    report = graded["reports"][(f"blank-{name[:2]}", name)]
    assert report["error"] is None and report["score"] == 0 and report["max_score"] > 0
    for task in report["tasks"]:
        assert task["message"].startswith((f"NotImplementedError: Task {task['grade_id'][5:]}:", "AssertionError: Question")), \
            (task, report["notes"], report["output"][-3000:])


def test_the_bleu_task_grades_the_solution_full_and_a_blank_zero(graded):
    solution = _tasks(graded["reports"][("solution-08", "08_decoding_and_gpu")])["task-6"]
    blank = _tasks(graded["reports"][("blank-08", "08_decoding_and_gpu")])["task-6"]
    assert solution["score"] == 3 and solution["message"].startswith("✓ Task 6 passed: corpus BLEU"), solution
    assert blank["score"] == 0 and blank["message"].startswith("NotImplementedError: Task 6:"), blank


def test_redefined_checks_score_nothing(graded):
    # The checks run in the grader's process: the submission's own check functions are never called.
    tasks = _tasks(graded["reports"][("cheat-redefines", "03_self_attention")])
    assert tasks["task-1"]["score"] == 0 and tasks["task-1"]["message"].startswith("NotImplementedError: Task 1")
    assert tasks["task-2"]["score"] == 0 and tasks["task-2"]["message"].startswith("NotImplementedError: Task 2")


def test_rebinding_minitransformer_or_patching_the_checks_changes_nothing(graded):
    # The name `minitransformer` in the submission is not what the grader's checks use: the solution keeps its
    # points; the checks' internals are not in the sandbox, so a blank notebook that "patches" them still scores 0.
    rebinds = graded["reports"][("cheat-rebinds", "03_self_attention")]
    assert rebinds["score"] == rebinds["max_score"] == FULL_03 == 7
    patches = graded["reports"][("cheat-patches", "03_self_attention")]
    assert patches["score"] == 0
    assert "ModuleNotFoundError: No module named 'minitransformer.grading._common'" in patches["output"]


def test_the_reference_imported_by_strings_costs_its_task_only(graded):
    report = graded["reports"][("cheat-strings", "03_self_attention")]
    tasks = _tasks(report)
    assert tasks["task-1"]["score"] == 0
    assert tasks["task-1"]["message"].startswith("AssertionError: Task 1: your code calls minitransformer's "
                                                 "scaled_dot_product_attention")
    assert tasks["task-2"]["score"] == 1 and tasks["task-3"]["score"] == 1 and tasks["task-4"]["score"] == 2


def test_a_submission_cannot_delete_files_beside_it(graded):
    assert (graded["root"] / "victim.txt").read_text() == "another student's work"
    assert graded["reports"][("hostile-deletes", "03_self_attention")]["score"] == FULL_03


def test_a_submission_cannot_rewrite_the_reference(graded):
    assert graded["reference_intact"]
    rewriter = graded["reports"][("hostile-rewrites", "03_self_attention")]
    assert rewriter["score"] == 0
    blank = graded["reports"][("blank-after-rewrite", "03_self_attention")]
    assert blank["score"] == 0 and blank["error"] is None


def test_a_submission_that_kills_its_parent_is_still_graded(graded):
    report = graded["reports"][("hostile-kills-parent", "03_self_attention")]
    assert report["score"] == FULL_03, report


def test_a_loop_that_ignores_sigint_is_killed_and_the_rest_is_kept(graded):
    report = graded["reports"][("hostile-loops", "03_self_attention")]
    tasks = _tasks(report)
    assert tasks["task-1"]["score"] == 3  # graded before the loop
    assert tasks["task-2"]["score"] == 0 and tasks["task-2"]["message"].startswith("not run: a cell ignored the interrupt")
    assert report["seconds"] < 30 + 5 + 30


def test_a_syntax_error_is_reported_as_such(graded):
    tasks = _tasks(graded["reports"][("syntax-error", "03_self_attention")])
    message = tasks["task-2"]["message"]
    assert message.startswith("SyntaxError in code cell 4") and "line 5: unmatched ']'" in message and "NameError" in message, message
    assert tasks["task-1"]["score"] == 3


def test_edited_and_deleted_check_cells_are_replaced_by_the_originals(graded):
    report = graded["reports"][("edits-checks", "03_self_attention")]
    tasks = _tasks(report)
    assert tasks["task-1"]["score"] == 0 and "divided by sqrt(d_k)" in tasks["task-1"]["message"]
    assert tasks["task-2"]["score"] == 1  # run at the end, where my_padding_mask exists
    assert any("task-1 was edited" in n for n in report["notes"]) and any("task-2 was missing" in n for n in report["notes"])


def test_an_unreadable_notebook_scores_0_of_its_maximum_and_fails_the_run(graded):
    report = graded["reports"][("unreadable", "03_self_attention")]
    assert report["error"].startswith("cannot read the notebook") and (report["score"], report["max_score"]) == (0, FULL_03)
    assert graded["run"].returncode == 1


def test_a_notebook_without_metadata_is_matched_by_content(graded):
    report = graded["reports"][("mystery", "03_self_attention")]
    assert report["score"] == FULL_03 and any("by the names it defines" in n for n in report["notes"])


def test_the_csv_has_one_row_per_submission_and_the_reasons_beside_it(graded):
    rows = list(csv.DictReader(io.StringIO(graded["csv"])))
    assert len(rows) == len(graded["reports"])
    row = next(r for r in rows if r["student"] == "cheat-strings")
    assert (row["exercise"], row["03 task 1 (/3)"], row["03 task 2 (/1)"], row["03 task 3 (/1)"], row["03 task 4 (/2)"],
            row["total"], row["max"]) == ("03_self_attention", "0", "1", "1", "2", "4", "7")
    # One column per task of each exercise, headed with its points, exercise by exercise in the reference's order.
    references = G.load_references()
    tasks_of = {name: [f"{name[:2]} task {t['grade_id'][5:]} (/{t['points']:g})" for t in references[name]["tasks"]]
                for name in NAMES}
    header = next(csv.reader(io.StringIO(graded["csv"])))
    assert header == ["student", "exercise", "notebook", *[c for name in NAMES for c in tasks_of[name]],
                      "total", "max", "error"], header
    for r in rows:  # a row fills the columns of its own exercise, whose sum is the total and the headers the max
        filled = {k: float(v) for k, v in r.items() if " task " in k and v != ""}
        assert set(filled) == set(tasks_of.get(r["exercise"], [])), r
        assert math.isclose(sum(filled.values()), float(r["total"]))
        assert math.isclose(sum(float(k.split("(/")[1][:-1]) for k in filled), float(r["max"]) if filled else 0.0)
    feedback = list(csv.DictReader(io.StringIO(graded["feedback"])))
    lost = [f for f in feedback if f["student"] == "cheat-strings"]
    assert [f["task"] for f in lost] == ["task-1"] and "scaled_dot_product_attention" in lost[0]["reason"]


def test_the_json_names_student_and_exercise(graded):
    report = graded["reports"][("solution-03", "03_self_attention")]
    assert report["student"] == "solution-03" and report["exercise"] == "03_self_attention"
    assert {"grade_id", "title", "points", "score", "message", "passed"} <= set(report["tasks"][0])


def test_no_tcp_warning_is_printed(graded):
    assert "TCP without encryption" not in graded["run"].stdout + graded["run"].stderr


@pytest.mark.parametrize("option", ["--timeout=0", "--timeout=-3", "--notebook-timeout=0", "--timeout=nan",
                                    "--notebook-timeout=nan", "--timeout=inf", "--notebook-timeout=-inf"])
def test_a_time_limit_must_be_finite_and_positive(option, capsys):
    with pytest.raises(SystemExit) as exit_info:
        G.main([str(ROOT / "exercises"), option])
    assert exit_info.value.code == 2 and "expected a finite number of seconds > 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="finite number of seconds > 0"):
        G.grade_notebook(ROOT / "exercises" / "03_self_attention.ipynb", timeout=float(option.split("=")[1]))


def test_the_help_says_grading_executes_student_code_in_a_sandbox(capsys):
    with pytest.raises(SystemExit):
        G.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the learner's code of each one runs in a sandbox" in text and "bubblewrap" in text
    assert "--no-sandbox" in text and "only inside a container" in text


def test_the_command_refuses_a_missing_path(capsys):
    with pytest.raises(SystemExit) as exit_info:
        G.main(["no/such/notebook.ipynb"])
    assert exit_info.value.code == 2
    assert "no such notebook or folder" in capsys.readouterr().err


def test_the_notebook_time_limit_stops_a_slow_notebook():
    from minitransformer.grading._sandbox import KernelPackage
    from minitransformer.grading._submission import run_plan

    package = KernelPackage()
    try:
        plan = {"cells": [{"kind": "code", "source": "import time\ntime.sleep(2)", "number": n} for n in range(30)]}
        result = run_plan(plan, package, cell_timeout=100, notebook_timeout=20, memory_mb=0)  # room for a slow start
    finally:
        package.remove()
    assert result.notebook_timeout and not result.ended and 0 < len(result.events) < 30


def test_a_submission_sees_a_private_folder_and_none_of_the_graders_secrets(monkeypatch):
    from minitransformer.grading._sandbox import KernelPackage
    from minitransformer.grading._submission import run_plan

    monkeypatch.setenv("GRADER_SECRET_TOKEN", "s3cret")
    package = KernelPackage()
    try:
        plan = {"cells": [{"kind": "code", "number": 1, "source":
                           "import os, pathlib\nassert 'GRADER_SECRET_TOKEN' not in os.environ\n"
                           "assert os.listdir('.') == []\nassert os.environ['OMP_NUM_THREADS'] == '1'\n"
                           "import torch\nassert torch.get_num_threads() == 1"}]}
        result = run_plan(plan, package, cell_timeout=60, notebook_timeout=120, memory_mb=0)
    finally:
        package.remove()
    assert result.ended and result.events[0]["error"] is None, result.events


def test_the_memory_limit_stops_a_greedy_cell():
    from minitransformer.grading._sandbox import KernelPackage
    from minitransformer.grading._submission import run_plan

    package = KernelPackage()
    try:
        plan = {"cells": [{"kind": "code", "source": "hog = bytearray(6 << 30)", "number": 1},
                          {"kind": "code", "source": "print('still here')", "number": 2}]}
        result = run_plan(plan, package, cell_timeout=60, notebook_timeout=120, memory_mb=3072)
    finally:
        package.remove()
    assert result.events[0]["error"]["ename"] == "MemoryError" and result.events[1]["error"] is None and result.ended


def test_the_grades_so_far_are_written_when_the_grader_dies(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    nbformat.write(_read("solutions", "03_self_attention"), folder / "a_first.ipynb")
    slow = _read("solutions", "03_self_attention")
    _insert_after(slow, "import math", "import time\ntime.sleep(30)")
    nbformat.write(slow, folder / "b_slow.ipynb")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    grader = subprocess.Popen([sys.executable, "-m", "minitransformer.grading", "grade", str(folder), "--quiet",
                               "--json", str(tmp_path / "g.json"), "--csv", str(tmp_path / "g.csv")],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            if (tmp_path / "g.json").exists():
                break
            time.sleep(0.5)
    finally:
        grader.terminate()
        grader.wait(timeout=60)
    reports = json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))
    assert [(r["student"], r["score"]) for r in reports] == [("a_first", FULL_03)]
    assert (tmp_path / "g.csv").read_text(encoding="utf-8").count("\n") == 2  # header and one row


def test_the_exercise_is_found_from_the_option_metadata_name_or_content():
    from minitransformer.grading.notebooks import identify

    refs = G.load_references()
    nb = _read("solutions", "05_add_norm_and_feed_forward")
    assert identify(nb, Path("x/alice.ipynb"), refs) == ("05_add_norm_and_feed_forward", "metadata")
    assert identify(nb, Path("x/alice.ipynb"), refs, "03_self_attention") == ("03_self_attention", "--exercise")
    assert identify(nb, Path("x/alice.ipynb"), refs, "nope")[0] is None
    nb.metadata = {}
    assert identify(nb, Path("07_training/alice.ipynb"), refs) == ("07_training", "name")
    assert identify(nb, Path("x/alice.ipynb"), refs) == ("05_add_norm_and_feed_forward", "content")
    assert identify(None, Path("x/alice.ipynb"), refs) == (None, "not found")


# nbgrader's own bookkeeping, which make-exercises does not write (exercises/README.md, "Releasing the exercises
# with nbgrader"): the checksums that autograde compares, JupyterLab's cell locks, the solution run's timings.
_NBGRADER_ONLY_METADATA = ("editable", "deletable", "execution")
_NBGRADER_ONLY_NBGRADER = ("checksum", "cell_type")


def _differences(released: nbformat.NotebookNode, ours: nbformat.NotebookNode) -> list[str]:
    """Where nbgrader's student notebook and ours differ, beyond nbgrader's own bookkeeping ([] when equal)."""
    found = []
    if released.metadata != ours.metadata:
        found.append(f"notebook metadata: {dict(released.metadata)} != {dict(ours.metadata)}")
    if len(released.cells) != len(ours.cells):
        found.append(f"{len(released.cells)} cells != {len(ours.cells)}")
    for index, (theirs, mine) in enumerate(zip(released.cells, ours.cells)):
        for key in ("id", "cell_type", "source", "outputs", "execution_count"):
            if theirs.get(key) != mine.get(key):
                found.append(f"cell {index} {key}: {theirs.get(key)!r} != {mine.get(key)!r}")
        meta = {k: v for k, v in theirs.metadata.items() if k not in _NBGRADER_ONLY_METADATA}
        meta["nbgrader"] = {k: v for k, v in meta["nbgrader"].items() if k not in _NBGRADER_ONLY_NBGRADER}
        if meta != mine.metadata:
            found.append(f"cell {index} metadata: {meta} != {dict(mine.metadata)}")
    return found


def _nbgrader_config() -> str:
    """The nbgrader_config.py that exercises/README.md tells instructors to use."""
    readme = (ROOT / "exercises" / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(# nbgrader_config\.py\n.*?)```", readme, re.DOTALL)
    assert len(blocks) == 1, "exercises/README.md should show one nbgrader_config.py"
    return blocks[0]


def _clear_with(preprocessor: Any, solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """One nbgrader ClearSolutions-like step, then nbgrader's own clearing of outputs and hidden tests."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput

    nb = copy.deepcopy(solution)
    for step in (preprocessor, ClearOutput(), ClearHiddenTests()):
        nb, _ = step.preprocess(nb, {})
    return nb


@pytest.mark.extra("nbgrader")
def test_nbgraders_own_clear_solutions_loses_the_hints_and_ours_keeps_them():
    """In process, without the gradebook: the step the plug-in replaces, nbgrader's and ours, on every exercise."""
    from nbgrader.preprocessors import ClearSolutions

    from minitransformer.grading.nbgrader_plugin import ClearSolutionsWithHints

    for name in NAMES:
        solution = _read("solutions", name)
        ours = exercise_from_solution(solution)
        plain = _differences(_clear_with(ClearSolutions(), solution), ours)
        # nbgrader alone: a bare stub in every task cell and the solutions note in the first cell.
        tasks = sum(bool(c.metadata["nbgrader"]["solution"]) for c in solution.cells)
        assert sum("raise NotImplementedError()" in d or "# YOUR CODE HERE" in d for d in plain) == tasks, name
        assert any("cell 0 source" in d and "> **Solutions.**" in d for d in plain), name
        assert _differences(_clear_with(ClearSolutionsWithHints(), solution), ours) == [], name
    blockless = _with_a_task_cell_without_block()
    assert _differences(_clear_with(ClearSolutionsWithHints(), blockless), exercise_from_solution(blockless)) == []


def _with_a_task_cell_without_block() -> nbformat.NotebookNode:
    """03 with task 2's answer written without BEGIN/END SOLUTION, its hint in the cell's metadata."""
    solution = _read("solutions", "03_self_attention")
    cell = next(c for c in solution.cells if c.metadata["nbgrader"].get("grade_id") == "task-2-code")
    cell.source = "def my_padding_mask(tokens, pad_id):\n    return (tokens != pad_id)[:, None, None, :]"
    cell.metadata["minitransformer"] = {"hint": "compare with pad_id"}
    return solution


def test_a_task_cell_without_a_solution_block_is_all_answer():
    """nbgrader's rule for a solution cell without BEGIN/END SOLUTION, with the course's stub and hint."""
    exercise = exercise_from_solution(_with_a_task_cell_without_block())
    stub = next(c for c in exercise.cells if c.metadata["nbgrader"].get("grade_id") == "task-2-code")
    assert stub.source == 'raise NotImplementedError("Task 2: compare with pad_id")'


@pytest.mark.extra("nbgrader")
def test_the_nbgrader_configuration_replaces_only_clear_solutions():
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearOutput, ClearSolutions
    from traitlets.config import Config

    from minitransformer.grading.nbgrader_plugin import ClearSolutionsWithHints, configure

    config = Config()
    configure(config)
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    assert config.GenerateAssignment.preprocessors == [ClearSolutionsWithHints if p is ClearSolutions else p
                                                       for p in default]
    assert ClearSolutions not in config.GenerateAssignment.preprocessors
    configure(config)  # twice: unchanged
    assert config.GenerateAssignment.preprocessors.count(ClearSolutionsWithHints) == 1
    own = Config()
    own.GenerateAssignment.preprocessors = [ClearOutput]
    with pytest.raises(ValueError, match="no ClearSolutions to replace"):
        configure(own)


@pytest.mark.extra("nbgrader")
def test_nbgrader_generate_assignment_writes_our_exercises(tmp_path):
    """Real nbgrader, configured as exercises/README.md says, releases the notebooks of exercises/ (see _differences)."""
    (tmp_path / "nbgrader_config.py").write_text(_nbgrader_config(), encoding="utf-8")
    for name in NAMES:
        (tmp_path / "source" / name).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / f"{name}.ipynb", tmp_path / "source" / name)
    # nbgrader creates its gradebook by running the `alembic` command, found on PATH: put this Python's
    # scripts folder first, so that the test passes also when the environment was not activated.
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", "")}
    run = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "*", f"--CourseDirectory.root={tmp_path}",
                          f"--CourseDirectory.db_url=sqlite:///{tmp_path}/gradebook.db"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    for name in NAMES:
        released = nbformat.read(tmp_path / "release" / name / f"{name}.ipynb", as_version=4)
        assert _differences(released, exercise_from_solution(_read("solutions", name))) == [], name
        assert _differences(released, _read("exercises", name)) == [], name  # the committed ones, too
        text = "\n".join(c.source for c in released.cells)
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text and "YOUR CODE HERE" not in text


@pytest.mark.parametrize("wrong, blamed", [("mask", "check task 2"), ("attention", "check task 1")])
def test_putting_it_together_in_03_blames_the_right_task(wrong, blamed):
    solution = _read("solutions", "03_self_attention")
    space: dict[str, Any] = {}
    for cell in solution.cells:
        if cell.cell_type == "code" and ("def my_" in cell.source or "import math" in cell.source):
            exec(cell.source, space)
    if wrong == "mask":
        space["my_padding_mask"] = lambda tokens, pad_id: (tokens != pad_id)[:, None, :, None]  # hides rows
    else:
        right = space["my_attention"]
        space["my_attention"] = lambda q, k, v, mask=None: right(q, k, v)  # forgets the mask
    together = next(c for c in solution.cells if "tokens = torch.tensor([[5, 7, 9, 4]" in c.source)
    with pytest.raises(AssertionError, match=blamed):
        exec(together.source, space)


def test_partial_credit_counts_each_passing_part():
    from minitransformer.grading._submission import RunResult
    from minitransformer.grading.notebooks import Report, _score

    ref = G.load_references()["06_decoder_and_masking"]
    task = next(t for t in ref["tasks"] if t["grade_id"] == "task-6")
    assert task["parts"] == [2, 1] and "seeds=(3, 4)" in task["source"] and "seeds" not in task["visible"]
    cells = [{"kind": "check", "grade_id": t["grade_id"], "source": t["source"]} for t in ref["tasks"]]
    run = RunResult(ended=True)
    for index, t in enumerate(ref["tasks"]):
        parts = [{"passed": True, "message": "✓"}]
        if t["grade_id"] == "task-6":  # the visible check passes, the hidden one fails
            parts = [{"passed": True, "message": "✓ Task 6 passed"}, {"passed": False, "message": "AssertionError: no"}]
        run.events[index] = {"event": "done", "cell": index, "parts": parts}
    results = {r.grade_id: r for r in _score(cells, ref, run, 30, 60, Report(path="x"))}
    assert (results["task-6"].score, results["task-6"].points) == (2, 3)
    assert results["task-6"].message == "2 of 3 points; part 2 failed: AssertionError: no"

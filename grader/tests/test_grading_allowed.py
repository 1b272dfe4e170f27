"""Issue 42, items 4, 7, 9 and 10: allowed operations, the folder opened once, identity from the layout.

Item 4: a task lists the operations it allows (``minitransformer.checks.operations``), and the grader
records what the learner's code runs while a check calls it. Ready-made pieces that no list of
forbidden names held (``x.logsumexp``, ``MultiHeadAttention.split_heads``, ``torch.native_layer_norm``,
the package's ``TokenBatchSampler``, sacreBLEU's ``BLEU``, ``model(tokens)``...) now cost their task, with
a message that names what the task asks for and what the code called; so do the ways around the
recording (``torch.ops.aten``, ``DisableTorchFunction``, a thread, a tensor subclass). One class run of
``python -m minitransformer grade`` in the sandbox, as in ``test_grading_hostile_second.py``.
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
from test_grading_escapes import _blank, _put, _replace_def, _solution

# (student, exercise, the header of the cell to replace, its new source, the task that must score 0)
ATTACKS = [
    ("logsumexp-method", "03_self_attention", "def my_logsumexp", """
import torch
def my_logsumexp(x, dim=-1):
    return x.logsumexp(dim)
def my_softmax(x, dim=-1):
    return x.softmax(dim)
""", "task-4"),
    ("aten-softmax", "03_self_attention", "def my_logsumexp", """
import torch
def my_logsumexp(x, dim=-1):
    return getattr(torch.ops.aten, "logsum" + "exp")(x, [dim])
def my_softmax(x, dim=-1):
    return getattr(torch.ops.aten, "_soft" + "max")(x, dim, False)
""", "task-4"),
    ("recorder-off", "03_self_attention", "def my_logsumexp", """
import torch
def my_logsumexp(x, dim=-1):
    with torch._C.DisableTorchFunction():
        return x.logsumexp(dim)
def my_softmax(x, dim=-1):
    return list(map(getattr(torch.Tensor, "soft" + "max"), [x], [dim]))[0]
""", "task-4"),
    ("thread-worker", "03_self_attention", "def my_logsumexp", """
import queue, threading, torch
_jobs, _done = queue.Queue(), queue.Queue()
def _worker():
    while True:
        x, dim = _jobs.get()
        try:
            _done.put(getattr(x, "logsum" + "exp")(dim))
        except Exception as err:
            _done.put(err)
threading.Thread(target=_worker, daemon=True).start()
def my_logsumexp(x, dim=-1):
    _jobs.put((x, dim))
    out = _done.get(timeout=5)
    if isinstance(out, Exception):
        raise out
    return out
def my_softmax(x, dim=-1):
    return torch.exp(x - my_logsumexp(x, dim).unsqueeze(dim))
""", "task-4"),
    ("split-heads", "04_multi_head_attention", "def my_split_heads", """
import torch
from minitransformer.attention import MultiHeadAttention
def my_split_heads(x, n_heads):
    shell = MultiHeadAttention.__new__(MultiHeadAttention)
    shell.n_heads = n_heads
    return MultiHeadAttention.split_heads(shell, x)
def my_merge_heads(x):
    b, h, t, dk = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dk)
""", "task-1"),
    ("mha-forward", "04_multi_head_attention", "class MyMultiHeadAttention", """
import torch
import torch.nn.functional as F
from torch import nn
class MyMultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
    def forward(self, query, key, value, mask=None):
        q, k, v = (t.transpose(0, 1) for t in (query, key, value))
        w = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])
        b = torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
        hidden = None if mask is None else ~mask.expand(query.size(0), self.n_heads, query.size(1), key.size(1)) \\
            .reshape(-1, query.size(1), key.size(1))
        out, weights = F.multi_head_attention_forward(q, k, v, query.size(-1), self.n_heads, w, b, None, None, False,
                                                      0.0, self.w_o.weight, self.w_o.bias, training=False,
                                                      attn_mask=hidden, average_attn_weights=False)
        return out.transpose(0, 1), weights
""", "task-2"),
    ("native-layer-norm", "05_add_norm_and_feed_forward", "class MyLayerNorm", """
import torch
from torch import nn
class MyLayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        return torch.native_layer_norm(x, (x.size(-1),), self.weight, self.bias, self.eps)[0]
""", "task-1"),
    ("token-batch-sampler", "07_training", "def my_token_batches", """
from minitransformer.data.batching import TokenBatchSampler
def my_token_batches(src_lengths, tgt_lengths, max_tokens):
    return TokenBatchSampler(src_lengths, tgt_lengths, max_tokens, shuffle=False).all_batches()
""", "task-1"),
    ("sacrebleu-class", "08_decoding_and_gpu", "def my_corpus_bleu", """
import itertools
from sacrebleu.metrics import BLEU
def my_corpus_bleu(hypotheses, references):
    streams = [list(s) for s in itertools.zip_longest(*references)]
    return BLEU(tokenize="none").corpus_score(hypotheses, streams).score
""", "task-6"),
    ("model-forward", "09_beyond_translation", "def my_lm_logits", """
def my_lm_logits(model, tokens):
    return model(tokens)
""", "task-1"),
    ("package-sampling", "09_beyond_translation", "def my_next_token_probs", """
from minitransformer.variants import next_token_probabilities
def my_next_token_probs(logits, temperature, top_k):
    return next_token_probabilities(logits, temperature, top_k)
""", "task-2"),
    ("package-pooling", "09_beyond_translation", "def my_masked_mean", """
from minitransformer import variants
def my_masked_mean(x, keep):
    return variants.masked_mean(x, keep)
""", "task-3"),
]

# What each message must name: the piece the task asks for, and what the code called.
NAMED = {"logsumexp-method": ("log-sum-exp", "Tensor.logsumexp"), "aten-softmax": ("log-sum-exp", "torch.ops.aten.logsumexp"),
         "recorder-off": ("log-sum-exp", "DisableTorchFunction"), "thread-worker": ("log-sum-exp", "thread"),
         "split-heads": ("splitting and merging heads", "MultiHeadAttention.split_heads"),
         "mha-forward": ("multi-head attention", "multi_head_attention_forward"),
         "native-layer-norm": ("layer normalization", "torch.native_layer_norm"),
         "token-batch-sampler": ("batches", "TokenBatchSampler"), "sacrebleu-class": ("BLEU", "sacrebleu's BLEU"),
         "model-forward": ("not model(tokens)", "DecoderOnlyLM.forward"),
         "package-sampling": ("top-k", "next_token_probabilities"), "package-pooling": ("masked mean", "masked_mean")}


def _class(root: Path) -> None:
    for student, exercise, header, source, _ in ATTACKS:
        _put(root, student, _replace_def(_blank(exercise), header, source), exercise)


@pytest.fixture(scope="module")
def third(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("third")
    _class(root)
    _more(root)
    out = root / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "minitransformer", "grade", str(root / "submitted"), "--jobs", "2",
               "--timeout", "30", "--notebook-timeout", "120", "--memory", "2048", "--out", str(out), "--quiet"]
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    rows = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    return {"run": run, "rows": rows, "by": {r["student"]: r for r in rows}}


@pytest.mark.parametrize("student", [a[0] for a in ATTACKS])
def test_4_a_ready_made_piece_costs_its_task_and_the_message_names_it(third, student):
    task = next(a[4] for a in ATTACKS if a[0] == student)
    row = third["by"][student]
    tasks = {t["grade_id"]: t for t in row["tasks"]}
    assert tasks[task]["score"] == 0, (student, tasks[task])
    what, called = NAMED[student]
    message = tasks[task]["message"]
    assert "this task asks you to build" in message and what in message and called in message, (student, message)


# Item 10 (last part): the toy next-token scores the grader computes for exercise 08's beam search are bounded by
# what one search needs (2 * beam_size prefixes of at most max_len + 1 tokens), not by the frame's limit.
HUGE_REQUEST = """
import torch
def my_beam_search(next_log_probs, bos_id, eos_id, beam_size, alpha, max_len):
    for _ in range(3):
        next_log_probs(torch.ones(1, 262_144, dtype=torch.long))
    return [bos_id]
"""


def _more(root: Path) -> None:
    """Items 9 and 10: identity from the layout, look-alike names, and the beam-search helper's bound."""
    _put(root, "huge-request", _replace_def(_blank("08_decoding_and_gpu"), "def my_beam_search", HUGE_REQUEST),
         "08_decoding_and_gpu")
    _put(root, "renamed-00", _solution("00_introduction"), "03_self_attention")  # a solved 00 handed in as 03
    _put(root, "07-1111", _blank())  # a student id that starts like an exercise
    _put(root, "b\u043eb", _blank())  # a Cyrillic o
    _put(root, "jos\u00e9", _blank())  # é composed (NFC) ...
    _put(root, "jose\u0301", _blank())  # ... and decomposed (NFD): one student, two copies


def test_10_the_beam_search_helper_refuses_what_no_search_needs(third):
    row = third["by"]["huge-request"]
    task = {t["grade_id"]: t for t in row["tasks"]}["task-3"]
    assert task["score"] == 0 and "at most 8 rows of at most 11 tokens" in task["message"], task
    assert row["seconds"] < 60, row["seconds"]


def test_9_identity_comes_from_the_layout_and_is_checked_against_the_notebook(third):
    renamed = third["by"]["renamed-00"]
    assert renamed["exercise"] == "03_self_attention" and renamed["score"] == 0, renamed
    assert "handed in as 03_self_attention, but the notebook is exercise 00_introduction" in renamed["error"], renamed
    assert third["by"]["07-1111"]["exercise"] == "03_self_attention"  # a student, not an exercise folder
    assert any("several scripts (CYRILLIC, LATIN)" in n for n in third["by"]["b\u043eb"]["notes"])
    same = [r for r in third["rows"] if r["student"] == "jos\u00e9"]
    assert len(same) == 2 and all(r["error"].startswith("duplicate") for r in same), same
    assert "jose\u0301" not in third["by"]


def test_7_a_folder_swapped_for_a_link_after_the_listing_is_refused(tmp_path):
    from minitransformer_grader.classroom import Refused, _find, read_submission

    secret = tmp_path / "instructor" / "03_self_attention"
    secret.mkdir(parents=True)
    nbformat.write(_solution(), secret / "03_self_attention.ipynb")
    mine = _put(tmp_path / "class", "mallory", _blank())
    found = _find([str(tmp_path / "class" / "submitted")], ["03_self_attention"])
    assert found == [(mine, "mallory")]
    folder = mine.parent
    folder.rename(tmp_path / "moved")
    folder.symlink_to(secret)  # swapped after the listing, before the read
    with pytest.raises(Refused, match="changed after the grader listed it"):
        read_submission(mine)
    folder.unlink()
    (tmp_path / "replacement").mkdir()
    nbformat.write(_solution(), tmp_path / "replacement" / "03_self_attention.ipynb")
    (tmp_path / "replacement").rename(folder)  # another real folder in its place
    with pytest.raises(Refused, match="changed after the grader listed it"):
        read_submission(mine)


def test_9_a_nested_submitted_folder_or_a_numeric_id_names_no_one_else(tmp_path):
    from minitransformer_grader.classroom import _find

    _put(tmp_path / "class", "alice", _blank())
    nested = tmp_path / "class" / "submitted" / "mallory" / "submitted" / "carol" / "03_self_attention"
    nested.mkdir(parents=True)
    nbformat.write(_blank(), nested / "03_self_attention.ipynb")
    loose = tmp_path / "loose" / "mallory" / "submitted" / "carol" / "03_self_attention.ipynb"
    loose.parent.mkdir(parents=True)
    nbformat.write(_blank(), loose)
    ids = tmp_path / "ids" / "07-1111" / "03_self_attention.ipynb"
    ids.parent.mkdir(parents=True)
    nbformat.write(_blank(), ids)
    refused: list = []
    found = _find([str(tmp_path / "class"), str(tmp_path / "loose"), str(tmp_path / "ids")],
                  ["03_self_attention", "07_training"], refused)
    assert [s for _, s in found] == ["alice", "07-1111"], found
    assert sorted(s for _, s, _ in refused) == ["mallory", "mallory"], refused
    assert all("submitted/ folder inside" in why for _, _, why in refused)

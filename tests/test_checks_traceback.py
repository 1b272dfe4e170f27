"""What a learner sees when a check fails in a notebook: the cell that called it, the learner's own error if
their code raised one, and the check's message; never the check's source (its table of known mistakes).

IPython hides the frames that set ``__tracebackhide__`` but always shows the last one, which was the check's
``raise``; the checks now give their failures a ``_render_traceback_``. The tests run exercise 03 in a real
Jupyter kernel, as a learner does, with wrong answers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
import torch

from minitransformer.checks import check_causal_mask, check_scaled_dot_product_attention

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
CHECKS_FILE = re.compile(r"checks[/\\]\w+\.py")  # a frame of the checks (the modules of minitransformer.checks)

UNSCALED = '''def my_attention(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return weights @ value, weights'''
BROKEN_MASK = '''def my_padding_mask(tokens, pad_id):
    return (tokens != pad_id)[:, None, None, :] @ torch.ones(3)  # the learner's bug'''


def _cell(notebook: Any, grade_id: str) -> Any:
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


@pytest.fixture(scope="module")
def shown() -> dict[str, str]:
    """The error each failing check cell of exercise 03 shows in a Jupyter kernel, as plain text."""
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(ROOT / "exercises" / "03_self_attention.ipynb", as_version=4)
    _cell(notebook, "task-1-code").source = UNSCALED
    _cell(notebook, "task-2-code").source = BROKEN_MASK
    keep = {"cell-01", "task-1-code", "task-1", "task-2-code", "task-2"}
    notebook.cells = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") in keep]
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    out: dict[str, str] = {}
    for grade_id in ("task-1", "task-2"):
        errors = [o for o in _cell(notebook, grade_id).outputs if o.output_type == "error"]
        assert len(errors) == 1, _cell(notebook, grade_id).outputs
        assert errors[0].ename == "AssertionError"
        out[grade_id] = ANSI.sub("", "\n".join(errors[0].traceback))
    return out


def test_a_failed_check_shows_the_cell_and_the_message_only(shown):
    text = shown["task-1"]
    assert "check_scaled_dot_product_attention(my_attention, task=1)" in text  # the learner's cell
    assert text.rstrip().endswith("AssertionError: my_attention(query (2, 4, 8), key (2, 4, 8), value (2, 4, 8)) "
                                  "[self-attention (B, T, d_k)]: wrong weights. The scores must be divided by "
                                  "sqrt(d_k) before the softmax; yours are not scaled."), text
    for internal in ("minitransformer/checks", "known_mistake", "raise AssertionError", "hint", "skipping hidden"):
        assert internal not in text, (internal, text)


def test_the_learners_own_error_keeps_the_learners_line(shown):
    text = shown["task-2"]
    assert "@ torch.ones(3)  # the learner's bug" in text and "RuntimeError" in text  # where their code broke
    assert "check_padding_mask(my_padding_mask, task=2)" in text
    assert "raised RuntimeError" in text.splitlines()[-1]
    for internal in ("minitransformer/checks", "LEARNER_DEPTH", "raise AssertionError", "skipping hidden"):
        assert internal not in text, (internal, text)


def test_outside_a_notebook_the_failure_is_a_plain_assertion_error():
    def my_causal_mask(size: int) -> torch.Tensor:
        return torch.ones(size, size, dtype=torch.bool).triu()  # the future instead of the past

    with pytest.raises(AssertionError) as info:
        check_causal_mask(my_causal_mask, task=1)
    assert type(info.value) is AssertionError  # the grader reports "AssertionError: ..." as before
    assert callable(getattr(info.value, "_render_traceback_", None))
    lines = ANSI.sub("", "".join(info.value._render_traceback_()))  # outside IPython too, without the checks
    assert "AssertionError" in lines and not CHECKS_FILE.search(lines), lines


def test_the_refusal_of_the_packages_piece_is_rendered_the_same_way():
    from minitransformer import scaled_dot_product_attention

    with pytest.raises(AssertionError, match="Task 1: your code calls minitransformer's") as info:
        check_scaled_dot_product_attention(lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask),
                                           task=1)
    lines = ANSI.sub("", "".join(info.value._render_traceback_()))
    assert "Task 1: your code calls" in lines and not CHECKS_FILE.search(lines), lines

"""Exercise 03's task 4, the softmax that does not overflow: the checks pass the solution, name each usual mistake,
refuse PyTorch's own versions (the grader's scores of the notebooks: grader/tests/test_grading_tasks.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from minitransformer.checks import check_logsumexp, check_stable_softmax

ROOT = Path(__file__).resolve().parents[1]


def _solution() -> dict[str, Any]:
    """The functions of the solution notebook's task 4 cell, run as the learner's notebook runs them."""
    notebook = nbformat.read(ROOT / "solutions" / "03_self_attention.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if c.metadata["nbgrader"].get("grade_id") == "task-4-code")
    space: dict[str, Any] = {"torch": torch}
    exec(cell.source, space)
    return space


SOLUTION = _solution()
LSE: Callable[..., Tensor] = SOLUTION["my_logsumexp"]
SOFTMAX: Callable[..., Tensor] = SOLUTION["my_softmax"]


def test_the_solution_passes(capsys: pytest.CaptureFixture[str]) -> None:
    check_logsumexp(LSE, task=4)
    check_stable_softmax(SOFTMAX, task=4)
    out = capsys.readouterr().out
    assert out.count("✓ Task 4 passed") == 2, out


def test_the_solution_agrees_with_torch_where_the_formula_overflows() -> None:
    s = torch.tensor([1000.0, 999.0, 800.0])
    assert torch.isinf(torch.log(torch.exp(s).sum()))  # the formula as written
    torch.testing.assert_close(LSE(s, 0), torch.logsumexp(s, 0))
    masked = torch.tensor([[1.0, 2.0, 3.0], [-float("inf")] * 3])
    assert torch.equal(LSE(masked, -1).isneginf(), torch.tensor([False, True]))


def _shifted(x: Tensor, dim: int, *, fix: bool = True) -> tuple[Tensor, Tensor]:
    m = x.amax(dim=dim, keepdim=True)
    if fix:
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return m, torch.exp(x - m)


def _no_finite_fix(x: Tensor, dim: int) -> Tensor:
    m, e = _shifted(x, dim, fix=False)
    return (m + torch.log(e.sum(dim=dim, keepdim=True))).squeeze(dim)


def _max_is_a_pair(x: Tensor, dim: int) -> Tensor:
    m = x.max(dim, keepdim=True)  # (values, indices)
    return (m + torch.log(torch.exp(x - m).sum(dim, keepdim=True))).squeeze(dim)


def _in_place(x: Tensor, dim: int) -> Tensor:
    m = x.amax(dim=dim, keepdim=True)
    x -= m
    return (m + torch.log(torch.exp(x).sum(dim=dim, keepdim=True))).squeeze(dim)


LSE_MISTAKES: list[tuple[str, Callable[[Tensor, int], Any], str]] = [
    ("as written", lambda x, d: torch.log(torch.exp(x).sum(d)), "as written: exp(x) overflows to inf"),
    ("as written in float64", lambda x, d: torch.log(torch.exp(x.double()).sum(d)).float(), "709.8 in float64"),
    ("max not added back", lambda x, d: torch.log(_shifted(x, d)[1].sum(d)), "forgot to add it back"),
    ("one max for the whole tensor", lambda x, d: x.max() + torch.log(torch.exp(x - x.max()).sum(d)),
     "not one maximum of the whole tensor"),
    ("all -inf row gives NaN", _no_finite_fix, "all -inf is NaN; it should be -inf"),
    ("keepdim kept", lambda x, d: LSE(x, d).unsqueeze(d), "removes the reduced dimension"),
    ("max kept its axis, the sum did not",
     lambda x, d: _shifted(x, d)[0] + torch.log(_shifted(x, d)[1].sum(d)), "The max kept its axis (keepdim=True)"),
    ("dim hard-coded to -1", lambda x, d: LSE(x, -1), "reduce over dim=1, the argument"),
    ("max without keepdim", lambda x, d: x.amax(d) + torch.log(torch.exp(x - x.amax(d)).sum(d)),
     "put it back (.unsqueeze(dim)) before subtracting"),
    ("x.max(dim) is a pair", _max_is_a_pair, "x.max(dim) returns a pair (values, indices)"),
    ("no log", lambda x, d: (_shifted(x, d)[0] + _shifted(x, d)[1].sum(d, keepdim=True)).squeeze(d),
     "The log is missing"),
    ("mean for sum", lambda x, d: (_shifted(x, d)[0] + torch.log(_shifted(x, d)[1].mean(d, keepdim=True))).squeeze(d),
     "don't average them"),
    ("the whole tensor", lambda x, d: LSE(x.flatten(), 0), "Reduce over dim=-1 only"),
    ("in place", _in_place, "changed x in place"),
    ("not a tensor", lambda x, d: LSE(x, d).tolist(), "expected a torch.Tensor"),
]


@pytest.mark.parametrize("implementation, message", [m[1:] for m in LSE_MISTAKES], ids=[m[0] for m in LSE_MISTAKES])
def test_each_logsumexp_mistake_is_named(implementation: Callable[[Tensor, int], Any], message: str) -> None:
    with pytest.raises(AssertionError) as error:
        check_logsumexp(implementation, task=4)
    assert message in str(error.value), str(error.value)


def test_a_max_that_only_swaps_axes_on_a_square_matrix_is_named() -> None:
    # x - x.amax(dim) on a square matrix raises nothing: the maxima of the rows are subtracted from the columns.
    def square_only(x: Tensor, dim: int) -> Tensor:
        if x.dim() == 2 and x.size(0) == x.size(1) and dim in (-1, 1):
            return x.amax(dim) + torch.log(torch.exp(x - x.amax(dim)).sum(dim))
        return LSE(x, dim)

    with pytest.raises(AssertionError, match=r"broadcast the row maxima along the wrong axis"):
        check_logsumexp(square_only)


SOFTMAX_MISTAKES: list[tuple[str, Callable[[Tensor, int], Any], str]] = [
    ("as written", lambda x, d: torch.exp(x) / torch.exp(x).sum(d, keepdim=True), "exp(1000) is inf in float32"),
    ("LSE not put back", lambda x, d: torch.exp(x - LSE(x, d)), "put it back (.unsqueeze(dim))"),
    ("log-softmax returned", lambda x, d: x - LSE(x, d).unsqueeze(d), "the log-softmax"),
    ("shifted by the max only", lambda x, d: torch.exp(x - x.amax(d, keepdim=True)), "not normalised yet"),
    ("dim hard-coded to -1", lambda x, d: SOFTMAX(x, -1), "ran over another dimension"),
    ("one number per row", lambda x, d: LSE(x, d), "one weight per entry"),
]


@pytest.mark.parametrize("implementation, message", [m[1:] for m in SOFTMAX_MISTAKES],
                         ids=[m[0] for m in SOFTMAX_MISTAKES])
def test_each_softmax_mistake_is_named(implementation: Callable[[Tensor, int], Any], message: str) -> None:
    with pytest.raises(AssertionError) as error:
        check_stable_softmax(implementation, task=4)
    assert message in str(error.value), str(error.value)


def test_the_unsqueeze_forgotten_on_a_square_matrix_is_named() -> None:
    def square_only(x: Tensor, dim: int) -> Tensor:
        if x.dim() == 2 and x.size(0) == x.size(1):
            return torch.exp(x - LSE(x, dim))  # broadcasts along the last axis without an error
        return SOFTMAX(x, dim)

    with pytest.raises(AssertionError, match=r"broadcast it along the wrong axis"):
        check_stable_softmax(square_only)


@pytest.mark.parametrize("check, implementation, name", [
    (check_logsumexp, lambda x, d: torch.logsumexp(x, d), "torch's logsumexp"),
    (check_logsumexp, lambda x, d: (x - F.log_softmax(x, d)).select(d, 0), "torch's log_softmax"),
    (check_stable_softmax, lambda x, d: torch.softmax(x, d), "torch's softmax"),
    (check_stable_softmax, lambda x, d: F.softmax(x, dim=d), "torch's softmax"),
    (check_stable_softmax, lambda x, d: torch.exp(x - torch.logsumexp(x, d, keepdim=True)), "torch's logsumexp"),
])
def test_pytorchs_own_versions_are_refused(check: Callable[..., None], implementation: Callable[..., Tensor],
                                          name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(AssertionError, match=r"^Task 4: your code calls .*" + name):
        check(implementation, task=4)
    assert "passed" not in capsys.readouterr().out
    assert torch.equal(torch.softmax(torch.zeros(2), 0), torch.full((2,), 0.5))  # the sentinels are gone


def test_the_check_cell_labels_each_part_so_a_pass_then_a_failure_reads_right(capsys: pytest.CaptureFixture[str]) -> None:
    # The cell checks two functions, one point each: a right log-sum-exp and a wrong softmax print one passed part,
    # named as a part of task 4, then fail on the second; never a bare "Task 4 passed" above the failure.
    notebook = nbformat.read(ROOT / "exercises" / "03_self_attention.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if c.metadata["nbgrader"].get("grade_id") == "task-4")
    space: dict[str, Any] = {"check_logsumexp": check_logsumexp, "check_stable_softmax": check_stable_softmax,
                             "my_logsumexp": LSE, "my_softmax": SOFTMAX_MISTAKES[0][1]}
    with pytest.raises(AssertionError, match="wrong softmax"):
        exec(cell.source, space)
    out = capsys.readouterr().out
    assert out.startswith("✓ Task 4, part 1 of 2 passed: log-sum-exp") and out.count("passed") == 1, out
    space["my_softmax"] = SOFTMAX
    exec(cell.source, space)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" passed")[0] for line in lines] == ["✓ Task 4, part 1 of 2", "✓ Task 4, part 2 of 2"], lines
    metadata = cell.metadata["minitransformer"]
    assert metadata["parts"] == [1, 1] and cell.metadata["nbgrader"]["points"] == 2  # what "1 point" in the cell says

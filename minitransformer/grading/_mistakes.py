"""Helpers shared by the checks of the lesson-by-lesson tasks (exercises 00, 01, 08 and the new tasks of 02-07)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ._common import _describe


def _as_number(x: Any, text: str, wanted: str = "a number") -> float:
    """A Python float from the learner's int, float or one-element tensor."""
    __tracebackhide__ = True
    if isinstance(x, Tensor) and x.numel() == 1:
        return float(x.item())
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    raise AssertionError(f"{text} returned {_describe(x)}; expected {wanted}")


def _pair(result: Any, text: str, names: str) -> tuple[Any, Any]:
    """The two elements of a returned pair, or an explained AssertionError."""
    __tracebackhide__ = True
    if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 2:
        raise AssertionError(f"{text} returned {_describe(result)}; expected a pair ({names})")
    return result[0], result[1]

"""Argument checks shared by the playground views: one clear ``ValueError`` per bad value."""

from __future__ import annotations

import math


def check_int(value: object, name: str, low: int = 1, high: int | None = None, why: str = "") -> int:
    """``value`` if it is an int in [low, high] (no upper bound when ``high`` is None), else a clear error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{name} must be an integer {bounds}{why}, got {value}")
    return value


def check_number(value: object, name: str, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, why: str = "") -> float:
    """``value`` as a float inside the given bounds (closed unless ``*_open``), else a clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        left = "" if low is None else ("(" if low_open else "[") + f"{low:g}"
        right = "" if high is None else f"{high:g}" + (")" if high_open else "]")
        interval = f"in {left or '(-inf'}, {right or 'inf)'}"
        raise ValueError(f"{name} must be {interval}{why}, got {value}")
    return float(value)


def check_even(value: object, name: str) -> int:
    """A positive even integer (sine and cosine columns pair up), else a clear error."""
    check_int(value, name, 2)
    if value % 2:  # type: ignore[operator]
        raise ValueError(f"{name} must be a positive even integer (sine and cosine columns pair up), got {value}")
    return value  # type: ignore[return-value]

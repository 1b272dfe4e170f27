"""One submission, from start to end: its cells run in the sandbox, its check cells here, one :class:`RunResult`.

:func:`run_submission` starts the submission's process (:class:`.sandbox.Sandboxed`), sends it the
plan of its cells, and follows the runner's messages (:mod:`.runner`): it times each code cell and
interrupts one that runs past its limit, and runs each check cell in the grader's process against the
learner's code (:func:`.remote.run_check_cell`) when the runner reaches it. It sits above both
sides, which therefore need not know each other.
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from typing import Any

from .protocol import Closed, TooLarge, read_frame
from .remote import GRACE, KernelGone, Link, check_functions, run_check_cell
from .sandbox import KernelPackage, Sandboxed

__all__ = ["RunResult", "run_plan", "run_submission"]


@dataclasses.dataclass
class RunResult:
    """What happened in one run: each cell's outcome, and how the run ended."""

    events: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    timed_out_cells: list[int] = dataclasses.field(default_factory=list)
    notebook_timeout: bool = False
    ended: bool = False
    crash: dict[str, Any] | None = None
    gone: str | None = None
    exit_code: int | None = None
    output: str = ""
    output_cut: bool = False
    limit_hit: str | None = None  # why a memory or process limit stopped the submission


def _cell(header: dict[str, Any], cells: list[dict[str, Any]]) -> int:
    """The cell index a runner's message names, or -1 (the runner is the submission's: any JSON may come)."""
    index = header.get("cell")
    return index if type(index) is int and 0 <= index < len(cells) else -1


def _cell_error(error: Any) -> dict[str, Any] | None:
    """A code cell's error as the runner reported it, reduced to short strings (the runner may send anything)."""
    if not isinstance(error, dict):
        return None
    clean: dict[str, Any] = {"ename": str(error.get("ename", "Exception"))[:80],
                             "evalue": str(error.get("evalue", ""))[:2000]}
    if type(error.get("lineno")) is int:
        clean["lineno"] = error["lineno"]
    return clean


def run_submission(cells: list[dict[str, Any]], package: Any, *, notebook: bytes | None, sandbox: bool,
                   cell_timeout: float, notebook_timeout: float, memory_mb: int,
                   checks: dict[str, Any]) -> RunResult:
    """Run the learner's cells in a sandbox and the check cells here; see the module docstring."""
    box = Sandboxed(package, notebook, sandbox=sandbox, memory_mb=memory_mb)
    link = Link(box)
    result = RunResult()
    start = time.monotonic()
    end = start + notebook_timeout
    try:
        plan = {"threads": 1,
                "cells": [{"kind": c["kind"], "source": c["source"] if c["kind"] == "code" else ""} for c in cells]}
        link.send({"op": "plan"}, pickle.dumps(plan))
        current: int | None = None
        cell_start = interrupted_at = 0.0
        while True:  # every deadline is fixed in advance and checked on every message: none can be extended
            now = time.monotonic()
            if now >= end:
                result.notebook_timeout = True
                break
            if current is not None and not interrupted_at and now >= cell_start + cell_timeout:
                result.timed_out_cells.append(current)
                interrupted_at = now
                box.interrupt()
            elif interrupted_at and now >= interrupted_at + GRACE:
                result.gone = "a cell ignored the interrupt after its time limit"
                break
            deadlines = [end, now + 1.0]
            if current is not None:
                deadlines.append(cell_start + cell_timeout if not interrupted_at else interrupted_at + GRACE)
            try:
                header, _ = read_frame(box.out_r, min(deadlines), limit=end + GRACE)
            except TimeoutError:
                if not box.alive():
                    break  # the runner ended, but something it started holds the channel open
                continue
            except (Closed, TooLarge, ValueError, OSError) as err:
                if not isinstance(err, Closed):
                    result.gone = f"the submission's process sent a message the grader refuses ({err})"
                break
            event = header.get("event")
            if event == "start":
                current, cell_start, interrupted_at = _cell(header, cells), time.monotonic(), 0.0
            elif event == "done":
                result.events[_cell(header, cells)] = {"error": _cell_error(header.get("error"))}
                current = None
            elif event == "serve":  # nothing is computed for ordinary code cells
                link.serve(header, _, set())
            elif event == "check":
                index = _cell(header, cells)
                if not 0 <= index < len(cells) or cells[index]["kind"] != "check" or index in result.events:
                    result.gone = "the submission's process sent a message out of order"
                    break
                cell = cells[index]
                parts = run_check_cell(link, cell["source"], cell["grade_id"], checks, cell_timeout, end)
                end += link.waited  # waiting for another submission's check is not this one's time
                result.events[index] = {"parts": parts}
                if link.dead:
                    result.gone = link.dead
                    break
                link.send({"op": "resume"})
            elif event == "end":
                result.ended = True
                break
            elif event == "crash":
                result.crash = _cell_error(header.get("error")) or {"ename": "?", "evalue": ""}
                break
    except KernelGone as err:
        result.gone = str(err)
    finally:
        result.exit_code = box.close()
        result.limit_hit = box.limit_hit
        result.output, result.output_cut = box.output.text(), box.output.cut
    return result


def run_plan(plan: dict[str, Any], package: KernelPackage, *, cell_timeout: float, notebook_timeout: float,
             memory_mb: int, sandbox: bool = True) -> RunResult:
    """Run the code cells of ``plan`` (``{"cells": [{"kind": "code", "source": ...}, ...]}``) in a sandbox.

    Returns a :class:`RunResult`; check cells (``"kind": "check"``) run in this process.
    """
    return run_submission(plan["cells"], package, notebook=None, sandbox=sandbox, cell_timeout=cell_timeout,
                          notebook_timeout=notebook_timeout, memory_mb=memory_mb, checks=check_functions())

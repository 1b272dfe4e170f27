"""``nbgrader generate_assignment`` writing the same student notebooks as ``make-exercises``.

nbgrader's ``ClearSolutions`` replaces every ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` block
with one stub for the whole course (``# YOUR CODE HERE`` and a bare ``raise NotImplementedError()``):
the task's hint (the ``### HINT:`` line inside the block) and the ``### STUB:`` lines of the answer
cells are lost, and the solutions-only ``> **Solutions.**`` paragraph stays. :class:`ClearSolutionsWithHints`
takes its place in nbgrader's pipeline and clears each cell with :func:`.generate.clear_solution`,
the function that ``python -m minitransformer_grader make-exercises`` uses. nbgrader's other steps
run as before and in the same order: locking cells, clearing outputs, the gradebook and the checksums
(which therefore record the stubs with their hints), and the removal of the hidden tests after the
gradebook has saved them.

The course's ``nbgrader_config.py`` (in the nbgrader course folder, or given with ``--config``)::

    from minitransformer_grader.nbgrader_plugin import configure
    configure(get_config())

Using it needs nbgrader (the grader's ``nbgrader`` extra); importing it does not.
"""

from __future__ import annotations

from typing import Any

from .generate import clear_solution

# nbgrader is an optional extra: importing this module (as any module of the package) must work
# without it; using the plug-in then says what to install.
try:
    from nbgrader import utils
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearSolutions
except ModuleNotFoundError as err:
    _MISSING: ModuleNotFoundError | None = err
    ClearSolutions = object
else:
    _MISSING = None


def _require_nbgrader() -> None:
    if _MISSING is not None:
        raise ModuleNotFoundError(f"the nbgrader plug-in needs nbgrader ({_MISSING}): "
                                  "pip install -e 'grader[nbgrader]' in the course's repository")

__all__ = ["ClearSolutionsWithHints", "configure"]


class ClearSolutionsWithHints(ClearSolutions):
    """nbgrader's ClearSolutions, with the course's stubs: ``raise NotImplementedError("Task N: <hint>")``.

    A code cell marked as a solution gets exactly the stub that ``make-exercises`` writes (the
    markers are the course's fixed ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines; a task cell
    without them is all answer, as in nbgrader). A written answer graded by hand (a markdown solution
    cell) gets its ``### STUB:`` lines, or nbgrader's text stub. Every other cell goes through nbgrader's
    own ClearSolutions (its error for a solution block outside a solution cell), and a markdown cell then
    loses its ``> **Solutions.**`` paragraph. So
    ``ClearSolutions.code_stub`` and the solution delimiters no longer apply to code cells.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _require_nbgrader()
        super().__init__(*args, **kwargs)

    def preprocess_cell(self, cell: Any, resources: Any, cell_index: int) -> tuple[Any, Any]:
        if utils.is_solution(cell):  # a task cell, or a written answer graded by hand (markdown)
            clear_solution(cell)
            return cell, resources
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        clear_solution(cell)  # a markdown cell: the solutions-only note
        return cell, resources


def configure(config: Any) -> None:
    """Make ``nbgrader generate_assignment`` use :class:`ClearSolutionsWithHints` (in ``nbgrader_config.py``).

    Args:
        config: the ``traitlets`` Config of ``nbgrader_config.py`` (``get_config()``). Its
            ``GenerateAssignment.preprocessors`` (nbgrader's default list unless the file set one
            before) gets ``ClearSolutionsWithHints`` in place of ``ClearSolutions``.

    Raises:
        ValueError: the list holds no ``ClearSolutions`` to replace.
    """
    _require_nbgrader()
    section = config.GenerateAssignment
    if "preprocessors" in section:
        steps = list(section.preprocessors)
    else:
        steps = list(GenerateAssignment.class_traits()["preprocessors"].default())
    if ClearSolutions not in steps and ClearSolutionsWithHints not in steps:
        raise ValueError(f"GenerateAssignment.preprocessors has no ClearSolutions to replace: {steps}")
    section.preprocessors = [ClearSolutionsWithHints if step is ClearSolutions else step for step in steps]

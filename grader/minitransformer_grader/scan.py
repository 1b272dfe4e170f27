"""The grader's own reading of the submitted source: does the learner's code for a task name its forbidden piece?

In the sandbox the runner disables a task's forbidden pieces (PyTorch's ``F.layer_norm``, the package's
classes) while the check calls the learner's code, but code in the sandbox can undo that, and a default
argument or a class attribute keeps the real object. This scan runs in the grader, on the notebook's
text, so nothing the submission does at run time changes it: for each check cell it takes the names the
check is given (``my_attention``), their top-level definitions in the code cells, and, transitively, the
notebook's other definitions those use; a reference to a forbidden piece there (``F.layer_norm`` in a
default argument, ``class MyFeedForward(PositionwiseFeedForward)``, ``forward = PositionwiseFeedForward.forward``)
costs the task. Names are resolved through the notebook's imports (``import torch.nn.functional as F``).
What it cannot see: a piece reached by a computed name (``getattr(F, "layer_" + "norm")``), ``exec`` of a
string, or an import made inside another cell's function; see docs/what_is_safe.md.
"""

from __future__ import annotations

import ast
import threading
from typing import Any, Iterable

__all__ = ["parse", "parse_cells", "smuggled"]

# --jobs grades submissions in threads, and CPython 3.11 keeps one recursion counter for turning source into ast
# objects per interpreter, not per thread: two threads parsing at once can fail with "SystemError: AST constructor
# recursion depth mismatch" (python/cpython#106905), which once cost a blank notebook its grade.
_PARSE_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse``, one thread at a time."""
    with _PARSE_LOCK:
        return ast.parse(source)


def parse_cells(code_cells: list[str] | list[ast.Module]) -> list[ast.Module]:
    """The trees of the code cells (see :func:`_trees`); trees given are returned as they are."""
    return code_cells if all(isinstance(c, ast.Module) for c in code_cells) else _trees(code_cells)  # type: ignore


def _trees(sources: Iterable[str]) -> list[ast.Module]:
    """The Python that IPython runs for each cell (magics and shell escapes rewritten as calls), parsed, and the
    code a magic is given as a string (``%time f = F.layer_norm``), parsed too."""
    from IPython.core.inputtransformer2 import TransformerManager

    trees, todo, budget = [], list(sources)[::-1], 10_000
    while todo and budget > 0:
        budget -= 1
        source = todo.pop()
        try:
            tree = parse(TransformerManager().transform_cell(source))
        except (SyntaxError, ValueError, RecursionError, MemoryError, IndexError, TypeError):
            continue
        trees.append(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("run_line_magic", "run_cell_magic"):
                todo += [a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return trees


def _aliases(trees: list[ast.Module]) -> dict[str, str]:
    """Local name -> the dotted name it was imported as, from every import in the notebook."""
    names: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        names[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        names[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    return None


def _definitions(trees: list[ast.Module]) -> dict[str, list[ast.AST]]:
    """Top-level name -> the statements that define it (def, class, assignment)."""
    found: dict[str, list[ast.AST]] = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.setdefault(node.name, []).append(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, []).append(node)
    return found


def _reached(start: list[str], definitions: dict[str, list[ast.AST]]) -> list[ast.AST]:
    """The definitions of ``start`` and of the notebook's functions and classes they use, transitively."""
    seen: set[str] = set()
    todo = [n for n in start if n in definitions]
    nodes: list[ast.AST] = []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in definitions[name]:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and name not in start and \
                    not isinstance(node.value, (ast.Name, ast.Attribute)):
                continue  # a helper is followed through def, class and aliases (f = F.x); a computed value is not
            nodes.append(node)
            todo += [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in definitions]
    return nodes


def _hits(nodes: list[ast.AST], targets: list[str], aliases: dict[str, str]) -> list[str]:
    wanted = [(t.split(":")[0].split(".")[0], t.split(":")[1]) for t in targets if ":" in t]
    hits: list[str] = []
    for node in nodes:
        for part in ast.walk(node):
            name = _dotted(part, aliases) if isinstance(part, (ast.Name, ast.Attribute)) else None
            if not name:
                continue
            for top, attr in wanted:
                if name.startswith(top + ".") and name.endswith("." + attr) and name not in hits:
                    hits.append(name)
    return hits


def smuggled(code_cells: list[str] | list[ast.Module], check_source: str, checks: dict[str, Any],
             avoid: list[str]) -> str | None:
    """Why the learner's code for this check cell names a forbidden piece (one line), or None.

    ``code_cells``: the sources, or their trees from :func:`parse_cells` (parsed once for every check cell).
    """
    if not avoid:
        return None
    trees = parse_cells(code_cells)
    used = {n.id for n in ast.walk(parse(check_source)) if isinstance(n, ast.Name) and n.id not in checks}
    nodes = _reached(sorted(used), _definitions(trees))
    hits = _hits(nodes, avoid, _aliases(trees))
    if not hits:
        return None
    return (f"your code for this task refers to {', '.join(hits)}, the ready-made version of the piece it asks you "
            "to write (in its body, a default argument, a base class or a class attribute). Build it from PyTorch "
            "operations instead (graded: 0 points for this task).")

"""The packages' shape: no import circle between their modules, and each within a budget of lines on its total.

Both packages of the repository: the learner's ``minitransformer`` and the instructor's grader
(``grader/minitransformer_grader``), which the library never imports.

The import graph is built from the source with :mod:`ast`, without importing anything: an edge
``a -> b`` for every ``import``/``from ... import`` in module ``a`` that names module ``b`` of the
package, at any depth (imports inside functions count: they run, later, and a circle through them
still means that neither module can be understood or moved without the other).
``from pkg import submodule`` is an edge to the submodule alone, not to ``pkg``'s ``__init__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "minitransformer"
GRADER = Path(__file__).resolve().parents[1] / "grader" / "minitransformer_grader"

# Budgets on totals, not on files (as tinygrad keeps its line count): a cap per file only moves code
# between files. The core is the paper in lesson order, what a learner reads like minGPT.
CORE = ("config", "masks", "embeddings", "attention", "layers", "model", "cache", "decoding", "variants", "interop")
# The library is what a learner reads beside the lessons; the checks are the exercises' feedback (one
# module per exercise, a few helpers), measured apart so that growth in either shows on its own line.
BUDGETS = {"core": 1_420, "library": 10_700, "checks": 6_450, "grader": 3_750}


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """``{module: {imported module of the package: line of the first import}}`` for the package at ``root``."""
    modules = {_module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                source = ".".join([*base, *([node.module] if node.module else [])])
                subs = [f"{source}.{alias.name}" for alias in node.names]
                targets = subs if all(s in modules for s in subs) else [source, *subs]
            else:
                continue
            for target in targets:
                if target in modules and target != name:
                    graph[name].setdefault(target, node.lineno)
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The groups of modules that import each other in a circle (strongly connected components of 2 or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(start: str) -> None:  # Tarjan's algorithm, iterative (no recursion limit to meet)
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, iter(graph[target])))
                    break
                if target in stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))

    for module in graph:
        if module not in index:
            visit(module)
    return found


def _describe(graph: dict[str, dict[str, int]], group: list[str]) -> str:
    edges = [f"{a}:{line} imports {b}" for a in group for b, line in graph[a].items() if b in group]
    return "; ".join(edges)


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE)
    assert "minitransformer.checks.compare" in graph and len(graph) > 50
    cycles = import_cycles(graph)
    assert not cycles, "import circles: " + " | ".join(_describe(graph, c) for c in cycles)


def test_the_grader_has_no_import_circle() -> None:
    graph = import_graph(GRADER)
    assert "minitransformer_grader.remote" in graph and len(graph) > 10
    cycles = import_cycles(graph)
    assert not cycles, "import circles: " + " | ".join(_describe(graph, c) for c in cycles)


def test_the_library_never_imports_the_grader() -> None:
    """``python -m minitransformer grade`` finds the grader through its entry point, not by its name."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}:{node.lineno}" for n in names if n.split(".")[0] == "minitransformer_grader"]
    assert not found, found


def private_imports(root: Path) -> list[str]:
    """``file:line name`` for every import, in the package at ``root``, of a name with one leading underscore
    from a module of either package (or a relative one): a module's private names are its own."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in OURS):
                names = [*(node.module or "").split("."), *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [part for a in node.names if a.name.split(".")[0] in OURS for part in a.name.split(".")]
            else:
                continue
            found += [f"{path.relative_to(root.parent)}:{node.lineno} {n}" for n in names
                      if n.startswith("_") and not n.startswith("__")]
    return found


OURS = ("minitransformer", "minitransformer_grader")


def test_no_module_imports_another_modules_private_names() -> None:
    """A name with a leading underscore belongs to its module: what other modules share is public (checks.compare)."""
    found = private_imports(PACKAGE) + private_imports(GRADER)
    assert not found, "private names imported from another module: " + "; ".join(found)


def test_a_private_import_is_found(tmp_path: Path) -> None:
    package = tmp_path / "minitransformer"
    package.mkdir()
    (package / "a.py").write_text("import _thread\nfrom os import _exit\nfrom .b import public\n")
    assert private_imports(package) == []
    (package / "c.py").write_text("def f():\n    from .b import _hidden\n    from minitransformer import _stubs\n")
    assert private_imports(package) == ["minitransformer/c.py:2 _hidden", "minitransformer/c.py:3 _stubs"]


def test_a_circle_is_found(tmp_path: Path) -> None:
    """The check can fail: two modules that import each other, one of them inside a function."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from . import a\n")
    (package / "a.py").write_text("from .sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def f():\n    from ..a import g\n    return g\n")
    (package / "c.py").write_text("import pkg.sub.b\nfrom . import a\n")  # imports both, in no circle
    graph = import_graph(package)
    assert graph["pkg.sub.b"] == {"pkg.a": 2}
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b"]]
    (package / "sub" / "b.py").write_text("def f():\n    return 1\n")
    assert import_cycles(import_graph(package)) == []


def test_a_circle_through_a_package_init_is_found(tmp_path: Path) -> None:
    """``from pkg import name`` (not a submodule) runs pkg's ``__init__``: a circle through it counts."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .a import f\n")
    (package / "a.py").write_text("def f():\n    from pkg import g\n    return g\n")
    assert import_cycles(import_graph(package)) == [["pkg", "pkg.a"]]


def _lines(paths) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)


def test_the_packages_fit_their_line_budgets() -> None:
    checks = set((PACKAGE / "checks").rglob("*.py"))
    sizes = {"core": _lines(PACKAGE / f"{name}.py" for name in CORE),
             "library": _lines(p for p in PACKAGE.rglob("*.py") if p not in checks), "checks": _lines(checks),
             "grader": _lines(GRADER.rglob("*.py"))}
    print("lines:", ", ".join(f"{name} {n:,} of {BUDGETS[name]:,}" for name, n in sizes.items()))
    over = {name: n for name, n in sizes.items() if n > BUDGETS[name]}
    assert not over, f"over the line budget (tests/test_package_structure.py, BUDGETS): {over}"


def test_the_checks_export_the_check_of_every_exercise_module() -> None:
    """checks.__all__ (what the grader runs) is every check_* of its modules, one module per exercise."""
    import importlib

    from minitransformer import checks

    modules = sorted(p.stem for p in (PACKAGE / "checks").glob("*.py") if not p.stem.startswith("_") and p.stem != "compare")
    assert modules == ["capstone", "debugging"] + [f"lesson{n:02d}" for n in range(11)] + ["operations", "questions"]
    defined = {name: value for module in (importlib.import_module(f"minitransformer.checks.{m}") for m in modules)
               for name, value in vars(module).items()
               if name.startswith("check_") and value.__module__ == module.__name__}
    assert sorted(checks.__all__) == sorted(defined)
    assert all(getattr(checks, n) is defined[n] for n in defined)

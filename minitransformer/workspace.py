"""The learner's own copy of the lessons and exercises (``python -m minitransformer workspace``).

JupyterLab saves a notebook as it runs, so a learner who ran the stored lessons would write over the
outputs they were committed with. A workspace is a folder of copies, laid out as the course is, so
that the links between lessons and exercises, and the records the lessons read, work from it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

#: Folders of the course that lessons read or link to (../benchmarks/results, ../runs/multi30k, ../docs):
#: a workspace links to them, so the copies find them where the stored lessons do.
_COURSE_FOLDERS = ("benchmarks", "docs", "runs", "solutions")
#: The note at the start of a stored lesson (a cell of its own), and what it says in the learner's copy.
_STORED_NOTE = "> **Run your own copy.**"
_COPY_NOTE = ("> **Your copy.** This is your copy of the lesson, made by `python -m minitransformer workspace`: "
              "run it and change it freely. The stored lesson in the course's `notebooks/` keeps its outputs.")


def make_workspace(course: str | Path, out: str | Path) -> tuple[list[Path], list[Path]]:
    """Copy the lessons and exercises of ``course`` into ``out``; returns (copied, kept) notebooks.

    ``out/notebooks`` and ``out/exercises`` mirror the course's folders, so relative links between
    lessons and exercises work in the copy; ``out/benchmarks``, ``out/docs``, ``out/runs`` and
    ``out/solutions`` link to the course's own. A notebook already in ``out`` is the learner's and
    is never replaced.
    """
    course, out = Path(course), Path(out)
    if not sorted((course / "notebooks").glob("*.ipynb")) or not sorted((course / "exercises").glob("*.ipynb")):
        raise FileNotFoundError(f"no lessons in {course.resolve()}/notebooks and exercises: run this from the "
                                "course repository's root, or name that folder with --course")
    if out.resolve() in {(course / name).resolve() for name in ("notebooks", "exercises", *_COURSE_FOLDERS)}:
        raise ValueError(f"{out} is a folder of the course itself: choose a folder of your own, e.g. my-course")
    copied, kept = [], []
    for part, pattern in (("notebooks", "*"), ("exercises", "*.ipynb")):
        (out / part).mkdir(parents=True, exist_ok=True)
        for source in sorted((course / part).glob(pattern)):
            target = out / part / source.name
            if target.exists():
                kept += [target] if source.suffix == ".ipynb" else []
                continue
            if source.suffix == ".ipynb":
                notebook = json.loads(source.read_text(encoding="utf-8"))
                for cell in notebook["cells"]:
                    if "".join(cell["source"]).startswith(_STORED_NOTE):
                        cell["source"] = _COPY_NOTE
                target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
                copied.append(target)
            elif source.is_file():
                shutil.copy2(source, target)
    for name in _COURSE_FOLDERS:
        link = out / name
        if link.exists() or link.is_symlink():
            continue
        # A link to a folder not there yet (runs/, until something is trained) works once it appears.
        link.symlink_to(Path(os.path.relpath((course / name).resolve(), out.resolve())), target_is_directory=True)
    return copied, kept

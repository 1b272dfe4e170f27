"""Hostile submissions, graded in the bubblewrap sandbox: each attack of issue 19 as a small notebook.

One class folder holds every attack (several per notebook where they do not interfere) and is
graded once by the command, as an instructor would, with a secret in the grader's environment.
Each test asserts one outcome: nothing escaped, the score is what the code earns, nothing is left
running. Without a working bubblewrap these tests fail (CI installs it), except where noted.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

import minitransformer_grader
from minitransformer_grader import load_references

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = "03_self_attention"
FULL = sum(task["points"] for task in load_references()[EXERCISE]["tasks"])  # 7: tasks 1-4 earn 3, 1, 1 and 2
SECRET = "s3cr3t-" + "9f2c41d7"  # in the grader's environment only
DAEMON_TAG = "987.6543"  # `sleep 987.6543`: a daemon the submission leaves behind, if it could
KILLED_TAG = "876.5432"


def _read(kind: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / kind / f"{EXERCISE}.ipynb", as_version=4)


def _add(nb: nbformat.NotebookNode, after: str, source: str) -> nbformat.NotebookNode:
    index = next(i for i, c in enumerate(nb.cells) if after in c.source)
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    return nb


def _put(root: Path, student: str, nb: nbformat.NotebookNode) -> Path:
    path = root / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _package_folders() -> list[Path]:
    """The checkout's package and grader, and the installed ones (the same folders with an editable install)."""
    import importlib.util

    installed = Path(next(iter(importlib.util.find_spec("minitransformer").submodule_search_locations)))
    folders = [ROOT / "minitransformer", ROOT / "grader" / "minitransformer_grader", installed,
               Path(minitransformer_grader.__file__).parent]
    return sorted({f.resolve() for f in folders})


def _package_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(p for folder in _package_folders() for p in folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


def _processes_with(tag: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if tag in line:
                found.append(f"{entry.name}: {line}")
    return found


def _wrong_attention(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The solution with the sqrt(d_k) scaling left out: task 1 is wrong, tasks 2 to 4 right (FULL - 3 points)."""
    cell = next(c for c in nb.cells if "def my_attention" in c.source)
    assert " / math.sqrt(d_k)" in cell.source
    cell.source = cell.source.replace(" / math.sqrt(d_k)", "")
    return nb


def _class(root: Path) -> dict[str, Any]:
    victim = root / "victim.txt"
    victim.write_text("the instructor's file")
    solution_path = _put(root, "aaa-solution", _read("solutions"))
    escaped = root / "escaped.txt"

    # "intruder" (a solution, so full marks if nothing else happens): 1. delete a file outside its folder and another
    # student's notebook, write outside; 6. read the grader's environment; 8. kill every process it sees;
    # 7. leave a double-forked daemon; 9. flood the output. The cells are added in reverse order.
    intruder = _read("solutions")
    _add(intruder, "import math", """
import os
chunk = b'x' * (1 << 20)
for _ in range(48):
    os.write(2, chunk)
print('AFTER-FLOOD')
""")
    _add(intruder, "import math", f"""
import os, subprocess
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/bin/sleep', ['sleep', {DAEMON_TAG!r}])
    os._exit(0)
subprocess.Popen(['sleep', {DAEMON_TAG!r}], start_new_session=True)
""")
    _add(intruder, "import math", """
import os, signal
mine = {int(t) for t in os.listdir('/proc/self/task')}  # its own threads: killing one kills itself
for pid in range(1, 64):
    if pid not in mine:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
os.kill(os.getppid(), signal.SIGKILL)
""")
    _add(intruder, "import math", f"""
import os, pathlib
hits = []
for env in pathlib.Path('/proc').glob('*/environ'):
    try:
        if {SECRET[:7]!r} + {SECRET[7:]!r} in env.read_bytes().decode(errors='replace'):
            hits.append(str(env))
    except OSError:
        pass
if any({SECRET[:7]!r} in v for v in os.environ.values()):
    hits.append('os.environ')
print('SPY-HITS', len(hits), 'PIDS', sorted(int(p.name) for p in pathlib.Path('/proc').iterdir() if p.name.isdigit()))
""")
    _put(root, "intruder", _add(intruder, "import math", f"""
import os, pathlib
for p in [{str(victim)!r}, {str(solution_path)!r}]:
    try:
        os.remove(p); print('DELETED', p)
    except OSError as err:
        print('could not delete:', type(err).__name__)
try:
    pathlib.Path({str(escaped)!r}).write_text('out'); print('ESCAPED')
except OSError as err:
    print('could not write outside:', type(err).__name__)
"""))

    # "attacker" (a blank exercise, so 0 if nothing else happens): 2. read the reference, the answer key and the
    # solutions and run them if found; 5. rewrite the package; 4. swap the checks through gc, forge the runner's
    # events and leave. The cells are added in reverse order.
    attacker = _read("exercises")
    _add(attacker, "import math", """
import gc, os, sys
tick = lambda *a, **k: print('✓ Task 1 passed: all good')
for o in gc.get_objects():
    if isinstance(o, dict):
        for name in [n for n in list(o) if isinstance(n, str) and n.startswith('check_')]:
            o[name] = tick
runner = sys.modules.get('minitransformer_grader.runner') or sys.modules.get('__main__')
link = getattr(runner, '_LINK', None)
if link is not None:
    for cell in range(60):
        link.emit({'event': 'done', 'cell': cell, 'error': None, 'parts': [{'passed': True, 'message': '✓'}]})
    link.emit({'event': 'end'})
os._exit(0)
""")
    _add(attacker, "import math", f"""
import pathlib, minitransformer, minitransformer_grader
for folder in [pathlib.Path(minitransformer.__file__).parent, pathlib.Path(minitransformer_grader.__file__).parent,
               *map(pathlib.Path, {[str(f) for f in _package_folders()]!r})]:
    for p in list(folder.rglob('*.py'))[:50] + list(folder.rglob('*.json'))[:50]:
        try:
            p.chmod(0o644); p.write_text('raise SystemExit'); print('REWROTE', p)
        except OSError:
            pass
""")
    references = [str(folder / "reference" / f"{EXERCISE}.json") for folder in _package_folders()]
    _put(root, "attacker", _add(attacker, "import math", f"""
import importlib, json, pathlib
found = []
for p in [*{references!r}, {str(ROOT / 'solutions' / (EXERCISE + '.ipynb'))!r}, {str(victim)!r},
          {str(ROOT / 'README.md')!r}]:
    try:
        pathlib.Path(p).read_bytes(); found.append(p)
    except OSError:
        pass
for module in ['minitransformer.checks.questions', 'minitransformer.checks.lesson03',
               'minitransformer.checks.compare']:
    try:
        importlib.import_module(module); found.append(module)
    except ImportError:
        pass
import minitransformer.checks as c, minitransformer_grader as g
found += [p.name for p in pathlib.Path(g.__file__).parent.iterdir() if p.suffix == '.json' or p.name == 'reference']
found += [p.name for p in pathlib.Path(c.__file__).parent.iterdir() if p.suffix == '.py' and p.name != '__init__.py']
print('FOUND' if found else 'NOTHING-FOUND', found)
try:
    nb = json.loads(pathlib.Path({str(ROOT / 'solutions' / (EXERCISE + '.ipynb'))!r}).read_text())
    for cell in nb['cells']:
        if cell['cell_type'] == 'code' and 'def my_' in ''.join(cell['source']):
            exec(''.join(cell['source']))
except OSError:
    pass
"""))

    # 3. Loosen the comparison from inside the kernel: patch torch, the checks' internals, the sentinels.
    patcher = _wrong_attention(_read("solutions"))
    _put(root, "patcher", _add(patcher, "import math", """
import torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
torch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)
for module in ['minitransformer.checks.compare', 'minitransformer.checks']:
    try:
        m = __import__(module, fromlist=['x'])
        m.compare = lambda *a, **k: None
        m.LEARNER_DEPTH = -10**6
        m.all_close = lambda *a, **k: True
    except ImportError:
        pass
"""))
    # ... and call the package's own attention, however it is reached.
    strings = _read("solutions")
    cell = next(c for c in strings.cells if "def my_attention" in c.source)
    cell.source = cell.source.replace("    d_k = query.size(-1)", (
        "    import importlib\n"
        "    f = getattr(importlib.import_module('minitransformer.attention'), 'scaled_' + 'dot_product_attention')\n"
        "    return f(query, key, value, mask)\n    d_k = query.size(-1)"), 1)
    _put(root, "uses-reference", strings)

    _put(root, "zzz-solution-after", _read("solutions"))  # graded after the rewriter

    # 10. An endless loop that ignores the interrupt.
    _put(root, "looper", _add(_read("solutions"), "def my_padding_mask",
                               "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"))
    return {"victim": victim, "solution": solution_path, "escaped": escaped}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hostile")
    info = _class(root)
    before = _package_digest()
    out = root / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GRADER_SECRET": SECRET}
    command = [sys.executable, "-m", "minitransformer_grader", "grade", str(root / "submitted"), "--jobs", "2",
               "--timeout", "8", "--notebook-timeout", "90", "--out", str(out), "--quiet"]
    start = time.monotonic()
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    time.sleep(0.5)
    reports = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    return {**info, "run": run, "seconds": time.monotonic() - start, "before": before, "after": _package_digest(),
            "reports": {r["student"]: r for r in reports}, "daemons": _processes_with(DAEMON_TAG)}


def _score(hostile: dict[str, Any], student: str) -> tuple[float, float]:
    report = hostile["reports"][student]
    return report["score"], report["max_score"]


def test_every_submission_is_graded(hostile):
    assert set(hostile["reports"]) == {"aaa-solution", "intruder", "attacker", "patcher", "uses-reference", "looper",
                                       "zzz-solution-after"}, hostile["run"].stderr[-2000:]
    assert hostile["run"].returncode == 0, hostile["run"].stderr[-2000:]
    assert _score(hostile, "aaa-solution") == (FULL, FULL)


def test_nothing_outside_the_submissions_folder_is_deleted_or_written(hostile):
    assert hostile["victim"].read_text() == "the instructor's file"
    assert hostile["solution"].exists() and not hostile["escaped"].exists()
    report = hostile["reports"]["intruder"]
    assert "DELETED" not in report["output"] and "ESCAPED" not in report["output"]
    assert "could not delete" in report["output"] and report["score"] == FULL  # its own code still earns its points


def test_the_reference_answer_key_and_solutions_are_out_of_reach(hostile):
    report = hostile["reports"]["attacker"]
    assert "NOTHING-FOUND" in report["output"], report["output"][-2000:]
    assert report["score"] == 0


def test_patching_the_kernel_changes_only_the_learners_own_outputs(hostile):
    assert _score(hostile, "patcher") == (FULL - 3, FULL), hostile["reports"]["patcher"]["tasks"]
    tasks = {t["grade_id"]: t for t in hostile["reports"]["patcher"]["tasks"]}
    assert tasks["task-1"]["score"] == 0 and "divided by sqrt(d_k)" in tasks["task-1"]["message"]


def test_the_packages_own_piece_is_refused_however_it_is_reached(hostile):
    tasks = {t["grade_id"]: t for t in hostile["reports"]["uses-reference"]["tasks"]}
    assert tasks["task-1"]["score"] == 0 and "calls minitransformer's scaled_dot_product_attention" in tasks["task-1"]["message"]
    assert tasks["task-2"]["score"] == 1 and tasks["task-3"]["score"] == 1


def test_forged_checks_and_events_score_nothing(hostile):
    assert _score(hostile, "attacker") == (0, FULL)


def test_the_package_cannot_be_rewritten(hostile):
    assert hostile["before"] == hostile["after"]
    assert "REWROTE" not in hostile["reports"]["attacker"]["output"]
    assert _score(hostile, "zzz-solution-after") == (FULL, FULL)


def test_the_graders_environment_and_processes_are_invisible(hostile):
    output = hostile["reports"]["intruder"]["output"]
    line = next(ln for ln in output.splitlines() if ln.startswith("SPY-HITS"))
    assert line.startswith("SPY-HITS 0 "), line
    pids = json.loads(line.split("PIDS", 1)[1].strip().replace("(", "[").replace(")", "]"))
    assert max(pids) < 50, pids  # the sandbox's own PID namespace
    assert SECRET not in json.dumps(hostile["reports"]) and SECRET not in hostile["run"].stdout


def test_no_daemon_outlives_the_grader(hostile):
    assert hostile["daemons"] == []
    assert _score(hostile, "intruder") == (FULL, FULL)


def test_killing_its_parents_and_every_process_it_sees_changes_nothing(hostile):
    # Its parent is the PID namespace's init, immune to signals from inside; the grader is out of sight.
    assert _score(hostile, "intruder") == (FULL, FULL)
    assert _score(hostile, "zzz-solution-after") == (FULL, FULL)


def test_a_flood_of_output_is_cut_and_the_grade_kept(hostile):
    report = hostile["reports"]["intruder"]
    assert len(report["output"]) < 40_000 and "bytes of output cut" in report["output"]
    assert "AFTER-FLOOD" in report["output"] and report["score"] == FULL
    assert any("output was cut" in n for n in report["notes"])


def test_an_endless_loop_is_stopped_at_its_time_limit(hostile):
    report = hostile["reports"]["looper"]
    tasks = {t["grade_id"]: t for t in report["tasks"]}
    assert tasks["task-1"]["score"] == 3 and tasks["task-2"]["score"] == 0
    assert report["seconds"] < 60


def test_a_grader_killed_half_way_keeps_the_grades_and_leaves_nothing_running(tmp_path):
    _put(tmp_path, "a-first", _read("solutions"))
    _put(tmp_path, "b-sleeper", _add(_read("solutions"), "import math",
                                     f"import subprocess\nsubprocess.run(['sleep', {KILLED_TAG!r}])"))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "minitransformer_grader", "grade", str(tmp_path / "submitted"), "--out", str(out),
               "--quiet", "--timeout", "300"]
    grader = subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _processes_with(KILLED_TAG) and time.monotonic() < deadline and grader.poll() is None:
        time.sleep(0.2)
    assert _processes_with(KILLED_TAG), "the second submission never started"
    os.kill(grader.pid, signal.SIGKILL)
    grader.wait()
    for _ in range(50):
        if not _processes_with(KILLED_TAG):
            break
        time.sleep(0.1)
    assert _processes_with(KILLED_TAG) == []
    graded = {r["student"]: r["score"] for r in json.loads((out / "grades.json").read_text())}
    assert graded == {"a-first": FULL}

"""Issue 32: a grader that student code cannot escape, with any install. Each item is a row here.

One class folder holds every attack, graded once by ``python -m minitransformer grade`` in the sandbox
(as an instructor would, with a secret in the grader's environment and an instructor's file beside the
submissions); each test asserts one safe outcome. CI runs this file with an editable install and again
with a regular one (``pip install .``), where site-packages holds the checks and the reference.
The attacks that need no sandbox (the served piece's argument checks, CSV cells) are tested directly.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from test_grading_hostile import FULL, ROOT, SECRET, _add, _read

import minitransformer_grader.classroom as classroom

MARKER = "escape-marker.txt"  # written by anything that ran outside the sandbox

# Item 3: look for the checks, the reference and the solutions anywhere Python can see (see _class); outside the
# sandbox it finds them all (test_3_the_seeker_finds_what_it_looks_for_outside_the_sandbox).
SEEKER = """
import os, sys, time, importlib.util
started = time.monotonic()
def outermost(folders):
    folders = sorted({os.path.realpath(f or '.') for f in folders if os.path.isdir(f or '.')})
    return [r for r in folders if not any(r != o and r.startswith(o.rstrip('/') + '/') for o in folders)]
python_roots = outermost(sys.path)
system_roots = [r for r in outermost(['/usr', '/opt']) if r not in python_roots]
found, walked, python_done = [], 0, False
for root in python_roots + system_roots:
    if root in system_roots:
        python_done = True
    for folder, _, names in os.walk(root):
        if root in system_roots and time.monotonic() - started > 5:
            break
        walked += len(names)
        for name in names:
            path = os.path.join(folder, name)
            if (folder.endswith('/minitransformer_grader/reference') and name.endswith('.json')) or path.endswith(
                    ('/checks/lesson03.py', '/checks/questions.py', '/solutions/03_self_attention.ipynb')):
                found.append(path)
python_done = python_done or not system_roots
for module in ('minitransformer.checks.questions', 'minitransformer.checks.lesson03'):
    if importlib.util.find_spec(module) is not None:
        found.append(module)
print(f'SEEKER-WALKED {walked} files under {len(python_roots)} + {len(system_roots)} folders in '
      f'{time.monotonic() - started:.1f} s, all of sys.path: {python_done}')
print('SEEKER-FOUND' if found else 'SEEKER-NOTHING', found[:5])
"""


def _put(root: Path, student: str, nb: nbformat.NotebookNode, exercise: str = "03_self_attention") -> Path:
    path = root / "submitted" / student / exercise / f"{exercise}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _blank(exercise: str = "03_self_attention") -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "exercises" / f"{exercise}.ipynb", as_version=4)


def _solution(exercise: str = "03_self_attention") -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / f"{exercise}.ipynb", as_version=4)


def _replace_def(nb: nbformat.NotebookNode, header: str, source: str) -> nbformat.NotebookNode:
    cell = next(c for c in nb.cells if header in c.source)
    cell.source = source
    return nb


def _reverse_channel(root: Path) -> str:
    """Items 1 and 2: name package code for the grader to run, during a code cell and during a check's call."""
    marker = root / MARKER
    return f"""
import sys, torch
from minitransformer_grader import runner as _runner
from minitransformer_grader.protocol import read_frame, save_plain
def ask(target, *args):
    payload = save_plain({{'args': list(args), 'kwargs': {{}}}})
    _runner._LINK.emit({{'event': 'piece', 'target': target}}, payload)
    _runner._LINK.emit({{'event': 'serve', 'target': target}}, payload)
    return [read_frame(_runner._LINK.fd_in, None)[0] for _ in range(1)]
print('ASKED', ask('minitransformer_grader.classroom:_atomic', {str(marker)!r}, 'pwned'))
from minitransformer import sandbox_stubs
sandbox_stubs.SERVED.add('minitransformer.masks:make_target_mask')  # the grader still refuses: no check is calling
for name in ('make_padding_mask', 'make_target_mask', 'scaled_dot_product_attention'):
    try:
        print('GOT', name, getattr(__import__('minitransformer'), name)(torch.ones(2, 3, dtype=torch.long), 0))
    except BaseException as err:
        print('REFUSED', name, err)
"""


def _class(root: Path) -> dict[str, Any]:
    victim = root / "instructor-secret.txt"
    victim.write_text("INSTRUCTOR-ONLY 7d1e")
    _put(root, "honest", _solution())

    # 1-2: the old reverse channel, in a code cell and from inside the learner's function during the check.
    reverse = _add(_blank(), "import math", _reverse_channel(root))
    _replace_def(reverse, "def my_attention", "def my_attention(query, key, value, mask=None):\n"
                 "    import minitransformer\n"
                 "    return minitransformer.scaled_dot_product_attention(query, key, value, mask)\n")
    _put(root, "reverse", reverse)

    # 3: look for the checks, the reference and the solutions anywhere Python can see: every folder on
    # sys.path (where an install puts them) walked to the end, then /usr and /opt for as long as the cell's
    # 10 s allow (a busy machine cannot walk all of /usr in that time; the walk stops itself rather than be
    # interrupted). One walk over each folder: each pattern globbed on its own walked them four times.
    _put(root, "seeker", _add(_blank(), "import math", SEEKER))

    # 4: links in the submissions folder; a FIFO would hang a reader that opens it.
    (root / "submitted" / "linker" / "03_self_attention").mkdir(parents=True)
    (root / "submitted" / "linker" / "03_self_attention" / "03_self_attention.ipynb").symlink_to(
        ROOT / "solutions" / "03_self_attention.ipynb")
    (root / "submitted" / "leaker").mkdir()
    (root / "submitted" / "leaker" / "03_self_attention.ipynb").symlink_to(victim)
    (root / "submitted" / "hardlinker").mkdir()
    os.link(victim, root / "submitted" / "hardlinker" / "03_self_attention.ipynb")
    (root / "submitted" / "piper").mkdir()
    os.mkfifo(root / "submitted" / "piper" / "03_self_attention.ipynb")
    (root / "submitted" / "dirlinker").symlink_to(ROOT / "solutions")

    # 5 and 6: stop reading the grader's answers while it writes to you; die half-way; odd metadata; fill the disk.
    _put(root, "silent", _add(_solution(), "def my_padding_mask", """
import os
from minitransformer_grader import runner as _runner
payload = _runner.save_plain({'args': [], 'kwargs': {}})
for _ in range(20000):  # each answer the grader writes back fills the pipe this cell never reads
    _runner._LINK.emit({'event': 'serve', 'target': 'x'}, payload)
"""))
    dying = _add(_solution(), "def my_padding_mask", "import os\nos._exit(0)")
    dying.metadata["minitransformer"] = "a string, not a mapping"
    _put(root, "dying", dying)
    odd = _solution()
    for cell in odd.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "task-2":
            cell.metadata["nbgrader"]["grade_id"] = ["task-2"]
    odd.metadata["grading"] = ["not", "a", "mapping"]
    _put(root, "odd-metadata", odd)
    _put(root, "filler", _add(_solution(), "import math", """
import os
for where in ('/submission/fill', '/tmp/fill', '/dev/shm/fill', '/dev/fill'):
    written = 0
    try:
        with open(where, 'wb') as f:
            for _ in range(1024):
                f.write(b'x' * (1 << 20)); written += 1
    except OSError as err:
        print('FULL', where, written, type(err).__name__)
    try:
        os.remove(where)
    except OSError:
        pass
"""))

    # 7: a correct but slow mask (11 s a call, --timeout 10): its own task times out, the others keep their points.
    _put(root, "slow", _add(_solution(), "def my_padding_mask", """
import time
_fast_padding_mask = my_padding_mask
def my_padding_mask(tokens, pad_id):
    time.sleep(11)
    return _fast_padding_mask(tokens, pad_id)
"""))

    # 8: the ready-made piece in a default argument (exercise 03), in a default and a subclass (exercise 05).
    _put(root, "smuggler", _replace_def(_blank(), "def my_attention", """
import torch.nn.functional as F
def my_attention(query, key, value, mask=None, _f=F.scaled_dot_product_attention):
    weights = torch.softmax((query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))).masked_fill(
        mask == 0, float('-inf')) if mask is not None else query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)), -1)
    return _f(query, key, value, attn_mask=mask), weights
"""))
    smuggler05 = _blank("05_add_norm_and_feed_forward")
    _replace_def(smuggler05, "class MyLayerNorm", """
import torch.nn.functional as F
class MyLayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model)), eps
    def forward(self, x, _ln=F.layer_norm):
        return _ln(x, x.shape[-1:], self.weight, self.bias, self.eps)
""")
    _replace_def(smuggler05, "class MyFeedForward", """
from minitransformer import PositionwiseFeedForward
class MyFeedForward(PositionwiseFeedForward):
    forward = PositionwiseFeedForward.forward
""")
    _put(root, "smuggler", smuggler05, "05_add_norm_and_feed_forward")
    # ... and hidden from the source scan behind a computed name: the runner swaps the default at run time.
    _put(root, "hider", _replace_def(_blank(), "def my_attention", """
_f = getattr(__import__('torch').nn.functional, 'scaled_dot_' + 'product_attention')
def my_attention(query, key, value, mask=None, _f=_f):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)), -1)
    return _f(query, key, value, attn_mask=mask), weights
"""))

    # 9: three children of 600 MiB each under --memory 1536: never all three at once. Each child holds its
    # memory until the parent has heard from all three (a line, or the end of a killed child's output) and has
    # waited one more second, so the three overlap however busy the machine is; the parent then counts the
    # children still alive and holding. (Allocating takes well under a second: the cell ends inside --timeout 10.)
    _put(root, "hog", _add(_solution(), "import math", """
import subprocess, sys, time
code = "import sys; b = bytearray(600 << 20); b[::4096] = b'x' * len(b[::4096]); print('HELD', flush=True); sys.stdin.read()"
children = [subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            for _ in range(3)]
said = [child.stdout.readline() for child in children]
time.sleep(1.0)
held = sum(line.startswith(b'HELD') and child.poll() is None for line, child in zip(said, children))
print('HOG-HELD', held, flush=True)
for child in children:
    child.stdin.close()
    child.wait()
"""))

    # 10: rows under other names; names that a spreadsheet runs as formulas; a duplicate.
    _put(root / "submitted" / "mallory", "alice", _blank())  # submitted/mallory/submitted/alice/...
    for name in ('=HYPERLINK("evil.example","x")', "+1+2", "@SUM(1)", "-2+3"):
        _put(root, name, _blank())
    twice = root / "submitted" / "twice" / "03_self_attention" / "copy" / "03_self_attention.ipynb"
    twice.parent.mkdir(parents=True)
    nbformat.write(_solution(), twice)
    _put(root, "twice", _solution())

    # Extras: a pickle instead of plain data, a tensor that claims 2**33 elements, a frame that claims 4 GiB,
    # a stopped runner, and the grader's descriptors.
    _put(root, "pickler", _replace_def(_blank(), "def my_attention", f"""
import os, pickle, torch
from minitransformer_grader import runner as _runner
class Boom:
    def __reduce__(self):
        return (os.system, ('touch {root / MARKER}',))
def my_attention(query, key, value, mask=None):
    _runner._LINK.emit({{'op': 'result'}}, pickle.dumps({{'value': Boom(), 'after': []}}))
    import time; time.sleep(60)
"""))
    _put(root, "expander", _replace_def(_blank(), "def my_attention", """
import torch
def my_attention(query, key, value, mask=None):
    return torch.zeros(1).expand(1 << 33), torch.zeros(1).expand(1 << 33)
"""))
    _put(root, "expander-raw", _replace_def(_blank(), "def my_attention", """
import torch
from minitransformer_grader import runner as _runner
def my_attention(query, key, value, mask=None):
    _runner._LINK.emit({'op': 'result'}, _runner.save_plain({'value': torch.zeros(1).expand(1 << 33), 'after': []}))
    import time; time.sleep(60)
"""))
    _put(root, "claimer", _add(_solution(), "def my_padding_mask", """
import os, struct
from minitransformer_grader import runner as _runner
os.write(_runner._LINK.fd_out, struct.pack('<II', 2, (4 << 30) - 1) + b'{}')
"""))
    _put(root, "stopper", _add(_solution(), "def my_padding_mask", "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)"))
    _put(root, "fd-reader", _add(_solution(), "import math", f"""
import os
seen = []
for fd in range(3, 64):
    try:
        os.lseek(fd, 0, 0)
        data = os.read(fd, 4096)
        seen.append((fd, data[:40]))
    except OSError:
        pass
for name in os.listdir('/proc/self/fd'):
    try:
        seen.append(os.readlink('/proc/self/fd/' + name))
    except OSError:
        pass
print('FDS', seen, any({SECRET[:7]!r} in str(s) or 'INSTRUCTOR' in str(s) for s in seen))
"""))
    return {"victim": victim}


@pytest.fixture(scope="module")
def escapes(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("escapes")
    info = _class(root)
    out = root / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GRADER_SECRET": SECRET}
    command = [sys.executable, "-m", "minitransformer", "grade", str(root / "submitted"), "--jobs", "2",
               "--timeout", "10", "--notebook-timeout", "120", "--memory", "1536", "--out", str(out), "--quiet"]
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    reports = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    return {**info, "root": root, "run": run, "rows": reports, "csv": (out / "grades.csv").read_text(),
            "feedback": (out / "grades_feedback.csv").read_text(),
            "by": {(r["student"], r["exercise"]): r for r in reports}}


def _row(escapes: dict[str, Any], student: str, exercise: str = "03_self_attention") -> dict[str, Any]:
    return escapes["by"][(student, exercise)]


def _tasks(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["grade_id"]: t for t in row["tasks"]}


def test_every_submission_has_a_row_and_the_exit_status_says_some_failed(escapes):
    run = escapes["run"]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 1, run.stdout[-2000:]  # refused links, duplicates
    assert _row(escapes, "honest")["score"] == FULL
    last = run.stdout.strip().splitlines()
    assert any(line.startswith("graded ") and "limits: memory 1536 MiB" in line for line in last), last[-3:]


def test_1_2_the_sandbox_cannot_name_code_for_the_grader_to_run(escapes):
    row = _row(escapes, "reverse")
    assert not (escapes["root"] / MARKER).exists()
    assert row["score"] == 0, row["tasks"]
    assert "REFUSED make_target_mask PermissionError: the grader computes nothing" in row["output"], row["output"][-2000:]
    assert "REFUSED make_padding_mask" in row["output"] and "task task-2 of exercise 03_self_attention" in row["output"]
    assert "minitransformer.scaled_dot_product_attention" in _tasks(row)["task-1"]["message"]  # the source scan


def test_3_nothing_secret_is_visible_with_this_install(escapes):
    row = _row(escapes, "seeker")
    assert "SEEKER-NOTHING" in row["output"], row["output"][-2000:]
    walked = next(ln for ln in row["output"].splitlines() if ln.startswith("SEEKER-WALKED"))
    assert int(walked.split()[1]) > 1000, walked  # it did search: torch alone is thousands of files
    assert walked.endswith("all of sys.path: True"), walked  # every folder an install could use
    assert row["score"] == 0


def test_3_the_seeker_finds_what_it_looks_for_outside_the_sandbox():
    """The control of item 3: run from the checkout without a sandbox, the same search finds every secret."""
    run = subprocess.run([sys.executable, "-c", SEEKER.replace("found[:5]", "found")], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    out = run.stdout
    assert "SEEKER-FOUND" in out, (out[-2000:], run.stderr[-2000:])
    for item in ("minitransformer.checks.questions", "minitransformer.checks.lesson03", "/checks/lesson03.py",
                 "/checks/questions.py", "/minitransformer_grader/reference/03_self_attention.json",
                 "/solutions/03_self_attention.ipynb"):
        assert item in out, (item, out[-2000:])


def test_4_links_fifos_and_hard_links_are_refused_and_named_by_the_layout(escapes):
    for student in ("linker", "leaker", "hardlinker", "piper", "dirlinker"):
        rows = [r for r in escapes["rows"] if r["student"] == student]
        assert len(rows) == 1, (student, [r["student"] for r in escapes["rows"]])
        assert rows[0]["error"].startswith("not graded: ") and rows[0]["score"] == 0, rows[0]
    assert "symbolic link" in _row(escapes, "linker")["error"] and "hard link" in _row(escapes, "hardlinker")["error"]
    assert "FIFO" in _row(escapes, "piper")["error"]
    assert "INSTRUCTOR-ONLY" not in escapes["csv"] + escapes["feedback"] + json.dumps(escapes["rows"])
    assert escapes["victim"].read_text() == "INSTRUCTOR-ONLY 7d1e"


def test_5_6_a_silent_dying_or_odd_submission_costs_only_its_own_row(escapes):
    silent = _tasks(_row(escapes, "silent"))
    assert silent["task-1"]["score"] == 3 and silent["task-2"]["score"] == 0
    dying = _row(escapes, "dying")
    assert _tasks(dying)["task-1"]["score"] == 3 and dying["score"] == 3
    odd = _row(escapes, "odd-metadata")
    assert odd["score"] == FULL and not odd["error"], odd
    filler = _row(escapes, "filler")
    assert filler["score"] == FULL
    for where in ("/submission/fill", "/tmp/fill", "/dev/shm/fill", "/dev/fill"):
        line = next(ln for ln in filler["output"].splitlines() if ln.startswith(f"FULL {where} "))
        assert int(line.split()[2]) <= 256, line


def test_7_a_slow_but_correct_function_keeps_the_tasks_it_finished(escapes):
    tasks = _tasks(_row(escapes, "slow"))
    assert tasks["task-1"]["score"] == 3 and tasks["task-3"]["score"] == 1 and tasks["task-4"]["score"] == 2
    assert tasks["task-2"]["score"] == 0 and "timed out" in tasks["task-2"]["message"]


def test_8_the_ready_made_piece_in_a_default_or_a_subclass_scores_nothing(escapes):
    assert "refers to torch.nn.functional.scaled_dot_product_attention" in \
        _tasks(_row(escapes, "smuggler"))["task-1"]["message"]
    assert _tasks(_row(escapes, "smuggler"))["task-1"]["score"] == 0
    five = _tasks(_row(escapes, "smuggler", "05_add_norm_and_feed_forward"))
    assert five["task-1"]["score"] == 0 and "torch.nn.functional.layer_norm" in five["task-1"]["message"]
    assert five["task-2"]["score"] == 0 and "PositionwiseFeedForward" in five["task-2"]["message"]
    hider = _tasks(_row(escapes, "hider"))["task-1"]
    assert hider["score"] == 0 and "scaled_dot_product_attention" in hider["message"], hider


def test_9_memory_is_limited_for_the_whole_submission(escapes):
    row = _row(escapes, "hog")
    held = [ln for ln in row["output"].splitlines() if ln.startswith("HOG-HELD")]
    stopped = any("limit" in n for n in row["notes"])
    how = [ln for ln in escapes["run"].stdout.splitlines() if ln.startswith("graded ")]
    # Either the whole submission was stopped, or the limit stopped a child and it ran on without
    # it: then at most two of the three held their memory, and the report says so all the same.
    assert not held or int(held[0].split()[1]) <= 2, (row["output"][-1500:], row["notes"], how)
    assert stopped, (row["output"][-1500:], row["notes"], how)


def test_10_rows_under_other_names_duplicates_and_formulas(escapes):
    nested = [r for r in escapes["rows"] if "mallory" in r["path"]]
    assert [r["student"] for r in nested] == ["mallory"] and "submitted/ folder inside" in nested[0]["error"]
    assert not any(r["student"] == "alice" for r in escapes["rows"])
    twice = [r for r in escapes["rows"] if r["student"] == "twice"]
    assert len(twice) == 2 and all(r["error"].startswith("duplicate: 2 submissions") for r in twice)
    for table in (escapes["csv"], escapes["feedback"]):
        for row in csv.reader(io.StringIO(table)):
            assert not any(cell[:1] in ("=", "+", "-", "@", "\t", "\r") for cell in row), row
    assert "'=HYPERLINK(" in escapes["csv"] and "'+1+2" in escapes["csv"] and "'@SUM(1)" in escapes["csv"]


def test_extra_attacks_through_the_channel_end_only_their_own_row(escapes):
    assert not (escapes["root"] / MARKER).exists()  # the pickle's os.system never ran
    for student in ("pickler", "expander", "expander-raw"):
        row = _row(escapes, student)
        assert row["score"] == 0, (student, row["tasks"])
    assert "refuses" in _tasks(_row(escapes, "pickler"))["task-1"]["message"]
    assert "refuses" in _tasks(_row(escapes, "expander-raw"))["task-1"]["message"]
    claimer = _row(escapes, "claimer")
    assert "refuses" in _tasks(claimer)["task-2"]["message"], claimer["tasks"]
    assert _tasks(claimer)["task-1"]["score"] == 3 and claimer["score"] == 3
    stopper = _row(escapes, "stopper")
    assert _tasks(stopper)["task-1"]["score"] == 3 and stopper["score"] == 3
    fds = next(ln for ln in _row(escapes, "fd-reader")["output"].splitlines() if ln.startswith("FDS"))
    assert fds.endswith("False"), fds


def test_the_served_piece_takes_only_small_plain_arguments():
    import torch

    from minitransformer_grader.remote import SERVED, _target_mask_arguments

    assert set(SERVED) == {"minitransformer.masks:make_target_mask"}
    args, _ = _target_mask_arguments({"args": [torch.ones(2, 5, dtype=torch.long)], "kwargs": {"pad_id": 0}})
    assert args[0].shape == (2, 5) and args[1] == 0
    for bad in ({"args": [torch.ones(1, 40000, dtype=torch.long), 0], "kwargs": {}},
                {"args": [torch.ones(2, 5), 0], "kwargs": {}},
                {"args": [torch.ones(2, 5, dtype=torch.long), 0.5], "kwargs": {}},
                {"args": [torch.ones(2, 5, dtype=torch.long)], "kwargs": {"pad_id": 0, "extra": 1}},
                {"args": "not a list", "kwargs": {}}):
        with pytest.raises((TypeError, ValueError)):
            _target_mask_arguments(bad)


def test_every_check_serves_only_pieces_of_the_fixed_table():
    from minitransformer_grader.remote import SERVED
    from minitransformer_grader.remote import check_functions

    listed = {s for check in check_functions().values() for s in getattr(check, "__serve__", ())}
    assert listed and listed <= set(SERVED)


@pytest.mark.parametrize("value", ["=1+2", "+1", "-1", "@A1", "\tx", "\rx"])
def test_a_csv_cell_that_would_start_a_formula_is_escaped(value):
    assert classroom._cell(value) == "'" + value
    assert classroom._cell("alice") == "alice" and classroom._cell("3") == "3"

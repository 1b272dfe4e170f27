"""Issue 42, the second hostile table: a run that never ends, a report that crashes, points without the work.

As in ``test_grading_escapes.py``: one class folder holds every attack, graded once by ``python -m
minitransformer grade`` in the sandbox (two at a time, short limits), and each test asserts one outcome
of the table in docs/what_is_safe.md. A run that hangs is stopped by the fixture after a while and every
row then fails on it, instead of the test session hanging.
"""

from __future__ import annotations

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
from test_grading_escapes import _blank, _put, _replace_def, _solution
from test_grading_hostile import FULL, _add

# Item 1: a learner's function that ignores the interrupt and sends the grader a refused request once a
# second, from inside a check's call (task 2) or from a code cell.
PINGER = """
import signal, time
from minitransformer_grader import runner as _runner
from minitransformer_grader.protocol import read_frame, save_plain
def _ping_forever():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        _runner._LINK.emit({'event': 'serve', 'target': 'x'}, save_plain({'args': [], 'kwargs': {}}))
        read_frame(_runner._LINK.fd_in)
        time.sleep(0.5)
"""


def _move_to_end(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    nb.cells.remove(cell)
    nb.cells.append(cell)
    return nb


def _class(root: Path) -> None:
    _put(root, "honest", _solution())
    _put(root, "honest-too", _solution())
    _put(root, "pinger", _add(_solution(), "def my_padding_mask", PINGER + """
def my_padding_mask(tokens, pad_id):
    _ping_forever()
"""))
    _put(root, "pinger-cell", _add(_solution(), "def my_padding_mask", PINGER + "_ping_forever()\n"))
    # Item 5: the first statement of task 4's check cell uses up its time; task 1's check cell comes after it.
    slow = _add(_solution(), "def my_logsumexp", """
import time
_fast_logsumexp = my_logsumexp
def my_logsumexp(x, dim=-1):
    time.sleep(30)  # past the 5-s limit and its 5-s grace: only an interrupt that lands stops it in time
    return _fast_logsumexp(x, dim)
""")
    _put(root, "slow-first-statement", _move_to_end(slow, "task-1"))

    # Item 2: strings that cannot be written, or that would move the instructor's terminal.
    _put(root, "surrogate", _replace_def(_solution(), "def my_attention", """
def my_attention(query, key, value, mask=None):
    raise ValueError('broken ' + chr(0xD800) + ' here')
"""))
    _put(root, "escapes-terminal", _replace_def(_solution(), "def my_attention", """
def my_attention(query, key, value, mask=None):
    raise ValueError('\\x1b[2J\\x1b]0;owned\\x07\\x9b31m' + 'x' * 5_000_000)
"""))
    # Item 8: honest answers of other types: a set of letters, a namedtuple (output, weights).
    letters = _solution()
    next(c for c in letters.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "task-3-code").source = \
        "answer = {'B', 'C'}"
    _put(root, "set-answer", letters)
    _put(root, "namedtuple", _add(_solution(), "def my_attention", """
import collections
Attention = collections.namedtuple('Attention', 'output weights')
_plain_attention = my_attention
def my_attention(query, key, value, mask=None):
    return Attention(*_plain_attention(query, key, value, mask))
"""))
    # Item 6: the ready-made piece behind a magic, beside a shell escape that made the cell unparsable.
    _put(root, "magic", _replace_def(_blank(), "def my_attention", """
import torch.nn.functional as F
%time _f = F.scaled_dot_product_attention
_ = !true
def my_attention(query, key, value, mask=None):
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)), -1)
    return _f(query, key, value), weights
"""))
    # Item 10: 6 MiB of one-line cells.
    huge = _solution()
    huge.cells += [nbformat.v4.new_code_cell(f"x{i} = {i}  # " + "y" * 600) for i in range(10_000)]
    _put(root, "huge", huge)
    big = _solution()
    next(c for c in big.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "task-3-code").source = \
        "answer = 'Z' * 20_000_000"
    _put(root, "big-answer", big)
    odd = os.fsencode(str(root / "submitted")) + b"/caf\xe9-\xff"
    os.makedirs(odd + b"/03_self_attention")
    nbformat.write(_solution(), os.fsdecode(odd + b"/03_self_attention/03_self_attention.ipynb"))


@pytest.fixture(scope="module")
def second(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("second")
    _class(root)
    out = root / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": ""}
    command = [sys.executable, "-m", "minitransformer", "grade", str(root / "submitted"), "--jobs", "2",
               "--timeout", "5", "--notebook-timeout", "30", "--memory", "1536", "--out", str(out)]
    start = time.monotonic()
    try:
        # SIGINT ignored, as for a job a shell without job control starts in the background (CI's): the
        # runner's interrupt must still land (item 5), where Python would otherwise leave SIGINT ignored
        run = subprocess.run(command, cwd=root, env=env, capture_output=True, timeout=400,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        stdout, stderr, code, hung = run.stdout, run.stderr, run.returncode, False
    except subprocess.TimeoutExpired as err:
        stdout, stderr, code, hung = err.stdout or b"", err.stderr or b"", None, True
    rows = json.loads((out / "grades.json").read_text(encoding="utf-8")) if (out / "grades.json").exists() else []
    return {"root": root, "hung": hung, "code": code, "stdout": stdout, "stderr": stderr, "rows": rows,
            "seconds": time.monotonic() - start, "out": out, "by": {r["student"]: r for r in rows}}


def _row(second: dict[str, Any], student: str) -> dict[str, Any]:
    assert not second["hung"], "the grading run never ended"
    assert student in second["by"], (student, sorted(second["by"]), second["stderr"][-2000:])
    return second["by"][student]


def _tasks(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["grade_id"]: t for t in row["tasks"]}


def test_the_run_ends_and_every_submission_has_a_row(second):
    assert not second["hung"], second["stdout"][-2000:]
    assert b"Traceback" not in second["stderr"], second["stderr"][-3000:]
    assert second["code"] == 1, second["stderr"][-2000:]  # the huge notebook is refused
    assert len(second["rows"]) == 13, sorted(second["by"])
    assert _row(second, "honest")["score"] == FULL and _row(second, "honest-too")["score"] == FULL


def test_1_requests_from_the_sandbox_do_not_extend_a_deadline(second):
    pinger = _tasks(_row(second, "pinger"))
    assert pinger["task-1"]["score"] == 3 and pinger["task-2"]["score"] == 0, pinger
    cell = _row(second, "pinger-cell")
    assert cell["score"] == 3 and cell["seconds"] < 40, cell  # stopped at 5 s (+5 s grace), task 1 kept
    assert _row(second, "pinger")["seconds"] < 40


def test_5_a_check_cell_out_of_time_leaves_the_runner_alive_for_the_next_task(second):
    tasks = _tasks(_row(second, "slow-first-statement"))
    assert tasks["task-4"]["score"] == 0 and "timed out" in tasks["task-4"]["message"], tasks["task-4"]
    assert tasks["task-1"]["score"] == 3 and tasks["task-2"]["score"] == 1 and tasks["task-3"]["score"] == 1, \
        (_row(second, "slow-first-statement").get("notes"), {k: (t["score"], t["message"][:100]) for k, t in tasks.items()})


def test_2_any_string_reaches_the_reports_printable_and_bounded(second):
    surrogate = _tasks(_row(second, "surrogate"))["task-1"]
    assert surrogate["score"] == 0 and "broken \\ud800 here" in surrogate["message"], surrogate
    loud = _row(second, "escapes-terminal")
    message = _tasks(loud)["task-1"]["message"]
    assert "\x1b" not in message and "\x9b" not in message and "\\x1b[2J" in message, message[:300]
    assert len(message) < 5000 and "characters in all" in message, len(message)
    for name in ("grades.json", "grades.csv", "grades_feedback.csv"):
        data = (second["out"] / name).read_bytes()
        assert b"\x1b" not in data and len(data) < 200_000, (name, len(data))
        data.decode("utf-8")
    assert b"\x1b" not in second["stdout"]
    big = _tasks(_row(second, "big-answer"))["task-3"]
    assert big["score"] == 0 and len(big["message"]) < 5000, len(big["message"])
    odd = [r for r in second["rows"] if r["student"].startswith("caf")]
    assert len(odd) == 1 and odd[0]["score"] == FULL and odd[0]["student"] == "caf\\xe9-\\xff", odd


def test_8_answers_of_any_reasonable_type_arrive_as_they_left(second):
    assert _row(second, "set-answer")["score"] == FULL, _row(second, "set-answer")["tasks"]
    assert _row(second, "namedtuple")["score"] == FULL, _row(second, "namedtuple")["tasks"]


def test_6_10_the_scan_reads_magics_and_refuses_what_it_cannot_bound(second):
    magic = _tasks(_row(second, "magic"))["task-1"]
    assert magic["score"] == 0 and "scaled_dot_product_attention" in magic["message"], magic
    huge = _row(second, "huge")
    assert huge["score"] == 0 and "over the grader's limit" in huge["error"] and huge["seconds"] < 20, huge["error"]

"""The README's and the set-up page's commands start a JupyterLab that serves the lessons *and* the exercises.

Jupyter Server 2 serves the folder of the file (or the folder) it is given unless ``root_dir`` says
otherwise; started that way inside ``notebooks/``, the link at the end of each lesson to
``../exercises/`` is dead. Each documented ``jupyter lab`` command is started here for real, and its
contents API must answer for both folders.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "site" / "pages" / "setup.md"]
pytestmark = pytest.mark.skipif(shutil.which("jupyter") is None and not (Path(sys.executable).parent / "jupyter").exists(),
                                reason="JupyterLab is not installed (the notebooks extra)")


def _commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for line in re.findall(r"^jupyter lab\b.*$", page.read_text(encoding="utf-8"), flags=re.MULTILINE):
            found.append((page.name, line.split("#")[0].strip()))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serves(port: int, folder: str, deadline: float) -> bool:
    url = f"http://127.0.0.1:{port}/api/contents/{folder}?content=0"
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return json.load(answer)["type"] == "directory"
        except urllib.error.HTTPError as error:
            return error.code != 404 and False
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.5)
    raise TimeoutError(f"no Jupyter server answered on port {port}")


def _course_copy(tmp: Path) -> Path:
    """A folder laid out like a checkout after the README's `python -m minitransformer workspace`."""
    from minitransformer.workspace import make_workspace

    course = tmp / "course"
    for name in ("notebooks", "exercises"):
        (course / name).mkdir(parents=True)
        (course / name / "00_introduction.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, '
                                                             '"nbformat_minor": 5}')
    make_workspace(course, course / "my-course")
    return course


@pytest.mark.parametrize("page, command", _commands(), ids=[f"{p}: {c}" for p, c in _commands()])
def test_the_documented_command_serves_lessons_and_exercises(page: str, command: str, tmp_path: Path) -> None:
    course = _course_copy(tmp_path)
    port = _free_port()
    jupyter = shutil.which("jupyter") or str(Path(sys.executable).parent / "jupyter")
    args = [jupyter, *shlex.split(command)[1:], "--no-browser", f"--port={port}", "--ServerApp.token=",
            "--ServerApp.password=", "--allow-root", "--ServerApp.open_browser=False"]
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws")}
    server = subprocess.Popen(args, cwd=course, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 90
        # The folders whose notebooks the command's user opens: the workspace's, which link to each other.
        where = "my-course/" if "my-course/" in command else ""
        served = {folder: _serves(port, where + folder, deadline) for folder in ("notebooks", "exercises")}
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    assert all(served.values()), (f"{page}: `{command}` started a server that does not serve "
                                  f"{[f for f, ok in served.items() if not ok]}: start it at the course's root "
                                  f"(--ServerApp.root_dir=.)")


def test_the_check_can_fail(tmp_path: Path) -> None:
    # Started the old way, inside notebooks/, the server cannot see the exercises.
    course = _course_copy(tmp_path)
    port = _free_port()
    jupyter = shutil.which("jupyter") or str(Path(sys.executable).parent / "jupyter")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    server = subprocess.Popen([jupyter, "lab", "notebooks/00_introduction.ipynb", "--no-browser", f"--port={port}",
                               "--ServerApp.token=", "--allow-root"], cwd=course, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert not _serves(port, "exercises", time.time() + 90)
    finally:
        server.terminate()
        server.wait(timeout=20)

"""Ctrl-C while the command line starts: one line on stderr and exit status 130, never a traceback.

``python -m minitransformer ...`` (and ``python -m minitransformer.grading``, and the ``minitransformer``
script) imports the whole package before a line of the command runs, and ``import torch`` alone
takes seconds. Python's own Ctrl-C (``KeyboardInterrupt``) would surface wherever that import
happens to be, as a traceback deep inside PyTorch, or be swallowed by a library's bare ``except``
and turn into a stranger error. So while the program starts, Ctrl-C ends it at once: the handler
writes one line and calls ``os._exit(130)`` (128 + SIGINT, what a shell reports for Ctrl-C).
Nothing needs cleaning up yet: no file is written and no process started before the command runs.

:func:`guard` is called at the top of ``minitransformer/__init__.py`` and acts only when this process
is the command line (a library import, a notebook or a test is left alone), and only where Python's
default handler is in place (a parent that ignores SIGINT, as ``nohup`` does, keeps it ignored).
:func:`done` gives Ctrl-C back to Python when start-up is over, just before a command's own work,
whose ``KeyboardInterrupt`` handling saves a checkpoint or kills the grading sandboxes.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

__all__ = ["done", "guard"]

_LINE = b"minitransformer: interrupted (Ctrl-C) while starting\n"
_SCRIPTS = ("minitransformer", "minitransformer.exe", "minitransformer-script.py")
# The commands, and only they: other modules run with -m (the grading sandbox's runner, whose cells are
# interrupted by a simulated Ctrl-C) keep Python's KeyboardInterrupt.
_MODULES = ("minitransformer", "minitransformer.__main__", "minitransformer.grading",
            "minitransformer.grading.__main__")


def _is_the_command_line() -> bool:
    """Whether this process runs ``python -m minitransformer`` (or ``.grading``) or the ``minitransformer`` script."""
    argv = sys.argv if isinstance(getattr(sys, "argv", None), list) else []
    if argv[:1] == ["-m"]:  # Python's argv[0] while it imports the packages of ``-m NAME``, before NAME runs
        args = list(getattr(sys, "orig_argv", []))
        for k, arg in enumerate(args[1:], start=1):
            name = args[k + 1] if arg == "-m" and k + 1 < len(args) else arg[2:] if arg.startswith("-m") else None
            if name is not None:
                return name in _MODULES
        return False
    return bool(argv) and os.path.basename(str(argv[0])) in _SCRIPTS


def _interrupted(signum: int, frame: FrameType | None) -> None:
    try:
        os.write(2, _LINE)
    except OSError:
        pass
    os._exit(128 + signal.SIGINT)


def guard() -> bool:
    """Make Ctrl-C end the program quietly until :func:`done`, if this process is the command line.

    Returns:
        Whether the handler was installed.
    """
    try:
        if _is_the_command_line() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupted)
            return True
    except (ValueError, OSError, AttributeError):  # not the main thread, or no signals on this platform
        pass
    return False


def done() -> None:
    """Start-up is over: Ctrl-C raises ``KeyboardInterrupt`` again, for the command to handle."""
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except (ValueError, OSError):
        pass

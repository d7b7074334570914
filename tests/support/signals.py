"""A child process that a test interrupts with SIGINT, whatever SIGINT's disposition in the test runner."""

from __future__ import annotations

import sys

# SIGINT set back to its default, then the command itself by exec (an exec keeps a default disposition).
_RESET_THEN_EXEC = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"


def interruptible(args: list[str]) -> list[str]:
    """``args`` (a program's path first) run so that SIGINT reaches the program as Ctrl-C does.

    A shell starts a background job (`make test &`, `nohup make test`) with
    SIGINT ignored; children inherit that through exec, and Python leaves an
    inherited ignored SIGINT ignored. A test's SIGINT would then do nothing,
    and the command would finish its work and exit 0. A preexec_fn would do
    the same in fewer lines but is unsafe in a process with threads.
    """
    return [sys.executable, "-c", _RESET_THEN_EXEC, *args]

"""Run an ovrnn command in a child interpreter: isolated from the working directory, with
signals forwarded and the child always reaped.

* Isolated: ``python -I`` (no working directory or PYTHON* variables on the module path, no user
  site). So that an install found through PYTHONPATH or the user site still works, the child's
  module path is this process's own, minus the working directory, and the folder holding this
  ``ovrnn`` package comes first: the child runs the same ovrnn, numpy and OpenVINO as its parent,
  and never a ``numpy.py`` or ``ovrnn/__main__.py`` of the directory it runs in.
* Signals: SIGINT, SIGTERM and SIGHUP sent to this process are passed on to the child. If it has
  not ended within ``GRACE_SECONDS`` it is killed, and in every case it is waited for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..signals import TERMINATING

GRACE_SECONDS = 3.0
CHILD_ENV = "OVRNN_RUN_CHILD"
_BOOT = "import sys, json; sys.path[:] = json.loads(sys.argv.pop(1)); from ovrnn.cli import main; sys.exit(main(sys.argv[1:]))"


@dataclass
class Finished:
    returncode: int  # negative: killed by that signal
    stdout: str
    stderr: str
    pid: int
    interrupted_by: int | None  # a signal this process received and passed on


def module_path() -> list[str]:
    here = str(Path(__file__).resolve().parents[2])  # the folder that holds the ovrnn package
    cwd = os.path.realpath(os.curdir)
    paths = [here]
    for p in sys.path:
        if p and p not in paths and os.path.realpath(p) != cwd:
            paths.append(p)
    return paths


def command(argv: list[str]) -> list[str]:
    return [sys.executable, "-I", "-c", _BOOT, json.dumps(module_path()), *argv]


def run(argv: list[str], env: dict[str, str] | None = None, pass_fds: tuple[int, ...] = ()) -> Finished:
    """`env`: more environment variables for the child; `pass_fds`: file descriptors it inherits."""
    received: list[int] = []
    proc: subprocess.Popen | None = None

    def forward(signum, frame):
        received.append(signum)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)

    main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, forward) for s in TERMINATING} if main_thread else {}
    try:
        proc = subprocess.Popen(
            command(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {}), CHILD_ENV: "1"},
            pass_fds=pass_fds,
        )
        if received:  # arrived while the child was being started
            proc.send_signal(received[0])
        deadline = None
        while True:
            try:
                out, err = proc.communicate(timeout=None if not received else 0.2)
                break
            except subprocess.TimeoutExpired:
                deadline = deadline or time.monotonic() + GRACE_SECONDS
                if time.monotonic() > deadline:
                    proc.kill()
        return Finished(proc.returncode, out, err, proc.pid, received[0] if received else None)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for s, handler in previous.items():
            signal.signal(s, handler)

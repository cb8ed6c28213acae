"""Signals become exceptions, so that every exit path cleans up.

Python's default SIGTERM/SIGHUP action ends the process on the spot, with no ``finally`` run and
temporary files left behind. ``raise_on_signals`` makes SIGINT, SIGTERM and SIGHUP raise
``Interrupted`` instead. ``deferred`` holds them back over a few statements that must not be cut
in half (the renames that publish an output).
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

from .errors import Interrupted

TERMINATING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _raise(signum, frame):
    if _importing(frame):
        # An exception raised inside an import can cross a native module's initialiser (onnx's
        # nanobind one), which then calls std::terminate: the process aborts with no cleanup.
        # Nothing has been written yet at import time, so deliver the signal again a moment later.
        timer = threading.Timer(0.02, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()
        return
    raise Interrupted(signum)


def _importing(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def raise_on_signals() -> None:
    if threading.current_thread() is threading.main_thread():
        for s in TERMINATING:
            if signal.getsignal(s) is not signal.SIG_IGN:  # nohup'ed: stay ignored
                signal.signal(s, _raise)


@contextmanager
def deferred():
    """Signals that arrive inside are delivered when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, TERMINATING)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)

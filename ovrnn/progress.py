"""Progress on stderr for long conversions, compiles and inference loops.

By default only when stderr is a terminal, so redirected or piped output stays quiet and the
one-line error contract is untouched. ``--verbose`` shows it always (plain lines when stderr is
not a terminal); ``--quiet`` never. ``ovrnn run`` compiles in a child process: the parent hands
it its own stderr as ``OVRNN_PROGRESS_FD`` (and whether that is a terminal), so progress reaches
the user while OpenVINO's log lines on the child's stderr do not.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager

FD_ENV = "OVRNN_PROGRESS_FD"
MODE_ENV = "OVRNN_PROGRESS"  # "tty", "lines" or "off": how the parent wants progress shown

_mode: str | None = None  # set by the CLI: "auto", "verbose" or "quiet"
_stream = None


def set_mode(mode: str) -> None:
    global _mode  # noqa: PLW0603 (one process-wide mode, set once by the CLI)
    _mode = mode


def quiet() -> bool:
    """--quiet: no notes and no progress."""
    return _mode == "quiet"


def _out():
    """The parent's stderr when this is `ovrnn run`'s child, else this process's own."""
    global _stream  # noqa: PLW0603 (opened once, on first use)
    fd = os.environ.get(FD_ENV)
    if not fd:
        return sys.stderr
    if _stream is None:
        try:
            _stream = os.fdopen(int(fd), "w", buffering=1, closefd=False)
        except (OSError, ValueError):
            return sys.stderr
    return _stream


def style() -> str:
    """'tty' (one line redrawn with \\r), 'lines' (a line when done) or 'off'."""
    inherited = os.environ.get(MODE_ENV)
    if inherited in ("tty", "lines", "off"):
        return inherited
    if _mode == "quiet":
        return "off"
    tty = _out().isatty()
    if tty:
        return "tty"
    return "lines" if _mode == "verbose" else "off"


@contextmanager
def stage(label: str, min_seconds: float = 0.5):
    """Show `label` with the elapsed time while the block runs (a compile, an emission)."""
    how = style()
    if how == "off":
        yield
        return
    out = _out()
    done = threading.Event()
    start = time.perf_counter()

    def tick() -> None:
        while not done.wait(0.2):
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                out.write(f"\r{label} ... {elapsed:.1f} s")
                out.flush()

    thread = threading.Thread(target=tick, daemon=True)
    if how == "tty":
        thread.start()
    try:
        yield
    finally:
        done.set()
        if how == "tty":
            thread.join()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds or how == "lines":
            out.write(("\r" if how == "tty" else "") + f"{label} ... done in {elapsed:.1f} s\n")
            out.flush()


class Counter:
    """``label 37/1000`` redrawn at most 5 times a second, once the loop has run for a while."""

    def __init__(self, label: str, total: int, min_seconds: float = 0.5) -> None:
        self.label, self.total, self.min_seconds = label, total, min_seconds
        self.how = style()
        self.start = self.last = time.perf_counter()
        self.shown = False

    def step(self, done: int) -> None:
        if self.how != "tty":
            return
        now = time.perf_counter()
        if now - self.start >= self.min_seconds and now - self.last >= 0.2:
            self.last, self.shown = now, True
            _out().write(f"\r{self.label} {done}/{self.total} ... {now - self.start:.1f} s")
            _out().flush()

    def close(self) -> None:
        elapsed = time.perf_counter() - self.start
        if self.shown or (self.how == "lines"):
            _out().write(("\r" if self.how == "tty" else "") + f"{self.label} {self.total}/{self.total} ... done in {elapsed:.1f} s\n")
            _out().flush()

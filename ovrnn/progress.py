"""Progress on stderr for long conversions and compiles: only when stderr is a terminal.

Redirected or piped output stays quiet, so logs and the one-line error contract are untouched.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager


def enabled() -> bool:
    return sys.stderr.isatty()


@contextmanager
def stage(label: str, min_seconds: float = 0.5):
    """Show `label` with the elapsed time while the block runs (a compile, an emission)."""
    if not enabled():
        yield
        return
    done = threading.Event()
    start = time.perf_counter()

    def tick() -> None:
        while not done.wait(0.2):
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                sys.stderr.write(f"\r{label} ... {elapsed:.1f} s")
                sys.stderr.flush()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            sys.stderr.write(f"\r{label} ... done in {elapsed:.1f} s\n")
            sys.stderr.flush()

"""Ctrl-C and a batch run on the caller's thread: the interrupt lands where it can be handled.

A blocking call (``feed``, ``feed_many``, ``feed_group``) on an idle worker runs the batch on the
caller's thread. A KeyboardInterrupt is raised between any two bytecodes of the main thread: inside
the worker's bookkeeping (a chunk popped from its queue and not yet in a batch, a worker claimed and
not yet released, half of a batch's states scattered back) it would leave a stream in flight for
ever, or a state half new. So, on the main thread, the batcher's Python around a batch is
``critical()``: a SIGINT that arrives there is held, and raised at the one place where a batch can
fail atomically, OpenVINO's call (``window()`` in ``BatchedStep._infer``, before any state is
scattered back: no state written, every chunk of the batch gets ``BatchInterruptedError``, the
interrupt goes on up), or when the critical part ends. ``install()`` (at ``StreamBatcher()``, on
the main thread) replaces Python's default SIGINT handler by one that behaves the same outside
these parts; a handler of the program's own is left alone (then the interrupt is not held).
"""

from __future__ import annotations

import signal
import threading

_MAIN = threading.main_thread().ident
_held = [0, False]  # depth of critical parts open on the main thread, a SIGINT held meanwhile


def _handler(signum, frame):
    if _held[0]:
        _held[1] = True
        return
    raise KeyboardInterrupt


def install() -> None:
    if threading.get_ident() == _MAIN and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _handler)


def _raise_held() -> None:
    if _held[1]:
        _held[1] = False
        raise KeyboardInterrupt


class _Critical:
    """Hold a SIGINT on the main thread until the part ends (or a ``window`` opens)."""

    def __enter__(self):
        if threading.get_ident() == _MAIN:
            _held[0] += 1

    def __exit__(self, kind, exc, tb):
        if threading.get_ident() == _MAIN:
            _held[0] -= 1
            if not _held[0]:
                if exc is None:
                    _raise_held()
                _held[1] = False  # an interrupt already on its way up


class _Window:
    """Inside a critical part: the place a held or arriving SIGINT is raised (the OpenVINO call)."""

    def __enter__(self):
        if threading.get_ident() == _MAIN:
            _raise_held()
            self.depth, _held[0] = _held[0], 0

    def __exit__(self, kind, exc, tb):
        if threading.get_ident() == _MAIN:
            _held[0] = self.depth


def critical() -> _Critical:
    return _Critical()


def window() -> _Window:
    return _Window()

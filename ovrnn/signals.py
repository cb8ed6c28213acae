"""Signals become exceptions, so that every exit path cleans up.

Python's default SIGTERM/SIGHUP action ends the process on the spot, with no ``finally`` run and
temporary files left behind. ``raise_on_signals`` makes SIGINT, SIGTERM and SIGHUP raise
``Interrupted`` instead. ``deferred`` holds them back over a few statements that must not be cut
in half (the renames that publish an output).

A signal that lands while native code runs a Python callback (OpenVINO's ONNX frontend calling
ovrnn's conversion extension) raises inside the callback, and the native code wraps what it caught in
its own error: an OpConversionFailure naming "KeyboardInterrupt", which ovrnn would report as a model
error, or a later failure ("input X has no declared element type") once the frontend goes on; an
``except Exception`` then swallows Ctrl-C. ``kept_across_native`` keeps such a signal's exception and
raises it, itself, when the native call returns (``raised_in_callback`` re-delivers the signal where
no such block is open: ``ov.convert_model(..., extension=ovrnn.extension())`` in the user's code).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from functools import partial

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


_KEEPERS: list[list[BaseException]] = []  # kept_across_native() blocks open on the main thread, innermost last


@contextmanager
def kept_across_native():
    """Around a native call that runs Python callbacks (``fe.convert``): the exception a signal's
    handler raises inside (KeyboardInterrupt, Interrupted) is kept as it is raised, and when the
    call returns, or fails with whatever the native code made of it, that exception is raised
    instead. Signals are delivered to the main thread only: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept: list[BaseException] = []
    previous = {}
    for s in TERMINATING:
        handler = signal.getsignal(s)
        if callable(handler):  # SIG_DFL and SIG_IGN raise nothing to keep
            previous[s] = handler
            signal.signal(s, partial(_keep, handler, kept))
    _KEEPERS.append(kept)
    try:
        yield
    except BaseException:
        if kept:
            raise kept[0] from None  # not the native code's wrapping of it
        raise
    finally:
        _KEEPERS.pop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if kept:  # the native code returned as if nothing happened (it caught and went on)
        raise kept[0]


def _keep(handler, kept: list, signum, frame):
    try:
        handler(signum, frame)
    except BaseException as exc:
        if not kept:
            kept.append(exc)
        raise


_CALLBACKS = [0]  # native callbacks running on the main thread now (nested: a body's node inside its holder's)


@contextmanager
def native_callback():
    """Around the body of a Python callback that native code runs (ovrnn's conversion extension):
    a KeyboardInterrupt raised inside goes on out of the callback (so that the native code stops),
    and the block around the native call raises it when that returns (``kept_across_native``).
    Where no such block is open (``ov.convert_model(..., extension=ovrnn.extension())`` in the
    user's code), the signal is sent again once the native call has returned: when the Python frame
    that called it has moved on (the native code runs Python code of its own too, OpenVINO's
    telemetry, where the signal's exception would be wrapped again)."""
    main = threading.current_thread() is threading.main_thread()
    caller = _frame(3) if main else None  # the frame that called the native code: generator, __enter__, callback, caller
    _CALLBACKS[0] += main
    try:
        yield
    except KeyboardInterrupt as exc:
        if main and not _KEEPERS:
            signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
            where = (caller, caller.f_lasti) if caller is not None else None
            threading.Thread(target=_send_after_native, args=(signum, threading.main_thread().ident, where), daemon=True).start()
        raise
    finally:
        _CALLBACKS[0] -= main


def _frame(depth: int):
    """The frame `depth` levels below the caller's (sys._getframe(depth) as the caller would call it)."""
    try:
        return sys._getframe(depth + 1)
    except ValueError:  # called from native code with no Python frame below
        return None


def _send_after_native(signum: int, main: int, where) -> None:
    """Send `signum` to this process once no callback runs and the main thread is past the native
    call (`where`: the calling frame and its instruction then)."""
    import time

    while _CALLBACKS[0] or (where is not None and _inside(sys._current_frames().get(main), *where)):
        time.sleep(0.001)
    os.kill(os.getpid(), signum)


def _inside(frame, caller, lasti: int) -> bool:
    while frame is not None:
        if frame is caller:
            return frame.f_lasti == lasti
        frame = frame.f_back
    return False

"""Ctrl-C and a batch run on the caller's thread: the interrupt lands where it can be handled.

A blocking call (``feed``, ``feed_many``, ``feed_group``) on an idle worker runs the batch on the
caller's thread. A KeyboardInterrupt is raised between any two bytecodes of the main thread: inside
the worker's bookkeeping (a chunk popped from its queue and not yet in a batch, a worker claimed and
not yet released, half of a batch's states scattered back) it would leave a stream in flight for
ever, or a state half new. So, on the main thread, the batcher's Python around a batch is
``critical()``: a SIGINT that arrives there is held, and raised at the one place where a batch can
fail atomically, OpenVINO's call (``in_window`` in ``BatchedStep._infer``, before any state is
scattered back: no state written, every chunk of the batch gets ``BatchInterruptedError``, the
interrupt goes on up), or when the critical part ends (after an OpenVINO call returned in the part,
its batch written back and states moved, as ``KeyboardInterrupt(AFTER_A_RUN)``, which says so).
``install()`` (at ``StreamBatcher()``, on
the main thread) replaces Python's default SIGINT handler by one that behaves the same outside
these parts; a handler of the program's own is left alone (then the interrupt is not held).

Python runs a signal's handler at a function's first bytecode and after a call returns, and an
exception raised there skips whatever the function had left to do. So nothing here depends on a
store that a handler could skip: the window is wherever ``_window``'s frame is on the stack (the
handler looks), the depth of critical parts changes where a handler run just before or after it
does no harm, and a raised KeyboardInterrupt stands for every SIGINT held before it (a held one is
never raised again later).
The window used to be a context manager whose ``__exit__`` restored the depth: a handler at that
method's first bytecode raised before the depth came back, the rest of the part ran unprotected,
and a later interrupt there left the worker claimed for ever (its ``shutdown()`` hung).
"""

from __future__ import annotations

import signal
import threading

_MAIN = threading.main_thread().ident
_held = [0, False]  # depth of critical parts open on the main thread, a SIGINT held meanwhile
_ran = [False]  # an OpenVINO call returned inside the open critical part: its batch is being written back
AFTER_A_RUN = (
    "Ctrl-C after OpenVINO's call had returned, while its batch was written back: that batch ran (its streams' "
    "states moved; this call's outputs are dropped); read state() before feeding its chunks again"
)


def _handler(signum, frame):
    if _held[0] > 0 and not _in_window(frame):
        _held[1] = True
        return
    _held[1] = False  # this KeyboardInterrupt stands for any SIGINT held before it
    raise KeyboardInterrupt


def _in_window(frame) -> bool:
    while frame is not None:
        if frame.f_code is _WINDOW:
            return True
        frame = frame.f_back
    return False


def install() -> None:
    if threading.get_ident() == _MAIN and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _handler)


class _Critical:
    """Hold a SIGINT on the main thread until the part ends (or ``in_window`` runs OpenVINO's call)."""

    __slots__ = ("main",)

    def __enter__(self):
        self.main = threading.get_ident() == _MAIN
        if self.main:
            if not _held[0]:
                _ran[0] = False  # before the depth: a handler here raises, the part not entered
            _held[0] += 1  # a handler before it raises (the part not entered), after it holds

    def __exit__(self, kind, exc, tb):
        if self.main:
            _held[0] -= 1  # a handler before it holds; after it (depth 0) raises and drops what was held
            if not _held[0]:
                pending, _held[1] = _held[1], False
                if pending and exc is None and _ran[0]:  # the batch is written: saying nothing would read as "nothing ran"
                    raise KeyboardInterrupt(AFTER_A_RUN)
                if pending and not isinstance(exc, KeyboardInterrupt):
                    raise KeyboardInterrupt  # the held Ctrl-C, once (another error on its way up is its context)


WHILE_QUEUED = (
    "Ctrl-C while the call waited for its worker thread: its chunks were queued or running there and still run "
    "(their streams' states move unless their batch fails; this call's outputs are dropped); read state() before feeding them again"
)


def said(queued: bool, failed: bool) -> tuple:
    """The words of a KeyboardInterrupt that lands once a call's chunks were queued (they cannot be
    taken back): ``WHILE_QUEUED`` while some still wait or run, else ``AFTER_A_RUN`` when every one
    ran (with a failed one among them: none)."""
    return (WHILE_QUEUED,) if queued else () if failed else (AFTER_A_RUN,)


def control_went_on(what: str) -> str:
    """The words of a KeyboardInterrupt that lands once `what` (``reset()``, ``set_state()``) was made or queued."""
    return f"Ctrl-C during {what}: it was made, or queued behind the stream's chunks fed before it, and takes effect (read state())"


def critical() -> _Critical:
    return _Critical()


def in_window(call):
    """``call()`` (OpenVINO's call) inside a critical part: a SIGINT held so far is raised before it,
    one arriving during it is raised when it returns (nothing of the batch is written yet)."""
    if _held[1] and threading.get_ident() == _MAIN:
        _held[1] = False
        raise KeyboardInterrupt
    return _window(call)


def _window(call):
    result = call()  # the handler raises wherever this frame is on the stack
    _ran[0] = threading.get_ident() == _MAIN or _ran[0]  # returned: what follows writes its batch back
    return result


_WINDOW = _window.__code__

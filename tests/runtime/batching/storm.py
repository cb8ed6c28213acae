"""A SIGINT storm for the batcher's Ctrl-C tests (test_batcher_safety's and test_batcher_open_group's):
a thread sends SIGINT to the main thread every 0.7 ms while the main thread feeds. The storm's
handler hands the batcher's (``interrupts._handler``) one signal per arming only, so the test's own
lines are never cut: arm it (``storm.armed = True``) just before a call, disarm it just after. With
`hang_after_s`, a feed that makes no progress (``storm.progress`` not refreshed) for that long is a
``Hung`` failure raised from the handler instead of a hang. Real signals to the process: the tests
run alone in a child process (conftest.alone_in_a_child)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time

from ovrnn.runtime.batching import interrupts


class Hung(Exception):
    pass


class Storm:
    def __init__(self, hang_after_s: float | None = None, every_s: float = 0.0007) -> None:
        self.hang_after_s, self.every_s = hang_after_s, every_s
        self.armed = self.hung = self.stop = False
        self.progress = time.monotonic()

    def handler(self, signum, frame) -> None:
        if self.hung:
            raise Hung(f"a feed made no progress for {self.hang_after_s:g} s after an interrupt")
        if self.armed:  # disarmed here: one arming gives at most one interrupt, never one in the test's own except
            self.armed = False
            interrupts._handler(signum, frame)

    @contextlib.contextmanager
    def handling(self):
        """The storm's handler is SIGINT's meanwhile (the one before it restored after)."""
        old = signal.signal(signal.SIGINT, self.handler)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, old)

    @contextlib.contextmanager
    def blowing(self):
        """A thread sends SIGINT to the main thread every `every_s` meanwhile (stopped and joined after)."""
        main = threading.main_thread().ident

        def poke() -> None:
            while not self.stop:
                time.sleep(self.every_s)
                if self.hang_after_s is not None and time.monotonic() - self.progress > self.hang_after_s:
                    self.hung = True
                signal.pthread_kill(main, signal.SIGINT)

        self.stop = False
        thread = threading.Thread(target=poke, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stop = True
            thread.join()

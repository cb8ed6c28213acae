"""The chunk calls of a ``ProcessBatcher`` (processes.py): feed, feed_many, feed_group, submit,
submit_many, feed_async. Every call is checked and copied as ``StreamBatcher``'s (the same
``_stack``/``_chunk``: chunks.py), admitted here, its chunks written to each worker's shared rows with one
assignment per input, and ONE message sent per worker; the worker's reply hands each chunk's
outputs back (copied out of the rows) to what the caller waits on.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import numpy as np

from ...errors import UsageError, WorkerDiedError
from . import refusals
from .chunks import ChunkChecks
from .group import stacked_inputs
from .interrupts import AFTER_A_RUN, critical
from .step import to_batch, to_rows
from .worker import StreamHandle, copy_error


def acquire(lock) -> None:
    """`lock.acquire()`, which on the main thread looks at signals every 0.1 s: a SIGINT the kernel
    handed to another thread does not wake a main thread blocked in a lock, and its Ctrl-C would
    wait for the lock (the worker's reply) first."""
    if threading.current_thread() is threading.main_thread():
        while not lock.acquire(timeout=0.1):
            pass
    else:
        lock.acquire()


class _Block:
    """A blocking caller's: released once its worker's reply came."""

    __slots__ = ("done", "errors", "lock", "n", "outputs")

    def __init__(self, places: list) -> None:
        self.n = len(places)
        self.lock = threading.Lock()
        self.lock.acquire()
        self.outputs, self.errors, self.done = None, None, False

    def finish(self, outputs, errors) -> None:
        self.outputs, self.errors, self.done = outputs, errors, True
        self.lock.release()

    def wait(self) -> None:
        """Until the worker's reply (a Ctrl-C meanwhile, or while the results are made: ``_said``)."""
        acquire(self.lock)


def _said(sinks: list) -> KeyboardInterrupt:
    """What a Ctrl-C raises once a blocking call's chunks were handed to its worker processes
    (`sinks`: its ``_Block``s), while it waited for them or made its results. They cannot be taken
    back: they run there. So wait for every reply (a second Ctrl-C stops waiting), then say what
    became of them, as the in-process batcher does: a caller must not feed them again blindly.
    Every reply already there (the call was making its results): ``AFTER_A_RUN``, the in-process
    words for a batch that ran while its results were made."""
    replied = all(sink.done for sink, _ in sinks)  # `done`, not the lock: a Ctrl-C may land just after the lock was taken
    try:
        for sink, _ in sinks:
            while not sink.done:
                sink.lock.acquire(timeout=0.1)
    except KeyboardInterrupt:
        return KeyboardInterrupt("interrupted twice while the call's chunks were in its worker process: they may have run (read state())")
    failed = sum(len(sink.errors) for sink, _ in sinks if sink.errors)
    if not failed and replied:
        return KeyboardInterrupt(AFTER_A_RUN)
    if not failed:
        ran = "ran there (their streams' states moved; their outputs are dropped)"
    elif failed == sum(sink.n for sink, _ in sinks):
        ran = "failed there (no state moved)"
    else:
        ran = "partly ran there (read state() before feeding them again)"
    return KeyboardInterrupt(f"interrupted while the call's chunks were in its worker process: they {ran}")


class _Futures:
    """submit()'s: a concurrent.futures.Future per chunk, set on the receiver thread."""

    __slots__ = ("futures",)

    def __init__(self, futures: list) -> None:
        self.futures = futures

    def finish(self, outputs, errors) -> None:
        for k, future in enumerate(self.futures):
            error = errors.get(k) if errors else None
            if error is not None:
                future.set_exception(copy_error(error))
            else:
                future.set_result({name: array[k] for name, array in outputs.items()})


class _Async:
    """feed_async()'s: asyncio futures set on their loop, one wake-up per reply."""

    __slots__ = ("futures", "loop")

    def __init__(self, loop, futures: list) -> None:
        self.loop, self.futures = loop, futures

    def finish(self, outputs, errors) -> None:
        def resolve():
            for k, future in enumerate(self.futures):
                if future.cancelled():
                    continue
                error = errors.get(k) if errors else None
                if error is not None:
                    future.set_exception(copy_error(error))
                else:
                    future.set_result({name: array[k] for name, array in outputs.items()})

        try:
            self.loop.call_soon_threadsafe(resolve)
        except RuntimeError:  # the loop is closed: nobody awaits these any more
            pass


class Calls(ChunkChecks):
    """The chunk calls of ``ProcessBatcher``, the class they are part of: they use its ``spec``,
    ``max_pending``, ``_chunk_ports``, ``_procs``, ``_lock``, ``_counts``, ``_reqs``, ``_token``,
    ``_threads`` and ``_send`` (processes.py)."""

    def feed(self, stream: StreamHandle, inputs: dict) -> dict[str, np.ndarray]:
        """As ``StreamBatcher.feed``."""
        self._not_on_a_worker("feed()")
        return self.feed_many([(stream, inputs)])[0]

    def feed_many(self, chunks: list, return_exceptions: bool = False) -> list:
        """As ``StreamBatcher.feed_many``: one message per worker process for the whole call."""
        self._not_on_a_worker("feed_many()")
        if not chunks:
            return []
        streams = [stream for stream, _ in chunks]
        stacked = self._stacked_rows([inputs for _, inputs in chunks])
        sinks: list = []
        try:
            return self._feed_many(streams, stacked, sinks, return_exceptions)
        except KeyboardInterrupt:
            if not sinks:  # nothing was handed over
                raise
            raise _said(sinks) from None

    def _feed_many(self, streams: list, stacked: list, sinks: list, return_exceptions: bool) -> list:
        self._dispatch(streams, stacked, _Block, sinks)
        out: list = [None] * len(streams)
        first = None
        for sink, places in sinks:
            sink.wait()
            outputs, errors = sink.outputs, sink.errors
            if not errors:  # each chunk's rows: views of the copied rows, made by iterating them in C
                names = list(outputs)
                rows = (
                    [{names[0]: r} for r in outputs[names[0]]]
                    if len(names) == 1
                    else [dict(zip(names, rs)) for rs in zip(*outputs.values())]
                )
                if len(places) == len(out):
                    out = rows
                else:
                    for place, row in zip(places, rows):
                        out[place] = row
                continue
            for k, place in enumerate(places):
                error = errors.get(k) if errors else None
                if error is not None:
                    out[place] = copy_error(error)
                    if first is None or place < first:
                        first = place
                else:
                    out[place] = {name: array[k] for name, array in outputs.items()}
        if first is not None and not return_exceptions:
            raise out[first]
        return out

    def feed_group(self, streams: list, inputs: dict) -> dict[str, np.ndarray]:
        """As ``StreamBatcher.feed_group``: {input: the streams' chunks stacked on its batch axis}
        in, their outputs stacked the same way out (the first failed chunk's error raised)."""
        self._not_on_a_worker("feed_group()")
        streams = list(streams)
        n = len(streams)
        if not n:
            raise UsageError("feed_group(): expected at least one stream")
        given = stacked_inputs(self.spec, inputs, n)
        stacked = [to_rows(given[p.name], p.batch_axis) for p in self.spec.inputs]
        sinks: list = []
        try:
            return self._feed_group(streams, stacked, sinks)
        except KeyboardInterrupt:
            if not sinks:  # nothing was handed over
                raise
            raise _said(sinks) from None

    def _feed_group(self, streams: list, stacked: list, sinks: list) -> dict[str, np.ndarray]:
        n = len(streams)
        self._dispatch(streams, stacked, _Block, sinks)
        for sink, _ in sinks:
            sink.wait()
        for sink, _ in sinks:
            if sink.errors:
                raise copy_error(sink.errors[min(sink.errors)])
        out = {}
        for port in self.spec.outputs:
            if len(sinks) == 1:
                full = sinks[0][0].outputs[port.name]
            else:
                full = np.empty((n, *port.shape), port.dtype)
                for sink, places in sinks:
                    full[places] = sink.outputs[port.name]
            out[port.name] = to_batch(full, port.batch_axis)
        return out

    def submit(self, stream: StreamHandle, inputs: dict) -> Future:
        """As ``StreamBatcher.submit``."""
        return self.submit_many([(stream, inputs)])[0]

    def submit_many(self, chunks: list) -> list[Future]:
        """As ``StreamBatcher.submit_many``: one Future per chunk (refusals raised at once)."""
        if not chunks:
            return []
        futures = [Future() for _ in chunks]
        for f in futures:
            f.set_running_or_notify_cancel()
        stacked = self._stacked_rows([inputs for _, inputs in chunks])
        self._dispatch([s for s, _ in chunks], stacked, lambda places: _Futures([futures[k] for k in places]), [])
        return futures

    async def feed_async(self, stream: StreamHandle, inputs: dict) -> dict[str, np.ndarray]:
        """As ``StreamBatcher.feed_async``."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._dispatch([stream], self._stacked_rows([inputs]), lambda places: _Async(loop, [future]), [])
        return await future

    # -- helpers

    def _stacked_rows(self, group: list) -> list[np.ndarray]:
        """The chunks, checked, one array per input [n, *chunk shape] (one copy): ``_stack``'s for
        the common call (exact dicts of exact arrays), else each one as ``_chunk`` checks it, with
        its errors, then stacked."""
        stacked = self._stack(group)
        if stacked is None:
            copies = [self._chunk(inputs) for inputs in group]
            stacked = [np.stack([c[name] for c in copies]) for name in self._chunk_ports]
        return stacked

    def _dispatch(self, streams: list, stacked: list, make_sink, sinks: list) -> None:
        """Admit and send one call's chunks: `sinks` gets [(sink, [place in the call of its k-th chunk])],
        one per message, each before its message is sent (a blocking caller interrupted meanwhile
        waits for what was sent: ``_said``). Every chunk is admitted before any is sent (a refusal sends nothing); a call
        larger than half a worker's shared rows goes as several messages, each waiting for rows
        the worker gives back as it answers the ones before."""
        n = len(streams)
        one = streams[0].worker if type(streams[0]) is StreamHandle else None
        for s in streams:
            if type(s) is not StreamHandle or s.owner is not self._token:
                raise refusals.foreign(s)
            if s.worker != one:
                one = None
        if one is not None:
            groups = [(self._procs[one], list(range(n)))]
        else:
            groups = []
            for p in self._procs:
                places = [k for k, s in enumerate(streams) if s.worker == p.index]
                if places:
                    groups.append((p, places))
        names = list(self._chunk_ports)
        try:
            with critical():  # a Ctrl-C held: a message half written would leave its worker waiting for the rest for ever
                self._send_parts(streams, stacked, groups, names, make_sink, sinks)
        except KeyboardInterrupt:
            if not sinks:
                raise
            raise KeyboardInterrupt(
                "interrupted after the call's chunks were handed to its worker process: they run there "
                "(read state() before feeding them again)"
            ) from None

    def _send_parts(self, streams: list, stacked: list, groups: list, names: list, make_sink, sinks: list) -> None:
        n = len(streams)
        with self._lock:
            with self._counts:
                self._admit(streams, n)
            for p, places in groups:
                part = p.rows // 2
                for start in range(0, len(places), part):
                    mine = places[start : start + part]
                    rows = p.arena.take(len(mine))  # free at once, unless this call is larger than `part`
                    index = None if len(mine) == n else np.array(mine, np.intp)
                    for name, array in zip(names, stacked):
                        p.arena.inputs[name][rows] = array if index is None else array[index]
                    handles = streams if index is None else [streams[k] for k in mine]
                    sink = make_sink(mine)
                    with self._counts:
                        alive = p.alive
                        if alive:
                            req = next(self._reqs)
                            p.inflight[req] = (handles, rows, sink)
                    sinks.append((sink, mine))
                    if not alive:  # it ended while this call waited for its rows: what it would have told
                        p.arena.give_back(rows)
                        sink.finish(
                            None,
                            dict.fromkeys(range(len(mine)), WorkerDiedError(f"the batcher's {p.why[4:]}; the call's chunks were not sent")),
                        )
                        continue
                    self._send(p, ("feed", req, np.fromiter([s.id for s in handles], np.int64, len(handles)), rows))

    def _admit(self, streams: list, n: int) -> None:
        """(Counts lock held) Raise unless every stream is open and within max_pending; then count the call's chunks pending."""
        limit = self.max_pending
        for s in streams:  # the common call: every stream open and below its limit (a stream twice: counted below)
            if not s.open or s.pending >= limit:
                break
        else:
            if len({s.id for s in streams}) == n:
                limit = None
        counts: dict[int, int] = {}
        for s in streams if limit is not None else ():
            if not s.open:
                raise refusals.closed(s.id, s.why)
            count = counts[s.id] = counts.get(s.id, s.pending) + 1
            if count > limit:
                self._procs[s.worker].recorder.refused_pending += 1
                raise refusals.too_many_pending(s.id, count, limit)
        for s in streams:
            s.pending += 1

    def _not_on_a_worker(self, what: str) -> None:
        if threading.current_thread() in self._threads:
            raise refusals.on_its_workers_thread(what)

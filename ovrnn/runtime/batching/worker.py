"""One batcher worker: a thread that owns a BatchedStep (its compiled sizes and their requests)
and a StateStore, and runs the chunks its streams are fed.

Policy (under the worker's lock; one chunk per stream per batch, a stream's chunks in order):

    a batch runs when   the largest size is full
                        or the oldest ready chunk has waited max_wait
                        or at once when the worker was idle (nothing was ready when it last looked)
    it takes            the ready streams oldest chunk first, one chunk each, up to the largest size

A stream's queue holds its chunks and the controls fed after them (reset, set_state, state),
which take effect between batches, in order with the chunks. A batch is gathered, run and
scattered with the lock released (only the batch's slots are written); its results and errors are
handed to the futures outside the lock, so a callback that feeds again cannot deadlock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from time import monotonic

import numpy as np

from ...errors import BatchInterruptedError, StreamClosedError
from .interrupts import said
from .stats import Recorder
from .step import BatchedStep
from .store import StateStore


class StreamHandle:
    """One open stream of a StreamBatcher (what ``open()`` returns; pass it to ``feed``)."""

    __slots__ = (
        "fed",
        "group",
        "id",
        "in_flight",
        "last_used",
        "open",
        "owner",
        "pending",
        "queue",
        "slot",
        "why",
        "worker",
    )

    def __init__(self, sid: int, worker: int, slot: int, owner: object, now: float) -> None:
        self.id, self.worker, self.slot, self.owner = sid, worker, slot, owner
        self.queue: deque = deque()  # _Chunk and Control items, in the order they were fed
        self.pending = 0  # chunks in `queue`
        self.in_flight = False  # a chunk of it is in the running batch
        self.open, self.why = True, ""
        self.last_used = now
        self.fed = False  # its first chunk was queued (its time is in the worker's `first` by slot)
        self.group = None  # the StreamGroup it is a member of (fed only through it: stream_group.py)

    def __repr__(self) -> str:
        return f"<stream {self.id} on worker {self.worker}{'' if self.open else ', closed'}>"


class _Chunk:
    __slots__ = ("index", "inputs", "sink", "t")

    def __init__(self, inputs: dict, sink, t: float, index: int = 0) -> None:
        self.inputs, self.sink, self.t, self.index = inputs, sink, t, index


class Control:
    __slots__ = ("apply", "index", "sink", "t")

    def __init__(self, apply, sink, t: float) -> None:
        self.apply, self.sink, self.t, self.index = apply, sink, t, 0


class Waiter:
    """What ``feed`` and ``feed_many`` block on: one lock, released when the last of its `n`
    chunks is done (far cheaper than a Future a chunk: 0.5 µs against 3-8). Filled by one worker
    thread only (``feed_many`` makes one per worker)."""

    __slots__ = ("errors", "left", "lock", "results")

    def __init__(self, n: int) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.left, self.results, self.errors = n, [None] * n, None

    def done(self, index: int, result, error) -> None:
        if error is not None:
            self.errors = self.errors or {}
            self.errors[index] = error
        else:
            self.results[index] = result
        self.left -= 1
        if not self.left:
            self.lock.release()

    def wait(self) -> None:
        """Block until every chunk is done; ``results[k]``: the k-th one's outputs, made here (a Ctrl-C says what ran)."""
        try:
            self.lock.acquire()
            self.results = [_row(*r) if type(r) is tuple else r for r in self.results]
        except KeyboardInterrupt:  # the chunks cannot be taken back: all done (left 0) or still queued or running
            raise KeyboardInterrupt(*said(self.left > 0, bool(self.errors))) from None


class AsyncSink:
    """An asyncio future of `loop`: set on its loop, one wake-up of the loop per batch."""

    __slots__ = ("future", "loop")

    def __init__(self, loop, future) -> None:
        self.loop, self.future = loop, future


class Worker:
    def __init__(
        self,
        index: int,
        step: BatchedStep,
        capacity: int,
        max_wait_s: float,
        idle_timeout_s: float | None,
        chunk_seconds: float | None,
    ) -> None:
        self.index, self.step = index, step
        self.store = StateStore(step.spec, capacity)
        self.max_wait, self.idle_timeout, self.chunk_seconds = (
            max_wait_s,
            idle_timeout_s,
            chunk_seconds,
        )
        self.largest = step.largest
        # per slot, for the lag behind real time (stats()), written a batch at a time: when the
        # slot's stream was first fed (inf: not yet), its chunks run, when its last result came
        self.first = np.full(capacity, np.inf)
        self.runs = np.zeros(capacity, np.int64)
        self.ended = np.zeros(capacity)
        self.cond = threading.Condition(threading.Lock())
        self.heap: list = []  # (time of its head chunk, seq, stream, chunk): streams with a chunk ready
        self.controls: deque = deque()  # streams whose head is a control
        self.streams: dict[int, StreamHandle] = {}
        self.outbox: list = []  # (sink, index, result, error) to hand over with the lock released
        self.recorder = Recorder()
        self.stopping = False
        self.waiting = False  # in cond.wait: a new chunk must notify
        self.idle = True
        self.claimed = 0  # the id of a caller's thread running batches (run_here), else 0
        self._seq = itertools.count()
        self._next_idle_check = monotonic()
        self._outputs = [(p.name, p.batch_axis) for p in step.spec.outputs]
        self._inputs = [p.name for p in step.spec.inputs]
        self.thread = threading.Thread(target=self._loop, name=f"ovrnn-batcher-{index}", daemon=True)

    # -- called with the lock held

    def enqueue(self, stream: StreamHandle, item, chunk: bool, wake: bool = True) -> None:
        """Queue `item`; `wake`: wake the worker if it waits (a group wakes it once, at its end)."""
        was_empty = not stream.queue
        stream.queue.append(item)
        if chunk:
            stream.pending += 1
        if was_empty and not stream.in_flight:
            self._ready(stream)
        if wake:
            self.wake()

    def enqueue_chunks(self, items: list, now: float) -> None:
        """Queue [(stream, inputs, sink, index)] (checked by the caller), fed at `now`. A stream
        whose chunk becomes ready goes on the heap by append: its key (now, a fresh seq) is at
        least every key there (each is an earlier time), so the heap stays a heap."""
        heap, seq = self.heap, self._seq
        for stream, inputs, sink, index in items:
            chunk = _Chunk(inputs, sink, now, index)
            if not stream.fed:
                stream.fed = True
                if self.first[stream.slot] == np.inf:  # not fed by a direct group before
                    self.first[stream.slot] = now
            stream.last_used = now
            queue = stream.queue
            if not queue and not stream.in_flight:
                heap.append((now, next(seq), stream, chunk))
            queue.append(chunk)
            stream.pending += 1

    def wake(self) -> None:
        """Wake the worker when it waits (notify costs a lock round trip; a busy worker looks at
        the queues again by itself when its batch ends)."""
        if self.waiting:
            self.cond.notify()

    def close(self, stream: StreamHandle, why: str) -> None:
        """Close now: its waiting chunks and controls fail; a chunk in the running batch completes,
        and the slot is freed after it."""
        if not stream.open:
            return
        stream.open, stream.why = False, why
        for item in stream.queue:
            self.outbox.append(
                (item.sink, item.index, None, StreamClosedError(f"stream {stream.id} was closed ({why}) before this call ran"))
            )
        had_items = bool(stream.queue)
        had_ready = had_items and type(stream.queue[0]) is _Chunk and not stream.in_flight
        stream.queue.clear()
        stream.pending = 0
        if had_ready:
            self.heap = [entry for entry in self.heap if entry[2] is not stream]
            heapq.heapify(self.heap)
        if stream.group is not None:  # a group's member: its slot stays the group's until the group closes
            stream.group.gone += 1
        elif not stream.in_flight:
            self.store.give_back(stream.slot)
        self.streams.pop(stream.id, None)
        if had_items:  # its failed chunks to hand over, the heap changed: else nothing for the worker to do (no wake-up)
            self.cond.notify()

    def new_stream(self, slot: int) -> None:
        """(Lock held) A new stream in `slot`: not fed yet, no chunk run."""
        self.first[slot], self.runs[slot], self.ended[slot] = np.inf, 0, 0.0

    def ran(self, slots: np.ndarray, start: float, end: float) -> None:
        """(Lock held) One chunk of each of `slots` ran from `start` to `end` (a slot not fed before,
        by a direct group, counts from `start`)."""
        first = self.first[slots]
        unfed = first == np.inf
        if unfed.any():
            self.first[slots[unfed]] = start
        self.runs[slots] += 1
        self.ended[slots] = end

    def lags(self) -> dict[int, float]:
        """(Lock held) {stream id: seconds its last result came after real time}: its first chunk
        taken as its start and one chunk every ``chunk_seconds`` after (0 before a chunk ran)."""
        streams = list(self.streams.values())
        slots = np.fromiter([s.slot for s in streams], np.intp, len(streams))
        runs = self.runs[slots]
        lag = np.where(runs > 0, self.ended[slots] - self.first[slots] - (runs - 1) * (self.chunk_seconds or 0.0), 0.0)
        return dict(zip([s.id for s in streams], np.maximum(lag, 0.0).tolist()))

    def _ready(self, stream: StreamHandle) -> None:
        head = stream.queue[0]
        if type(head) is _Chunk:
            heapq.heappush(self.heap, (head.t, next(self._seq), stream, head))
        else:
            self.controls.append(stream)

    def _apply_controls(self) -> None:
        while self.controls:
            stream = self.controls.popleft()
            while stream.queue and type(stream.queue[0]) is Control:
                item = stream.queue.popleft()
                try:
                    self.outbox.append((item.sink, 0, item.apply(stream), None))
                except Exception as exc:  # noqa: BLE001 - a control's own check: handed to its caller
                    self.outbox.append((item.sink, 0, None, exc))
                stream.last_used = monotonic()
            if stream.queue:
                self._ready(stream)

    def _close_idle(self, now: float) -> None:
        if self.idle_timeout is None or now < self._next_idle_check:
            return
        self._next_idle_check = now + min(self.idle_timeout / 4, 1.0)
        for stream in list(self.streams.values()):
            used = stream.last_used if stream.group is None else max(stream.last_used, stream.group.last_used)  # fed with its group
            if not stream.queue and not stream.in_flight and now - used > self.idle_timeout:
                self.close(
                    stream,
                    f"idle for more than {self.idle_timeout:g} s, idle_timeout_s={self.idle_timeout:g}",
                )
                self.recorder.idle_closed += 1

    def _next_batch(self, block: bool = True):
        """Wait for the next batch: (streams, chunks, time formed); None to stop; () when the
        outbox has results to hand over first. With `block` False (a caller running batches
        itself, see ``run_here``): the ready chunks at once, False when none are ready."""
        while True:
            if block and self.claimed:  # a caller runs batches on its own thread: wait until it is done
                self.waiting = True
                self.cond.wait(None if self.idle_timeout is None else 0.05)
                self.waiting = False
                continue
            self._apply_controls()
            now = monotonic()
            self._close_idle(now)
            if self.outbox:
                return ()
            if self.stopping:
                return None
            heap = self.heap
            if not heap:
                if not block:
                    return False
                self.idle = True
                self.waiting = True
                self.cond.wait(None if self.idle_timeout is None else max(self._next_idle_check - now, 0.001))
                self.waiting = False
                continue
            waited = now - heap[0][0]
            if not block or len(heap) >= self.largest or self.idle or waited >= self.max_wait:
                break
            self.waiting = True
            self.cond.wait(self.max_wait - waited)
            self.waiting = False
        if len(heap) <= self.largest:  # every ready stream fits: all of them, no order to keep
            taken, self.heap = heap, []
        else:
            taken = [heapq.heappop(heap) for _ in range(self.largest)]
        streams = [entry[2] for entry in taken]
        chunks = [entry[3] for entry in taken]
        for stream in streams:
            stream.queue.popleft()
            stream.pending -= 1
            stream.in_flight = True
        self.idle = False
        return streams, chunks, now

    # -- a blocking caller's thread

    def claim(self) -> bool:
        """(Lock held) Claim the worker for the calling thread when its thread is idle in its wait
        (nothing was ready when it last looked): see ``run_here``."""
        if self.claimed or not self.waiting or not self.idle or self.stopping:
            return False
        self.claimed = threading.get_ident()
        return True

    def run_here(self, waiter: Waiter) -> None:
        """(After ``claim``) Run the ready batches on this (a blocking caller's) thread until `waiter` is done: the
        same batches it would run at once, without two thread hand-offs per call (on a loaded core each costs a
        scheduler wake-up). The worker thread waits meanwhile (one runner per worker: its request is one call's).
        When the worker is busy, or anything is left, the caller waits for the worker as before."""
        try:
            while waiter.left:
                with self.cond:
                    batch = self._next_batch(block=False)
                    outbox, self.outbox = self.outbox, []
                _deliver(outbox)
                if batch is None or batch is False:
                    return
                if batch:
                    self._run(*batch)
        finally:
            with self.cond:
                self.claimed = 0
                self.idle = not self.heap  # as the worker thread would be, had it run these
                if self.heap or self.controls or self.outbox or self.stopping:
                    self.cond.notify()

    # -- the thread

    def _loop(self) -> None:
        try:
            while True:
                with self.cond:
                    batch = self._next_batch()
                    outbox, self.outbox = self.outbox, []
                _deliver(outbox)
                if batch is None:
                    return
                if batch:
                    self._run(*batch)
        except BaseException as exc:  # a bug of ours: no caller may wait for this worker without end
            why = f"the batcher's worker {self.index} stopped: {type(exc).__name__}: {exc}"
            with self.cond:
                self.stopping = True
                for stream in list(self.streams.values()):
                    self.close(stream, why)
                outbox, self.outbox = self.outbox, []
            _deliver(outbox)
            raise

    def _run(self, streams: list[StreamHandle], chunks: list[_Chunk], formed: float) -> None:
        start, outputs, error = monotonic(), None, None  # a Ctrl-C fails the batch like any error, then goes on up
        try:
            slots = np.fromiter([s.slot for s in streams], np.intp, len(streams))
            inputs = {name: [c.inputs[name] for c in chunks] for name in self._inputs}
            outputs = self.step.run_slots(self.store.slabs, slots, inputs)  # a Ctrl-C held meanwhile lands in its infer
        except BaseException as exc:  # noqa: BLE001 - the batch failed, each of its callers gets it; no state was written (run_slots scatters on success only)
            error = exc
        n, end = len(streams), monotonic()
        with self.cond:
            for stream in streams:  # first: the streams back (a Ctrl-C in the counts below loses counts, not streams)
                stream.in_flight = False
                stream.last_used = end
                if not stream.open:
                    self.store.give_back(stream.slot)
                elif stream.queue:
                    self._ready(stream)
            r = self.recorder
            r.rows[n] += 1
            r.sizes[self.step.size_for(n)] += 1
            r.computes.append(end - start)
            r.waits.extend([start - c.t for c in chunks])
            if error is None:
                r.chunks += n
                self.ran(slots, start, end)
            else:
                r.failed_batches += 1
                r.failed_chunks += n
        if error is None:
            _deliver_rows(chunks, outputs, self._outputs)
        else:
            _deliver([(c.sink, c.index, None, copy_error(error)) for c in chunks])
            if not isinstance(error, Exception):
                raise error

    def start(self) -> None:
        self.thread.start()

    def stop(self, why: str) -> None:
        with self.cond:
            for stream in list(self.streams.values()):
                self.close(stream, why)
            self.stopping = True
            self.cond.notify()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join()


def copy_error(error: BaseException) -> Exception:
    """Each waiting call raises its own exception object (one object raised in several threads
    would share one traceback); a batch cut by a KeyboardInterrupt: a BatchInterruptedError."""
    if not isinstance(error, Exception):
        return BatchInterruptedError(f"the batch was cut by {type(error).__name__} on its thread; no state moved: feed the chunk again")
    try:
        return type(error)(str(error))
    except Exception:  # noqa: BLE001 - an exception type that takes other arguments
        return error


def _row(outputs: dict, ports: list, i: int) -> dict:
    """Stream i's {output: its rows}: views of the batch's new arrays (each stream's rows its own)."""
    if len(ports) == 1 and ports[0][1] == 0:
        name = ports[0][0]
        return {name: outputs[name][i : i + 1]}
    return {name: outputs[name][(slice(None),) * axis + (slice(i, i + 1),)] for name, axis in ports}


def _deliver_rows(chunks: list, outputs: dict, ports: list) -> None:
    """A batch's results: a Waiter or an asyncio future gets (outputs, ports, row) and makes the
    stream's dict on its own thread; a Future gets the dict."""
    loops: dict | None = None
    for i, chunk in enumerate(chunks):
        sink = chunk.sink
        kind = type(sink)
        if kind is Waiter:  # Waiter.done, inlined
            sink.results[chunk.index] = (outputs, ports, i)
            sink.left -= 1
            if not sink.left:
                sink.lock.release()
        elif kind is AsyncSink:
            loops = loops if loops is not None else {}
            loops.setdefault(sink.loop, []).append((sink.future, (outputs, ports, i), None))
        else:
            sink.set_result(_row(outputs, ports, i))
    for loop, items in (loops or {}).items():
        try:
            loop.call_soon_threadsafe(_resolve, items)
        except RuntimeError:  # the loop is closed: nobody awaits these any more
            pass


def _deliver(outbox: list) -> None:
    """Hand results over (no lock held): Waiters released, Futures set, asyncio futures set on
    their loops with one call_soon_threadsafe per loop."""
    loops: dict | None = None
    for sink, index, result, error in outbox:
        kind = type(sink)
        if kind is Waiter:
            sink.done(index, result, error)
        elif kind is AsyncSink:
            loops = loops if loops is not None else {}
            loops.setdefault(sink.loop, []).append((sink.future, result, error))
        elif error is not None:
            sink.set_exception(error)
        else:
            sink.set_result(result)
    for loop, items in (loops or {}).items():
        try:
            loop.call_soon_threadsafe(_resolve, items)
        except RuntimeError:  # the loop is closed: nobody awaits these any more
            pass


def _resolve(items: list) -> None:
    for future, result, error in items:
        if future.cancelled():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(_row(*result) if type(result) is tuple else result)

"""``ovrnn.StreamBatcher``: many streams of one recurrent model, their chunks batched into one call.

    with ovrnn.StreamBatcher(SILERO, "state=stateN", context={"input": 64}, shapes={"input": [1, 576]},
                             frozen={"sr": 16000}, chunk_seconds=0.032) as batcher:
        stream = batcher.open()
        prob = batcher.feed(stream, {"input": chunk})["output"]     # blocking; chunk [1, 512] or [512]
        probs = batcher.feed_many([(s, {"input": c}) for s, c in ready])  # a gateway's tick
        probs = batcher.feed_group(streams, {"input": stacked})["output"]  # stacked in and out; open_group(n).feed: ditto
        future = batcher.submit(stream, {"input": chunk})           # concurrent.futures.Future
        prob = await batcher.feed_async(stream, {"input": chunk})   # asyncio
        batcher.reset(stream); batcher.state(stream); batcher.set_state(stream, "state", value)
        batcher.close(stream); batcher.stats()

Each worker (``workers``, one per core) is a thread with its own ``BatchedStep`` (the model
compiled at every size, one OpenVINO thread) and its own ``StateStore``; a stream is placed on a
worker at ``open()`` (its id modulo ``workers``, the next one with room when that one is full)
and stays there. The policy and the order guarantees: ``worker.py``. docs/batching.md.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import threading
from concurrent.futures import Future
from time import monotonic

import numpy as np

from ...errors import UsageError
from .. import engine
from . import group, refusals, stream_group
from .admit import admit, enqueue_all
from .chunks import ChunkChecks, ports
from .interrupts import control_went_on, critical, install, said
from .options import checked
from .processes import start as start_processes
from .stats import collect
from .step import DEFAULT_SIZES, BatchedStep
from .worker import AsyncSink, Control, StreamHandle, Waiter, Worker


class StreamBatcher(ChunkChecks):
    """Serve many streams of one model (see the module docstring).

    `model`: a ``StreamSpec``, or a model with ``StreamSpec.of``'s arguments (`state`, `context`,
    `shapes`, `frozen`, `batch`, `lowering`). `sizes`: the static batch sizes compiled and warmed
    at start (1 is always among them: one ready stream runs alone). `max_wait_ms`: how long the
    oldest ready chunk may wait for a fuller batch (not at all when the worker is idle).
    `max_streams`: open streams, then ``open()`` is refused; `max_pending`: chunks a stream may
    have waiting, then ``feed`` is refused (``OverloadedError`` both, never a wait without end).
    `idle_timeout_s`: streams not fed or asked for that long are closed (None: never).
    `chunk_seconds`: the real time one chunk covers (silero 16 kHz: 0.032); with it ``stats()``
    reports each stream's lag behind real time. `pad`: as ``BatchedStep``'s. `threads`: CPU
    threads of one worker's call (1: a worker per core, what ``workers`` scales on). `check_rows`, `trust_indices`: as BatchedStep's."""

    def __new__(cls, *args, processes: bool = False, **kwargs):
        """`processes=True`: each worker a process, a ``processes.ProcessBatcher`` with this API, made
        from these arguments by name (and `start_timeout_s`, its own: how long a worker process may
        take to start)."""
        if processes is False:
            return super().__new__(cls)
        if processes is not True:
            raise UsageError(f"processes: expected True or False, got {processes!r}")
        start_timeout_s = kwargs.pop("start_timeout_s", 600.0)
        try:
            bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"StreamBatcher(): {exc}") from None
        bound.apply_defaults()
        return start_processes(dict(bound.arguments), start_timeout_s)

    def __init__(
        self,
        model,
        state=None,
        *,
        context: dict | None = None,
        shapes: dict | None = None,
        frozen: dict | None = None,
        batch: dict | None = None,
        lowering: str = "fastest",
        sizes=DEFAULT_SIZES,
        max_wait_ms: float = 2.0,
        workers: int = 1,
        max_streams: int = 4096,
        max_pending: int = 4,
        idle_timeout_s: float | None = None,
        chunk_seconds: float | None = None,
        device: str = "CPU",
        precision: str | None = engine.DEFAULT_PRECISION,
        cache_dir=None,
        pad: str = "initial",
        threads: int | None = 1,
        check_rows: bool = True,
        trust_indices: bool = False,
        processes: bool = False,
    ) -> None:
        spec = checked(
            model,
            state,
            context=context,
            shapes=shapes,
            frozen=frozen,
            batch=batch,
            lowering=lowering,
            workers=workers,
            max_streams=max_streams,
            max_pending=max_pending,
            max_wait_ms=max_wait_ms,
            idle_timeout_s=idle_timeout_s,
            chunk_seconds=chunk_seconds,
        )
        self.spec = spec
        self.max_streams, self.max_pending = max_streams, max_pending
        self.chunk_seconds = chunk_seconds
        sizes = tuple(sorted({1, *sizes})) if all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in sizes) else sizes
        capacity = math.ceil(max_streams / workers)
        threads = threads if device.split(".")[0].upper() == "CPU" else None
        self._workers = [
            Worker(
                i,
                BatchedStep(
                    spec, sizes, device, precision, threads, cache_dir, pad=pad, check_rows=check_rows, trust_indices=trust_indices
                ),
                capacity,
                max_wait_ms / 1000,
                idle_timeout_s,
                chunk_seconds,
            )
            for i in range(workers)
        ]
        self.sizes = self._workers[0].step.sizes
        self._index_limits = self._workers[0].step.index_limits
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._shut = False
        self._chunk_ports = ports(spec)  # input: (one chunk's shape, that shape without its batch axis, dtype)
        self._threads = {worker.thread for worker in self._workers}
        install()  # Ctrl-C on the main thread held over the batcher's bookkeeping (interrupts.py)
        for worker in self._workers:
            worker.start()

    # -- streams

    def open(self, state: dict | None = None, *, worker: int | None = None) -> StreamHandle:
        """A new stream, at the initial state, or with the states `state` gives ({name: value},
        one stream's value; ``spec.state_names``). ``OverloadedError`` when ``max_streams`` are open.
        `worker`: place it on that worker (0 .. workers-1), for a gateway that feeds each worker's
        streams from its own thread (``feed_group``/``feed_many`` then run on that thread);
        ``OverloadedError`` when that worker's slots are all held. Default: the stream's id modulo
        ``workers``, the next worker with room when that one is full."""
        return self._open(state, worker)

    def _open(self, state: dict | None, worker: int | None, sid: int | None = None) -> StreamHandle:
        """``open``; `sid`: the stream's id (None: the next one; a worker process opens its parent's streams under
        their parent's ids, proc_child.py, so that its messages name a stream as its caller knows it)."""
        store = self._workers[0].store
        seeds = {name: store.checked(name, value) for name, value in (state or {}).items()}
        count = len(self._workers)
        refusals.check_worker("open", worker, count)
        with self._lock:  # one open() at a time: the stream count and the placement agree
            if self._shut:
                raise refusals.shut_down()
            sid = next(self._ids) if sid is None else sid
            if sum(len(w.streams) for w in self._workers) < self.max_streams:
                for index in [(sid + k) % count for k in range(count)] if worker is None else [int(worker)]:
                    place = self._workers[index]
                    with place.cond:
                        slot = place.store.take()
                        if slot is None:
                            continue
                        place.store.reset(slot)
                        place.new_stream(slot)
                        for name, value in seeds.items():
                            place.store.write(slot, name, value)
                        stream = StreamHandle(sid, place.index, slot, self, monotonic())
                        place.streams[sid] = stream
                        return stream
        chosen = self._workers[sid % count if worker is None else int(worker)]
        with chosen.cond:
            chosen.recorder.refused_streams += 1
        opened = sum(len(w.streams) for w in self._workers)
        if worker is not None and opened < self.max_streams:
            raise refusals.worker_full(worker, chosen.store.capacity, self.max_streams, count)
        held = "the other slots are held by groups' closed members: reopen them (group.reopen) or close the groups"  # stream_group.py
        raise refusals.all_open(opened, self.max_streams, refusals.FULL if opened >= self.max_streams else held)

    def open_group(self, n: int, state: dict | None = None, *, worker: int | None = None):
        """n new streams fed only together, one batch a call: a ``StreamGroup`` (stream_group.py)."""
        return stream_group.open_group(self, n, state, worker)

    def feed(self, stream: StreamHandle, inputs: dict) -> dict[str, np.ndarray]:
        """One chunk of `stream` ({input: one stream's chunk}), blocking until its batch ran:
        {output: array}, one stream's rows (batch axis of size 1), arrays the caller owns. The
        chunk is copied first: the caller may refill its arrays at once. A stream's chunks run
        in the order they were fed (from any number of threads: the order they got in).
        ``OverloadedError`` when `stream` already has ``max_pending`` chunks waiting;
        ``StreamClosedError`` when it is closed; the batch's error when its batch failed."""
        self._not_on_a_worker("feed()")
        waiter = Waiter(1)
        with critical():  # a Ctrl-C held until OpenVINO's call, where the batch fails atomically (interrupts.py)
            if self._enqueue([(stream, self._checked(stream, self._chunk(inputs)), waiter, 0)], claim=True):
                self._workers[stream.worker].run_here(waiter)
        try:
            waiter.wait()
            if waiter.errors:
                raise waiter.errors[0]
            return waiter.results[0]
        except KeyboardInterrupt as exc:  # just after the wait: it would be bare, and the chunk ran
            if exc.args:
                raise
            raise KeyboardInterrupt(*said(waiter.left > 0, bool(waiter.errors))) from None

    def feed_many(self, chunks: list[tuple[StreamHandle, dict]], return_exceptions: bool = False) -> list:
        """Several streams' chunks at once ([(stream, inputs)]; a stream may come more than once,
        its chunks in list order), blocking until all ran: their outputs, in order. One lock and
        one wake-up per worker instead of one per chunk: what a gateway holding many streams does
        each tick. All or none of the chunks are queued, over every worker (a refusal queues
        nothing). A failed chunk raises its error, or with `return_exceptions` stands in the
        list as the exception (the others' results kept)."""
        self._not_on_a_worker("feed_many()")
        with critical():  # as in feed()
            stacked = self._stack([inputs for _, inputs in chunks])
            if stacked is not None and not self._index_limits:  # every stream idle, and its worker: one direct run
                direct = group.feed_rows(self, chunks, stacked, return_exceptions)
                if direct is not None:
                    return direct
            waiters, claimed = self._enqueue_many(chunks, Waiter, claim=True, stacked=stacked)
            waited = waiters[0][0] if len(waiters) == 1 and len(waiters[0][1]) == len(chunks) else None  # one worker: its results
            if waited is not None and claimed:
                self._workers[0].run_here(waited)
        try:
            return self._gathered(waiters, waited, len(chunks), return_exceptions)
        except KeyboardInterrupt as exc:  # between the waits, or after: it would be bare, and chunks ran
            if exc.args:
                raise
            raise KeyboardInterrupt(*said(any(w.left for w, _ in waiters), any(w.errors for w, _ in waiters))) from None

    def _gathered(self, waiters: list, waited, n: int, return_exceptions: bool) -> list:
        """``feed_many``'s results once queued: [(waiter, places)] waited for and put in call order."""
        if waited is not None:
            waited.wait()
            if not waited.errors:
                return waited.results
        out: list = [None] * n
        first = None
        for waiter, places in waiters:
            if waiter is not waited:
                waiter.wait()
            for k, place in enumerate(places):
                error = waiter.errors.get(k) if waiter.errors else None
                out[place] = error if error is not None else waiter.results[k]
                if error is not None and (first is None or place < first[0]):
                    first = (place, error)
        if first is not None and not return_exceptions:
            raise first[1]
        return out

    def feed_group(self, streams: list[StreamHandle], inputs: dict) -> dict[str, np.ndarray]:
        """One chunk of each of `streams`, given stacked: {input: one array, the streams' chunks
        stacked on its batch axis in list order}; returns {output: their rows stacked the same
        way}, arrays the caller owns. When the streams are distinct, on one worker, idle and the
        worker too, it runs them at once on this thread (states gathered by slot, scattered back
        only if all succeeded: a failed group changes no state); else it is ``feed_many`` of
        the rows. Either way each stream's chunks keep the order they were fed in. ``group.py``."""
        self._not_on_a_worker("feed_group()")
        return group.feed_group(self, streams, inputs)

    def submit(self, stream: StreamHandle, inputs: dict) -> Future:
        """``feed`` without blocking: a ``concurrent.futures.Future`` of its result (refusals are
        raised here, at once). Not cancellable: a queued chunk runs (its stream's state depends on
        it)."""
        future: Future = Future()
        future.set_running_or_notify_cancel()
        self._enqueue([(stream, self._checked(stream, self._chunk(inputs)), future, 0)])
        return future

    def submit_many(self, chunks: list[tuple[StreamHandle, dict]]) -> list[Future]:
        """``feed_many`` without blocking: one Future per chunk, in order."""
        futures: list = [None] * len(chunks)
        prepared = list(zip([stream for stream, _ in chunks], self._chunks([inputs for _, inputs in chunks])))
        for stream, chunk in prepared:
            self._checked(stream, chunk)
        groups = []
        for worker in self._workers:
            mine = []
            for i, (stream, chunk) in enumerate(prepared):
                if self._worker(stream) is worker:
                    futures[i] = Future()
                    futures[i].set_running_or_notify_cancel()
                    mine.append((stream, chunk, futures[i], 0))
            if mine:
                groups.append((worker, mine))
        enqueue_all(self, groups)  # all workers' chunks, or none
        return futures

    async def feed_async(self, stream: StreamHandle, inputs: dict) -> dict[str, np.ndarray]:
        """``feed`` for asyncio: awaits the chunk's batch without blocking the event loop (the
        worker sets the results of a batch on a loop with one wake-up). Cancelling the await does
        not take the chunk back: it runs."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._enqueue([(stream, self._checked(stream, self._chunk(inputs)), AsyncSink(loop, future), 0)])
        return await future

    def reset(self, stream: StreamHandle) -> None:
        """Every state of `stream` back to its initial value, after the chunks fed before."""
        self._control(stream, lambda s: self._workers[s.worker].store.reset(s.slot), "reset()")

    def state(self, stream: StreamHandle) -> dict[str, np.ndarray]:
        """{state: value} of `stream` after the chunks fed before (copies, one stream's shape)."""
        return self._control(stream, lambda s: self._workers[s.worker].store.read(s.slot))

    def set_state(self, stream: StreamHandle, name: str, value) -> None:
        """Set one state of `stream` (after the chunks fed before); the next chunk starts from it."""
        checked = self._worker(stream).store.checked(name, value)  # a foreign handle: the UsageError the others give
        self._control(stream, lambda s: self._workers[s.worker].store.write(s.slot, name, checked), "set_state()")

    def close(self, stream: StreamHandle) -> None:
        """Close `stream` now: chunks still waiting fail with ``StreamClosedError`` (one in a
        running batch completes); its slot is free for ``open()``. Closing twice is a no-op."""
        worker = self._worker(stream)
        with worker.cond:
            worker.close(stream, "closed by close()")

    def streams(self) -> list[StreamHandle]:
        """The open streams."""
        out = []
        for worker in self._workers:
            with worker.cond:
                out.extend(worker.streams.values())
        return out

    # -- the batcher

    def stats(self) -> dict:
        """Counts since start: ``batch_rows`` {real rows: batches}, ``batch_sizes`` {compiled size:
        batches}, ``queue_wait_s`` and ``compute_s`` {p50, p99, max} over the latest 20,000
        chunks / batches, chunks, failed batches and chunks, ``refused`` {max_pending,
        max_streams}, ``idle_closed``; with ``chunk_seconds``: ``lag_s`` {stream id: seconds its
        last result came after real time} and ``lag`` {p50, p99, max, behind: streams more than a
        chunk behind}."""
        return collect(self._workers, self.chunk_seconds)

    def shutdown(self) -> None:
        """Close every stream (waiting chunks fail with ``StreamClosedError``), let a running
        batch finish, and stop the workers. ``open()`` and ``feed`` are refused after."""
        with self._lock:
            self._shut = True
        for worker in self._workers:
            worker.stop("the batcher was shut down")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        open_ = sum(len(w.streams) for w in self._workers)
        return f"StreamBatcher({len(self._workers)} workers, sizes {list(self.sizes)}, {open_} streams open)"

    # -- helpers

    def _worker(self, stream) -> Worker:
        if not isinstance(stream, StreamHandle) or stream.owner is not self:
            raise refusals.foreign(stream)
        return self._workers[stream.worker]

    def _enqueue(self, items: list, claim: bool = False) -> bool:
        """Queue [(stream, chunk, sink, index)], every stream on one worker: all, or none when a
        stream is closed or would pass ``max_pending``. `claim`: a blocking caller that runs the
        batches itself when the worker is idle (``Worker.run_here``): True when it must."""
        worker = self._worker(items[0][0])
        with worker.cond:
            admit(self, worker, items)
            worker.enqueue_chunks(items, monotonic())
            if claim and worker.claim():
                return True
            worker.wake()
        return False

    def _enqueue_many(self, chunks: list, make_sink, claim: bool = False, stacked: list | None = None) -> tuple[list, bool]:
        """[(sink, [place in `chunks` of its k-th chunk])], one sink per worker; and whether the
        caller claimed the only worker (`claim`, see ``_enqueue``). `stacked`: ``_stack``'s copy
        of the chunks, when the caller made it."""
        if not chunks:
            return [], False
        streams = [stream for stream, _ in chunks]
        copies = self._chunks([inputs for _, inputs in chunks], stacked)
        for stream, copy in zip(streams, copies):
            if type(stream) is not StreamHandle or stream.owner is not self:
                self._worker(stream)  # raises the error
            self._checked(stream, copy)
        if len(self._workers) == 1:
            sink = make_sink(len(chunks))
            claimed = self._enqueue([(stream, copy, sink, k) for k, (stream, copy) in enumerate(zip(streams, copies))], claim)
            return [(sink, range(len(chunks)))], claimed
        out, groups = [], []
        for worker in self._workers:
            places = [i for i, stream in enumerate(streams) if stream.worker == worker.index]
            if places:
                sink = make_sink(len(places))
                groups.append((worker, [(streams[i], copies[i], sink, k) for k, i in enumerate(places)]))
                out.append((sink, places))
        enqueue_all(self, groups)  # all workers' chunks, or none
        return out, False

    def _control(self, stream: StreamHandle, apply, what: str | None = None):
        """`apply(stream)` now, or queued behind the stream's chunks. A Ctrl-C is held while it writes (a
        state never half reset) and, once it is made or queued, says so (`what`: a call that changes state)."""
        worker = self._worker(stream)
        if stream.group is not None:  # a group's member: after its group's running call (stream_group.py)
            return stream.group.control(stream, apply, what)
        future, made = None, False
        try:
            with critical(), worker.cond:
                if not stream.open:
                    raise refusals.closed(stream.id, stream.why)
                stream.last_used = monotonic()
                if not stream.queue and not stream.in_flight:  # nothing before it: now, on this thread
                    result, made = apply(stream), True
                else:
                    self._not_on_a_worker("reset(), state() and set_state() of a stream with chunks waiting")
                    future = Future()
                    future.set_running_or_notify_cancel()
                    worker.enqueue(stream, Control(apply, future, monotonic()), False)
                    made = True
            return result if future is None else future.result()
        except KeyboardInterrupt as exc:
            if not made or what is None or exc.args:
                raise
            raise KeyboardInterrupt(control_went_on(what)) from None

    def _not_on_a_worker(self, what: str) -> None:
        if threading.current_thread() in self._threads or any(w.claimed == threading.get_ident() for w in self._workers):
            raise refusals.on_its_workers_thread(what)

    def _chunks(self, group: list, stacked: list | None = None) -> list[dict[str, np.ndarray]]:
        """Many streams' chunks, checked and copied: one copy per input for the whole group
        (``_stack``, or `stacked` it made) and each chunk a view of its row of that copy (nobody
        else holds it); else each one through ``_chunk``."""
        stacked = stacked if stacked is not None else self._stack(group)
        if stacked is None:
            return [self._chunk(inputs) for inputs in group]
        names = list(self._chunk_ports)
        if len(names) == 1:
            name = names[0]
            return [{name: row} for row in stacked[0]]
        return [dict(zip(names, row)) for row in zip(*stacked)]

    def _checked(self, stream, chunk: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`chunk` with its index inputs checked (``BatchedStep.check_indices``) before it may join
        a batch: a bad index is the feeding stream's ``UsageError``, and no other stream's call."""
        if self._index_limits:
            self._workers[0].step.check_indices(chunk, f"stream {getattr(stream, 'id', stream)}")
        return chunk

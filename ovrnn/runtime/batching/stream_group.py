"""``StreamBatcher.open_group``: n streams opened together and fed only together, one stacked batch.

    group = batcher.open_group(256)              # 256 member streams in slots start..start+255 of one worker
    y = group.feed({"X": x})["Y"]                # x: one chunk of each member stacked on X's batch axis (member k: row k)
    batcher.reset(group.streams[3])              # a member is a stream: state, set_state, reset, close
    group.reopen(3)                              # a closed member's row: a new stream, initial state
    group.close()                                # every member closed, the slots back

``feed_group`` takes any streams, so each call checks, marks and releases each of them, and
gathers and scatters their states by slot index. A group is registered once: its members' slots
are contiguous in the worker's state store, so a call copies each state's rows as one block
(``BatchedStep.run_range``), and what a call checks is the group's (open, no member closed), not
each stream's. It runs on the calling thread, taking turns with the worker's own batches on the
``BatchedStep``'s lock (the worker never touches a member's rows: a member is fed only through its
group, ``admit`` refuses it alone), so it waits for no thread hand-off and claims no worker.

The group's lock is held for a call: two calls on one group run one after the other, and a
member's ``reset``/``state``/``set_state`` (``StreamBatcher._control``), ``reopen`` and
``close()`` of the group wait for a running call (a state is never changed under it). A failed
call (an OpenVINO error, a Ctrl-C in its infer: ``interrupts.py``) writes no state.
"""

from __future__ import annotations

import threading
from time import monotonic

import numpy as np

from ...errors import OverloadedError, StreamClosedError, UsageError
from . import refusals
from .group import stacked_inputs
from .in_place import InPlace
from .interrupts import control_went_on, critical
from .worker import StreamHandle


class StreamGroup:
    """n streams of one worker fed together (see the module docstring); ``open_group`` makes it."""

    def __init__(self, batcher, worker, start: int, members: list[StreamHandle]) -> None:
        self.batcher, self.worker, self.start, self.n = batcher, worker, start, len(members)
        self._members = members
        self.lock = threading.Lock()
        self.open = True
        self.gone = 0  # members closed (Worker.close counts them)
        self.last_used = monotonic()  # a member is used when its group is fed (Worker._close_idle)
        spec = batcher.spec
        self._exact = {}  # input: (the stacked shape, dtype) a call gives
        for port in spec.inputs:  # the caller gives the chunk without its context
            shape = list(spec.chunk_shape(port.name))
            shape[port.batch_axis] = self.n
            self._exact[port.name] = (tuple(shape), port.dtype)
        step = worker.step
        self._pieces = [
            (min(step.largest, self.n - k), step.size_for(min(step.largest, self.n - k))) for k in range(0, self.n, step.largest)
        ]
        self._waits = [0.0] * self.n  # each chunk's queue wait: none
        self._in_place = None  # the group's own requests (in_place.py), made by open_group once the locks are released

    @property
    def streams(self) -> list[StreamHandle]:
        """The members, member k at row k of every stacked array (a closed one until ``reopen``)."""
        return list(self._members)

    def __len__(self) -> int:
        return self.n

    def feed(self, inputs: dict) -> dict[str, np.ndarray]:
        """One chunk of every member: {input: n chunks stacked on its batch axis, member k at
        row k}; returns {output: n rows stacked the same way}, new arrays the caller owns. The
        input is read before the call returns (the caller may refill it at once). A failed call
        raises and changes no member's state. ``StreamClosedError`` when the group or a member is
        closed (``reopen`` it)."""
        worker = self.worker
        stacked = inputs if self._is_exact(inputs) else stacked_inputs(self.batcher.spec, inputs, self.n, "group.feed()")
        if self.batcher._index_limits:  # a bad index refuses the call before it runs
            worker.step.check_indices(stacked, "group.feed()")
        with critical(), self.lock:  # a Ctrl-C held until OpenVINO's call, where the call fails atomically (interrupts.py)
            if self.gone or not self.open:
                raise self._closed_error()
            start = self.last_used = monotonic()
            error = None
            try:
                if self._in_place is not None:
                    outputs = self._in_place.run(worker.step, stacked)
                else:
                    outputs = worker.step.run_range(worker.store.slabs, self.start, self.n, stacked)
            except BaseException as exc:  # noqa: BLE001 - raised below (a Ctrl-C too), after the counts; no state was written
                error = exc
            end = self.last_used = monotonic()
            with worker.cond:
                r = worker.recorder
                for rows, size in self._pieces:
                    r.rows[rows] += 1
                    r.sizes[size] += 1
                r.computes.append(end - start)
                r.waits.extend(self._waits)
                if error is None:
                    r.chunks += self.n
                    span = slice(self.start, self.start + self.n)  # the lag's counts (Worker.ran), by slot range
                    first = worker.first[span]
                    np.copyto(first, start, where=first == np.inf)
                    worker.runs[span] += 1
                    worker.ended[span] = end
                else:
                    r.failed_batches += 1  # as feed_group: one failed group call
                    r.failed_chunks += self.n
            if error is not None:
                raise error
        return outputs

    def reopen(self, k: int, state: dict | None = None) -> StreamHandle:
        """Member k, closed, again: a new stream (a new id) in row k, at the initial state or the
        states `state` gives (as ``open()``). Returns it (also ``streams[k]``)."""
        b, worker = self.batcher, self.worker
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < self.n:
            raise UsageError(f"reopen(k): expected a member index from 0 to {self.n - 1}, got {k!r}")
        k = int(k)
        seeds = {name: worker.store.checked(name, value) for name, value in (state or {}).items()}
        with self.lock, b._lock, worker.cond:  # after a running call of the group
            if not self.open:
                raise self._closed_error()
            old = self._members[k]
            if old.open:
                raise UsageError(f"reopen({k}): member {k} (stream {old.id}) is open: reset it (batcher.reset), or close it first")
            if b._shut:
                raise StreamClosedError("the batcher is shut down: reopen() takes no new streams")
            if self._in_place is not None:
                self._in_place.settle()
            count = sum(len(w.streams) for w in b._workers)
            if count >= b.max_streams:
                worker.recorder.refused_streams += 1
                raise OverloadedError(
                    f"reopen({k}): {count} streams are open (max_streams={b.max_streams}); "
                    "close one, or make the batcher with a larger max_streams"
                )
            slot = self.start + k
            worker.store.reset(slot)
            for name, value in seeds.items():
                worker.store.write(slot, name, value)
            worker.new_stream(slot)
            stream = _member(b, worker, slot, self, next(b._ids))
            worker.streams[stream.id] = stream
            self._members[k] = stream
            self.gone -= 1
        return stream

    def close(self) -> None:
        """Close every member (after a running call of the group) and give the slots back to the
        worker. Closing twice is a no-op."""
        worker = self.worker
        with self.lock, worker.cond:
            if not self.open:
                return
            self.open = False
            for stream in self._members:
                worker.close(stream, "its group was closed")
            worker.store.free.extend(range(self.start + self.n - 1, self.start - 1, -1))  # pop() takes the lowest first

    def control(self, stream: StreamHandle, apply, what: str | None = None):
        """A member's reset/state/set_state (``StreamBatcher._control``, its Ctrl-C too): after a running call."""
        worker = self.worker
        with self.lock, worker.cond:
            if not stream.open:
                raise refusals.closed(stream.id, stream.why)
            stream.last_used = monotonic()
            if self._in_place is not None:
                self._in_place.settle()
            made = False
            try:
                with critical():  # a Ctrl-C held: a state never half written
                    result, made = apply(stream), True
            except KeyboardInterrupt as exc:
                if made and what is not None and not exc.args:
                    raise KeyboardInterrupt(control_went_on(what)) from None
                raise
            return result

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        slots = f"slots {self.start}-{self.start + self.n - 1}" if self.n > 1 else f"slot {self.start}"  # member ids change with reopen
        state = "closed" if not self.open else (f"{self.gone} of its members closed" if self.gone else "open")
        return f"<group of {self.n} ({slots}) on worker {self.worker.index}, {state}>"

    def alone_error(self, stream: StreamHandle) -> UsageError:
        """What a member fed alone (feed, feed_many, submit, feed_group, feed_async) gets."""
        return UsageError(
            f"stream {stream.id} is member {stream.slot - self.start} of a group (open_group): feed it with the group's feed(), not alone"
        )

    # -- helpers

    def _is_exact(self, inputs) -> bool:
        """The common call: {input: an array of exactly the stacked shape and dtype}, nothing else."""
        if type(inputs) is not dict or len(inputs) != len(self._exact):
            return False
        for name, (shape, dtype) in self._exact.items():
            value = inputs.get(name)
            if type(value) is not np.ndarray or value.shape != shape or value.dtype != dtype:
                return False
        return True

    def _closed_error(self) -> StreamClosedError:
        if not self.open:
            return StreamClosedError(f"the group is closed ({self!r}); open a new one with open_group()")
        k, member = next((k, s) for k, s in enumerate(self._members) if not s.open)
        return StreamClosedError(
            f"group.feed(): member {k} (stream {member.id}) is closed ({member.why}); reopen it with group.reopen({k}), or close the group"
        )


def _member(batcher, worker, slot: int, group: StreamGroup | None, sid: int) -> StreamHandle:
    stream = StreamHandle(sid, worker.index, slot, batcher, monotonic())
    stream.group = group
    return stream


def open_group(batcher, n, state: dict | None, worker: int | None) -> StreamGroup:
    """``StreamBatcher.open_group``: n member streams in n free slots in a row of one worker."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise UsageError(f"open_group(n): expected a whole number of streams of 1 or more, got {n!r}")
    n = int(n)
    workers, count = batcher._workers, len(batcher._workers)
    refusals.check_worker("open_group", worker, count)
    seeds = {name: workers[0].store.checked(name, value) for name, value in (state or {}).items()}
    group = None
    with batcher._lock:  # as open(): the stream count and the placement agree
        if batcher._shut:
            raise StreamClosedError("the batcher is shut down: open_group() takes no new streams")
        first = next(batcher._ids)
        order = [(first + k) % count for k in range(count)] if worker is None else [int(worker)]
        opened = sum(len(w.streams) for w in workers)
        for index in order if opened + n <= batcher.max_streams else ():
            place = workers[index]
            with place.cond:
                start = place.store.take_run(n)
                if start is None:
                    continue
                members = []
                for k in range(n):
                    slot = start + k
                    place.store.reset(slot)
                    for name, value in seeds.items():
                        place.store.write(slot, name, value)
                    place.new_stream(slot)
                    members.append(_member(batcher, place, slot, None, first if k == 0 else next(batcher._ids)))
                group = StreamGroup(batcher, place, start, members)
                for stream in members:
                    stream.group = group
                    place.streams[stream.id] = stream
                break
    if group is not None:
        with group.lock:  # its own two requests (in_place.py), made holding neither the batcher's nor the worker's lock
            group._in_place = InPlace.make(place.step, place.store.slabs, group.start, group.n)
        return group
    chosen = workers[order[0]]
    with chosen.cond:
        chosen.recorder.refused_streams += 1
    if opened + n > batcher.max_streams:
        raise OverloadedError(
            f"open_group({n}): {opened} streams are open (max_streams={batcher.max_streams}); "
            f"{n} more would pass it: close some, or make the batcher with a larger max_streams"
        )
    call, where = (
        (f"open_group({n}, worker={int(worker)})", f"worker {int(worker)} has no")
        if worker is not None
        else (f"open_group({n})", "no worker has")
    )
    raise OverloadedError(
        f"{call}: {where} {n} free slots in a row (each worker holds {chosen.store.capacity}: "
        f"max_streams={batcher.max_streams} over {count} workers); close streams, or open a smaller group"
    )

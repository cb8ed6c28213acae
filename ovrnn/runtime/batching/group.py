"""``StreamBatcher.feed_group``: one chunk of many streams given as ONE stacked array per input.

    out = batcher.feed_group(streams, {"x": x})     # x: len(streams) chunks stacked on x's batch axis
    out["y"]                                         # len(streams) rows stacked the same way

What a gateway that already holds many streams' chunks in one array (a Ray stateless request)
sends. The direct path, taken when every stream is distinct, on one worker, open, with nothing
waiting or running, and the worker idle (claimed for this thread as ``feed`` does):

    states  = slabs[:, slots]              gathered by slot index (one copy per state)
    outputs, new = step.run(inputs, states)   once, in calls of at most the largest size
    slabs[:, slots] = new                  scattered back only when every call succeeded

so a failed group leaves every stream's state as it was (all or nothing: stronger than
``feed_many``), and a chunk fed to one of its streams meanwhile waits behind it (the streams are
in flight). Otherwise the group is ``feed_many`` of its rows, with feed_many's guarantees.
The per-stream queues, waiters and result dicts are what this skips: ~4-5 µs a chunk.
"""

from __future__ import annotations

from time import monotonic

import numpy as np

from ...errors import UsageError
from .admit import fit
from .interrupts import critical
from .refusals import missing_input, not_an_input
from .step import rows, take, to_batch, to_rows
from .worker import StreamHandle, copy_error


def feed_group(batcher, streams: list, inputs: dict) -> dict[str, np.ndarray]:
    """See the module docstring and ``StreamBatcher.feed_group``."""
    streams = list(streams)
    n = len(streams)
    if not n:
        raise UsageError("feed_group(): expected at least one stream")
    batcher._worker(streams[0])  # the others are checked by take_idle (a stranger: feed_many's error)
    stacked = stacked_inputs(batcher.spec, inputs, n)
    worker = batcher._workers[streams[0].worker]
    if batcher._index_limits:  # a bad direct index refuses the group before any of it runs or queues
        worker.step.check_indices(stacked, "feed_group()")
    with critical():  # a Ctrl-C held until OpenVINO's call, where the group fails atomically (interrupts.py)
        with worker.cond:
            taken = take_idle(worker, streams, batcher)
            direct = taken is not None and worker.claim()
            if taken is not None and not direct:  # the worker is busy: the streams go back as they were
                for stream in streams:
                    stream.in_flight = False
        if direct:
            try:
                return run_taken(worker, streams, stacked, n, taken)
            finally:
                release(worker)
    return _fallback(batcher, streams, stacked, n)


def feed_rows(batcher, chunks: list, stacked: list, return_exceptions: bool) -> list | None:
    """``feed_many``'s direct path: `chunks` [(stream, inputs)] whose inputs ``_stack`` copied
    into `stacked` (one array per input, [n, *chunk shape]). Taken when ``feed_group``'s would be
    (every stream distinct, on one worker, open, nothing waiting or running, the worker idle):
    the group runs at once on this thread and each stream gets its rows as ``feed_many`` gives
    them; a failed group changes no state and every chunk gets the error. Else None: nothing
    was taken, and ``feed_many`` queues the chunks."""
    streams = [stream for stream, _ in chunks]
    first = streams[0]
    if type(first) is not StreamHandle or first.owner is not batcher:
        return None
    worker = batcher._workers[first.worker]
    with worker.cond:
        taken = take_idle(worker, streams, batcher)
        direct = taken is not None and worker.claim()
        if taken is not None and not direct:  # the worker is busy: the streams go back as they were
            for stream in streams:
                stream.in_flight = False
    if not direct:
        return None
    n = len(streams)
    inputs = {}
    try:
        for port, array in zip(batcher.spec.inputs, stacked):  # [n, ..., 1 at the batch axis, ...] -> n on the batch axis (a view)
            inputs[port.name] = to_batch(array, port.batch_axis)
    except BaseException:  # a Ctrl-C before the group ran: its streams and the worker back as they were
        with worker.cond:
            for stream in streams:
                stream.in_flight = False
        release(worker)
        raise
    try:
        try:
            outputs = run_taken(worker, streams, inputs, n, taken)
        finally:
            release(worker)
    except Exception as exc:  # the group failed as one: every chunk gets the error, as feed_many hands them over
        if not return_exceptions:
            raise
        return [copy_error(exc) for _ in range(n)]
    # each stream's rows: views of one new array per output, made by iterating the array in C
    names = [name for name, _ in worker._outputs]
    each = [list(to_rows(outputs[name], axis)) for name, axis in worker._outputs]
    if len(names) == 1:
        name = names[0]
        return [{name: r} for r in each[0]]
    return [dict(zip(names, rs)) for rs in zip(*each)]


def release(worker) -> None:
    """The worker back from this thread (see ``Worker.run_here``)."""
    with worker.cond:
        worker.claimed = 0
        worker.idle = not worker.heap
        if worker.heap or worker.controls or worker.outbox or worker.stopping:
            worker.cond.notify()


def take_idle(worker, streams: list, owner) -> list[int] | None:
    """(Lock held) Mark every stream in flight when each is `owner`'s, on `worker`, open, with
    nothing waiting or running, not a group's member, and listed once (a second listing finds it
    in flight), and return their slots; else mark none and return None."""
    index = worker.index
    slots: list[int] = []
    add = slots.append
    for s in streams:
        if (
            type(s) is not StreamHandle
            or s.owner is not owner
            or s.worker != index
            or not s.open
            or s.queue
            or s.in_flight
            or s.group is not None
        ):
            for t in streams[: len(slots)]:
                t.in_flight = False
            return None
        s.in_flight = True
        add(s.slot)
    return slots


def run_taken(worker, streams: list, stacked: dict, n: int, taken: list[int]) -> dict[str, np.ndarray]:
    step, store, spec = worker.step, worker.store, worker.step.spec
    start = monotonic()
    outputs, error = None, None
    try:
        slots = np.array(taken, np.intp)  # the streams' slots, as take_idle listed them
        if n <= step.largest:  # one call: gathered into the request's buffers, scattered from them on success
            outputs = step.run_slots(store.slabs, slots, stacked)
        else:  # several calls: every one must succeed before any state is written
            states = {name: np.take(store.slabs[name], slots, axis=spec.state_port(name).batch_axis) for name in spec.state_names}
            outputs, new = step.run(stacked, states)
            for name, value in new.items():
                slab = store.slabs[name]
                slab[take(slab, spec.state_port(name).batch_axis, slots)] = value
    except BaseException as exc:  # noqa: BLE001 - raised below (a Ctrl-C too), after the streams are released; no state was written
        error = exc
    end = monotonic()
    with worker.cond:
        later = []  # closed meanwhile, or fed meanwhile (first: the streams back; a Ctrl-C in the counts below loses counts, not streams)
        if worker.idle_timeout is None:  # one tight loop: most of the group's Python a stream (last_used is read for idle_timeout only)
            for s in streams:
                s.in_flight = False
                if s.queue or not s.open:
                    later.append(s)
        else:
            for s in streams:
                s.in_flight = False
                s.last_used = end
                if s.queue or not s.open:
                    later.append(s)
        for s in later:
            if not s.open:
                store.give_back(s.slot)
            elif s.queue:
                worker._ready(s)
        r = worker.recorder
        for first in range(0, n, step.largest):
            m = min(step.largest, n - first)
            r.rows[m] += 1
            r.sizes[step.size_for(m)] += 1
        r.computes.append(end - start)
        r.waits.extend([0.0] * n)
        if error is None:
            r.chunks += n
            worker.ran(slots, start, end)  # the lag's counts, by slot (vectorised)
        else:
            r.failed_batches += 1
            r.failed_chunks += n
    if error is not None:
        raise error
    return outputs


def _fallback(batcher, streams: list, stacked: dict, n: int) -> dict[str, np.ndarray]:
    """``feed_many`` of the group's rows, its results stacked again (new arrays)."""
    axes = {p.name: p.batch_axis for p in batcher.spec.inputs}
    chunks = [(s, {name: rows(value, axes[name], i, i + 1) for name, value in stacked.items()}) for i, s in enumerate(streams)]
    results = batcher.feed_many(chunks)
    return {p.name: np.concatenate([r[p.name] for r in results], p.batch_axis) for p in batcher.spec.outputs}


def stacked_inputs(spec, inputs: dict, n: int, who: str = "feed_group()") -> dict[str, np.ndarray]:
    """{input: n chunks stacked on its batch axis}, checked (names, shape, dtype); no copy when the
    caller's array is already exact (it is read before `who` returns)."""
    if not isinstance(inputs, dict):
        raise UsageError(f"{who}: expected {{input: n chunks stacked}}, got {type(inputs).__name__}")
    names = [p.name for p in spec.inputs]
    for name in inputs:
        if name not in names:
            raise not_an_input(spec, name, names)
    out = {}
    for port in spec.inputs:
        if port.name not in inputs:
            raise missing_input(port.name, names)
        array = np.asarray(inputs[port.name])
        shape = spec.chunk_shape(port.name)
        want = shape[: port.batch_axis] + (n,) + shape[port.batch_axis + 1 :]
        if array.shape != want:
            raise UsageError(
                f"input '{port.name}': {n} streams' chunks stacked on axis "
                f"{port.batch_axis} are shape {list(want)}, got {list(array.shape)}"
            )
        out[port.name] = fit(array, port.dtype, f"input '{port.name}'")  # no copy when exact; a value that would change refused
    return out

"""What a ``StreamBatcher`` checks before chunks may queue, so that a refused call queues nothing.

* ``fit``: a value cast to an input's dtype only when the cast keeps every value: 'same_kind'
  casting lets uint64 2**64-1 become int64 -1 (a valid index: the last row) and int64 2**40 become
  int32 0, silently; such a value is refused, named as it was given.
* ``admit``: (one worker's lock held) every stream of the call is this batcher's, on that worker,
  not a group's member (fed only through its group), open, and within ``max_pending``.
* ``enqueue_all``: chunks of several workers queued all or none: every worker's lock taken (in
  worker order, so two calls cannot wait for each other), every worker's chunks admitted, and only
  then any queued. Before, a refusal on one worker came after the other workers' chunks had been
  queued: they ran, their states moved, their results were dropped, and a caller retrying the
  refused call fed those streams the same chunk twice.
"""

from __future__ import annotations

from contextlib import ExitStack
from time import monotonic

import numpy as np

from ...errors import UsageError
from .refusals import closed, too_many_pending


def fit(value, dtype, what: str) -> np.ndarray:
    """`value` as an array of `dtype` (itself when it is one already). A cast must be 'same_kind' and
    keep every value: an integer outside `dtype`'s range, or a finite float that would become inf,
    is a ``UsageError`` naming the value given."""
    array = np.asarray(value)
    dtype = np.dtype(dtype)
    if array.dtype == dtype:
        return array
    if not np.can_cast(array.dtype, dtype, "same_kind"):
        raise UsageError(f"{what}: expected {dtype}, got {array.dtype}")
    if array.size and array.dtype.kind in "iu" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            bad = high if high > info.max else low
            at = np.argwhere(array == (array.max() if bad == high else array.min()))[0].tolist()
            raise UsageError(
                f"{what}: value {bad} at index {at} does not fit {dtype} (from {array.dtype}: {info.min} to {info.max}); "
                "a cast would change it"
            )
    out = array.astype(dtype)
    if array.size and array.dtype.kind == "f" and dtype.kind == "f":
        overflow = np.isinf(out) & np.isfinite(array)
        if overflow.any():
            at = np.argwhere(overflow)[0]
            raise UsageError(f"{what}: value {array[tuple(at)].item()!r} at index {at.tolist()} does not fit {dtype} (it would become inf)")
    return out


def admit(batcher, worker, items: list) -> None:
    """(`worker`'s lock held) Raise unless every (stream, chunk, sink, index) of `items` may queue on `worker`."""
    counts: dict[int, int] = {}
    limit, index = batcher.max_pending, worker.index
    for stream, _, _, _ in items:
        if stream.worker != index or stream.owner is not batcher:
            raise UsageError(f"expected streams of one worker of this batcher, got {stream!r}")
        if stream.group is not None:
            raise stream.group.alone_error(stream)
        if not stream.open:
            raise closed(stream.id, stream.why)
        count = counts[stream.id] = counts.get(stream.id, stream.pending) + 1
        if count > limit:
            worker.recorder.refused_pending += 1
            raise too_many_pending(stream.id, count, limit)


def enqueue_all(batcher, groups: list) -> None:
    """Queue [(worker, items)] on several workers: all of them, or none when any is refused."""
    groups = sorted(groups, key=lambda g: g[0].index)
    with ExitStack() as locks:
        for worker, _ in groups:
            locks.enter_context(worker.cond)
        for worker, items in groups:
            admit(batcher, worker, items)
        now = monotonic()
        for worker, items in groups:
            worker.enqueue_chunks(items, now)
            worker.wake()

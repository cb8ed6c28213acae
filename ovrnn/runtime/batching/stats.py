"""What a batcher's workers count: batch sizes, queue wait, compute time, refusals, lag."""

from __future__ import annotations

from collections import Counter, deque

import numpy as np

WINDOW = 20000  # the latest samples the percentiles are taken over


class Recorder:
    """One worker's counts (written under the worker's lock)."""

    def __init__(self) -> None:
        self.rows = Counter()  # real rows per batch -> batches
        self.sizes = Counter()  # compiled size run -> batches
        self.waits: deque[float] = deque(maxlen=WINDOW)  # seconds a chunk waited before its batch ran
        self.computes: deque[float] = deque(maxlen=WINDOW)  # seconds a batch took (gather, infer, scatter)
        self.chunks = 0
        self.failed_batches = 0
        self.failed_chunks = 0
        self.refused_pending = 0
        self.refused_streams = 0
        self.idle_closed = 0

    def copy(self, refusals: bool = True) -> Recorder:
        """A copy (taken under the worker's lock: a consistent view). Without `refusals` when they
        are counted elsewhere (a worker process's: its parent decides and counts them)."""
        c = Recorder()
        c.rows, c.sizes, c.waits, c.computes = self.rows.copy(), self.sizes.copy(), list(self.waits), list(self.computes)
        c.chunks, c.failed_batches, c.failed_chunks, c.idle_closed = self.chunks, self.failed_batches, self.failed_chunks, self.idle_closed
        if refusals:
            c.refused_pending, c.refused_streams = self.refused_pending, self.refused_streams
        return c


def percentiles(values) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    array = np.fromiter(values, float, len(values))
    return {
        "p50": float(np.percentile(array, 50)),
        "p99": float(np.percentile(array, 99)),
        "max": float(array.max()),
    }


def summary(
    recorders: list[Recorder],
    lags: dict[int, float] | None,
    chunk_seconds: float | None,
    open_streams: int,
    pending: int,
) -> dict:
    """The dict ``StreamBatcher.stats()`` returns (times in seconds)."""
    rows, sizes = Counter(), Counter()
    waits, computes = [], []
    for r in recorders:
        rows.update(r.rows)
        sizes.update(r.sizes)
        waits.extend(r.waits)
        computes.extend(r.computes)
    batches = sum(rows.values())
    out = {
        "streams": open_streams,
        "pending_chunks": pending,
        "chunks": sum(r.chunks for r in recorders),
        "batches": batches,
        "mean_rows": (sum(n * c for n, c in rows.items()) / batches) if batches else None,
        "batch_rows": dict(sorted(rows.items())),
        "batch_sizes": dict(sorted(sizes.items())),
        "queue_wait_s": percentiles(waits),
        "compute_s": percentiles(computes),
        "failed_batches": sum(r.failed_batches for r in recorders),
        "failed_chunks": sum(r.failed_chunks for r in recorders),
        "refused": {
            "max_pending": sum(r.refused_pending for r in recorders),
            "max_streams": sum(r.refused_streams for r in recorders),
        },
        "refusals": sum(r.refused_pending + r.refused_streams for r in recorders),
        "idle_closed": sum(r.idle_closed for r in recorders),
        "chunk_seconds": chunk_seconds,
    }
    if lags is not None:
        values = list(lags.values())
        out["lag_s"] = lags
        out["lag"] = percentiles(values) | {"behind": sum(v > chunk_seconds for v in values) if chunk_seconds else 0}
    return out


def collect(workers: list, chunk_seconds: float | None) -> dict:
    """``summary`` of `workers`' counts, each copied under its worker's lock (a consistent view of
    each worker; the workers one after the other)."""
    copies, lags, streams, pending = [], {} if chunk_seconds else None, 0, 0
    for worker in workers:
        with worker.cond:
            copies.append(worker.recorder.copy())
            streams += len(worker.streams)
            pending += sum(s.pending for s in worker.streams.values())
            if lags is not None:
                lags.update(worker.lags())
    return summary(copies, lags, chunk_seconds, streams, pending)

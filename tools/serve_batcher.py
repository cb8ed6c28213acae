"""tools/bench_serve.py's ovrnn sides: the StreamBatcher (worker threads; the play feeds it from this
thread) and BatchedStep alone (the compute and the state gather/scatter, no queue, no futures).

The StreamBatcher is given what a user gives it: the ONNX model, its state pairs, silero's 64-sample
context and frozen sr; default sizes (1, 8, 32, 128, 256) and max_wait_ms (2); one OpenVINO thread
per worker. max_pending is raised (a behind stream's chunks queue and show as latency instead of
being refused) and max_streams covers the largest N searched.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
from serve_events import CHUNK, CLOSE, OPEN, Counting, play_single

clock = time.perf_counter
cpu = time.thread_time
MAX_STREAMS = 16384
TICK = 0.0005  # s: the feeder's shortest sleep (a server's event loop wakes per arrival burst, it does not spin)


def stream_spec(model):
    from ovrnn.runtime.batching import StreamSpec

    shapes = {model.x: list(model.chunk)} if model.ctx else None
    return StreamSpec.of(
        str(model.path), model.pairs(), context={model.x: model.ctx} if model.ctx else None, shapes=shapes, frozen=dict(model.extra) or None
    )


class BatcherSide:
    """ovrnn.StreamBatcher with `workers` workers, fed the way a gateway feeds it: the streams of each
    worker by one thread (the serving thread itself with one worker; with two, one thread per worker,
    each opening its streams on its worker with ``open(worker=k)``), every chunk that has arrived (at
    most one a stream, 256 at most) in one blocking ``feed_many`` per wake-up: the loop onnxruntime by hand and
    BatchedStep by hand are played with (serve_events.play_single). With the worker idle, feed_many
    runs on the calling thread (its direct path, docs/batching.md). Each compiled request's infer is
    timed in CPU seconds (OpenVINO releases the GIL in it): what is left of the process's CPU time is
    Python and numpy, holding the GIL."""

    batched = True
    max_batch = (
        256  # chunks one wake-up hands over at most: the largest compiled size (a batch of the worker's own), as BatchedStep by hand
    )

    def __init__(self, model, workers: int = 1):
        import ovrnn

        self.m, self.workers = model, workers
        self.threaded = workers > 1
        spec = stream_spec(model)
        self.b = ovrnn.StreamBatcher(spec, workers=workers, max_streams=MAX_STREAMS, max_pending=1000, chunk_seconds=model.period)
        self.h: dict[int, object] = {}
        self.pool = model.pool.reshape(len(model.pool), *spec.chunk_shape(model.x))  # views: a chunk exactly as the batcher takes it
        self.infer_s = [0.0] * workers
        self.exited_wait = 0.0  # run-queue seconds of gateway threads that have ended
        for k, worker in enumerate(self.b._workers):  # instrumentation only: the same call, timed
            for bucket in worker.step._buckets.values():
                bucket.infer = _timed(bucket.infer, self.infer_s, k)

    def infer_seconds(self) -> float:
        return sum(self.infer_s)

    def resize(self, capacity: int) -> None:
        for handle in self.h.values():
            self.b.close(handle)
        self.h = {}

    def open(self, slot: int) -> None:
        if slot in self.h:
            self.b.close(self.h[slot])
        self.h[slot] = self.b.open(worker=slot % self.workers)

    def close(self, slot: int) -> None:
        self.b.close(self.h.pop(slot))

    def batch(self, slots, cids):
        """Every listed stream's chunk at once: one feed_many, a gateway's tick; [each stream's output]."""
        x, y, pool, h = self.m.x, self.m.y, self.pool, self.h
        return [r[y] for r in self.b.feed_many([(h[s], {x: pool[c]}) for s, c in zip(slots.tolist(), cids.tolist())])]

    def state_of(self, slot: int) -> dict:
        return self.b.state(self.h[slot])

    def play(self, ev: dict, duration: float, bound: float):
        """Several workers: slot s's streams live on worker s mod workers, and thread k plays the
        events of worker k's slots (serve_events.play_single, one shared clock)."""
        done = np.full(len(ev["t"]), np.nan)
        parts, threads = [], []
        start = clock() + 0.05
        for k in range(self.workers):
            index = np.nonzero(ev["slot"] % self.workers == k)[0]
            part = {key: value[index] for key, value in ev.items()}
            counted = Counting(self)
            parts.append((index, np.full(len(index), np.nan), counted))
            threads.append(
                threading.Thread(target=self._gateway, args=(counted, part, duration, bound, start, parts[-1][1]), name=f"gateway-{k}")
            )
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sizes = []
        for index, got, counted in parts:
            done[index] = got
            sizes += counted.sizes
        return done, sizes

    def _gateway(self, *args) -> None:
        """serve_events.play_single on this thread; its run-queue wait added to ``exited_wait`` (a
        thread that has ended is gone from /proc/self/task, where the trial reads the others')."""
        before = _waited()
        try:
            play_single(*args)
        finally:
            self.exited_wait += _waited() - before

    def shutdown(self) -> dict:
        stats = self.b.stats()
        self.b.shutdown()
        return {
            "batcher_stats": {
                k: stats.get(k) for k in ("batches", "mean_rows", "batch_sizes", "queue_wait_s", "compute_s", "refused", "failed_batches")
            }
        }


def _waited() -> float:
    """Seconds this thread has been runnable but waiting for a CPU (0 where Linux does not say)."""
    try:
        return int(open("/proc/thread-self/schedstat").read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _timed(infer, totals: list, k: int):
    """`infer`, its CPU time added to totals[k] (OpenVINO at one thread runs it on the calling
    thread: measured, thread CPU time == process CPU time across a call)."""

    def timed():
        t0 = cpu()
        try:
            return infer()
        finally:
            totals[k] += cpu() - t0

    return timed


class SubmitSide(BatcherSide):
    """The StreamBatcher fed without blocking: one feeder thread hands each wake-up's chunks over
    with submit_many (a Future per chunk, the worker threads run every batch), streams placed by
    open()'s default. The cost at a fixed N: submit_many of all N, then every result."""

    threaded = True

    def open(self, slot: int) -> None:
        if slot in self.h:
            self.b.close(self.h[slot])
        self.h[slot] = self.b.open()

    def batch(self, slots, cids):
        x, y, pool = self.m.x, self.m.y, self.pool
        futures = self.b.submit_many([(self.h[s], {x: pool[c]}) for s, c in zip(slots.tolist(), cids.tolist())])
        return [f.result()[y] for f in futures]

    def play(self, ev: dict, duration: float, bound: float):
        """Feed the schedule from this thread at its arrival times (opens, chunks by submit_many per
        wake-up, closes once the stream's last chunk is back); done times from each future's callback."""
        t, slot, kind, cid = ev["t"].tolist(), ev["slot"].tolist(), ev["kind"].tolist(), ev["cid"].tolist()
        n, x, pool = len(t), self.m.x, self.pool
        done = np.full(n, np.nan)
        last: dict[int, object] = {}  # slot -> its stream's last future
        deferred: list = []  # (handle, future): closes waiting for the stream's last result
        give_up = max(20 * bound, 0.5)
        before = self.b.stats()
        start = clock() + 0.02
        i = 0

        def mark(e):
            return lambda f: done.__setitem__(e, clock() - start)

        while i < n or deferred:
            now = clock() - start
            if deferred:
                deferred = [(h, f) for h, f in deferred if not (f.done() and self.b.close(h) is None)]
            if i >= n:
                if now > t[-1] + give_up:
                    break
                time.sleep(TICK)
                continue
            if t[i] > now:
                time.sleep(max(TICK, t[i] - now))
                continue
            batch, ids = [], []
            while i < n and t[i] <= now:
                k, s = kind[i], slot[i]
                if k == CHUNK:
                    batch.append((self.h[s], {x: pool[cid[i]]}))
                    ids.append(i)
                else:
                    if batch:
                        self._submit(batch, ids, slot, last, mark)
                        batch, ids = [], []
                    if k == OPEN:
                        self.h[s] = self.b.open()
                    elif k == CLOSE:
                        f = last.pop(s, None)
                        deferred.append((self.h.pop(s), f)) if f is not None and not f.done() else self.b.close(self.h.pop(s))
                i += 1
            if batch:
                self._submit(batch, ids, slot, last, mark)
            behind = [e for e in ids[:1] if now - t[e] > give_up]
            if behind:
                break
        for h, _ in deferred:
            self.b.close(h)
        after = self.b.stats()
        rows = {int(k): v - before["batch_rows"].get(k, 0) for k, v in after["batch_rows"].items()}
        sizes = [r for r, c in rows.items() for _ in range(c)]
        return done, sizes

    def _submit(self, batch, ids, slot, last, mark):
        futures = self.b.submit_many(batch)
        for e, f in zip(ids, futures):
            f.add_done_callback(mark(e))
            last[slot[e]] = f


class GroupSide(BatcherSide):
    """The cost at a fixed N through feed_group: the same per-stream chunk arrays as the other sides,
    stacked here (np.concatenate on the input's batch axis, in the timed call), one call, the
    stacked output back (the direct path when every stream is idle: no queue, no per-chunk result)."""

    def __init__(self, model, workers: int = 1):
        super().__init__(model, workers)
        self.axis = self.b.spec.input(model.x).batch_axis

    def batch(self, slots, cids):
        h, pool = self.h, self.pool
        stacked = np.concatenate([pool[c] for c in cids.tolist()], self.axis)
        return self.b.feed_group([h[s] for s in slots.tolist()], {self.m.x: stacked})[self.m.y]

    def shutdown(self) -> dict:
        return {"batcher_group_stats": super().shutdown()["batcher_stats"]}  # the feed_many side's stats stay its own


class OpenGroupSide(GroupSide):
    """The cost at a fixed N through open_group: the N streams opened once as one group (their slots
    contiguous), the same per-stream chunk arrays stacked here in the timed call, one group.feed (no
    per-stream work a call). A slot's open() resets its member: a new stream in that row."""

    def resize(self, capacity: int) -> None:
        if getattr(self, "group", None) is not None:
            self.group.close()
        self.group = self.b.open_group(capacity) if capacity else None
        self.h = dict(enumerate(self.group.streams)) if capacity else {}

    def open(self, slot: int) -> None:
        self.b.reset(self.h[slot])

    def close(self, slot: int) -> None:
        pass

    def batch(self, slots, cids):
        stacked = np.concatenate([self.pool[c] for c in cids.tolist()], self.axis)  # slots are 0..N-1: the group's rows in order
        return self.group.feed({self.m.x: stacked})[self.m.y]

    def shutdown(self) -> dict:
        return {"batcher_open_group_stats": BatcherSide.shutdown(self)["batcher_stats"]}


class StepSide:
    """BatchedStep.run_slots driven by the harness: gather by slot, one call, scatter (no queue)."""

    batched = True
    max_batch = 256

    def __init__(self, model):
        from ovrnn.runtime.batching import BatchedStep

        self.m = model
        self.spec = stream_spec(model)
        self.step = BatchedStep(self.spec, threads=1)
        self.pool = model.pool.reshape(len(model.pool), *self.spec.chunk_shape(model.x))
        self.resize(0)

    def resize(self, capacity: int) -> None:
        spec = self.spec
        self.slabs = {}
        for name in spec.state_names:
            port = spec.state_port(name)
            self.slabs[name] = np.zeros(port.at(capacity), port.dtype)
        self.initial = spec.initial_state()

    def open(self, slot: int) -> None:
        for name, slab in self.slabs.items():
            axis = self.spec.state_port(name).batch_axis
            slab[(slice(None),) * axis + (slot,)] = np.take(self.initial[name], 0, axis=axis)

    def close(self, slot: int) -> None:
        pass

    def batch(self, slots, cids):
        pool = self.pool
        return self.step.run_slots(self.slabs, np.asarray(slots), {self.m.x: [pool[c] for c in cids.tolist()]})[self.m.y]

    def state_of(self, slot: int) -> dict:
        out = {}
        for name, slab in self.slabs.items():
            axis = self.spec.state_port(name).batch_axis
            out[name] = np.take(slab, [slot], axis=axis).copy()
        return out


class ProcessSide(BatcherSide):
    """ovrnn.StreamBatcher(workers=2, processes=True): two worker processes, fed as batcher_w2 is fed
    (a gateway thread per worker, its streams opened with open(worker=k), feed_many per wake-up: one
    message to its worker process; while one thread waits for its worker, the other prepares its
    next call). The worker processes' CPU and run-queue seconds are read from /proc (they are not
    this process's)."""

    infer_seconds = None  # OpenVINO runs in the worker processes: their CPU is read from /proc

    def __init__(self, model, workers: int = 2):
        import ovrnn

        self.m, self.workers = model, workers
        self.threaded = workers > 1
        spec = stream_spec(model)
        self.b = ovrnn.StreamBatcher(
            spec, workers=workers, processes=True, max_streams=MAX_STREAMS, max_pending=1000, chunk_seconds=model.period
        )
        self.h: dict[int, object] = {}
        self.pool = model.pool.reshape(len(model.pool), *spec.chunk_shape(model.x))
        self.exited_wait = 0.0

    def child_seconds(self) -> tuple[float, float]:
        """(CPU seconds, run-queue seconds) the worker processes have used so far, summed."""
        cpu_s, wait_s = 0.0, 0.0
        tick = os.sysconf("SC_CLK_TCK")
        for pid in self.b.workers_pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                cpu_s += (int(fields[11]) + int(fields[12])) / tick
                for task in os.listdir(f"/proc/{pid}/task"):
                    wait_s += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[1]) / 1e9
            except (OSError, IndexError, ValueError):
                pass
        return cpu_s, wait_s

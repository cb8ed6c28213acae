"""The events of a served schedule: what tools/bench_serve.py plays on every side (serve_play.py's and
serve_batcher.py's). ``schedule`` makes them: (arrival time, slot, open | chunk | close, chunk id);
``play_single`` serves them on one thread as they arrive; ``Counting`` counts a batched side's batch sizes."""

from __future__ import annotations

import bisect
import time

import numpy as np

OPEN, CHUNK, CLOSE = 0, 1, 2
POOL = 97  # distinct chunks per model; a stream's chunk k is POOL entry (slot * 31 + k) % POOL
clock = time.perf_counter


def schedule(n: int, period: float, duration: float, jitter: float, life: float, seed: int) -> dict:
    """Events of n slots over `duration` s: each slot opens a stream at a random phase; a stream lives
    an exponential time (mean `life` s, at least one chunk), its chunk k arrives at open + (k+1)·period +
    U(0, jitter), it closes half a period after its last chunk, and the next stream opens in its slot
    after a gap of U(0, period)."""
    rng = np.random.default_rng(seed)
    ts, slots, kinds, cids = [], [], [], []
    for slot in range(n):
        t, k0 = rng.uniform(0, period), 0
        while t < duration:
            chunks = max(1, int(rng.exponential(life) / period))
            arrive = t + period * np.arange(1, chunks + 1) + rng.uniform(0, jitter, chunks)
            arrive = arrive[arrive < duration]
            ts += [t, *arrive.tolist()]
            kinds += [OPEN] + [CHUNK] * len(arrive)
            cids += [0] + ((slot * 31 + k0 + np.arange(len(arrive))) % POOL).tolist()
            slots += [slot] * (len(arrive) + 1)
            k0 += len(arrive)
            if len(arrive) == 0:
                break
            close = arrive[-1] + period / 2
            ts.append(close), kinds.append(CLOSE), cids.append(0), slots.append(slot)
            t = close + rng.uniform(0, period)
    order = np.argsort(np.array(ts), kind="stable")

    def pick(v, dt):
        return np.array(v, dt)[order]

    return {"t": pick(ts, np.float64), "slot": pick(slots, np.int64), "kind": pick(kinds, np.int8), "cid": pick(cids, np.int64)}


def play_single(side, ev: dict, duration: float, bound: float, start: float | None = None, done: np.ndarray | None = None) -> np.ndarray:
    """Serve the schedule on this thread: admit everything that has arrived, serve it (per stream:
    in arrival order; batched: one chunk per stream per call, every other event of a stream in that
    call waits for the next), repeat; sleep when nothing is pending. Returns each event's done time
    (NaN: never served); stops early when a chunk has waited 20 bounds (the trial has failed).
    `start` (clock time of t = 0) and `done` (filled in place): a gateway thread of several
    playing their parts of one schedule."""
    t, slot, kind, cid = ev["t"].tolist(), ev["slot"].tolist(), ev["kind"].tolist(), ev["cid"].tolist()
    tt = ev["t"]
    n = len(t)
    done = np.full(n, np.nan) if done is None else done
    pending: list[int] = []
    give_up = max(20 * bound, 0.5)
    i = 0
    start = clock() + 0.02 if start is None else start
    while True:
        now = clock() - start
        j = bisect.bisect_right(t, now, i)
        if j > i:
            pending.extend(range(i, j))
            i = j
        if not pending:
            if i >= n:
                break
            wait = t[i] - now
            if wait > 0.0003:
                time.sleep(wait - 0.0002)
            continue
        if now - t[pending[0]] > give_up:
            break
        if side.batched:
            used, take, keep = set(), [], []
            for e in pending:
                s = slot[e]
                if s in used or len(take) >= side.max_batch:
                    keep.append(e)
                    if s not in used:
                        used.add(s)  # later events of this stream wait behind it
                elif kind[e] == CHUNK:
                    take.append(e)
                    used.add(s)
                elif kind[e] == OPEN:
                    side.open(s)
                    done[e] = 0
                else:
                    side.close(s)
                    done[e] = 0
            if take:
                side.batch(np.array([slot[e] for e in take]), np.array([cid[e] for e in take]))
                finished = clock() - start
                done[take] = finished
            pending = keep
        else:
            for e in pending:
                k = kind[e]
                if k == CHUNK:
                    side.one(slot[e], cid[e])
                    done[e] = clock() - start
                elif k == OPEN:
                    side.open(slot[e])
                else:
                    side.close(slot[e])
            pending = []
    del tt
    return done


class Counting:
    """Wraps a batched side to count batch sizes."""

    def __init__(self, side):
        self.side, self.sizes = side, []
        self.batched, self.max_batch = True, side.max_batch
        self.open, self.close = side.open, side.close

    def batch(self, slots, cids):
        self.sizes.append(len(slots))
        return self.side.batch(slots, cids)

"""tools/bench_serve.py's child: the sides, the real-time play of N streams, the cost at a fixed N.

A child is pinned to its cores (bench_serve.child_main) before this module is imported. Every side
serves the same schedule of events: (arrival time, slot, open | chunk | close, chunk data). A slot
holds one stream at a time; its state lives at index `slot` of the side's state store.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import make_serve_models
import numpy as np
from serve_events import CHUNK, POOL, Counting, clock, play_single, schedule

NEVER = 1e12  # ms: the latency of a chunk never served
ORT_MAX_BATCH = 1024  # onnxruntime batched by hand: one call takes up to this many ready streams


class Model:
    """One model's spec (tools/make_serve_models.MODELS), its file and a pool of chunks."""

    def __init__(self, name: str, path: Path, model_dir: Path):
        self.name, self.path, self.dir = name, Path(path), Path(model_dir)
        m = make_serve_models.MODELS[name]
        self.x, self.chunk, self.xaxis, self.y, self.ctx = m["x"], tuple(m["chunk"]), m["xaxis"], m["y"], m["context"]
        self.period = m["period_ms"] / 1000
        self.states = {s: (o, tuple(shape), axis) for s, (o, shape, axis) in m["states"].items()}
        self.extra = {k: np.array(v, np.int64) for k, v in m["extra"].items()}
        self.sample = tuple(d for i, d in enumerate(self.chunk) if i != self.xaxis)  # one stream's x, batch axis dropped
        new = self.sample[:-1] + (self.sample[-1] - self.ctx,)
        rng = np.random.default_rng(7)
        self.pool = (rng.standard_normal((POOL, *new)) * (0.3 if name == "silero" else 1.0)).astype(np.float32)

    def pairs(self) -> str:
        return ",".join(f"{s}={o}" for s, (o, _, _) in self.states.items())

    def ir(self, batch, stateful: bool = False) -> Path:
        """ovrnn's stateless (or stateful) IR at a batch, converted for CPU, cached in the model dir."""
        import ovrnn

        path = self.dir / f"{self.name}_b{batch}{'_stateful' if stateful else ''}.xml"
        if not path.is_file():
            spec = make_serve_models.convert_spec(self.name, batch)
            ovrnn.convert_model(str(self.path), input=spec, device="CPU", **({"stateful": self.pairs()} if stateful else {})).save(path)
        return path

    def x_batch(self, n: int) -> np.ndarray:
        shape = list(self.chunk)
        shape[self.xaxis] = n
        return np.zeros(shape, np.float32)

    def slab(self, capacity: int) -> dict:
        out = {}
        for s, (_, shape, axis) in self.states.items():
            dims = list(shape)
            dims[axis] = capacity
            out[s] = np.zeros(dims, np.float32)
        return out


def ort_session(path: Path):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.log_severity_level = 3
    o.intra_op_num_threads = 1  # as LiveKit and pipecat configure it; one core per side
    o.inter_op_num_threads = 1
    o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])


# --------------------------------------------------------------------------- single-threaded sides


class PerStream:
    """A batch-1 call per stream and chunk: onnxruntime (one shared session, the state kept by the
    caller) or ovrnn.Stream (one stateful request per stream). Inputs are written into one
    preallocated batch-1 buffer; states and context are kept per stream."""

    batched = False

    def __init__(self, model: Model, kind: str):
        self.m, self.kind = model, kind
        self.x1 = model.x_batch(1)
        self.x1_rows = np.moveaxis(self.x1, model.xaxis, 0)  # [1, *sample]: the stream's row
        self.streams: list = []
        if kind == "ort_b1":
            self.session = ort_session(model.path)
            self.out_names = [model.y] + [o for o, _, _ in model.states.values()]
            self.state_names = list(model.states)
        else:
            import ovrnn

            self.proto = ovrnn.Stream(model.ir(1, stateful=True), threads=1)
        self.resize(0)

    def resize(self, capacity: int) -> None:
        m = self.m
        self.ctx = np.zeros((capacity, *m.sample[:-1], m.ctx), np.float32)
        if self.kind == "ort_b1":
            self.state = [{s: np.zeros(shape, np.float32) for s, (_, shape, _) in m.states.items()} for _ in range(capacity)]
        else:
            while len(self.streams) < capacity:
                self.streams.append(self.proto if not self.streams else self.proto.spawn())

    def open(self, slot: int) -> None:
        self.ctx[slot] = 0
        if self.kind == "ort_b1":
            for s in self.state[slot].values():
                s[...] = 0
        else:
            self.streams[slot].reset()

    def close(self, slot: int) -> None:
        pass

    def one(self, slot: int, cid: int):
        m, row = self.m, self.x1_rows[0]
        if m.ctx:
            row[..., : m.ctx] = self.ctx[slot]
            row[..., m.ctx :] = m.pool[cid]
            self.ctx[slot] = row[..., -m.ctx :]
        else:
            row[...] = m.pool[cid]
        if self.kind == "ort_b1":
            feeds = {m.x: self.x1, **self.state[slot], **m.extra}
            out = self.session.run(self.out_names, feeds)
            self.state[slot] = dict(zip(self.state_names, out[1:]))
            return out[0]
        return self.streams[slot].feed({m.x: self.x1})[m.y]

    def state_of(self, slot: int) -> dict:
        if self.kind == "ort_b1":
            return {s: v.copy() for s, v in self.state[slot].items()}
        st = self.streams[slot].state
        return {s: np.asarray(st[s]).copy() for s in self.m.states}


class OrtBatched:
    """onnxruntime, every ready stream (at most one chunk each) stacked into one call: x written in
    place into one preallocated buffer, states gathered from one slab per state and scattered back."""

    batched = True
    max_batch = ORT_MAX_BATCH

    def __init__(self, model: Model):
        self.m = model
        self.session = ort_session(model.path)
        self.out_names = [model.y] + [o for o, _, _ in model.states.values()]
        self.xbuf = model.x_batch(self.max_batch)
        self.x_rows = np.moveaxis(self.xbuf, model.xaxis, 0)
        self.resize(0)

    def resize(self, capacity: int) -> None:
        self.slab = self.m.slab(capacity)
        self.slab_rows = {s: np.moveaxis(v, self.m.states[s][2], 0) for s, v in self.slab.items()}  # views, stream first
        self.ctx = np.zeros((capacity, *self.m.sample[:-1], self.m.ctx), np.float32)

    def open(self, slot: int) -> None:
        for rows in self.slab_rows.values():
            rows[slot] = 0
        self.ctx[slot] = 0

    def close(self, slot: int) -> None:
        pass

    def batch(self, slots: np.ndarray, cids: np.ndarray):
        m, n = self.m, len(slots)
        rows = self.x_rows[:n]
        new = np.stack([m.pool[c] for c in cids.tolist()])  # chunks arrive one array per stream, as the other sides get them
        if m.ctx:
            rows[..., : m.ctx] = self.ctx[slots]
            rows[..., m.ctx :] = new
            self.ctx[slots] = rows[..., -m.ctx :]
        else:
            rows[...] = new
        x = self.xbuf[(slice(None),) * m.xaxis + (slice(0, n),)]
        feeds = {m.x: x, **{s: np.take(self.slab[s], slots, axis=m.states[s][2]) for s in m.states}, **m.extra}
        out = self.session.run(self.out_names, feeds)
        for s, new in zip(m.states, out[1:]):
            self.slab_rows[s][slots] = np.moveaxis(new, m.states[s][2], 0)
        return out[0]

    def state_of(self, slot: int) -> dict:
        return {s: np.expand_dims(rows[slot], self.m.states[s][2]).copy() for s, rows in self.slab_rows.items()}


# --------------------------------------------------------------------------- the latency of a play (the schedule: serve_events.py)


def latency_stats(ev: dict, done: np.ndarray, warm: float, duration: float, bound: float, batches: list | None = None) -> dict:
    chunk = (ev["kind"] == CHUNK) & (ev["t"] >= warm) & (ev["t"] < duration)
    lat = (done[chunk] - ev["t"][chunk]) * 1000
    served = float((~np.isnan(lat)).mean()) if len(lat) else 0.0
    lat = np.where(np.isnan(lat), NEVER, lat)  # a chunk never served: later than any bound

    def pct(q):
        v = float(np.percentile(lat, q, method="higher")) if len(lat) else NEVER
        return float("inf") if v >= NEVER else v

    p50, p99, worst = pct(50), pct(99), pct(100)
    out = {"chunks": int(chunk.sum()), "served": served, "p50_ms": p50, "p99_ms": p99, "max_ms": worst}
    out["ok"] = bool(p99 <= bound * 1000 and served == 1.0)
    if batches:
        out["mean_batch"] = float(np.mean(batches))
    return out


# --------------------------------------------------------------------------- sides by name


def make_side(name: str, model: Model, workers: int = 1):
    if name in ("ort_b1", "ov_stream"):
        return PerStream(model, name)
    if name == "ort_batched":
        return OrtBatched(model)
    if name in ("batcher", "batcher_w2"):
        import serve_batcher

        return serve_batcher.BatcherSide(model, 2 if name == "batcher_w2" else workers)
    if name in ("batcher_submit", "batcher_submit_w2"):
        import serve_batcher

        return serve_batcher.SubmitSide(model, 2 if name == "batcher_submit_w2" else workers)
    if name in ("batcher_p1", "batcher_p2"):
        import serve_batcher

        return serve_batcher.ProcessSide(model, 2 if name == "batcher_p2" else 1)
    if name == "batcher_group":
        import serve_batcher

        return serve_batcher.GroupSide(model, workers)
    if name == "batcher_open_group":
        import serve_batcher

        return serve_batcher.OpenGroupSide(model, workers)
    if name == "step":
        import serve_batcher

        return serve_batcher.StepSide(model)
    raise ValueError(name)


def trial(side, model: Model, n: int, duration: float, bound: float, seed: int, warm: float = 0.5) -> dict:
    """One real-time play of n streams; {ok, p50_ms, p99_ms, ...}."""
    ev = schedule(n, model.period, duration, jitter=min(0.005, model.period / 2), life=max(1.0, duration / 2), seed=seed)
    side.resize(n)
    counted = Counting(side) if side.batched and not getattr(side, "threaded", False) else side
    timed = getattr(side, "infer_seconds", None)  # the batcher sides time OpenVINO's infer (the GIL released)
    infer0 = timed() if timed else 0.0
    children = getattr(side, "child_seconds", None)  # worker processes: their CPU and run-queue seconds, read from /proc
    child0 = children() if children else (0.0, 0.0)
    cpu0, wall0, wait0, exited0 = time.process_time(), clock(), runqueue_wait(), getattr(side, "exited_wait", 0.0)
    if getattr(side, "threaded", False):
        done, sizes = side.play(ev, duration, bound)
    else:
        done = play_single(counted, ev, duration, bound)
        sizes = getattr(counted, "sizes", None)
    wall = clock() - wall0
    used = (
        time.process_time() - cpu0
    ) / wall  # cores this process used (below 1 per core: idle between arrivals, or others' jobs on its core)
    waited = (
        runqueue_wait() - wait0 + getattr(side, "exited_wait", 0.0) - exited0
    ) / wall  # threads of this process ready to run but waiting for a CPU (others' jobs), on average
    out = {
        "n": n,
        **latency_stats(ev, done, warm, duration, bound, sizes),
        "cores_used": round(used, 2),
        "runqueue_wait": round(waited, 2),
        "load": round(os.getloadavg()[0], 2),
    }
    if children:  # the serving process and its worker processes, each: cores used / waiting for a CPU
        child1 = children()
        used_c, waited_c = (child1[0] - child0[0]) / wall, (child1[1] - child0[1]) / wall
        out["parent_cores"], out["parent_runqueue_wait"] = out["cores_used"], out["runqueue_wait"]
        out["worker_cores"], out["worker_runqueue_wait"] = round(used_c, 2), round(waited_c, 2)
        out["cores_used"], out["runqueue_wait"] = round(used + used_c, 2), round(waited + waited_c, 2)
    if timed:  # cores in OpenVINO's infer, and the rest: Python and numpy, the GIL held (at most one core's worth)
        infer = (timed() - infer0) / wall
        out["infer_cores"], out["gil_cores"] = round(infer, 2), round(used - infer, 2)
    return out


def runqueue_wait() -> float:
    """Seconds this process's threads (the current ones) have spent runnable but not running, from
    /proc/self/task/*/schedstat (0 where Linux does not report it)."""
    total = 0
    for task in Path("/proc/self/task").glob("*"):
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def search(side, model: Model, hint_us: float, duration: float, bound: float, quick: bool, max_n: int = 16384) -> dict:
    """The largest N (to within 8%, 20% with --quick) whose play keeps p99 within the bound: start at
    60% of the load the measured per-chunk cost allows, grow ×1.5 while passing, then bisect."""
    full = model.period / (hint_us * 1e-6) if hint_us > 0 else 256
    n = int(min(max_n, max(8, 0.6 * full)))
    lo, hi, trials = 0, None, []
    for k in range(5 if quick else 8):
        r = trial(side, model, n, duration, bound, seed=1000 + k)
        trials.append(r)
        if r["ok"]:
            lo = n
        else:
            hi = n
        if hi is not None and lo and hi / lo <= (1.2 if quick else 1.08):
            break
        if hi is None:
            n = min(max_n, int(n * 1.5))
            if lo == max_n:
                break
        elif lo == 0:
            n = max(1, int(n / 1.5))
            if hi <= 1:
                break
        else:
            n = (lo + hi) // 2
    at = next((r for r in trials if r["n"] == lo), None)
    return {"streams": lo, "trials": trials, "at": at}


# --------------------------------------------------------------------------- the cost at a fixed N


def cost(model: Model, sides: list[str], n: int, quick: bool, timed: bool = True) -> dict:
    """µs per stream-chunk with all n streams ready each round; sides interleaved in passes; each side's
    outputs and final states from a fresh start (3 rounds) against onnxruntime per stream."""
    built = {}
    for s in sides:
        side = make_side(s, model)
        side.resize(n)
        for slot in range(n):
            side.open(slot)
        built[s] = side
    slots = np.arange(n)
    rounds = [(slots * 31 + r) % POOL for r in range(POOL)]

    def round_fn(side):
        if side.batched:
            return lambda r: side.batch(slots, rounds[r % POOL])
        return lambda r: [side.one(int(s), int(c)) for s, c in zip(slots, rounds[r % POOL])]

    # exactness: 3 rounds from the open state, outputs and states against onnxruntime per stream
    diffs, ref = {}, None
    order = (["ort_b1"] if "ort_b1" in built else []) + [s for s in built if s != "ort_b1"]
    for s in order:
        fn = round_fn(built[s])
        ys = [flat(fn(r)) for r in range(3)]  # a batched side's stacked output, or one array per stream
        st = [np.concatenate([built[s].state_of(slot)[k].reshape(-1) for slot in range(n)]) for k in model.states]
        if ref is None:
            ref = (ys, st)
            diffs[s] = 0.0
            continue
        diffs[s] = max(float(np.abs(a - b).max()) for a, b in [*zip(ys, ref[0]), *zip(st, ref[1])])
    # timing: calibrate a block per side, then interleaved passes
    block, passes = (0.15, 5) if quick else (0.3, 9)
    if not timed:
        block, passes = 0.0, 1
    fns, reps = {}, {}
    for s, side in built.items():
        fn, r, t0 = round_fn(side), 0, clock()
        while clock() - t0 < block / 3 or r < 2:
            fn(r)
            r += 1
        reps[s] = max(1, int(r * block / (clock() - t0)))
        fns[s] = fn
    per = {s: [] for s in built}
    cpu = {s: [] for s in built}  # the process's CPU time (every thread): what a side costs, whatever else runs on the VM
    for p in range(passes):
        for s, fn in fns.items():
            children = getattr(built[s], "child_seconds", None)  # a side's worker processes: their CPU counts too
            t0, c0 = clock(), time.process_time() + (children()[0] if children else 0.0)
            for r in range(reps[s]):
                fn(r + p)
            per[s].append((clock() - t0) / reps[s] / n * 1e6)
            cpu[s].append((time.process_time() + (children()[0] if children else 0.0) - c0) / reps[s] / n * 1e6)
    extra = {}
    for side in built.values():
        if hasattr(side, "shutdown"):
            extra.update(side.shutdown())
    return {
        "n": n,
        "per_chunk_us": {s: statistics.median(v) for s, v in per.items()},
        "spread_us": {s: [min(v), max(v)] for s, v in per.items()},
        "max_abs_diff": diffs,
        "passes": passes,
        "per_chunk_cpu_us": {s: statistics.median(v) for s, v in cpu.items()},
        "pass_ratios": {s: [a / b for a, b in zip(v, per["ort_batched"])] for s, v in per.items()} if "ort_batched" in per else {},
        **extra,
    }


def flat(y) -> np.ndarray:
    """Every stream's output of one round, in stream order, flattened (a copy)."""
    return np.concatenate([np.asarray(v).reshape(-1) for v in y]) if isinstance(y, list) else np.asarray(y).reshape(-1).copy()


def main(argv: list[str], cores: list[int]) -> dict:
    p = argparse.ArgumentParser()
    p.add_argument("--model")
    p.add_argument("--path", type=Path)
    p.add_argument("--model-dir", type=Path)
    p.add_argument("--task", choices=("cost", "streams", "ray"))
    p.add_argument("--sides", default="")
    p.add_argument("--side", default="")
    p.add_argument("--cost-n", type=int, default=256)
    p.add_argument("--hint-us", type=float, default=0.0)
    p.add_argument("--bound-ms", type=float, default=25.0)
    p.add_argument("--duration", type=float, default=4.0)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    if a.task == "ray":
        import serve_ray_cost

        return serve_ray_cost.measure(a.path, quick=a.quick)
    model = Model(a.model, a.path, a.model_dir)
    result = {"cores": cores}
    if a.task == "cost":
        result.update(cost(model, a.sides.split(","), a.cost_n, a.quick))
        return result
    workers = 2 if a.side.endswith(("_w2", "_p2")) else 1
    side = make_side(a.side, model, workers)
    found = search(side, model, a.hint_us, a.duration, a.bound_ms / 1000, a.quick)
    if hasattr(side, "shutdown"):
        found.update(side.shutdown())
    found["streams_per_core"] = round(found["streams"] / len(cores))
    result.update(found)
    return result

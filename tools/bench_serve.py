"""Serve N concurrent real-time recurrent streams on one core: streams per core at a p99 added-latency bound.

    python tools/bench_serve.py [--quick] [--models silero,lstm128,...] [--sides ...] [--bound-ms 25] [--out DIR]

Two measurements per model (models: tools/make_serve_models.py; silero VAD from the silero-vad wheel):

* cost: per stream-chunk µs at a fixed N (--cost-n, 256), every stream ready, sides interleaved pass
  by pass in ONE process pinned to one core; each side's outputs checked against onnxruntime per stream.
* streams per core: a real-time play of N streams (arrivals every chunk period, jittered; streams
  open and close: exponential lives, a new stream takes a closed one's place), N searched for the
  largest that keeps the p99 added latency (result time - chunk arrival time; a chunk never served
  counts as late) within the bound. One child process per side and model, pinned with
  os.sched_setaffinity before anything is imported: one core, or two for the two-worker batcher.

Sides, each single-threaded where it computes (onnxruntime intra = inter = 1, no spinning; OpenVINO
1 thread), each given the same preallocation care (state slabs, stacked inputs written in place):
  ort_b1       onnxruntime, one session, a batch-1 call per stream and chunk, the state kept by the caller
               (what LiveKit's and pipecat's silero plugins do)
  ort_batched  onnxruntime, all ready streams (at most one chunk each) stacked into one call by hand,
               states gathered from and scattered to one slab per state (what sherpa-onnx does)
  ov_stream    ovrnn.Stream per stream (a stateful IR at batch 1, one infer request per stream)
  step         ovrnn's BatchedStep driven by the serving thread like onnxruntime by hand (no queue, no
               worker thread): what OpenVINO batched costs without the batcher's plumbing
  batcher      ovrnn.StreamBatcher, 1 worker on 1 core, fed as a gateway feeds it: the serving thread
               hands every arrived chunk over in one blocking feed_many per wake-up (the same play loop
               as onnxruntime by hand); on an idle worker it runs on that thread (docs/batching.md)
  batcher_submit  the same batcher fed without blocking: one feeder thread, submit_many per wake-up
               (a Future per chunk), the worker thread runs the batches
  batcher_w2   ovrnn.StreamBatcher, 2 workers on 2 cores, a feeding thread per worker (its streams
               opened with open(worker=k)), feed_many (figure: streams ÷ the 1-worker figure)
  batcher_p2   ovrnn.StreamBatcher(workers=2, processes=True): 2 worker processes on 2 cores, fed as
               batcher_w2 (a thread per worker, feed_many: one message to its worker process); the serving
               and worker processes' cores used and run-queue waits reported apart (figure: ÷ the 1-worker figure)
  (cost only, with batcher_p2) batcher_p1: 1 worker process on the cost's one core: µs per stream-chunk of the
               serving process and its worker together; 2 x batcher ÷ batcher_p1 is what 2 cores can give at most
  (cost only, with batcher) batcher_group: feed_group, the same per-stream chunks stacked by the side
               in the timed call, one stacked result
  (cost only, with batcher) batcher_open_group: the N streams opened once as one group (open_group: slots
               contiguous, states bound in place), the same chunks stacked by the side, one group.feed a round
The batcher sides time OpenVINO's infer in CPU seconds: a trial reports the cores spent there and
the rest (Python and numpy, the GIL held), which bounds what threads of one process can add.

Every done-when figure of issue 31 in one run (< 10 min on the 2-core VM):
    python tools/bench_serve.py --quick --ray

Writes DIR/bench_serve.json and DIR/bench_serve.md (DIR defaults to bench_results/). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
SIDES = ("ort_b1", "ort_batched", "ov_stream", "step", "batcher", "batcher_submit", "batcher_w2", "batcher_p2")
MODEL_ORDER = ("silero", "lstm128", "lstm512", "nsnet", "rl_policy")
COST_N = 256
TARGETS = {  # figure: (target, ">=" or "<=", what)
    "silero_streams_per_core": (800, ">=", "silero VAD: batcher real-time streams per core at p99 added latency <= the bound"),
    "silero_cost_vs_ort_batched": (0.4, "<=", "silero VAD: batcher µs per stream-chunk ÷ onnxruntime batched by hand"),
    "lstm128_cost_vs_ort_batched": (
        1.0,
        "<=",
        "one-step LSTM H=128, 256 streams: batcher µs per stream-chunk ÷ onnxruntime batched by hand",
    ),
    "silero_group_cost_vs_ort_batched": (
        0.4,
        "<=",
        "silero VAD: batcher feed_group (chunks stacked by the caller) µs per stream-chunk ÷ onnxruntime batched by hand",
    ),
    "lstm128_group_cost_vs_ort_batched": (
        1.0,
        "<=",
        "one-step LSTM H=128, 256 streams: batcher feed_group µs per stream-chunk ÷ onnxruntime batched by hand",
    ),
    "silero_open_group_cost_vs_ort_batched": (
        0.4,
        "<=",
        "silero VAD: batcher open_group (a group registered once, fed stacked) µs per stream-chunk ÷ onnxruntime batched by hand",
    ),
    "lstm128_open_group_cost_vs_ort_batched": (
        1.0,
        "<=",
        "one-step LSTM H=128, 256 streams: batcher open_group µs per stream-chunk ÷ onnxruntime batched by hand",
    ),
    "two_workers_vs_one": (1.7, ">=", "silero VAD: streams served by 2 workers on 2 cores ÷ by 1 worker on 1 core"),
    "two_worker_processes_vs_one": (
        1.7,
        ">=",
        "silero VAD: streams served by 2 worker processes (processes=True) on 2 cores ÷ by 1 worker on 1 core",
    ),
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the parent


def child(args: list[str], cores: list[int], timeout: float) -> dict:
    """Run this file as a child pinned to `cores`; its last stdout line is its JSON result."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps({"cores": cores, "argv": args})]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    sys.stderr.write(proc.stderr)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": f"child exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else ''}"}
    return json.loads(lines[-1])


def pick_cores(count: int) -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-count:] if len(cpus) >= count else cpus


def run(
    models: list[str],
    sides: list[str],
    quick: bool,
    bound_ms: float,
    cost_n: int,
    duration: float,
    model_dir: Path,
    streams: bool = True,
    stream_models: tuple = (),
) -> dict:
    """Every model's cost; the streams-per-core search for each side of `stream_models` (all when empty)."""
    import make_serve_models

    paths = make_serve_models.build(model_dir)
    R = {"env": environment(), "bound_ms": bound_ms, "cost_n": cost_n, "duration_s": duration, "quick": quick, "models": {}}
    R["env"]["load_before"] = os.getloadavg()
    started = time.time()
    for name in models:
        if name not in paths:
            R["models"][name] = {"skipped": "the silero-vad wheel is not installed (pip install --no-deps silero-vad==6.2.3)"}
            continue
        common = [
            "--model",
            name,
            "--path",
            str(paths[name]),
            "--model-dir",
            str(model_dir),
            "--bound-ms",
            str(bound_ms),
            "--duration",
            str(duration),
        ] + (["--quick"] if quick else [])
        log(f"{name}: cost at N={cost_n}")
        cost_sides = [s for s in sides if s not in ("batcher_w2", "batcher_p2")]
        cost_sides += [s for s in ("batcher_submit", "batcher_group", "batcher_open_group") if "batcher" in sides and s not in cost_sides]
        cost_sides += ["batcher_p1"] if "batcher_p2" in sides else []  # the worker-process tax: 1 worker process on the same core
        cost = child(common + ["--task", "cost", "--cost-n", str(cost_n), "--sides", ",".join(cost_sides)], pick_cores(1), 1200)
        entry = {"cost": cost, "streams": {}}
        for side in sides if streams and (name in stream_models or not stream_models) else ():
            workers = 2 if side in ("batcher_w2", "batcher_p2") else 1
            per_chunk = cost.get("per_chunk_us") or {}
            hint = per_chunk.get(side) or per_chunk.get("batcher" if side.startswith("batcher") else side)
            log(f"{name}: streams per core, {side}")
            entry["streams"][side] = child(
                common + ["--task", "streams", "--side", side, "--hint-us", str(hint or 0)], pick_cores(workers), 1800
            )
        R["models"][name] = entry
    R["env"]["load_after"] = os.getloadavg()
    R["seconds"] = time.time() - started
    R["figures"] = figures(R)
    return R


def ray_cost(quick: bool) -> dict:
    """tools/serve_ray_cost.py in a child (a local Ray instance lives and dies with it)."""
    import make_serve_models

    silero = make_serve_models.silero_onnx()
    if silero is None:
        return {"skipped": "the silero-vad wheel is not installed"}
    log("Ray Serve: per-request cost")
    return child(["--task", "ray", "--path", str(silero)] + (["--quick"] if quick else []), sorted(os.sched_getaffinity(0)), 900)


def figures(R: dict) -> dict:
    out = {}
    sil, lstm = R["models"].get("silero", {}), R["models"].get("lstm128", {})

    def per_core(entry, side):
        s = entry.get("streams", {}).get(side, {})
        return s.get("streams_per_core")

    def cost(entry, side):
        return (entry.get("cost", {}).get("per_chunk_us") or {}).get(side)

    def cpu_ratio(entry, side):  # the same ratio in process CPU time (robust to other jobs on a shared VM)
        c = entry.get("cost", {}).get("per_chunk_cpu_us") or {}
        return c[side] / c["ort_batched"] if c.get(side) and c.get("ort_batched") else None

    if per_core(sil, "batcher") is not None:
        out["silero_streams_per_core"] = {"value": per_core(sil, "batcher"), "deployed": per_core(sil, "ort_b1")}
    for key, entry in (("silero_cost_vs_ort_batched", sil), ("lstm128_cost_vs_ort_batched", lstm)):
        if cost(entry, "batcher") and cost(entry, "ort_batched"):
            out[key] = {
                "value": cost(entry, "batcher") / cost(entry, "ort_batched"),
                "batcher_us": cost(entry, "batcher"),
                "ort_batched_us": cost(entry, "ort_batched"),
                "cpu_value": cpu_ratio(entry, "batcher"),
            }
    for key, entry, side in (
        ("silero_group_cost_vs_ort_batched", sil, "batcher_group"),
        ("lstm128_group_cost_vs_ort_batched", lstm, "batcher_group"),
        ("silero_open_group_cost_vs_ort_batched", sil, "batcher_open_group"),
        ("lstm128_open_group_cost_vs_ort_batched", lstm, "batcher_open_group"),
    ):
        if cost(entry, side) and cost(entry, "ort_batched"):
            out[key] = {
                "value": cost(entry, side) / cost(entry, "ort_batched"),
                f"{side}_us": cost(entry, side),
                "ort_batched_us": cost(entry, "ort_batched"),
                "pass_ratios": (entry.get("cost", {}).get("pass_ratios") or {}).get(side),
                "cpu_value": cpu_ratio(entry, side),
            }
    one, two = sil.get("streams", {}).get("batcher", {}).get("streams"), sil.get("streams", {}).get("batcher_w2", {}).get("streams")
    if one and two:
        at = lambda side: sil["streams"][side].get("at") or {}  # noqa: E731
        out["two_workers_vs_one"] = {
            "value": two / one,
            "one_worker": one,
            "two_workers": two,
            "cores_used": [at("batcher").get("cores_used"), at("batcher_w2").get("cores_used")],
            "gil_cores": [at("batcher").get("gil_cores"), at("batcher_w2").get("gil_cores")],
            "runqueue_wait": [at("batcher").get("runqueue_wait"), at("batcher_w2").get("runqueue_wait")],
        }
    procs = sil.get("streams", {}).get("batcher_p2", {})
    if one and procs.get("streams"):
        at = procs.get("at") or {}
        out["two_worker_processes_vs_one"] = {
            "value": procs["streams"] / one,
            "one_worker": one,
            "two_worker_processes": procs["streams"],
            "cores_used": at.get("cores_used"),
            "runqueue_wait": at.get("runqueue_wait"),
            "serving_process": [at.get("parent_cores"), at.get("parent_runqueue_wait")],
            "worker_processes": [at.get("worker_cores"), at.get("worker_runqueue_wait")],
        }
        if cost(sil, "batcher") and cost(sil, "batcher_p1"):  # what 2 cores could give at most: the CPU a chunk costs, each way
            out["two_worker_processes_vs_one"]["ceiling_from_cost"] = 2 * cost(sil, "batcher") / cost(sil, "batcher_p1")
            cpu = sil.get("cost", {}).get("per_chunk_cpu_us") or {}
            if cpu.get("batcher") and cpu.get("batcher_p1"):  # the same in CPU time (the serving and worker processes')
                out["two_worker_processes_vs_one"]["ceiling_from_cpu"] = 2 * cpu["batcher"] / cpu["batcher_p1"]
    for key, f in out.items():
        target, sense, _ = TARGETS[key]
        f["met"] = f["value"] >= target if sense == ">=" else f["value"] <= target
        # a cost ratio: met only in wall time AND in CPU time (a loaded VM's wall ratio alone can flatter)
        if f.get("cpu_value") is not None:
            f["met"] = f["met"] and f["cpu_value"] <= target
    return out


def environment() -> dict:
    import numpy
    import onnxruntime
    import openvino

    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "openvino": openvino.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu": _cpu_name(),
    }


def _cpu_name() -> str:
    try:
        return next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


LABELS = {
    "ort_b1": "onnxruntime batch 1 per stream (deployed)",
    "ort_batched": "onnxruntime batched by hand",
    "ov_stream": "ovrnn.Stream per stream",
    "batcher": "ovrnn.StreamBatcher, 1 worker, 1 core: feed_many from the serving thread",
    "batcher_submit": "ovrnn.StreamBatcher, 1 worker, 1 core: submit_many from a feeder thread (a Future per chunk)",
    "batcher_group": "ovrnn.StreamBatcher, cost through feed_group (the chunks stacked in the timed call)",
    "batcher_open_group": "ovrnn.StreamBatcher, cost through open_group: one group of the N streams (registered once, "
    "slots contiguous, states bound in place), group.feed of the chunks stacked in the timed call",
    "batcher_w2": "ovrnn.StreamBatcher, 2 workers, 2 cores: feed_many from a thread per worker",
    "batcher_p2": "ovrnn.StreamBatcher, 2 worker processes (processes=True), 2 cores: feed_many from a thread per worker",
    "batcher_p1": "ovrnn.StreamBatcher, 1 worker process (processes=True) on the same core: serving + worker cost",
    "step": "ovrnn BatchedStep by hand (serving thread, no queue)",
}


def render(R: dict) -> list[str]:
    env = R["env"]
    lines = [
        "## Serving many streams (tools/bench_serve.py)",
        "",
        (
            f"{env['date_utc']}, {env['cpu']} ({env['cpus']} CPUs), load average before "
            f"{fmt_load(env['load_before'])}, after {fmt_load(env.get('load_after'))}; "
            f"OpenVINO {env['openvino']}, onnxruntime {env['onnxruntime']}; p99 "
            f"added-latency bound {R['bound_ms']:g} ms, {R['duration_s']:g} s per trial"
        ),
    ]
    if R.get("figures"):
        lines += ["", "| figure | measured | target | |", "|---|---|---|---|"]
        for key, (target, sense, what) in TARGETS.items():
            f = R["figures"].get(key)
            if f:
                cpu = f" (CPU time: {f['cpu_value']:.3g})" if f.get("cpu_value") else ""
                lines.append(f"| {what} | **{f['value']:.3g}**{cpu} | {sense} {target} | {'met' if f['met'] else 'NOT met'} |")
                if "ceiling_from_cost" in f:  # the measured bound beside the measured figure
                    at_most = f"{f['ceiling_from_cost']:.3g}" + (
                        f" (CPU time: {f['ceiling_from_cpu']:.3g})" if f.get("ceiling_from_cpu") else ""
                    )
                    lines.append(f"| ... at most (2 x the 1-worker cost ÷ the 1-worker-process cost) | {at_most} | | |")
    lines += [
        "",
        (
            f"| model | side | µs per stream-chunk at N={R['cost_n']} (min-max) | max abs diff vs "
            f"onnxruntime per stream | streams at p99 ≤ {R['bound_ms']:g} ms | per core | p50 / p99 ms at that "
            "N | mean batch | cores used / waiting for a CPU (in OpenVINO + Python holding the GIL) |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in R["models"].items():
        if "skipped" in entry:
            lines.append(f"| {name} | skipped: {entry['skipped']} | | | | | | | |")
            continue
        cost = entry.get("cost", {})
        for side in SIDES:
            s = entry["streams"].get(side)
            c = (cost.get("per_chunk_us") or {}).get(side if side not in ("batcher_w2", "batcher_p2") else "")
            if s is None and c is None:
                continue
            spread = cost.get("spread_us", {}).get(side)
            ctext = f"{c:.1f} ({spread[0]:.1f}-{spread[1]:.1f})" if c and spread else (f"{c:.1f}" if c else "")
            diff = cost.get("max_abs_diff", {}).get(side)
            s = s or {}
            if "error" in s:
                lines.append(f"| {name} | {LABELS[side]} | {ctext} | {fmt_diff(diff)} | error: {s['error']} | | | | |")
                continue
            at = s.get("at") or {}
            lines.append(
                f"| {name} | {LABELS[side]} | {ctext} | {fmt_diff(diff)} | {s.get('streams', '')} | {s.get('streams_per_core', '')} | "
                f"{fmt_ms(at.get('p50_ms'))} / {fmt_ms(at.get('p99_ms'))} | {fmt_ms(at.get('mean_batch'))} "
                f"| {at.get('cores_used', '')} / {at.get('runqueue_wait', '')}"
                + (f" ({at['infer_cores']} + {at['gil_cores']})" if "gil_cores" in at else "")
                + (
                    f" (serving {at.get('parent_cores')} / {at.get('parent_runqueue_wait')}, "
                    f"workers {at.get('worker_cores')} / {at.get('worker_runqueue_wait')})"
                    if "worker_cores" in at
                    else ""
                )
                + " |"
            )
        for extra in ("batcher_group", "batcher_open_group", "batcher_p1"):  # cost-only sides
            if cost.get("per_chunk_us", {}).get(extra):
                lines.append(
                    f"| {name} | {LABELS[extra]} | {cost['per_chunk_us'][extra]:.1f} "
                    f"| {fmt_diff(cost.get('max_abs_diff', {}).get(extra))} | | | | | |"
                )
        if "error" in cost:
            lines.append(f"| {name} | cost | error: {cost['error']} | | | | | | |")
    if R.get("ray"):
        import serve_ray_cost

        ray = R["ray"]
        lines += (
            ["", f"Ray Serve: {ray.get('skipped') or 'error: ' + ray['error']}"]
            if ("skipped" in ray or "error" in ray)
            else serve_ray_cost.render(ray)
        )
    return lines


def fmt_load(load) -> str:
    return "?" if not load else " ".join(f"{x:.2f}" for x in load)


def fmt_ms(v) -> str:
    return "" if v is None else f"{v:.1f}"


def fmt_diff(v) -> str:
    return "" if v is None else f"{v:.1e}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "bench_results")
    p.add_argument(
        "--quick",
        action="store_true",
        help="every done-when figure of issue 31 in one run: silero VAD (cost and "
        "streams per core) and the LSTM H=128 (cost), short trials, a coarse search",
    )
    p.add_argument("--stream-models", default=None, help="models whose streams per core are searched (default: all; silero with --quick)")
    p.add_argument("--models", default=None, help=f"comma-separated, of {','.join(MODEL_ORDER)}")
    p.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, of {','.join(SIDES)}")
    p.add_argument("--bound-ms", type=float, default=25.0, help="p99 added latency a side must keep (ms)")
    p.add_argument("--cost-n", type=int, default=COST_N, help="streams for the per stream-chunk cost")
    p.add_argument("--duration", type=float, default=None, help="seconds of real-time play per trial (default 4, 2 with --quick)")
    p.add_argument(
        "--ray",
        action="store_true",
        help="also the per-request cost on Ray Serve against the in-process step (tools/serve_ray_cost.py; starts a local Ray)",
    )
    p.add_argument("--no-streams", action="store_true", help="skip the streams-per-core search (costs and --ray only)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child_main(json.loads(args.child))
    models = args.models.split(",") if args.models else (["silero", "lstm128"] if args.quick else list(MODEL_ORDER))
    sides = args.sides.split(",")
    bad = [m for m in models if m not in MODEL_ORDER] + [s for s in sides if s not in SIDES]
    if bad:
        print(f"error: unknown model or side: {', '.join(bad)}", file=sys.stderr)
        return 2
    duration = args.duration or (2.0 if args.quick else 4.0)
    with tempfile.TemporaryDirectory(prefix="bench_serve_") as tmp:
        stream_models = tuple(args.stream_models.split(",")) if args.stream_models else (("silero",) if args.quick else ())
        R = run(
            models,
            sides,
            args.quick,
            args.bound_ms,
            args.cost_n,
            duration,
            Path(tmp),
            streams=not args.no_streams,
            stream_models=stream_models,
        )
    if args.ray:
        R["ray"] = ray_cost(args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_serve.json").write_text(json.dumps(R, indent=1, default=str))
    text = "\n".join(render(R)) + "\n"
    (args.out / "bench_serve.md").write_text(text)
    print(text)
    return 0


def child_main(spec: dict) -> int:
    os.sched_setaffinity(0, spec["cores"])  # before numpy, onnxruntime or OpenVINO start a thread
    sys.path.insert(0, str(HERE))
    import serve_play

    result = serve_play.main(spec["argv"], spec["cores"])
    print(json.dumps(result, default=float))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())

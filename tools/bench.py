"""Benchmark ovrnn against OpenVINO's own ONNX import and onnxruntime, side by side, in one run.

    python tools/bench.py [--out DIR] [--quick] [--no-scale]

Every OpenVINO compile (ours and OpenVINO's own import) is on CPU with
{"INFERENCE_PRECISION_HINT": "f32"}. Sections (each with its ratio target, PASS/MISS):

 1. convert time, whole processes: `ovrnn convert` vs `ov.save_model(ov.convert_model(...))`
 2. .bin size / ONNX weight bytes
 3. layer counts: per step per direction, and the non-RNNCell layers as T grows
 4. compile time: ours vs OpenVINO's import; model cache cold/warm; chunk=64 vs chunk=0
 5. inference latency over a grid: ours, OpenVINO native, onnxruntime (outputs cross-checked)
 6. batch-1 investigation: where OpenVINO's per-call cost goes
 7. GFLOP/s against a stated nominal peak
 8. scale: T=10000 convert (wall time, peak memory, sizes) and compile

Outputs in DIR (default: bench_results/ at the repository root): bench.md, bench.json, bench.png.
Models are written with onnx.helper (ir_version 8, opset 14) into a temporary folder; inputs and
weights are seeded. Everything runs sequentially (compiles in fresh child processes, so one
compile's memory and the freeing of a big model never land in another's timer).
This is a measurement tool, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import inspect as _inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ovrnn  # noqa: E402

F32 = {"INFERENCE_PRECISION_HINT": "f32"}
OPSET = 14
IR_VERSION = 8
HUGE_STEPS = 10**9  # --max-steps / max_steps value when the installed ovrnn has that limit
TARGETS = {
    "convert_ratio": 1.0,
    "bin_ratio": 1.02,
    "compile_ratio_T256": 2.0,
    "latency_ours_over_native": 1.0,
    "latency_ours_over_ort_b16": 0.6,
    "latency_ours_over_ort_b1": 1.0,
}

_START = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _START:7.1f}s] {msg}", flush=True)


def median(xs):
    return float(statistics.median(xs)) if xs else float("nan")


def verdict(value, target) -> str:
    if value is None or value != value:  # None or NaN
        return "n/a"
    return "PASS" if value <= target else "MISS"


# --- models -------------------------------------------------------------------------------------


def make_rnn(path: Path, T: int, hidden: int, input_size: int, direction: str = "bidirectional", batch: int | None = None, seqlens: bool = False, seed: int = 0) -> dict:
    """A lone ONNX RNN node (tanh), W/R/B as initializers. batch None = dynamic ('batch')."""
    D = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng([seed, T, hidden, input_size, D])
    k = 1.0 / np.sqrt(hidden)  # PyTorch's nn.RNN init range
    W = rng.uniform(-k, k, (D, hidden, input_size)).astype(np.float32)
    R = rng.uniform(-k, k, (D, hidden, hidden)).astype(np.float32)
    B = rng.uniform(-k, k, (D, 2 * hidden)).astype(np.float32)
    b = batch if batch else "batch"
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, b, input_size])]
    node_inputs = ["X", "W", "R", "B"]
    if seqlens:
        inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [b]))
        node_inputs.append("sequence_lens")
    node = helper.make_node("RNN", node_inputs, ["Y", "Y_h"], name="rnn", hidden_size=hidden, direction=direction)
    outputs = [
        helper.make_tensor_value_info("Y", TensorProto.FLOAT, [T, D, b, hidden]),
        helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [D, b, hidden]),
    ]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B")]
    graph = helper.make_graph([node], f"rnn_T{T}_H{hidden}_{direction}", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ovrnn-bench")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return {"path": str(path), "T": T, "hidden": hidden, "input": input_size, "D": D, "batch": batch, "seqlens": seqlens, "weight_bytes": int(W.nbytes + R.nbytes + B.nbytes)}


def model_inputs(T: int, batch: int, input_size: int, D: int) -> np.ndarray:
    return np.random.default_rng([1, T, batch, input_size, D]).standard_normal((T, batch, input_size)).astype(np.float32)


# --- ovrnn entry points that other developers may be changing -----------------------------------


def _limit_kwargs(fn) -> dict:
    params = _inspect.signature(fn).parameters
    return {"max_steps": HUGE_STEPS} if "max_steps" in params else {}


def ovrnn_convert(path) -> "ovrnn.IR":
    return ovrnn.convert_model(str(path), **_limit_kwargs(ovrnn.convert_model))


def ovrnn_convert_chunk(path, chunk: int):
    """An IR lowered with a given chunk; (ir, how) or (None, why not)."""
    if "chunk" in _inspect.signature(ovrnn.convert_model).parameters:
        return ovrnn.convert_model(str(path), chunk=chunk, **_limit_kwargs(ovrnn.convert_model)), "ovrnn.convert_model(chunk=...)"
    from ovrnn.lower.rnn import LoweringOptions

    if "chunk" not in getattr(LoweringOptions, "__dataclass_fields__", {}):
        return None, "LoweringOptions has no 'chunk' field"
    from ovrnn.convert import _convert_rnn_graph
    from ovrnn.onnx.read import graph_view, load_model

    ir = _convert_rnn_graph(graph_view(load_model(str(path))), LoweringOptions(chunk=chunk), 11, **_limit_kwargs(_convert_rnn_graph))
    return ir, "ovrnn.convert._convert_rnn_graph(view, LoweringOptions(chunk=...), 11) (convert_model has no chunk parameter)"


_CLI_HELP: str | None = None


def cli_limit_args() -> list[str]:
    global _CLI_HELP
    if _CLI_HELP is None:
        _CLI_HELP = subprocess.run([sys.executable, "-m", "ovrnn", "convert", "--help"], capture_output=True, text=True).stdout
    return ["--max-steps", str(HUGE_STEPS)] if "--max-steps" in _CLI_HELP else []


# --- child processes ----------------------------------------------------------------------------

CHILD_COMPILE = textwrap.dedent(
    """
    import json, resource, sys, time
    a = json.loads(sys.argv[1])
    import openvino as ov
    f32 = {"INFERENCE_PRECISION_HINT": "f32"}
    # Outside the timer: load the ONNX and IR frontends and the CPU plugin (kept loaded by warm).
    warm = ov.Core()
    warm.compile_model(ov.convert_model(a["warm_onnx"]), "CPU", f32)
    warm.compile_model(warm.read_model(a["warm_xml"]), "CPU", f32)
    core = ov.Core()  # a fresh Core for the measurement
    cfg = dict(f32, **a.get("extra", {}))
    t0 = time.perf_counter()
    if a["kind"] == "ours":
        model = core.read_model(a["path"])
    elif a["kind"] == "native":
        model = ov.convert_model(a["path"])
    else:  # "file": compile_model straight from the path (the form CACHE_DIR can skip reading)
        model = a["path"]
    t1 = time.perf_counter()
    compiled = core.compile_model(model, "CPU", cfg)
    t2 = time.perf_counter()
    p = compiled.get_property("INFERENCE_PRECISION_HINT")
    print("BENCH_RESULT " + json.dumps({"load_s": t1 - t0, "compile_s": t2 - t1, "total_s": t2 - t0,
        "precision": p.get_type_name() if hasattr(p, "get_type_name") else str(p),
        "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}), flush=True)
    """
)

CHILD_MEASURE_CMD = textwrap.dedent(
    """
    import json, resource, subprocess, sys, time
    t = time.perf_counter()
    r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    wall = time.perf_counter() - t
    print("BENCH_RESULT " + json.dumps({"wall_s": wall, "returncode": r.returncode, "stderr": r.stderr[-2000:],
        "maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}), flush=True)
    """
)

NATIVE_CONVERT = "import sys, openvino as ov; ov.save_model(ov.convert_model(sys.argv[1]), sys.argv[2], compress_to_fp16=False)"


def run_child(args: list[str], label: str, heartbeat: float = 15.0) -> dict:
    """Run a child that prints 'BENCH_RESULT {json}'; print a progress line every `heartbeat` s."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while True:
        try:
            out, err = proc.communicate(timeout=heartbeat)
            break
        except subprocess.TimeoutExpired:
            log(f"  ... {label}: {time.perf_counter() - start:.0f} s")
    for line in out.splitlines():
        if line.startswith("BENCH_RESULT "):
            return json.loads(line[len("BENCH_RESULT "):])
    raise RuntimeError(f"{label}: child failed (exit {proc.returncode}): {err.strip()[-2000:]}")


class Ctx:
    def __init__(self, tmp: Path, quick: bool) -> None:
        self.tmp = tmp
        self.quick = quick
        self.n = 0
        warm = make_rnn(tmp / "warm.onnx", 2, 4, 4, "forward", 1)
        ovrnn_convert(warm["path"]).save(str(tmp / "warm.xml"))
        self.warm_onnx, self.warm_xml = warm["path"], str(tmp / "warm.xml")

    def file(self, name: str) -> Path:
        self.n += 1
        return self.tmp / f"{self.n:03d}_{name}"

    def compile_child(self, kind: str, path, label: str, extra: dict | None = None) -> dict:
        payload = {"kind": kind, "path": str(path), "warm_onnx": self.warm_onnx, "warm_xml": self.warm_xml, "extra": extra or {}}
        result = run_child([sys.executable, "-c", CHILD_COMPILE, json.dumps(payload)], label)
        if result["precision"] != "f32":
            raise RuntimeError(f"{label}: compiled at {result['precision']}, not f32")
        return result


# --- timing -------------------------------------------------------------------------------------


def time_calls(fns: dict, min_runs: int, min_time: float, rounds: int = 3) -> dict:
    """Interleave the contenders in `rounds` rounds; each gets >= min_runs calls and >= min_time s
    in total (after a warm-up each round). Median, p10, p90 over all timed calls, in seconds."""
    samples = {k: [] for k in fns}
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, fn in fns.items():
                t_end = time.perf_counter() + 0.03
                for _ in range(3):
                    fn()
                while time.perf_counter() < t_end:
                    fn()
                got, spent = samples[name], 0.0
                need_runs, need_time = -(-min_runs // rounds), min_time / rounds
                n = 0
                while n < need_runs or spent < need_time:
                    t = time.perf_counter()
                    fn()
                    dt = time.perf_counter() - t
                    got.append(dt)
                    spent += dt
                    n += 1
    finally:
        gc.enable()
    out = {}
    for name, xs in samples.items():
        q = np.percentile(xs, [10, 90])
        out[name] = {"median_s": median(xs), "p10_s": float(q[0]), "p90_s": float(q[1]), "runs": len(xs)}
    return out


def runtime_types(compiled) -> dict:
    return dict(Counter(op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ordered_ops()))


# --- machine ------------------------------------------------------------------------------------


def machine_info() -> dict:
    info = {"python": platform.python_version(), "platform": platform.platform(), "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds")}
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    fields = {}
    for line in cpuinfo.splitlines():
        if ":" in line:
            k, v = (s.strip() for s in line.split(":", 1))
            fields.setdefault(k, v)
    flags = set(fields.get("flags", "").split())
    info["cpu_model"] = fields.get("model name", platform.processor())
    info["cpu_family_model"] = f"{fields.get('cpu family', '?')}/{fields.get('model', '?')}"
    info["logical_cpus"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info["cpu_mhz"] = float(fields.get("cpu MHz", "nan"))
    if "avx512f" in flags:
        fpc, why = 64, "avx512f: 2 FMA units x 16 f32 lanes x 2 FLOP"
    elif "avx2" in flags and "fma" in flags:
        fpc, why = 32, "avx2+fma: 2 FMA units x 8 f32 lanes x 2 FLOP"
    elif "avx" in flags:
        fpc, why = 16, "avx: 8-lane add + 8-lane mul"
    else:
        fpc, why = 8, "sse: 4-lane add + 4-lane mul"
    info["flop_per_cycle_per_core"] = fpc
    info["flop_per_cycle_basis"] = why
    info["peak_gflops"] = info["logical_cpus"] * info["cpu_mhz"] / 1000.0 * fpc
    info["simd_flags"] = sorted(flags & {"avx512f", "avx512_bf16", "avx2", "fma", "avx"})
    import onnxruntime
    import openvino

    info["versions"] = {
        "ovrnn": ovrnn.__version__,
        "openvino": openvino.get_version(),
        "onnxruntime": onnxruntime.__version__,
        "onnx": onnx.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "ovrnn", "ir_templates"], capture_output=True, text=True).stdout.strip()
        info["ovrnn_git"] = head + (" + uncommitted changes under ovrnn/ or ir_templates/" if dirty else "")
    except OSError:
        info["ovrnn_git"] = "unknown"
    return info


# --- sections -----------------------------------------------------------------------------------


def s1_convert(ctx: Ctx, R: dict) -> None:
    runs = 2 if ctx.quick else 5
    log(f"1. convert time: T=1000 (and T=64) bidirectional hidden 64, {runs} interleaved runs each (+1 untimed warm-up each)")
    per_T = {}
    for T in (1000, 64):
        m = make_rnn(ctx.file(f"convert_T{T}.onnx"), T, 64, 64, "bidirectional")
        ours_cmd = [sys.executable, "-m", "ovrnn", "convert", m["path"], "-o", str(ctx.file(f"conv_ours_T{T}.xml"))]
        nat_cmd = [sys.executable, "-c", NATIVE_CONVERT, m["path"], str(ctx.file(f"conv_native_T{T}.xml"))]
        times = {"ours": [], "native": []}
        for i in range(runs + 1):
            for name, cmd in (("ours", ours_cmd), ("native", nat_cmd)):
                t = time.perf_counter()
                r = subprocess.run(cmd, capture_output=True, text=True)
                dt = time.perf_counter() - t
                if r.returncode:
                    raise RuntimeError(f"{name} convert failed: {r.stderr.strip()}")
                if i:
                    times[name].append(dt)
            if i and T == 1000:
                log(f"  T={T} run {i}: ours {times['ours'][-1]:.3f} s, OpenVINO {times['native'][-1]:.3f} s")
        o, n = median(times["ours"]), median(times["native"])
        per_T[T] = {"model": {k: m[k] for k in ("T", "hidden", "input", "D", "batch")}, "ours_s": times["ours"], "native_s": times["native"],
                    "ours_median_s": o, "native_median_s": n, "ratio": o / n}
        log(f"  T={T}: median ours {o:.3f} s, OpenVINO {n:.3f} s, ratio {o / n:.2f}")
    floors = {}
    for label, code in (("python -c pass", "pass"), ("python -c 'import onnx'", "import onnx"), ("python -c 'import openvino'", "import openvino"),
                        ("python -c 'import ovrnn.cli'", "import ovrnn.cli")):
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            ts.append(time.perf_counter() - t)
        floors[label] = median(ts)
    log("  process floors: " + ", ".join(f"{k} {v:.3f} s" for k, v in floors.items()))
    main_ = per_T[1000]
    R["convert_time"] = {
        **main_,
        "T64": per_T[64],
        "process_floors_s": floors,
        "ours_cmd": "python -m ovrnn convert MODEL.onnx -o OUT.xml",
        "native_cmd": "python -c 'import openvino as ov; ov.save_model(ov.convert_model(MODEL), OUT, compress_to_fp16=False)'",
        "target": TARGETS["convert_ratio"],
        "verdict": verdict(main_["ratio"], TARGETS["convert_ratio"]),
    }
    log(f"  T=1000 ratio {main_['ratio']:.2f} ({R['convert_time']['verdict']})")


def s2_bin_size(ctx: Ctx, R: dict) -> None:
    import openvino as ov

    log("2. .bin size / ONNX weight bytes")
    rows = []
    for T, seqlens in ((64, False), (1000, False), (64, True), (1000, True)):
        m = make_rnn(ctx.file(f"size_T{T}_{seqlens}.onnx"), T, 64, 64, "bidirectional", None, seqlens)
        xml = ctx.file(f"size_T{T}.xml")
        ovrnn_convert(m["path"]).save(str(xml))
        nxml = ctx.file(f"size_native_T{T}.xml")
        ov.save_model(ov.convert_model(m["path"]), str(nxml), compress_to_fp16=False)
        ours_bin = xml.with_suffix(".bin").stat().st_size
        nat_bin = nxml.with_suffix(".bin").stat().st_size
        ratio = ours_bin / m["weight_bytes"]
        rows.append({
            "T": T, "D": 2, "hidden": 64, "sequence_lens_input": seqlens, "onnx_weight_bytes": m["weight_bytes"],
            "ours_bin_bytes": ours_bin, "ours_xml_bytes": xml.stat().st_size, "ratio": ratio,
            "native_bin_bytes": nat_bin, "native_xml_bytes": nxml.stat().st_size, "native_ratio": nat_bin / m["weight_bytes"],
            "verdict": verdict(ratio, TARGETS["bin_ratio"]),
        })
        log(f"  T={T} seqlens={seqlens}: .bin {ours_bin:,} B / weights {m['weight_bytes']:,} B = {ratio:.4f} (OpenVINO {nat_bin / m['weight_bytes']:.4f})")
    R["bin_size"] = {"rows": rows, "target": TARGETS["bin_ratio"], "verdict": "PASS" if all(r["verdict"] == "PASS" for r in rows) else "MISS"}


def s3_node_count(ctx: Ctx, R: dict) -> None:
    log("3. layer counts")
    rows = []
    for direction, T, chunk in (("bidirectional", 64, None), ("bidirectional", 1000, None), ("forward", 64, None), ("forward", 1000, None), ("forward", 64, 0), ("forward", 1000, 0)):
        m = make_rnn(ctx.file(f"count_{direction}_T{T}.onnx"), T, 64, 64, direction)
        xml = ctx.file(f"count_{direction}_T{T}_{chunk}.xml")
        if chunk is None:
            ir, how = ovrnn_convert(m["path"]), "default"
        else:
            ir, how = ovrnn_convert_chunk(m["path"], chunk)
            if ir is None:
                log(f"  chunk={chunk} unavailable: {how}")
                continue
        ir.save(str(xml))
        rep = ovrnn.inspect(str(xml))
        counts = dict(rep.layer_counts)
        cells = counts.get("RNNCell", 0)
        other = rep.layer_count - cells
        rows.append({
            "direction": direction, "T": T, "D": m["D"], "chunk": "default (64)" if chunk is None else chunk, "layers": rep.layer_count,
            "rnncell": cells, "layers_per_step_per_direction": rep.layer_count / (T * m["D"]), "non_rnncell_layers": other,
            "non_rnncell_by_type": {k: v for k, v in sorted(counts.items()) if k != "RNNCell"}, "xml_bytes": xml.stat().st_size,
        })
        log(f"  {direction} T={T} chunk={rows[-1]['chunk']}: {rep.layer_count} layers ({rep.layer_count / (T * m['D']):.3f} per step per direction), non-RNNCell {other}")
    common = {r["T"]: r["non_rnncell_layers"] for r in rows if r["direction"] == "forward" and r["chunk"] == "default (64)"}
    flat = common.get(64) == common.get(1000)
    R["node_count"] = {
        "rows": rows,
        "common_case_non_rnncell": common,
        "target": "non-RNNCell layers of the forward tanh model equal at T=64 and T=1000",
        "verdict": "PASS" if flat else "MISS",
    }
    log(f"  forward/tanh non-RNNCell layers: T=64 {common.get(64)}, T=1000 {common.get(1000)} -> {R['node_count']['verdict']}")


def s4_compile(ctx: Ctx, R: dict) -> None:
    Ts = [64, 256] if ctx.quick else [64, 256, 1000, 4000]
    log(f"4. compile time, bidirectional hidden 64 batch 1, T={Ts} (each compile in a fresh child process, fresh ov.Core)")
    rows, models = [], {}
    for T in Ts:
        m = make_rnn(ctx.file(f"compile_T{T}.onnx"), T, 64, 64, "bidirectional", 1)
        xml = ctx.file(f"compile_T{T}.xml")
        ovrnn_convert(m["path"]).save(str(xml))
        models[T] = (m, xml)
        reps = 1 if (ctx.quick or T > 256) else 3
        ours, nat = [], []
        for i in range(reps):
            if T >= 1000:
                log(f"  T={T} ours: compiling {2 * T} cells (may take {'~5' if T <= 1000 else '~30-60'} s) ...")
            ours.append(ctx.compile_child("ours", xml, f"compile ours T={T}"))
            nat.append(ctx.compile_child("native", m["path"], f"compile native T={T}"))
        row = {"T": T, "D": 2, "runs": reps}
        for name, rs in (("ours", ours), ("native", nat)):
            for key in ("load_s", "compile_s", "total_s"):
                row[f"{name}_{key}"] = median([r[key] for r in rs])
            row[f"{name}_all_total_s"] = [r["total_s"] for r in rs]
            row[f"{name}_maxrss_kb"] = max(r["maxrss_kb"] for r in rs)
        row["ratio_total"] = row["ours_total_s"] / row["native_total_s"]
        row["ratio_compile_only"] = row["ours_compile_s"] / row["native_compile_s"]
        rows.append(row)
        log(f"  T={T}: ours {row['ours_total_s']:.3f} s (read {row['ours_load_s']:.3f} + compile {row['ours_compile_s']:.3f}), "
            f"OpenVINO {row['native_total_s']:.3f} s (convert_model {row['native_load_s']:.3f} + compile {row['native_compile_s']:.3f}); ratio {row['ratio_total']:.1f}")
    key = next((r for r in rows if r["T"] == 256), None)
    out = {"rows": rows, "key_T": 256, "key_ratio": key["ratio_total"] if key else None, "target": TARGETS["compile_ratio_T256"]}
    out["verdict"] = verdict(out["key_ratio"], TARGETS["compile_ratio_T256"])

    # model cache: cold compile (writes the blob), then a warm compile from the XML path in a new process
    cache_rows = []
    for T in [t for t in (256, 1000) if t in models]:
        _, xml = models[T]
        with tempfile.TemporaryDirectory(prefix="ovrnn_cache_") as cache:
            cold = ctx.compile_child("file", xml, f"cache cold T={T}", {"CACHE_DIR": cache})
            warm = ctx.compile_child("file", xml, f"cache warm T={T}", {"CACHE_DIR": cache})
            blob = sum(f.stat().st_size for f in Path(cache).rglob("*") if f.is_file())
        nocache = next(r["ours_total_s"] for r in rows if r["T"] == T)
        cache_rows.append({"T": T, "no_cache_s": nocache, "cold_s": cold["total_s"], "warm_s": warm["total_s"], "speedup_vs_cold": cold["total_s"] / warm["total_s"],
                           "speedup_vs_no_cache": nocache / warm["total_s"], "cache_bytes": blob})
        log(f"  cache T={T}: cold {cold['total_s']:.3f} s, warm {warm['total_s']:.3f} s ({cold['total_s'] / warm['total_s']:.1f}x), cache {blob:,} bytes")
    out["cache"] = cache_rows

    # chunk=64 (default) vs chunk=0 (one piece per chain)
    chunk_rows, how = [], None
    for T in [t for t in (256, 1000) if t in models]:
        m, _ = models[T]
        ir0, how = ovrnn_convert_chunk(m["path"], 0)
        if ir0 is None:
            log(f"  chunk=0 unavailable: {how}")
            break
        xml0 = ctx.file(f"compile_T{T}_chunk0.xml")
        ir0.save(str(xml0))
        reps = 1 if (ctx.quick or T > 256) else 3
        if T >= 1000:
            log(f"  T={T} chunk=0: one 1000-step piece per direction (may take ~10-15 s) ...")
        r0 = [ctx.compile_child("ours", xml0, f"compile chunk=0 T={T}") for _ in range(reps)]
        c0 = median([r["total_s"] for r in r0])
        c64 = next(r["ours_total_s"] for r in rows if r["T"] == T)
        nat = next(r["native_total_s"] for r in rows if r["T"] == T)
        chunk_rows.append({"T": T, "chunk64_s": c64, "chunk0_s": c0, "chunk0_over_chunk64": c0 / c64, "chunk0_over_native": c0 / nat, "runs": reps})
        log(f"  chunk T={T}: chunk=64 {c64:.3f} s, chunk=0 {c0:.3f} s ({c0 / c64:.1f}x slower without chunking)")
    out["chunk"] = chunk_rows
    out["chunk0_built_with"] = how
    R["compile_time"] = out


def _contenders(onnx_path: str, xml: str, extra: dict | None = None):
    import openvino as ov

    core = ov.Core()
    cfg = dict(F32, **(extra or {}))
    ours = core.compile_model(core.read_model(xml), "CPU", cfg)
    native = core.compile_model(ov.convert_model(onnx_path), "CPU", cfg)
    for c in (ours, native):
        p = c.get_property("INFERENCE_PRECISION_HINT")
        if p.get_type_name() != "f32":
            raise RuntimeError(f"compiled at {p}, not f32")
    return core, ours, native


def _outputs_of(compiled, request) -> dict:
    return {name: np.array(request.get_tensor(compiled.output(name)).data, copy=True) for name in ("Y", "Y_h")}


def s5_latency(ctx: Ctx, R: dict) -> None:
    import onnxruntime as ort

    if ctx.quick:
        grid = [("forward", T, b, 64) for T in (16, 64) for b in (1, 16)]
        min_runs, min_time = 20, 0.2
    else:
        grid = [("forward", T, b, s) for s in (64, 128, 512) for T in (16, 64, 256) for b in (1, 16)]
        grid += [("bidirectional", 64, b, s) for s in (64, 128, 512) for b in (1, 16)]
        min_runs, min_time = 30, 0.5
    log(f"5. latency grid: {len(grid)} points, 3 contenders, >= {min_runs} runs and >= {min_time} s each (3 interleaved rounds)")
    rows = []
    for direction, T, batch, size in grid:
        m = make_rnn(ctx.file(f"lat_{direction}_T{T}_B{batch}_S{size}.onnx"), T, size, size, direction, batch)
        xml = ctx.file(f"lat_{direction}_T{T}_B{batch}_S{size}.xml")
        ovrnn_convert(m["path"]).save(str(xml))
        core, ours, native = _contenders(m["path"], str(xml))
        sess = ort.InferenceSession(m["path"], providers=["CPUExecutionProvider"])
        x = model_inputs(T, batch, size, m["D"])
        ro, rn = ours.create_infer_request(), native.create_infer_request()
        feeds = {"X": x}
        ro.infer({0: x}, share_inputs=True)
        rn.infer({0: x}, share_inputs=True)
        got = {"ours": _outputs_of(ours, ro), "native": _outputs_of(native, rn), "onnxruntime": dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))}
        diffs = {}
        for a, b in (("ours", "onnxruntime"), ("native", "onnxruntime"), ("ours", "native")):
            diffs[f"{a}_vs_{b}"] = max(float(np.abs(got[a][k].astype(np.float64) - got[b][k]).max()) for k in ("Y", "Y_h"))
        t = time_calls({
            "ours": lambda: ro.infer({0: x}, share_inputs=True),
            "native": lambda: rn.infer({0: x}, share_inputs=True),
            "onnxruntime": lambda: sess.run(None, feeds),
        }, min_runs, min_time)
        flops = 2 * T * batch * m["D"] * size * (size + size)
        row = {"direction": direction, "T": T, "batch": batch, "hidden": size, "input": size, "D": m["D"], "flops": flops,
               "max_abs_diff": diffs, "agree": max(diffs.values()) <= 1e-4,
               "runtime_nodes_ours": runtime_types(ours), "runtime_nodes_native": runtime_types(native)}
        for name, v in t.items():
            row[f"{name}_s"] = v["median_s"]
            row[f"{name}_p10_s"] = v["p10_s"]
            row[f"{name}_p90_s"] = v["p90_s"]
            row[f"{name}_runs"] = v["runs"]
            row[f"{name}_gflops"] = flops / v["median_s"] / 1e9
        row["ours_over_native"] = row["ours_s"] / row["native_s"]
        extra_nodes = sum(row["runtime_nodes_ours"].values()) - sum(row["runtime_nodes_native"].values())
        row["extra_us_per_extra_runtime_node"] = (row["ours_s"] - row["native_s"]) * 1e6 / extra_nodes if extra_nodes > 0 else None
        row["ours_over_ort"] = row["ours_s"] / row["onnxruntime_s"]
        rows.append(row)
        log(f"  {direction[:3]} T={T:<3} B={batch:<2} H={size:<3}: ours {row['ours_s'] * 1e6:9.0f} us, native {row['native_s'] * 1e6:9.0f} us, "
            f"ort {row['onnxruntime_s'] * 1e6:9.0f} us | ours/native {row['ours_over_native']:.2f}, ours/ort {row['ours_over_ort']:.2f}, "
            f"max diff {max(diffs.values()):.1e}")
        del ro, rn, ours, native, core, sess
        gc.collect()
    ratios = [r["ours_over_native"] for r in rows]
    b16 = [r["ours_over_ort"] for r in rows if r["batch"] == 16]
    b1 = [r["ours_over_ort"] for r in rows if r["batch"] == 1]
    summary = {
        "median_ours_over_native": median(ratios),
        "median_ours_over_native_forward": median([r["ours_over_native"] for r in rows if r["D"] == 1]),
        "median_ours_over_ort_b16": median(b16),
        "median_ours_over_ort_b1": median(b1),
        "all_outputs_agree": all(r["agree"] for r in rows),
        "largest_diff": max(max(r["max_abs_diff"].values()) for r in rows),
    }
    summary["verdict_native"] = verdict(summary["median_ours_over_native"], TARGETS["latency_ours_over_native"])
    summary["verdict_ort_b16"] = verdict(summary["median_ours_over_ort_b16"], TARGETS["latency_ours_over_ort_b16"])
    summary["verdict_ort_b1"] = verdict(summary["median_ours_over_ort_b1"], TARGETS["latency_ours_over_ort_b1"])
    R["latency"] = {"rows": rows, "summary": summary, "min_runs": min_runs, "min_time_s": min_time, "rounds": 3,
                    "method": "Same seeded X for all three; OpenVINO: one infer request reused, infer({0: X}, share_inputs=True) (outputs copied out, like onnxruntime returns new arrays); onnxruntime: InferenceSession(CPUExecutionProvider, default options).run(None, {'X': X}); static batch in the ONNX model"}
    log(f"  median ours/native {summary['median_ours_over_native']:.2f}, ours/ort batch 16 {summary['median_ours_over_ort_b16']:.2f}, batch 1 {summary['median_ours_over_ort_b1']:.2f}")


def _profile(compiled, x, runs: int) -> dict:
    """PERF_COUNT: median per-call time of each runtime layer type that executed (µs), the wall time
    of the same calls, and how many runtime nodes ran vs were skipped (in-place / not run)."""
    req = compiled.create_infer_request()
    t_end = time.perf_counter() + 0.3
    while time.perf_counter() < t_end:  # warm-up
        req.infer({0: x}, share_inputs=True)
    per_type: dict[str, list[float]] = {}
    walls, status = [], Counter()
    gc.collect()
    for i in range(runs):
        t = time.perf_counter()
        req.infer({0: x}, share_inputs=True)
        walls.append(time.perf_counter() - t)
        acc: Counter = Counter()
        for p in req.get_profiling_info():
            ran = str(p.status).endswith("EXECUTED")
            if ran:
                acc[p.node_type] += p.real_time.total_seconds() * 1e6
            if i == 0:
                status["executed" if ran else "not run"] += 1
                if ran:
                    status[f"executed:{p.node_type}"] += 1
        for k, v in acc.items():
            per_type.setdefault(k, []).append(v)
    types = {k: {"median_us": median(v), "executed_nodes": status[f"executed:{k}"]} for k, v in per_type.items()}
    types = dict(sorted(types.items(), key=lambda kv: -kv[1]["median_us"]))
    node_sum = sum(t["median_us"] for t in types.values())
    wall = median(walls) * 1e6
    return {"types": types, "wall_us": wall, "node_sum_us": node_sum, "outside_nodes_us": wall - node_sum,
            "nodes_executed": status["executed"], "nodes_not_run": status["not run"], "runs": runs}


def s6_batch1(ctx: Ctx, R: dict) -> None:
    import onnxruntime as ort
    import openvino as ov

    T, H = 16, 64
    min_runs, min_time = (30, 0.15) if ctx.quick else (50, 0.4)
    log(f"6. batch-1 investigation: forward T={T} hidden {H} batch 1")
    m = make_rnn(ctx.file("b1.onnx"), T, H, H, "forward", 1)
    md = make_rnn(ctx.file("b1_dyn.onnx"), T, H, H, "forward", None)  # same weights (same seed and sizes), dynamic batch
    xml, xmld = ctx.file("b1.xml"), ctx.file("b1_dyn.xml")
    ovrnn_convert(m["path"]).save(str(xml))
    ovrnn_convert(md["path"]).save(str(xmld))
    x = model_inputs(T, 1, H, 1)
    rows = []

    def add(variant: str, fns: dict, note: str = "") -> None:
        t = time_calls(fns, min_runs, min_time)
        row = {"variant": variant, "note": note, **{f"{k}_us": v["median_s"] * 1e6 for k, v in t.items()}}
        rows.append(row)
        log("  " + variant + ": " + ", ".join(f"{k} {v['median_s'] * 1e6:.1f} us" for k, v in t.items()))

    log("  profiling (PERF_COUNT) ...")
    _, op, np_ = _contenders(m["path"], str(xml), {"PERF_COUNT": True})
    runs = 100 if ctx.quick else 500
    profile = {"ours": _profile(op, x, runs), "native": _profile(np_, x, runs)}
    for k, v in profile.items():
        log(f"  {k}: wall {v['wall_us']:.1f} us with PERF_COUNT, nodes {v['node_sum_us']:.1f} us ({v['nodes_executed']} executed, {v['nodes_not_run']} not run), outside nodes {v['outside_nodes_us']:.1f} us")
    del op, np_
    core, ours, native = _contenders(m["path"], str(xml))
    props = {k: str(ours.get_property(k)) for k in ("PERFORMANCE_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS")}
    ro, rn = ours.create_infer_request(), native.create_infer_request()
    add("baseline: reused request, infer({0: X}, share_inputs=True)", {"ours": lambda: ro.infer({0: x}, share_inputs=True), "native": lambda: rn.infer({0: x}, share_inputs=True)})
    add("(a) new infer request per call", {"ours": lambda: ours.create_infer_request().infer({0: x}, share_inputs=True), "native": lambda: native.create_infer_request().infer({0: x}, share_inputs=True)})
    add("(b) share_inputs=False (input copied)", {"ours": lambda: ro.infer({0: x}, share_inputs=False), "native": lambda: rn.infer({0: x}, share_inputs=False)})
    add("(e) compiled_model({0: X}) convenience call", {"ours": lambda: ours({0: x}), "native": lambda: native({0: x})}, "share_inputs=False by default")
    fo, fn_ = ours.create_infer_request(), native.create_infer_request()
    fo.set_input_tensor(ov.Tensor(x, shared_memory=True))
    fn_.set_input_tensor(ov.Tensor(x, shared_memory=True))

    def async_call(req):
        def call():
            req.start_async()
            req.wait()
        return call

    add("floor: input tensor set once, infer(share_outputs=True) (no input handling, no output copy)",
        {"ours": lambda: fo.infer(share_outputs=True), "native": lambda: fn_.infer(share_outputs=True)}, "about what the plugin itself costs per call")
    add("async API: input set once, start_async()+wait()", {"ours": async_call(fo), "native": async_call(fn_)}, "adds a hand-off to the request's executor thread")
    runner = ovrnn.Runner(str(xml))
    add("ovrnn.Runner(xml)({'X': X}) (checks + output copies)", {"ours": lambda: runner({"X": x})}, "ours only")
    runtime_ours, runtime_native = runtime_types(ours), runtime_types(native)
    del ro, rn, fo, fn_, runner
    for hint in ("LATENCY", "THROUGHPUT"):
        _, o2, n2 = _contenders(m["path"], str(xml), {"PERFORMANCE_HINT": hint})
        r2o, r2n = o2.create_infer_request(), n2.create_infer_request()
        add(f"(c) PERFORMANCE_HINT={hint}", {"ours": lambda: r2o.infer({0: x}, share_inputs=True), "native": lambda: r2n.infer({0: x}, share_inputs=True)},
            f"NUM_STREAMS={o2.get_property('NUM_STREAMS')}, threads={o2.get_property('INFERENCE_NUM_THREADS')}")
        del r2o, r2n, o2, n2
    for threads in (1, 2):
        _, o2, n2 = _contenders(m["path"], str(xml), {"INFERENCE_NUM_THREADS": threads})
        r2o, r2n = o2.create_infer_request(), n2.create_infer_request()
        add(f"(d) INFERENCE_NUM_THREADS={threads}" + (" (the default here)" if str(threads) == props["INFERENCE_NUM_THREADS"] else ""),
            {"ours": lambda: r2o.infer({0: x}, share_inputs=True), "native": lambda: r2n.infer({0: x}, share_inputs=True)})
        del r2o, r2n, o2, n2
    _, od, nd = _contenders(md["path"], str(xmld))
    rdo, rdn = od.create_infer_request(), nd.create_infer_request()
    add("dynamic-batch model (batch '?'), reused request", {"ours": lambda: rdo.infer({0: x}, share_inputs=True), "native": lambda: rdn.infer({0: x}, share_inputs=True)},
        "shape inference on every call")
    del rdo, rdn, od, nd
    s_def = ort.InferenceSession(m["path"], providers=["CPUExecutionProvider"])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s_one = ort.InferenceSession(m["path"], so, providers=["CPUExecutionProvider"])
    add("onnxruntime: default options / intra_op_num_threads=1", {"onnxruntime": lambda: s_def.run(None, {"X": x}), "onnxruntime_1thread": lambda: s_one.run(None, {"X": x})})
    del s_def, s_one
    R["batch1"] = {"model": {"T": T, "hidden": H, "input": H, "batch": 1, "direction": "forward"}, "default_properties": props, "rows": rows,
                   "runtime_nodes_ours": runtime_ours, "runtime_nodes_native": runtime_native, "profile": profile}


def s7_gflops(R: dict, machine: dict) -> None:
    rows = []
    for r in R.get("latency", {}).get("rows", []):
        rows.append({k: r[k] for k in ("direction", "T", "batch", "hidden", "flops", "ours_gflops", "native_gflops", "onnxruntime_gflops")})
    peak = machine["peak_gflops"]
    R["gflops"] = {
        "peak_gflops": peak,
        "formula": f"{machine['logical_cpus']} cores x {machine['cpu_mhz']:.0f} MHz x {machine['flop_per_cycle_per_core']} f32 FLOP/cycle ({machine['flop_per_cycle_basis']})",
        "flops_formula": "2*T*batch*D*hidden*(input+hidden)",
        "rows": rows,
        "best": {k: max((r[f"{k}_gflops"] for r in rows), default=None) for k in ("ours", "native", "onnxruntime")},
    }


def s8_scale(ctx: Ctx, R: dict) -> None:
    T = 10000
    log(f"8. scale: T={T} forward hidden 64 (convert in a child process, then compile; this takes a minute or more)")
    m = make_rnn(ctx.file("scale_T10000.onnx"), T, 64, 64, "forward")
    xml = ctx.file("scale_T10000.xml")
    extra = cli_limit_args()
    cmd = [sys.executable, "-m", "ovrnn", "convert", m["path"], "-o", str(xml), *extra]
    log(f"  ovrnn convert{' ' + ' '.join(extra) if extra else ''} ...")
    conv = run_child([sys.executable, "-c", CHILD_MEASURE_CMD, *cmd], "ovrnn convert T=10000")
    if conv["returncode"]:
        R["scale"] = {"T": T, "error": conv["stderr"].strip()}
        log(f"  convert failed: {conv['stderr'].strip()}")
        return
    log(f"  convert {conv['wall_s']:.2f} s, peak RSS {conv['maxrss_kb'] / 1024:.0f} MiB; compiling {T} cells ...")
    comp = ctx.compile_child("ours", xml, f"compile ours T={T}")
    log(f"  compile {comp['total_s']:.1f} s (read {comp['load_s']:.2f} + compile {comp['compile_s']:.1f}), peak RSS {comp['maxrss_kb'] / 1024:.0f} MiB")
    nat = ctx.compile_child("native", m["path"], f"compile native T={T}")
    R["scale"] = {
        "T": T, "D": 1, "hidden": 64, "input": 64, "convert_cmd": "python -m ovrnn convert MODEL.onnx -o OUT.xml " + " ".join(extra),
        "convert_wall_s": conv["wall_s"], "convert_peak_rss_kb": conv["maxrss_kb"], "convert_notes": conv["stderr"].strip(),
        "xml_bytes": xml.stat().st_size, "bin_bytes": xml.with_suffix(".bin").stat().st_size, "onnx_weight_bytes": m["weight_bytes"],
        "compile_total_s": comp["total_s"], "compile_read_s": comp["load_s"], "compile_s": comp["compile_s"], "compile_peak_rss_kb": comp["maxrss_kb"],
        "native_total_s": nat["total_s"], "native_peak_rss_kb": nat["maxrss_kb"],
    }


# --- report -------------------------------------------------------------------------------------


def us(s: float) -> str:
    return f"{s * 1e6:,.0f}" if s * 1e6 >= 100 else f"{s * 1e6:.1f}"


def table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def render_md(R: dict) -> str:
    mi = R["machine"]
    v = mi["versions"]
    md = ["# ovrnn benchmark", ""]
    md.append(f"{mi['date']} · {mi['cpu_model']} (family/model {mi['cpu_family_model']}), {mi['logical_cpus']} logical CPUs at {mi['cpu_mhz']:.0f} MHz · "
              f"ovrnn {v['ovrnn']} ({mi['ovrnn_git']}), openvino {v['openvino']}, onnxruntime {v['onnxruntime']}, onnx {v['onnx']}, numpy {v['numpy']}, python {v['python']}")
    md.append("")
    md.append("**Every OpenVINO compile (ovrnn's IR and OpenVINO's own ONNX import) is on CPU with `{\"INFERENCE_PRECISION_HINT\": \"f32\"}`** "
              "(checked on each compiled model). onnxruntime: `CPUExecutionProvider`, default session options. "
              f"Mode: {'--quick (smoke test subset)' if R['config']['quick'] else 'full'}. Total runtime {R['total_runtime_s']:.0f} s.")
    md.append("")
    md.append("## Summary")
    md.append("")
    md.append(table(["measure", "value", "target", "result"], [[s["measure"], s["value"], s["target"], s["verdict"]] for s in R["summary"]]))

    if "convert_time" in R:
        c = R["convert_time"]
        md += ["", "## 1. Convert time (whole processes)", ""]
        md.append(f"T={c['model']['T']} bidirectional, hidden {c['model']['hidden']}, input {c['model']['input']}, dynamic batch, weights as initializers. "
                  f"`{c['ours_cmd']}` vs `{c['native_cmd']}`; {len(c['ours_s'])} interleaved runs each after one untimed warm-up each; wall time of the child process.")
        md.append("")
        md.append(table(["", "runs (s)", "median (s)"], [
            ["ovrnn convert", ", ".join(f"{t:.3f}" for t in c["ours_s"]), f"{c['ours_median_s']:.3f}"],
            ["OpenVINO convert_model + save_model", ", ".join(f"{t:.3f}" for t in c["native_s"]), f"{c['native_median_s']:.3f}"],
        ]))
        md.append("")
        md.append(f"Ratio ours/OpenVINO: **{c['ratio']:.2f}** (target <= {c['target']}): **{c['verdict']}**")
        t64 = c["T64"]
        md.append("")
        md.append(f"Context: at T=64 the same pair takes {t64['ours_median_s']:.3f} s vs {t64['native_median_s']:.3f} s (ratio {t64['ratio']:.2f}), "
                  "so most of either time is the fixed cost of a Python process. Process floors (median of 3): "
                  + ", ".join(f"`{k}` {v:.3f} s" for k, v in c["process_floors_s"].items()) + ".")

    if "bin_size" in R:
        b = R["bin_size"]
        md += ["", "## 2. .bin size / ONNX weight bytes", ""]
        md.append("Bidirectional, hidden 64, input 64. ONNX weight bytes = raw bytes of the W, R and B initializers. "
                  "ovrnn stores W, R and Wb+Rb (one bias vector, not two) plus a few small shape constants.")
        md.append("")
        md.append(table(["T", "sequence_lens input", "ONNX W+R+B bytes", "ours .bin", "ours .bin / weights", "ours .xml", "OpenVINO .bin / weights", "result"], [
            [r["T"], "yes" if r["sequence_lens_input"] else "no", f"{r['onnx_weight_bytes']:,}", f"{r['ours_bin_bytes']:,}", f"{r['ratio']:.4f}", f"{r['ours_xml_bytes']:,}", f"{r['native_ratio']:.4f}", r["verdict"]]
            for r in b["rows"]]))
        md.append("")
        md.append(f"Target <= {b['target']}: **{b['verdict']}**")

    if "node_count" in R:
        n = R["node_count"]
        md += ["", "## 3. Layer counts", ""]
        md.append(table(["direction", "T", "chunk", "layers", "RNNCell", "layers / (T x D)", "non-RNNCell layers", "non-RNNCell by type", "XML bytes"], [
            [r["direction"], r["T"], r["chunk"], f"{r['layers']:,}", f"{r['rnncell']:,}", f"{r['layers_per_step_per_direction']:.3f}", r["non_rnncell_layers"],
             ", ".join(f"{k} {v}" for k, v in r["non_rnncell_by_type"].items()), f"{r['xml_bytes']:,}"] for r in n["rows"]]))
        md.append("")
        cc = n["common_case_non_rnncell"]
        md.append(f"Common case (forward, tanh, no sequence_lens), default chunk: non-RNNCell layers T=64: {cc.get(64)}, T=1000: {cc.get(1000)}. "
                  f"Target: {n['target']}: **{n['verdict']}**")
        if n["verdict"] == "MISS":
            md.append("")
            md.append("The growth is the per-piece W/R/B Const layers that chunking adds (3 per 64-step piece per direction); with chunk=0 the count is flat. "
                      "They point at the same .bin bytes, so the .bin does not grow.")

    if "compile_time" in R:
        c = R["compile_time"]
        md += ["", "## 4. Compile time", ""]
        md.append("Bidirectional, hidden 64, input 64, batch 1. Each measurement in a fresh child process with a fresh `ov.Core()`; "
                  "the ONNX/IR frontends and the CPU plugin are loaded by an untimed warm-up compile of a tiny model first. "
                  "ours = `core.read_model(xml)` + `compile_model`; OpenVINO = `ov.convert_model(onnx)` + `compile_model`. "
                  "Median of 3 runs for T <= 256, 1 run above (quick mode: 1 run).")
        md.append("")
        md.append(table(["T", "cells", "ours read (s)", "ours compile (s)", "ours total (s)", "OV convert_model (s)", "OV compile (s)", "OV total (s)", "ratio total", "ratio compile only", "ours peak RSS (MiB)"], [
            [r["T"], 2 * r["T"], f"{r['ours_load_s']:.3f}", f"{r['ours_compile_s']:.3f}", f"{r['ours_total_s']:.3f}", f"{r['native_load_s']:.3f}", f"{r['native_compile_s']:.3f}",
             f"{r['native_total_s']:.3f}", f"{r['ratio_total']:.1f}", f"{r['ratio_compile_only']:.1f}", f"{r['ours_maxrss_kb'] / 1024:.0f}"] for r in c["rows"]]))
        md.append("")
        md.append(f"Key ratio (T={c['key_T']}, total): **{c['key_ratio']:.2f}** (target <= {c['target']}): **{c['verdict']}**")
        if c["cache"]:
            md += ["", "Model cache (`CACHE_DIR` in a temp folder): cold compile (fills the cache) then warm compile in a new process, both `core.compile_model(xml_path)`:", ""]
            md.append(table(["T", "no cache (s)", "cold (s)", "warm (s)", "speed-up warm vs cold", "speed-up warm vs no cache", "cache size"], [
                [r["T"], f"{r['no_cache_s']:.3f}", f"{r['cold_s']:.3f}", f"{r['warm_s']:.3f}", f"{r['speedup_vs_cold']:.1f}x", f"{r['speedup_vs_no_cache']:.1f}x", f"{r['cache_bytes']:,}"] for r in c["cache"]]))
        if c["chunk"]:
            md += ["", f"Chunking: default chunk (64 steps per piece) vs chunk=0 (one piece per chain); chunk=0 IR built with {c['chunk0_built_with']}.", ""]
            md.append(table(["T", "chunk=64 total (s)", "chunk=0 total (s)", "chunk=0 / chunk=64", "chunk=0 / OpenVINO"], [
                [r["T"], f"{r['chunk64_s']:.3f}", f"{r['chunk0_s']:.3f}", f"{r['chunk0_over_chunk64']:.1f}x", f"{r['chunk0_over_native']:.1f}x"] for r in c["chunk"]]))

    if "latency" in R:
        L = R["latency"]
        s = L["summary"]
        md += ["", "## 5. Inference latency", ""]
        md.append(f"Median latency per call in µs. {L['method']}. Warm-up, then {L['rounds']} interleaved rounds; each contender >= {L['min_runs']} calls and >= {L['min_time_s']} s. "
                  "tanh, no sequence_lens, hidden = input. max diff = largest |difference| over Y and Y_h among the three.")
        md.append("")
        md.append(table(["dir", "T", "batch", "hidden", "ours (µs)", "native (µs)", "onnxruntime (µs)", "ours/native", "ours/ort", "max diff", "runtime nodes ours / native", "(ours-native) µs per extra node"], [
            [r["direction"][:3], r["T"], r["batch"], r["hidden"], us(r["ours_s"]), us(r["native_s"]), us(r["onnxruntime_s"]), f"{r['ours_over_native']:.2f}",
             f"{r['ours_over_ort']:.2f}", f"{max(r['max_abs_diff'].values()):.1e}", f"{sum(r['runtime_nodes_ours'].values())} / {sum(r['runtime_nodes_native'].values())}",
             "" if r["extra_us_per_extra_runtime_node"] is None else f"{r['extra_us_per_extra_runtime_node']:.2f}"] for r in L["rows"]]))
        md.append("")
        md.append(table(["ratio", "value", "target", "result"], [
            ["median over the grid of ours/native", f"{s['median_ours_over_native']:.2f}", f"<= {TARGETS['latency_ours_over_native']}", s["verdict_native"]],
            ["  (forward points only)", f"{s['median_ours_over_native_forward']:.2f}", "", ""],
            ["median ours/onnxruntime, batch 16", f"{s['median_ours_over_ort_b16']:.2f}", f"<= {TARGETS['latency_ours_over_ort_b16']}", s["verdict_ort_b16"]],
            ["median ours/onnxruntime, batch 1 (stretch)", f"{s['median_ours_over_ort_b1']:.2f}", f"<= {TARGETS['latency_ours_over_ort_b1']}", s["verdict_ort_b1"]],
        ]))
        md.append("")
        md.append(f"Outputs agree (max abs diff <= 1e-4 at every point): **{'yes' if s['all_outputs_agree'] else 'NO'}** (largest {s['largest_diff']:.1e}).")
        ex = L["rows"][min(len(L["rows"]) - 1, 2)]
        md.append("")
        md.append(f"Runtime graph the CPU plugin executes (`get_runtime_model()`), e.g. {ex['direction']} T={ex['T']} batch {ex['batch']} hidden {ex['hidden']}: "
                  f"ours {dict(sorted(ex['runtime_nodes_ours'].items(), key=lambda kv: -kv[1]))}; native {dict(sorted(ex['runtime_nodes_native'].items(), key=lambda kv: -kv[1]))}.")

    if "batch1" in R:
        b = R["batch1"]
        md += ["", "## 6. Batch-1 investigation", ""]
        md.append(f"Forward, T={b['model']['T']}, hidden {b['model']['hidden']}, batch 1; median µs per call. Default compiled-model properties: {b['default_properties']}.")
        md.append("")
        md.append(table(["variant", "ours (µs)", "native (µs)", "onnxruntime (µs)", "note"], [
            [r["variant"], f"{r['ours_us']:.1f}" if "ours_us" in r else "",
             f"{r['native_us']:.1f}" if "native_us" in r else "",
             (f"{r['onnxruntime_us']:.1f} / {r['onnxruntime_1thread_us']:.1f} (1 thread)" if "onnxruntime_us" in r else ""), r["note"]] for r in b["rows"]]))
        md.append("")
        pr = b["profile"]
        md.append(f"Where the time goes (compiled with `PERF_COUNT: True`, median over {pr['ours']['runs']} calls of `infer({{0: X}}, share_inputs=True)`; "
                  "node times from `get_profiling_info()`):")
        md.append("")
        types = list(dict.fromkeys(list(pr["ours"]["types"]) + list(pr["native"]["types"])))

        def cell(side, t):
            p = pr[side]["types"].get(t)
            return f"{p['median_us']:.1f} ({p['executed_nodes']} node{'s' if p['executed_nodes'] != 1 else ''})" if p else ""

        md.append(table(["", "ours (µs)", "native (µs)"],
                        [[f"layer type {t}", cell("ours", t), cell("native", t)] for t in types] + [
                         ["sum of executed node times", f"{pr['ours']['node_sum_us']:.1f}", f"{pr['native']['node_sum_us']:.1f}"],
                         ["wall time per call (PERF_COUNT on)", f"{pr['ours']['wall_us']:.1f}", f"{pr['native']['wall_us']:.1f}"],
                         ["**outside the nodes** (Python binding, request, graph walk)", f"{pr['ours']['outside_nodes_us']:.1f}", f"{pr['native']['outside_nodes_us']:.1f}"],
                         ["runtime nodes executed / not run (in place)", f"{pr['ours']['nodes_executed']} / {pr['ours']['nodes_not_run']}", f"{pr['native']['nodes_executed']} / {pr['native']['nodes_not_run']}"]]))
        md.append("")
        md.append(f"Runtime graph: ours {b['runtime_nodes_ours']}; native {b['runtime_nodes_native']}.")

    if "gflops" in R and R["gflops"]["rows"]:
        g = R["gflops"]
        md += ["", "## 7. GFLOP/s", ""]
        md.append(f"FLOPs per inference = {g['flops_formula']}; GFLOP/s = FLOPs / median latency. Nominal peak = {g['formula']} = **{g['peak_gflops']:.0f} GFLOP/s**. "
                  "This is a nominal upper bound, not a measured roofline: it assumes every FMA pipe busy every cycle at the clock /proc/cpuinfo reports "
                  "(in a VM that is the nominal clock; the core may boost higher, and AMD Zen 4, family 25, executes a 512-bit FMA as two 256-bit halves). "
                  "A recurrence at small batch is a chain of dependent matrix-vector products, bound by latency and per-call overhead, not by FMA throughput.")
        md.append("")
        pk = g["peak_gflops"]
        md.append(table(["dir", "T", "batch", "hidden", "MFLOP", "ours GFLOP/s", "native GFLOP/s", "onnxruntime GFLOP/s", "ours % of peak"], [
            [r["direction"][:3], r["T"], r["batch"], r["hidden"], f"{r['flops'] / 1e6:.1f}", f"{r['ours_gflops']:.1f}", f"{r['native_gflops']:.1f}", f"{r['onnxruntime_gflops']:.1f}",
             f"{100 * r['ours_gflops'] / pk:.1f}%"] for r in g["rows"]]))
        md.append("")
        md.append("Best: " + ", ".join(f"{k} {v:.1f} GFLOP/s ({100 * v / pk:.0f}% of peak)" for k, v in g["best"].items() if v))

    md += ["", "## 8. Scale (T=10000, forward, hidden 64)", ""]
    sc = R.get("scale")
    if sc is None:
        md.append("Skipped (`--no-scale` or `--quick`).")
    elif "error" in sc:
        md.append(f"`ovrnn convert` failed: `{sc['error']}`")
    else:
        md.append(table(["measure", "value"], [
            ["command", f"`{sc['convert_cmd']}`"],
            ["convert wall time (child process)", f"{sc['convert_wall_s']:.2f} s"],
            ["convert peak RSS", f"{sc['convert_peak_rss_kb'] / 1024:.0f} MiB"],
            ["XML size", f"{sc['xml_bytes']:,} bytes"],
            [".bin size (ONNX weights)", f"{sc['bin_bytes']:,} bytes ({sc['onnx_weight_bytes']:,})"],
            ["compile (read_model + compile_model, fresh process)", f"{sc['compile_total_s']:.1f} s (read {sc['compile_read_s']:.2f} s)"],
            ["compile peak RSS", f"{sc['compile_peak_rss_kb'] / 1024:.0f} MiB"],
            ["OpenVINO's import + compile, same model", f"{sc['native_total_s']:.2f} s (peak RSS {sc['native_peak_rss_kb'] / 1024:.0f} MiB)"],
        ]))
        if sc["convert_notes"]:
            md += ["", "convert's stderr: " + " ".join(f"`{ln}`" for ln in sc["convert_notes"].splitlines())]
    md.append("")
    md.append("![latency and compile time](bench.png)")
    md.append("")
    return "\n".join(md)


def build_summary(R: dict) -> list[dict]:
    s = []
    if "convert_time" in R:
        c = R["convert_time"]
        s.append({"measure": "1. convert time ours/OpenVINO (T=1000 bidir, processes)", "value": f"{c['ratio']:.2f}", "target": "<= 1.0", "verdict": c["verdict"]})
    if "bin_size" in R:
        worst = max(r["ratio"] for r in R["bin_size"]["rows"])
        s.append({"measure": "2. .bin / ONNX weight bytes (worst case)", "value": f"{worst:.4f}", "target": "<= 1.02", "verdict": R["bin_size"]["verdict"]})
    if "node_count" in R:
        cc = R["node_count"]["common_case_non_rnncell"]
        s.append({"measure": "3. non-RNNCell layers, forward tanh, T=64 -> T=1000", "value": f"{cc.get(64)} -> {cc.get(1000)}", "target": "O(1) (equal)", "verdict": R["node_count"]["verdict"]})
    if "compile_time" in R:
        c = R["compile_time"]
        s.append({"measure": "4. compile ours/OpenVINO at T=256 (load + compile)", "value": f"{c['key_ratio']:.2f}" if c["key_ratio"] else "n/a", "target": "<= 2.0", "verdict": c["verdict"]})
        for r in c["rows"]:
            if r["T"] != 256:
                s.append({"measure": f"   compile ours/OpenVINO at T={r['T']}", "value": f"{r['ratio_total']:.1f} ({r['ours_total_s']:.2f} s vs {r['native_total_s']:.2f} s)", "target": "", "verdict": ""})
        for r in c["cache"]:
            s.append({"measure": f"   model cache warm vs cold, T={r['T']}", "value": f"{r['speedup_vs_cold']:.1f}x ({r['warm_s']:.3f} s)", "target": "", "verdict": ""})
        for r in c["chunk"]:
            s.append({"measure": f"   chunk=0 / chunk=64 compile, T={r['T']}", "value": f"{r['chunk0_over_chunk64']:.1f}x", "target": "", "verdict": ""})
    if "latency" in R:
        x = R["latency"]["summary"]
        s.append({"measure": "5. latency: median ours/native over the grid", "value": f"{x['median_ours_over_native']:.2f}", "target": "<= 1.0", "verdict": x["verdict_native"]})
        s.append({"measure": "5. latency: median ours/onnxruntime, batch 16", "value": f"{x['median_ours_over_ort_b16']:.2f}", "target": "<= 0.6", "verdict": x["verdict_ort_b16"]})
        s.append({"measure": "5. latency: median ours/onnxruntime, batch 1 (stretch)", "value": f"{x['median_ours_over_ort_b1']:.2f}", "target": "<= 1.0", "verdict": x["verdict_ort_b1"]})
        s.append({"measure": "5. outputs of the three agree (max abs diff)", "value": f"{x['largest_diff']:.1e}", "target": "<= 1e-4", "verdict": "PASS" if x["all_outputs_agree"] else "MISS"})
    if "gflops" in R and R["gflops"]["rows"]:
        g = R["gflops"]
        s.append({"measure": "7. best GFLOP/s ours / native / onnxruntime", "value": " / ".join(f"{v:.1f}" for v in g["best"].values()), "target": f"peak {g['peak_gflops']:.0f} (nominal)", "verdict": ""})
    sc = R.get("scale")
    if sc and "error" not in sc:
        s.append({"measure": "8. T=10000: convert / compile", "value": f"{sc['convert_wall_s']:.1f} s ({sc['convert_peak_rss_kb'] / 1024:.0f} MiB) / {sc['compile_total_s']:.1f} s", "target": "", "verdict": ""})
    return s


def plot(R: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    rows = [r for r in R.get("latency", {}).get("rows", []) if r["D"] == 1]
    sizes = sorted({r["hidden"] for r in rows})
    size = 128 if 128 in sizes else (sizes[0] if sizes else None)
    colors = {"ours": "tab:blue", "native": "tab:orange", "onnxruntime": "tab:green"}
    labels = {"ours": "ovrnn", "native": "OpenVINO ONNX import", "onnxruntime": "onnxruntime"}
    for batch, style in ((1, "-o"), (16, "--s")):
        pts = sorted((r for r in rows if r["hidden"] == size and r["batch"] == batch), key=lambda r: r["T"])
        if not pts:
            continue
        for k in colors:
            a1.plot([r["T"] for r in pts], [r[f"{k}_s"] * 1e3 for r in pts], style, color=colors[k], label=f"{labels[k]}, batch {batch}")
    a1.set_xscale("log", base=2)
    a1.set_yscale("log")
    a1.set_xlabel("time steps T")
    a1.set_ylabel("median latency (ms)")
    a1.set_title(f"Inference latency, forward tanh, hidden=input={size}")
    a1.grid(True, which="both", alpha=0.3)
    if a1.get_legend_handles_labels()[0]:
        a1.legend(fontsize=8)
    c = R.get("compile_time", {})
    crow = c.get("rows", [])
    if crow:
        a2.plot([r["T"] for r in crow], [r["ours_total_s"] for r in crow], "-o", color=colors["ours"], label="ovrnn IR (chunk 64): read + compile")
        a2.plot([r["T"] for r in crow], [r["native_total_s"] for r in crow], "-o", color=colors["native"], label="OpenVINO: convert_model + compile")
    if c.get("chunk"):
        a2.plot([r["T"] for r in c["chunk"]], [r["chunk0_s"] for r in c["chunk"]], "--^", color="tab:red", label="ovrnn IR, chunk=0")
    sc = R.get("scale")
    if sc and "error" not in sc:
        a2.plot([sc["T"]], [sc["compile_total_s"]], "x", color=colors["ours"], markersize=9, label="ovrnn, T=10000 forward")
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_xlabel("time steps T (bidirectional, hidden 64)")
    a2.set_ylabel("compile time (s)")
    a2.set_title("OpenVINO CPU compile time (f32)")
    a2.grid(True, which="both", alpha=0.3)
    if a2.get_legend_handles_labels()[0]:
        a2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.bool_,)):
        return bool(o)
    return o


# --only name -> the section, in running order; gflops is derived from latency's rows afterwards
SECTIONS = {"convert": s1_convert, "size": s2_bin_size, "count": s3_node_count, "compile": s4_compile, "latency": s5_latency, "batch1": s6_batch1, "scale": s8_scale}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench_results"), help="output folder (default: bench_results/ at the repository root)")
    ap.add_argument("--quick", action="store_true", help="a small subset (about a minute) for smoke testing; implies --no-scale")
    ap.add_argument("--no-scale", action="store_true", help="skip section 8 (T=10000 convert and compile)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections to run (default all: {','.join(SECTIONS)})")
    a = ap.parse_args(argv)
    only = {s.strip() for s in a.only.split(",") if s.strip()}
    unknown = only - set(SECTIONS)
    if unknown:
        ap.error(f"--only: unknown section(s) {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    scale = not (a.quick or a.no_scale) and "scale" in only

    machine = machine_info()
    log(f"ovrnn bench ({'quick' if a.quick else 'full'}): {machine['cpu_model']}, {machine['logical_cpus']} CPUs, openvino {machine['versions']['openvino']}, "
        f"onnxruntime {machine['versions']['onnxruntime']}; every OpenVINO compile uses CPU with {json.dumps(F32)}")
    R: dict = {"machine": machine, "config": {"quick": a.quick, "scale": scale, "sections": sorted(only), "openvino_compile_config": F32, "device": "CPU",
                                              "onnx_ir_version": IR_VERSION, "onnx_opset": OPSET, "out": str(out)}, "targets": TARGETS}
    with tempfile.TemporaryDirectory(prefix="ovrnn_bench_") as tmp:
        ctx = Ctx(Path(tmp), a.quick)
        for name, section in SECTIONS.items():
            if name in only and (name != "scale" or scale):
                section(ctx, R)
        s7_gflops(R, machine)
    R["total_runtime_s"] = time.perf_counter() - _START
    R["summary"] = build_summary(R)
    (out / "bench.json").write_text(json.dumps(_jsonable(R), indent=1) + "\n")
    plot(R, out / "bench.png")
    (out / "bench.md").write_text(render_md(R))
    print()
    print("Summary (OpenVINO CPU, INFERENCE_PRECISION_HINT=f32)")
    width = max(len(s["measure"]) for s in R["summary"]) if R["summary"] else 10
    for s in R["summary"]:
        print(f"  {s['measure']:<{width}}  {s['value']:<28} {s['target']:<18} {s['verdict']}")
    print(f"\ntotal runtime {R['total_runtime_s']:.0f} s; wrote {out / 'bench.md'}, {out / 'bench.json'}, {out / 'bench.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

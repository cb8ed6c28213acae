"""Benchmark ovrnn against OpenVINO's own ONNX import and onnxruntime, in one run, as ratios.

    python tools/bench.py [--out DIR] [--quick] [--only SECTION ...]

Every figure is a ratio against an anchor measured in the same run: A and B alternate (A B A B ...),
the ratio is taken pair by pair and the median is reported, so a machine whose speed drifts (2 shared
cores here) moves both sides of a pair. OpenVINO runs on CPU at INFERENCE_PRECISION_HINT=f32.

* convert: `ovrnn convert` vs `ov.save_model(ov.convert_model(onnx))`, whole processes, each as installed
  (bytecode compiled, one warm-up run each: installed_env); .bin ÷ weights
* compile: `core.compile_model(path, "CPU")` in a fresh process, ours (the .xml) vs OpenVINO's import
  (the .onnx): T=16 and T=256 forward H=128, T=1000 bidirectional H=64; warm model cache (CACHE_DIR,
  second compile) at T=256
* runtime graph (RNN, GRU, LSTM): layer types the CPU plugin runs, and per-step leftovers: what 128 more steps add
  (Reshape/Reorder/Gather/Subgraph) per step and direction, static and dynamic batch, with and
  without runtime sequence_lens
* latency: one reused infer request, inputs shared; median over T 16-256, H 64-256, batch 1 and 16;
  runtime sequence_lens at batch 1 against OpenVINO's import and onnxruntime; GRU and LSTM (default
  activations, no P): T 16 and 256, H 64 and 256, forward and bidirectional, batch 1 and 16
* stream: an LSTM H=128 (a VAD's shape), batch 1, K=1 and K=16 steps per call, and the silero VAD
  (when its wheel is installed): per-call latency of ovrnn.Stream.feed on the stateful IR ÷ onnxruntime
  with the state carried by hand (the faster of its 1-thread and all-thread sessions), ÷ ovrnn.Runner on
  the stateless IR with the state carried by the host, and ÷ OpenVINO's own floor (one request, the
  tensor set once, infer(share_outputs=True)); every side gets a new chunk array each call, as a stream does;
  the IRs are converted for CPU (device="CPU"): each takes the step form ovrnn/data/cpu_forms.json measured
  and what the safe default costs (issue 30): Stream.feed as it is (outputs copied, the call locked) ÷
  feed(share_outputs=True) (locked, views) and ÷ the call before issue 30 (views, no lock), each its own stream

* serve (only with --only serve): tools/bench_serve.py's quick form: silero VAD and a one-step LSTM
  H=128 played as N concurrent real-time streams: streams per core at a p99 added-latency bound and
  the cost per stream-chunk, onnxruntime (batch 1 per stream, batched by hand), ovrnn.Stream and the
  StreamBatcher (its own targets, >= and <=: bench_serve.TARGETS)

Writes DIR/bench.md and DIR/bench.json (DIR defaults to bench_results/). It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import bench_real  # noqa: E402 (beside this file)
import bench_serve  # noqa: E402

F32 = {"INFERENCE_PRECISION_HINT": "f32"}
LEFTOVER = ("Reshape", "Reorder", "Gather", "Subgraph")
TARGETS = {  # figure: (target, what the ratio compares)
    "convert": (1.0, "ovrnn convert ÷ OpenVINO convert+save, T=1000 bidirectional H=64"),
    "bin": (1.02, ".bin ÷ ONNX W+R+B bytes (worst of T=64/1000, with/without lengths)"),
    "compile_T16": (1.3, "compile ÷ OpenVINO import, T=16 forward H=128"),
    "compile_T256": (9.0, "compile ÷ OpenVINO import, T=256 forward H=128"),
    "compile_T1000": (55.0, "compile ÷ OpenVINO import, T=1000 bidirectional H=64"),
    "warm_cache": (1.5, "warm-cache compile ÷ OpenVINO import warm, T=256 forward H=128"),
    "leftovers_static": (0.05, "per-step leftovers, static batch (worst of fwd/rev/bidir, ± lengths)"),
    "leftovers_dynamic": (0.05, "per-step leftovers, dynamic batch (worst of fwd/rev/bidir, ± lengths)"),
    "latency": (0.9, "latency ÷ OpenVINO import, median over the grid"),
    "lens_vs_ov": (0.35, "runtime sequence_lens, batch 1 ÷ OpenVINO import (median of fwd/rev/bidir)"),
    "lens_vs_ort": (1.4, "runtime sequence_lens, batch 1 ÷ onnxruntime (median of fwd/rev/bidir)"),
}
for _op in ("GRU", "LSTM"):
    for _b in (1, 16):
        TARGETS[f"{_op}_latency_b{_b}"] = (1.0, f"{_op} latency ÷ OpenVINO import, batch {_b}, median over T, H, fwd/bidir")
    for _b in ("static", "dynamic"):
        TARGETS[f"{_op}_leftovers_{_b}"] = (0.05, f"{_op} per-step leftovers, {_b} batch (worst of fwd/rev/bidir, ± lengths)")
TARGETS["int8_bin"] = (0.27, "--compress-weights int8: .bin ÷ the f32 IR's, LSTM H=256 I=256 (worst of fwd/bidir)")
TARGETS["int4_bin"] = (0.15, "--compress-weights int4 (per row): .bin ÷ the f32 IR's, LSTM H=256 I=256 (worst of fwd/bidir)")
TARGETS["int8_compile"] = (1.5, "--compress-weights int8: compile ÷ the f32 IR's, LSTM T=256 H=256")
TARGETS["int8_latency"] = (1.1, "--compress-weights int8: latency ÷ the f32 IR's, LSTM T=256 H=256 batch 1 (cells: folded to f32)")
TARGETS["int8_rss"] = (1.5, "--compress-weights int8: peak RSS growth of compile+infer ÷ the f32 IR's (child process), LSTM T=256 H=256")
TARGETS["int8_error_rows_vs_tensor"] = (1.0, "int8 quantization-only error at T=1000, one scale per row ÷ one per tensor (uneven rows)")
for _k in (1, 16):
    TARGETS[f"stream_K{_k}_vs_ir"] = (
        0.9,
        (
            f"ovrnn.Stream.feed, LSTM H=128, {_k} step{'s' if _k > 1 else ''} per call ÷ ovrnn.Runner on the stateless IR, state "
            "carried by the host"
        ),
    )
    TARGETS[f"stream_K{_k}_vs_ort"] = (
        1.0,
        (
            f"ovrnn.Stream.feed, LSTM H=128, {_k} step{'s' if _k > 1 else ''} per call ÷ onnxruntime run (faster of 1 and all "
            "threads), state carried by hand"
        ),
    )
for _key, _what in (
    ("stream_K1", "LSTM H=128, 1 step"),
    ("stream_K16", "LSTM H=128, 16 steps"),
    ("stream_silero", "silero VAD, 512 samples"),
):
    TARGETS[f"{_key}_safe_vs_previous"] = (
        1.1,
        f"ovrnn.Stream.feed, {_what} per call, the safe default (outputs copied, calls locked) ÷ the call before issue 30 (views, no lock)",
    )
TARGETS["stream_silero_vs_ort"] = (
    0.5,
    "ovrnn.Stream.feed, silero VAD 16 kHz, 512 samples per call ÷ onnxruntime run (faster of 1 and all threads), state carried by hand",
)
KNOWN = "LSTM with Y_c read and runtime lengths: known not to fold (the last valid C needs every step's C)"


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - START:6.0f}s] {msg}", flush=True)


GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def make_rnn(
    path: Path,
    T: int,
    H: int,
    I: int,
    direction: str = "forward",
    batch: int | None = 1,
    lens: bool = False,
    op: str = "RNN",
    y_c: bool = True,
) -> Path:
    """A lone ONNX RNN (tanh), GRU or LSTM node (default activations, no P), W/R/B initializers;
    batch None = dynamic; lens = runtime sequence_lens; y_c = LSTM's Y_c is a graph output."""
    D, G = (2 if direction == "bidirectional" else 1), GATES[op]
    rng = np.random.default_rng(T * 7 + H)
    scale = 1 / np.sqrt(H)  # a stable recurrence: long sequences are not chaotic, so outputs compare
    init = lambda n, s: numpy_helper.from_array(rng.uniform(-scale, scale, s).astype(np.float32), n)  # noqa: E731
    b = "batch" if batch is None else batch
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, b, I])]
    if lens:
        inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [b]))
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" and y_c else [])
    node = helper.make_node(
        op,
        ["X", "W", "R", "B"] + (["sequence_lens"] if lens else []),
        outputs,
        hidden_size=H,
        direction=direction,
        **({"activations": ["Tanh"] * D} if op == "RNN" else {}),
    )
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
    graph = helper.make_graph(
        [node], "bench", inputs, outs, [init("W", (D, G * H, I)), init("R", (D, G * H, H)), init("B", (D, 2 * G * H))]
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    return path


def convert(onnx_path: Path) -> Path:
    import ovrnn

    return ovrnn.convert_model(str(onnx_path)).save(onnx_path.with_suffix(".xml"))


def wall(cmd: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def installed_env(tmp: Path) -> dict:
    """The environment of a process as an installed package runs it: bytecode compiled once and read
    afterwards (pip compiles it at install). Run from a checkout with PYTHONDONTWRITEBYTECODE set, or
    with stale .pyc files, every `ovrnn convert` recompiles each ovrnn module (about 0.3 s of CPU on
    this VM) while OpenVINO's side reads its installed bytecode. Both sides keep their bytecode under
    `tmp` (PYTHONPYCACHEPREFIX): nothing is written into the checkout or site-packages."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPYCACHEPREFIX": str(tmp / "pycache")}


COMPILE_CHILD = """
import sys, time, openvino as ov
core = ov.Core()
cfg = {"INFERENCE_PRECISION_HINT": "f32"}
if len(sys.argv) > 2:
    cfg["CACHE_DIR"] = sys.argv[2]
start = time.perf_counter()
core.compile_model(sys.argv[1], "CPU", cfg)
print(time.perf_counter() - start)
"""


def compile_time(path: Path, cache: Path | None = None) -> float:
    """compile_model(path, "CPU") as a user calls it, timed inside a fresh process."""
    args = [sys.executable, "-c", COMPILE_CHILD, str(path)] + ([str(cache)] if cache else [])
    return float(subprocess.run(args, check=True, capture_output=True, text=True).stdout.split()[-1])


def paired(a, b, n: int) -> dict:
    """Run a() and b() alternately n times: medians of each and of the pairwise ratio a/b."""
    xs, ys = [], []
    for _ in range(n):
        xs.append(a())
        ys.append(b())
    ratios = [x / y for x, y in zip(xs, ys)]
    return {
        "ours": statistics.median(xs),
        "anchor": statistics.median(ys),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


def s_convert(tmp: Path, n: int) -> dict:
    onnx_path = make_rnn(tmp / "conv.onnx", 1000, 64, 64, "bidirectional")
    xml = tmp / "conv_out" / "m.xml"
    save_code = (
        f"import openvino as ov; ov.save_model(ov.convert_model({str(onnx_path)!r}), {str(tmp / 'ov_out.xml')!r}, compress_to_fp16=False)"
    )
    env = installed_env(tmp)
    ours = [sys.executable, "-m", "ovrnn", "convert", str(onnx_path), "-o", str(xml)]
    theirs = [sys.executable, "-c", save_code]
    wall(ours, env), wall(theirs, env)  # not counted: each side's bytecode written, its files in the page cache
    load = os.getloadavg()[0]
    r = paired(lambda: wall(ours, env), lambda: wall(theirs, env), n)
    r["load"] = (round(load, 1), round(os.getloadavg()[0], 1))  # 1-minute load average before and after: 2 shared cores
    bins = {}
    for T in (64, 1000):
        for lens in (False, True):
            ir = convert(make_rnn(tmp / f"bin_{T}_{lens}.onnx", T, 64, 64, "bidirectional", lens=lens))
            bins[f"T={T}{' lens' if lens else ''}"] = ir.with_suffix(".bin").stat().st_size / (2 * (64 * 64 + 64 * 64 + 2 * 64) * 4)
    return {"convert": r, "bin": {"ratio": max(bins.values()), "each": bins}}


def s_compile(tmp: Path, n: int) -> dict:
    out = {}
    for key, (T, H, direction) in {
        "compile_T16": (16, 128, "forward"),
        "compile_T256": (256, 128, "forward"),
        "compile_T1000": (1000, 64, "bidirectional"),
    }.items():
        onnx_path = make_rnn(tmp / f"{key}.onnx", T, H, H, direction)
        xml = convert(onnx_path)
        compile_time(xml), compile_time(onnx_path)  # warm the page cache and the plugin's shared libraries
        out[key] = paired(lambda xml=xml: compile_time(xml), lambda p=onnx_path: compile_time(p), n)
        log(f"{key}: ours {out[key]['ours']:.3f} s, OpenVINO import {out[key]['anchor']:.3f} s, ratio {out[key]['ratio']:.2f}")
    onnx_path = tmp / "compile_T256.onnx"
    xml = onnx_path.with_suffix(".xml")
    caches = {p: tmp / f"cache_{p.suffix[1:]}" for p in (xml, onnx_path)}
    for p, cache in caches.items():
        compile_time(p, cache)  # cold: fills the cache
    out["warm_cache"] = paired(lambda: compile_time(xml, caches[xml]), lambda: compile_time(onnx_path, caches[onnx_path]), n)
    return out


def runtime_types(compiled) -> Counter:
    return Counter(op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ordered_ops())


def s_graph(tmp: Path) -> dict:
    import openvino as ov

    core = ov.Core()
    rows = []
    for op in GATES:
        variants = [(False, True), (True, True)] + ([(True, False)] if op == "LSTM" else [])  # (lens, Y_c read)
        for batch in (2, None):
            for direction in ("forward", "reverse", "bidirectional"):
                for lens, y_c in variants:
                    D = 2 if direction == "bidirectional" else 1
                    types = {}
                    for T in (136, 264):
                        xml = convert(
                            make_rnn(tmp / f"g_{op}_{T}_{batch}_{direction}_{lens}_{y_c}.onnx", T, 32, 16, direction, batch, lens, op, y_c)
                        )
                        types[T] = runtime_types(core.compile_model(str(xml), "CPU", F32))
                    per_step = sum(types[264][t] - types[136][t] for t in LEFTOVER) / (128 * D)
                    folded = (
                        types[264]["RNNSeq"] == 5 * D
                        and not types[264]["TensorIterator"]
                        and not sum(types[264][c] for c in ("RNNCell", "GRUCell", "LSTMCell"))
                    )
                    known = op == "LSTM" and lens and y_c
                    rows.append(
                        {
                            "op": op,
                            "batch": "dynamic" if batch is None else "static",
                            "direction": direction,
                            "lens": lens,
                            "Y_c": y_c if op == "LSTM" else None,
                            "per_step": per_step,
                            "folded": folded,
                            "known_not_to_fold": known,
                            "types_T264": dict(sorted(types[264].items())),
                        }
                    )
    anchor = make_rnn(tmp / "g_anchor.onnx", 256, 128, 128)
    ours = convert(anchor)

    def worst(op, batch):
        return {"ratio": max(r["per_step"] for r in rows if r["op"] == op and r["batch"] == batch and not r["known_not_to_fold"])}

    return {
        "rows": rows,
        **{f"{'' if op == 'RNN' else op + '_'}leftovers_{b}": worst(op, b) for op in GATES for b in ("static", "dynamic")},
        "dynamic_batch_folds": all(r["folded"] for r in rows if not r["known_not_to_fold"]),
        "known_not_to_fold": [r for r in rows if r["known_not_to_fold"]],
        "types_T256": {
            "ovrnn": dict(sorted(runtime_types(core.compile_model(str(ours), "CPU", F32)).items())),
            "openvino_import": dict(sorted(runtime_types(core.compile_model(str(anchor), "CPU", F32)).items())),
        },
    }


def time_contenders(fns: dict, inputs: dict, min_time: float, rounds: int = 5) -> dict:
    """Median seconds per call of each contender, run in interleaved rounds."""
    per = {k: [] for k in fns}
    for fn in fns.values():
        fn(inputs)  # warm-up
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotate: nobody always runs right after another
            fn = fns[name]
            start, calls = time.perf_counter(), 0
            while calls < 3 or time.perf_counter() - start < min_time:
                fn(inputs)
                calls += 1
            per[name].append((time.perf_counter() - start) / calls)
    return {k: statistics.median(v) for k, v in per.items()}


def contenders(onnx_path: Path, xml: Path) -> tuple[dict, callable]:
    """{name: infer(inputs)} for ovrnn, OpenVINO's import and onnxruntime, plus a check of their outputs."""
    import onnxruntime as ort
    import openvino as ov

    core = ov.Core()
    requests = {
        name: core.compile_model(str(p), "CPU", F32).create_infer_request() for name, p in (("ovrnn", xml), ("openvino", onnx_path))
    }
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # its idle threads would spin into OpenVINO's turn
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    fns = {name: (lambda inputs, r=r: r.infer(inputs, share_inputs=True)) for name, r in requests.items()}
    fns["onnxruntime"] = lambda inputs: session.run(None, inputs)

    def max_diff(inputs) -> float:
        want = session.run(None, inputs)[0]
        return max(float(np.abs(r.infer(inputs)[0] - want).max()) for r in requests.values())

    return fns, max_diff


def latency_row(onnx_path: Path, x: dict, min_time: float, **case) -> dict:
    """One row of the latency tables: the case's keys, each side's µs on `x` (ovrnn's IR, OpenVINO's import, onnxruntime),
    ovrnn ÷ each of the other two, and the largest difference of their first output from onnxruntime's."""
    fns, max_diff = contenders(onnx_path, convert(onnx_path))
    t = time_contenders(fns, x, min_time)
    return {
        **case,
        **{k: v * 1e6 for k, v in t.items()},
        "vs_openvino": t["ovrnn"] / t["openvino"],
        "vs_onnxruntime": t["ovrnn"] / t["onnxruntime"],
        "max_abs_diff": max_diff(x),
    }


def s_latency(tmp: Path, quick: bool) -> dict:
    rows = []
    grid = [(T, H, B) for T in ((16, 256) if quick else (16, 64, 256)) for H in ((64, 256) if quick else (64, 128, 256)) for B in (1, 16)]
    for T, H, B in grid:
        onnx_path = make_rnn(tmp / f"lat_{T}_{H}_{B}.onnx", T, H, H, "forward", B)
        x = {"X": np.random.default_rng(0).uniform(-1, 1, (T, B, H)).astype(np.float32)}
        rows.append(row := latency_row(onnx_path, x, 0.05 if quick else 0.1, T=T, H=H, batch=B))
        log(
            f"latency T={T} H={H} batch {B}: ovrnn {row['ovrnn']:.0f} µs, ÷ OpenVINO {row['vs_openvino']:.2f}, ÷ "
            f"onnxruntime {row['vs_onnxruntime']:.2f}"
        )
    lens_rows = []
    for direction in ("forward", "reverse", "bidirectional"):
        onnx_path = make_rnn(tmp / f"lens_{direction}.onnx", 64, 128, 128, direction, 1, lens=True)
        x = {"X": np.random.default_rng(1).uniform(-1, 1, (64, 1, 128)).astype(np.float32), "sequence_lens": np.array([41], np.int32)}
        lens_rows.append(row := latency_row(onnx_path, x, 0.1, direction=direction))
        log(f"lengths {direction}: ovrnn {row['ovrnn']:.0f} µs, OpenVINO {row['openvino']:.0f}, onnxruntime {row['onnxruntime']:.0f}")
    gl_rows = []
    for op in ("GRU", "LSTM"):
        for T, H, direction, B in [
            (T, H, d, B) for T in (16, 256) for H in ((64,) if quick else (64, 256)) for d in ("forward", "bidirectional") for B in (1, 16)
        ]:
            onnx_path = make_rnn(tmp / f"lat_{op}_{T}_{H}_{direction}_{B}.onnx", T, H, H, direction, B, op=op)
            x = {"X": np.random.default_rng(0).uniform(-1, 1, (T, B, H)).astype(np.float32)}
            gl_rows.append(row := latency_row(onnx_path, x, 0.05 if quick else 0.1, op=op, T=T, H=H, direction=direction, batch=B))
            log(
                f"{op} latency T={T} H={H} {direction} batch {B}: ovrnn {row['ovrnn']:.0f} µs, ÷ OpenVINO "
                f"{row['vs_openvino']:.2f}, ÷ onnxruntime {row['vs_onnxruntime']:.2f}"
            )
    gl = lambda op, B, key: statistics.median(r[key] for r in gl_rows if r["op"] == op and r["batch"] == B)  # noqa: E731
    return {
        "gl_rows": gl_rows,
        **{
            f"{op}_latency_b{B}": {"ratio": gl(op, B, "vs_openvino"), "vs_onnxruntime": gl(op, B, "vs_onnxruntime")}
            for op in ("GRU", "LSTM")
            for B in (1, 16)
        },
        "rows": rows,
        "latency": {"ratio": statistics.median(r["vs_openvino"] for r in rows)},
        "latency_batch1_vs_onnxruntime": statistics.median(r["vs_onnxruntime"] for r in rows if r["batch"] == 1),
        "latency_batch16_vs_onnxruntime": statistics.median(r["vs_onnxruntime"] for r in rows if r["batch"] == 16),
        "lens_rows": lens_rows,
        "lens_vs_ov": {"ratio": statistics.median(r["vs_openvino"] for r in lens_rows)},
        "lens_vs_ort": {"ratio": statistics.median(r["vs_onnxruntime"] for r in lens_rows)},
    }


def make_stream_lstm(path: Path, K: int, H: int = 128, I: int = 128) -> Path:
    """An LSTM node that passes its state through the graph: X [K,1,I], initial_h/initial_c in,
    Y, Y_h, Y_c out; what a host carries the state of by hand."""
    rng = np.random.default_rng(K * 7 + H)
    scale = 1 / np.sqrt(H)
    init = lambda n, s: numpy_helper.from_array(rng.uniform(-scale, scale, s).astype(np.float32), n)  # noqa: E731
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [K, 1, I])] + [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, H]) for n in ("initial_h", "initial_c")
    ]
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "initial_h", "initial_c"], ["Y", "Y_h", "Y_c"], hidden_size=H)
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")]
    graph = helper.make_graph([node], "stream", inputs, outs, [init("W", (1, 4 * H, I)), init("R", (1, 4 * H, H)), init("B", (1, 8 * H))])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    return path


def _ort_session(path, threads: int | None = None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # its idle threads would spin into OpenVINO's turn
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _rotating(chunks: list):
    """The next chunk at each call: a stream gets a new array every call (no side may keep one set)."""
    state = {"i": 0}

    def next_chunk():
        state["i"] = (state["i"] + 1) % len(chunks)
        return chunks[state["i"]]

    return next_chunk


def stream_sides(
    stateful_xml: Path, onnx_path: Path, chunks: list, x_name: str, carried: dict, extra: dict, stateless_xml: Path | None = None
) -> dict:
    """{name: one call() -> first output} per streaming side, each carrying its own stream from zeros,
    each given the next of `chunks` every call. `carried`: {onnxruntime input: output index} of the
    state onnxruntime is handed back; `extra`: onnxruntime's other inputs (e.g. silero's sr)."""
    import openvino as ov

    import ovrnn

    stream = ovrnn.Stream(stateful_xml)
    floor = stream.compiled.compiled.create_infer_request()  # the same compiled model, its own request and states
    floor.set_input_tensor(0, ov.Tensor(chunks[0], shared_memory=True))

    def floor_call():  # OpenVINO's own cost of a call: the tensor set once, nothing checked
        floor.infer(share_outputs=True)
        return floor.get_output_tensor(0).data

    sides = {
        "stream": (lambda nxt: lambda: next(iter(stream.feed({x_name: nxt()}).values())))(_rotating(chunks)),
        "openvino_floor": floor_call,
    }
    # What the safe default costs: the same call with share_outputs=True (the lock, no copy), and
    # the call as it was before issue 30 (neither: no lock, read-only views of the buffers)
    shared = ovrnn.Stream(stateful_xml)
    sides["stream_shared"] = (lambda nxt: lambda: next(iter(shared.feed({x_name: nxt()}, share_outputs=True).values())))(_rotating(chunks))
    previous = ovrnn.Stream(stateful_xml)

    def previous_call(nxt=_rotating(chunks), r=previous._runner):  # noqa: B008 (bound once, on purpose)
        inputs = {x_name: nxt()}
        out = r._infer_set(True, inputs) if previous._static and r._copied_exactly(inputs) else r._call(inputs, True)
        return next(iter(out.values()))

    sides["stream_previous"] = previous_call
    for key, threads in (("onnxruntime_host", None), ("onnxruntime_host_1t", 1)):
        session, nxt = _ort_session(onnx_path, threads), _rotating(chunks)
        state = {name: np.zeros(shape, np.float32) for name, (_, shape) in carried.items()}

        def call(session=session, nxt=nxt, state=state):  # the state out of the outputs, back in as inputs
            out = session.run(None, {x_name: nxt(), **state, **extra})
            for name, (index, _) in carried.items():
                state[name] = out[index]
            return out[0]

        sides[key] = call
    if stateless_xml is not None:
        runner, nxt = ovrnn.Runner(stateless_xml), _rotating(chunks)
        host = {name: np.zeros(shape, np.float32) for name, (_, shape) in carried.items()}
        outs = list(runner.compiled.output_names)

        def carried_ir():
            out = runner({x_name: nxt(), **host})
            for name, (index, _) in carried.items():
                host[name] = out[outs[index]].copy()  # fed back next call: kept across it
            return out[outs[0]]

        sides["stateless_host"] = carried_ir
    return sides


def _interleaved(fns: dict, calls: int) -> dict:
    """{name: median seconds of one call}, each fn() called `calls` times, one call of each in turn."""
    clock, times = time.perf_counter, {k: [] for k in fns}
    for fn in fns.values():
        fn()  # warm-up
    for _ in range(calls):
        for name, fn in fns.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def stream_check(make_sides, calls: int = 8) -> float:
    """Max |difference| of every side's first output against onnxruntime's over `calls` calls from zeros."""
    fresh = make_sides()
    ys = {name: np.concatenate([np.array(fn()) for _ in range(calls)]) for name, fn in fresh.items() if name != "openvino_floor"}
    return max(float(np.abs(y - ys["onnxruntime_host"]).max()) for y in ys.values())


def s_stream(tmp: Path, quick: bool) -> dict:
    """Per-call latency of ovrnn.Stream.feed against onnxruntime with the state carried by hand."""
    import ovrnn

    rows, figures = [], {}
    cases = []
    for K in (1, 16):
        onnx_path = make_stream_lstm(tmp / f"stream_{K}.onnx", K)
        # converted for CPU: the step form the measured table gives each (explicit at K=1, cell at K=16)
        stateful = ovrnn.convert_model(str(onnx_path), stateful=True, device="CPU").save(
            onnx_path.with_name(onnx_path.stem + "_stateful.xml")
        )
        stateless = ovrnn.convert_model(str(onnx_path), device="CPU").save(onnx_path.with_suffix(".xml"))
        chunks = [np.random.default_rng(i).uniform(-1, 1, (K, 1, 128)).astype(np.float32) for i in range(8)]
        carried = {"initial_h": (1, (1, 1, 128)), "initial_c": (2, (1, 1, 128))}
        cases.append(
            (
                f"LSTM H=128 K={K}",
                f"stream_K{K}",
                K,
                lambda s=stateful, o=onnx_path, c=chunks, h=carried, x=stateless: stream_sides(s, o, c, "X", h, {}, x),
            )
        )
    silero = _silero_onnx()
    if silero is not None:
        xml = ovrnn.convert_model(str(silero), input="input[1,512],state[2,1,128],sr->16000", stateful="state=stateN", device="CPU").save(
            tmp / "silero_stream.xml"
        )
        chunks = [(np.random.default_rng(i).standard_normal((1, 512)) * 0.1).astype(np.float32) for i in range(8)]
        sr = {"sr": np.array(16000, np.int64)}
        cases.append(
            (
                "silero VAD 16 kHz, 512 samples",
                "stream_silero",
                1,
                lambda x=xml, c=chunks: stream_sides(x, silero, c, "input", {"state": (1, (2, 1, 128))}, sr),
            )
        )
    else:
        log("stream: the silero-vad wheel is not installed (pip install --no-deps silero-vad==6.2.3): no silero row")
    for label, key, K, make in cases:
        diff = stream_check(make)
        t = time_contenders(
            {k: (lambda _, fn=fn: fn()) for k, fn in make().items()}, None, 0.05 if quick else 0.2, rounds=5 if quick else 9
        )
        ort_best = min(t["onnxruntime_host"], t["onnxruntime_host_1t"])
        row = {
            "case": label,
            "K": K,
            **{k: v * 1e6 for k, v in t.items()},
            "vs_ort": t["stream"] / ort_best,
            "vs_floor": t["stream"] / t["openvino_floor"],
            "steps_per_second": K / t["stream"],
            "max_abs_diff": diff,
        }
        # the safe default's cost is a microsecond or two of a call: timed apart, one call of each
        # side in turn (A B C A B C ...), each call timed alone; medians per side (a call of tens of
        # µs is seldom cut by another process, so the median stays the uncut cost on a busy machine)
        safe = make()
        per = _interleaved({k: safe[k] for k in ("stream", "stream_shared", "stream_previous")}, 1000 if quick else 4000)
        row |= {"safe_us": per["stream"] * 1e6, "shared_us": per["stream_shared"] * 1e6, "previous_us": per["stream_previous"] * 1e6}
        row |= {"safe_vs_previous": per["stream"] / per["stream_previous"], "safe_vs_shared": per["stream"] / per["stream_shared"]}
        figures[f"{key}_safe_vs_previous"] = {"ratio": row["safe_vs_previous"]}
        if "stateless_host" in t:
            row["vs_ir"] = t["stream"] / t["stateless_host"]
            figures[f"{key}_vs_ir"] = {"ratio": row["vs_ir"]}
        figures[f"{key}_vs_ort"] = {"ratio": row["vs_ort"]}
        rows.append(row)
        log(
            f"stream {label}: safe default {row['safe_us']:.1f} µs, share_outputs=True {row['shared_us']:.1f} µs, before issue "
            f"30 {row['previous_us']:.1f} µs: ÷ shared {row['safe_vs_shared']:.3f}, ÷ before {row['safe_vs_previous']:.3f}"
        )
        log(
            f"stream {label}: Stream.feed {row['stream']:.0f} µs, ÷ onnxruntime + host state (its faster of 1 and all threads) "
            f"{row['vs_ort']:.2f}, ÷ OpenVINO's floor {row['vs_floor']:.2f}"
            + (f", ÷ stateless IR + host state {row['vs_ir']:.2f}" if "vs_ir" in row else "")
        )
    return {"rows": rows, **figures}


def _silero_onnx() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("silero_vad")
    path = Path(spec.origin).parent / "data" / "silero_vad.onnx" if spec and spec.origin else None
    return path if path is not None and path.is_file() else None


def versions() -> dict:
    import onnxruntime
    import openvino

    import ovrnn

    return {
        "ovrnn": ovrnn.__version__,
        "openvino": openvino.__version__,
        "onnxruntime": onnxruntime.__version__,
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
    }


def render(R: dict) -> str:
    lines = ["# ovrnn bench", "", f"{R['versions']}, CPU, INFERENCE_PRECISION_HINT=f32, {R['seconds']:.0f} s"]
    if any(key in R["figures"] for key in TARGETS):
        lines += ["", "| figure | ovrnn | anchor | ratio (min-max) | target | |", "|---|---|---|---|---|---|"]
    for key, (target, what) in TARGETS.items():
        r = R["figures"].get(key)
        if r is None:
            continue
        spread = f" ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})" if "ratio_min" in r else ""
        spread += f", load {r['load'][0]}-{r['load'][1]}" if "load" in r else ""
        ours = f"{r['ours']:.3f} s" if "ours" in r else ""
        anchor = f"{r['anchor']:.3f} s" if "anchor" in r else ""
        lines.append(
            f"| {what} | {ours} | {anchor} | **{r['ratio']:.3g}**{spread} | ≤ {target} | {'met' if r['ratio'] <= target else 'NOT met'} |"
        )
    g = R.get("graph")
    if g:
        lines += [
            "",
            (
                "Every piece folds into RNNSeq (no cell, no TensorIterator), static and dynamic batch: "
                f"{g['dynamic_batch_folds']}; not counted: {KNOWN}"
            ),
            "",
            "| op | batch | direction | lengths | Y_c read | folds | leftovers per step | runtime layer types, T=264 |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['op']} | {r['batch']} | {r['direction']} | {r['lens']} | {'' if r['Y_c'] is None else r['Y_c']} | "
            f"{r['folded']}{' (known: see above)' if r['known_not_to_fold'] else ''} | {r['per_step']:.3f} | {r['types_T264']} "
            "|"
            for r in g["rows"]
        ]
        lines += [
            "",
            (
                f"Runtime layer types, T=256 forward H=128: ovrnn {g['types_T256']['ovrnn']}; OpenVINO import "
                f"{g['types_T256']['openvino_import']}"
            ),
        ]
    lat = R.get("latency")
    if lat:
        lines += [
            "",
            "| T | H | batch | ovrnn µs | OpenVINO µs | onnxruntime µs | ÷ OpenVINO | ÷ onnxruntime | max abs diff |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['T']} | {r['H']} | {r['batch']} | {r['ovrnn']:.0f} | {r['openvino']:.0f} | {r['onnxruntime']:.0f} | "
            f"{r['vs_openvino']:.2f} | {r['vs_onnxruntime']:.2f} | {r['max_abs_diff']:.1e} |"
            for r in lat["rows"]
        ]
        lines += [
            "",
            (
                f"Median ÷ onnxruntime: batch 1 {lat['latency_batch1_vs_onnxruntime']:.2f}, batch 16 "
                f"{lat['latency_batch16_vs_onnxruntime']:.2f}"
            ),
            "",
        ]
        lines += [
            (
                "| runtime sequence_lens, T=64 H=128 batch 1 | ovrnn µs | OpenVINO µs | onnxruntime µs | ÷ OpenVINO | ÷ "
                "onnxruntime | max abs diff |"
            ),
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['direction']} | {r['ovrnn']:.0f} | {r['openvino']:.0f} | {r['onnxruntime']:.0f} | {r['vs_openvino']:.2f} | "
            f"{r['vs_onnxruntime']:.2f} | {r['max_abs_diff']:.1e} |"
            for r in lat["lens_rows"]
        ]
        lines += [
            "",
            (
                "| GRU/LSTM (default activations, no P) | T | H | direction | batch | ovrnn µs | OpenVINO µs | onnxruntime µs | ÷ "
                "OpenVINO | ÷ onnxruntime | max abs diff |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['op']} | {r['T']} | {r['H']} | {r['direction']} | {r['batch']} | {r['ovrnn']:.0f} | {r['openvino']:.0f} | "
            f"{r['onnxruntime']:.0f} | {r['vs_openvino']:.2f} | {r['vs_onnxruntime']:.2f} | {r['max_abs_diff']:.1e} |"
            for r in lat["gl_rows"]
        ]
        lines += [
            "",
            "Median ÷ onnxruntime: "
            + ", ".join(f"{op} batch {B} {lat[f'{op}_latency_b{B}']['vs_onnxruntime']:.2f}" for op in ("GRU", "LSTM") for B in (1, 16)),
        ]
    st = R.get("stream")
    if st:
        lines += [
            "",
            (
                "| stream, batch 1, per call | ovrnn.Stream.feed µs | OpenVINO floor µs | stateless IR + host state µs | "
                "onnxruntime + host state µs (all / 1 thread) | ÷ floor | ÷ stateless IR | ÷ onnxruntime | steps/s | max abs diff |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['case']} | {r['stream']:.0f} | {r['openvino_floor']:.0f} | {r.get('stateless_host', float('nan')):.0f} | "
            f"{r['onnxruntime_host']:.0f} / {r['onnxruntime_host_1t']:.0f} | {r['vs_floor']:.2f} | "
            f"{r.get('vs_ir', float('nan')):.2f} | {r['vs_ort']:.2f} | {r['steps_per_second']:,.0f} | {r['max_abs_diff']:.1e} |"
            for r in st["rows"]
        ]
        lines += [
            "",
            (
                "| safe outputs, batch 1, per call | default: copies + lock µs | share_outputs=True: lock µs | before issue 30: "
                "views, no lock µs | ÷ share_outputs | ÷ before |"
            ),
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['case']} | {r['safe_us']:.1f} | {r['shared_us']:.1f} | {r['previous_us']:.1f} | {r['safe_vs_shared']:.3f} | "
            f"{r['safe_vs_previous']:.3f} |"
            for r in st["rows"]
        ]
    comp = R.get("compression")
    if comp:
        lines += [
            "",
            "| quantization-only error, LSTM H=128 T=1000 (uneven rows), max abs Y | t<10 | t<100 | all 1000 | mean |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {k} | {v['t<10']:.1e} | {v['t<100']:.1e} | {v['all']:.1e} | {v['mean']:.1e} |"
            for k, v in comp["int8_error_rows_vs_tensor"]["errors"].items()
        ]
        lines += [
            "",
            (
                f".bin ÷ f32 IR: int8 {comp['int8_bin']['each']}, int4 {comp['int4_bin']['each']}, int4 group 32 "
                f"{comp['int4_bin']['group_32']}; peak RSS growth {comp['int8_rss']['ours_mib']:.0f} MiB (int8) vs "
                f"{comp['int8_rss']['anchor_mib']:.0f} MiB (f32)"
            ),
        ]
    lines += bench_real.render({**R["figures"], **{k: R[k] for k in EXTRA if k in R and k != "serve"}})
    if "serve" in R:
        lines += [""] + bench_serve.render(R["serve"])
    return "\n".join(lines) + "\n"


RSS_CHILD = """
import sys, numpy as np, openvino as ov
def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key)) / 1024
core = ov.Core(); before = status("VmRSS")
c = core.compile_model(sys.argv[1], "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
r = c.create_infer_request(); r.infer({"X": np.zeros(tuple(c.input(0).get_shape()), np.float32)})
print(status("VmHWM") - before)
"""


def uneven_lstm(path: Path, T: int, H: int, I: int, direction: str = "forward", sigma: float = 1.0) -> Path:
    """An LSTM whose rows have log-normal ranges (σ = `sigma`), as trained gates differ; a stable recurrence."""
    D = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(H + T)
    k = 1 / np.sqrt(H)
    rows = np.exp(rng.normal(0, sigma, (D, 4 * H, 1)))
    W = (rng.uniform(-k, k, (D, 4 * H, I)) * rows).astype(np.float32)
    R = (rng.uniform(-k, k, (D, 4 * H, H)) * rows / rows.max() * 2).astype(np.float32)  # the largest row keeps |R| <= 2/sqrt(H)
    B = rng.uniform(-k, k, (D, 8 * H)).astype(np.float32)
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], hidden_size=H, direction=direction)
    graph = helper.make_graph(
        [node],
        "q",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, 1, I])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
        [numpy_helper.from_array(a, n) for a, n in ((W, "W"), (R, "R"), (B, "B"))],
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    return path


def s_compression(tmp: Path, n: int) -> dict:
    """--compress-weights: .bin, compile, latency and peak RSS ÷ the f32 IR; quantization-only error at T=1000."""
    import onnx
    import openvino as ov

    import ovrnn
    from ovrnn import reference
    from ovrnn.onnx.reading.read import graph_view
    from ovrnn.quantization import Compression, quantize
    from ovrnn.reference.budget import reference_inputs
    from ovrnn.semantics.graph import graph_nodes, normalise_all
    from ovrnn.semantics.nodes import recurrent_nodes

    out: dict = {}
    bins: dict = {"int8": {}, "int4": {}, "int4 group 32": {}}
    for direction in ("forward", "bidirectional"):
        path = uneven_lstm(tmp / f"q_{direction}.onnx", 64, 256, 256, direction)
        f32 = len(ovrnn.convert_model(str(path)).bin)
        for name, kw in (
            ("int8", dict(compress_weights="int8")),
            ("int4", dict(compress_weights="int4")),
            ("int4 group 32", dict(compress_weights="int4", group_size=32)),
        ):
            bins[name][direction] = round(len(ovrnn.convert_model(str(path), max_weight_error=float("inf"), **kw).bin) / f32, 4)
    out["int8_bin"] = {"ratio": max(bins["int8"].values()), "each": bins["int8"]}
    out["int4_bin"] = {"ratio": max(bins["int4"].values()), "each": bins["int4"], "group_32": bins["int4 group 32"]}
    path = uneven_lstm(tmp / "q_time.onnx", 256, 256, 256)
    xml32 = ovrnn.convert_model(str(path)).save(tmp / "q_f32" / "m.xml")
    xml8 = ovrnn.convert_model(str(path), compress_weights="int8", max_weight_error=float("inf")).save(tmp / "q_i8" / "m.xml")
    compile_time(xml8), compile_time(xml32)
    out["int8_compile"] = paired(lambda: compile_time(xml8), lambda: compile_time(xml32), n)
    core = ov.Core()
    reqs = {k: core.compile_model(str(p), "CPU", F32).create_infer_request() for k, p in (("int8", xml8), ("f32", xml32))}
    x = {"X": np.random.default_rng(0).uniform(-1, 1, (256, 1, 256)).astype(np.float32)}
    t = time_contenders({k: (lambda inputs, r=r: r.infer(inputs, share_inputs=True)) for k, r in reqs.items()}, x, 0.3)
    out["int8_latency"] = {"ours": t["int8"], "anchor": t["f32"], "ratio": t["int8"] / t["f32"]}
    rss: dict = {"int8": [], "f32": []}
    for _ in range(max(2, n // 2)):
        for k, p in (("int8", xml8), ("f32", xml32)):
            rss[k].append(
                float(
                    subprocess.run([sys.executable, "-c", RSS_CHILD, str(p)], check=True, capture_output=True, text=True).stdout.split()[-1]
                )
            )
    out["int8_rss"] = {
        "ours_mib": statistics.median(rss["int8"]),
        "anchor_mib": statistics.median(rss["f32"]),
        "ratio": statistics.median(rss["int8"]) / statistics.median(rss["f32"]),
    }
    # quantization-only error over 1000 steps, float64: one scale per row vs one per tensor
    model = onnx.load(str(uneven_lstm(tmp / "q_err.onnx", 1000, 128, 128)))
    view = graph_view(model)
    spec = normalise_all(view, graph_nodes(view, recurrent_nodes(view.model)))[0]
    inputs, attrs = reference_inputs(spec, 1000)
    original = reference.run_node("LSTM", inputs, attrs)

    def per_tensor(M, bits):
        qmax = 127 if bits == 8 else 7
        s = np.abs(M).max() / qmax
        return np.clip(np.rint(M / s), -qmax, qmax) * s

    errors = {}
    for name, deq in (
        ("int8 per row", lambda M: quantize(M, Compression("int8")).dequantize()),
        ("int8 per tensor", lambda M: per_tensor(M, 8)),
        ("int4 per row", lambda M: quantize(M, Compression("int4")).dequantize()),
        ("int4 group 32", lambda M: quantize(M, Compression("int4", 32)).dequantize()),
        ("int4 per tensor", lambda M: per_tensor(M, 4)),
    ):
        changed = list(inputs)
        changed[1], changed[2] = (np.stack([deq(m) for m in inputs[k]]) for k in (1, 2))
        e = np.abs(reference.run_node("LSTM", changed, attrs)[0] - original[0])  # Y [T, D, B, H]
        per_step = e.reshape(e.shape[0], -1).max(axis=1)
        errors[name] = {
            "t<10": float(per_step[:10].max()),
            "t<100": float(per_step[:100].max()),
            "all": float(per_step.max()),
            "mean": float(e.mean()),
        }
    out["int8_error_rows_vs_tensor"] = {"ratio": errors["int8 per row"]["all"] / errors["int8 per tensor"]["all"], "errors": errors}
    log(
        f"compression: bin int8 {out['int8_bin']['ratio']:.3f}, int4 {out['int4_bin']['ratio']:.3f}; compile "
        f"{out['int8_compile']['ratio']:.2f}; latency {out['int8_latency']['ratio']:.2f}; rss {out['int8_rss']['ratio']:.2f}"
    )
    return out


SECTIONS = ("convert", "compile", "graph", "latency", "stream", "compression")
EXTRA = (
    "arch",
    "kernels",
    "serve",
)  # only with --only: real architectures and the kernel grid (tools/bench_real.py); serving many streams (tools/bench_serve.py --quick)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "bench_results")
    p.add_argument("--quick", action="store_true", help="fewer pairs and a smaller latency grid (about a minute and a half)")
    p.add_argument(
        "--only", choices=SECTIONS + EXTRA, action="append", help="run only these sections; arch and kernels run only when named"
    )
    p.add_argument("--rounds", type=int, default=11, help="alternated rounds per row in arch and kernels")
    args = p.parse_args(argv)
    n = 3 if args.quick else 7
    R = {"versions": versions(), "figures": {}}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for name in args.only or SECTIONS:
            log(f"section {name}")
            if name == "convert":
                R["figures"].update(s_convert(tmp, n))
            elif name == "compile":
                R["figures"].update(s_compile(tmp, n))
            elif name == "compression":
                R["compression"] = s_compression(tmp, n)
                R["figures"].update({k: v for k, v in R["compression"].items() if k in TARGETS})
            elif name == "graph":
                R["graph"] = s_graph(tmp)
                R["figures"].update({k: v for k, v in R["graph"].items() if "leftovers" in k})
            elif name == "serve":  # its own figures and targets (>= and <=): bench_serve.TARGETS
                R["serve"] = bench_serve.run(
                    ["silero", "lstm128"],
                    list(bench_serve.SIDES),
                    args.quick,
                    25.0,
                    bench_serve.COST_N,
                    2.0 if args.quick else 4.0,
                    tmp / "serve_models",
                )
            elif name in EXTRA:
                R[name] = getattr(bench_real, f"s_{name}")(tmp, args.rounds)
                R["figures"].update({k: v for k, v in R[name].items() if k in bench_real.TARGETS})
            elif name == "stream":
                R["stream"] = s_stream(tmp, args.quick)
                R["figures"].update({k: v for k, v in R["stream"].items() if k in TARGETS})
            else:
                R["latency"] = s_latency(tmp, args.quick)
                R["figures"].update({k: v for k, v in R["latency"].items() if k in TARGETS})
    R["seconds"] = time.perf_counter() - START
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(R, indent=1, default=str))
    (args.out / "bench.md").write_text(render(R))
    print(render(R))
    return 0


START = time.perf_counter()

if __name__ == "__main__":
    sys.exit(main())

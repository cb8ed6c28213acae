"""`tools/bench.py --only arch` and `--only kernels`: batch-1 latency on real architectures and on the kernel grid.

Three sides, all on this CPU at batch 1, 1 thread each (INFERENCE_NUM_THREADS=1 and
ENABLE_CPU_PINNING=False, unpinned like onnxruntime's; onnxruntime intra_op_num_threads=1,
sequential, no spinning), f32 (INFERENCE_PRECISION_HINT=f32: this CPU would compile bf16 otherwise):
* ovrnn: `ovrnn.convert_model(.onnx, device="CPU")`: the step forms measured for this CPU (the
  form column: `cell` chain or `explicit` MatMul chain, per direction, from the IR's rt_info);
* OpenVINO: its own ONNX import, `core.read_model(.onnx)` reshaped to the same static shapes;
* onnxruntime: `InferenceSession.run(None, feed)` on the .onnx (the anchor of every ratio).
OpenVINO's requests get their input tensors once (`set_tensor`, shared memory) and are called with
`infer()` and no argument. Per round every side runs back to back for about `ROUND_S`, the order
reversing each round, and each call is timed: a round's figure is its median call (the machine's
other jobs preempt single calls). A ratio is taken round by round against onnxruntime, and a row
shows its median with the 10th-90th percentile spread. Every row also checks the outputs against
onnxruntime's (max abs difference over all outputs).

arch: the whole models of tools/make_bench_models.py (built into its cache if missing and a
Python that can build them is named in OVRNN_BENCH_TORCH_PYTHON / OVRNN_BENCH_TF_PYTHON), plus
two streams per call: ovrnn's `--stateful` IR against onnxruntime with the state carried by hand
(a one-step LSTM H=128, and the silero VAD).
kernels: one ONNX node: RNN (tanh), GRU linear_before_reset 0 and 1, LSTM (default activations);
H 64, 128, 256 (I = H); T 1, 16, 64; forward and bidirectional.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

ROOT = Path(__file__).resolve().parent.parent
# ENABLE_CPU_PINNING=False: pinned to a core the machine's other jobs also use, OpenVINO's one thread
# measured 2.1-3.6x onnxruntime's (unpinned) time on an LSTM where unpinned it is 1.03-1.12x
ONE = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": False}
ROUND_S = 0.02
TARGETS = {  # figure: (target, what the ratio compares); all ÷ onnxruntime in the same run
    "arch_median": (1.0, "whole real architectures ÷ onnxruntime, median over the models"),
    "arch_worst": (1.5, "whole real architectures ÷ onnxruntime, worst model"),
    "gru_lbr0_T64": (1.4, "GRU linear_before_reset=0, T=64 forward ÷ onnxruntime, worst of H 64/128/256"),
    "bilstm_H256_T64": (1.0, "bidirectional LSTM H=256, T=64 ÷ onnxruntime"),
    "stream_lstm_H128_K1": (1.0, "one-step LSTM H=128 stream (stateful IR) ÷ onnxruntime with the state carried by hand, per call"),
    "stream_silero": (0.5, "silero VAD stream (stateful IR, 512 samples) ÷ onnxruntime with the state carried by hand, per call"),
}


def brief(e: Exception) -> str:
    """One line of an exception: OpenVINO's summary line where it has one."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    summary = [ln for ln in lines if ln.startswith("-- Conversion is failed for")]
    return f"{type(e).__name__}: {(summary or lines or [''])[0][:240]}"


def machine() -> str:
    """The CPU as Linux names it, its vector extensions that decide OpenVINO's kernels, cores and load."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        name = next(ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name"))
        flags = set(next(ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")))
        isa = [f for f in ("avx512f", "avx512_bf16", "amx_tile", "amx_bf16") if f in flags]
        load = Path("/proc/loadavg").read_text().split()[0]
    except (OSError, StopIteration):
        import platform

        return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    return f"{name} ({', '.join(isa) or 'no AVX-512'}), {os.cpu_count()} cores, load average {load} at the start"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- sides and timing


def ov_side(model, feed: dict, config: dict = ONE):
    """(infer, request): the model compiled on CPU, its inputs set once as shared tensors."""
    import openvino as ov

    compiled = ov.Core().compile_model(model, "CPU", config)
    request = compiled.create_infer_request()
    for port in compiled.inputs:  # a port may carry several tensor names (the ONNX input's among them)
        name = next((n for n in port.get_names() if n in feed), port.get_any_name())
        request.set_tensor(port, ov.Tensor(np.ascontiguousarray(feed[name]), shared_memory=True))
    request.infer()
    return request.infer, request


def ir_forms(xml: Path) -> str:
    """The step forms ovrnn wrote (rt_info: each node's fwd/rev value ends with its form), counted: 'cell 2, explicit 4'."""
    import re
    from collections import Counter

    # ovrnn's own writer: <info name="fwd" value="... cell"/>; a whole model saved by OpenVINO: <fwd value="... cell" />
    found = Counter(
        m.group(1) for m in re.finditer(r'(?:<info name="(?:fwd|rev)"|<(?:fwd|rev)) value="[^"]*?(\w+)" ?/>', Path(xml).read_text())
    )
    return ", ".join(f"{form} {n}" for form, n in sorted(found.items())) or "none"


def ov_outputs(request) -> dict:
    return {name: np.array(request.get_tensor(port).data) for port in request.model_outputs for name in port.get_names()}


def ort_session(path: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def alternate(sides: dict, rounds: int, round_s: float = ROUND_S) -> dict:
    """{side: [median seconds per call, per round]}: each side runs `round_s` worth of calls per round, order reversed every round."""
    names = list(sides)
    calls = {}
    for name in names:
        fn = sides[name]
        for _ in range(2):
            fn()
        start = time.perf_counter()
        for _ in range(3):
            fn()
        calls[name] = max(3, min(5000, int(round_s / max((time.perf_counter() - start) / 3, 1e-7))))
    out = {n: [] for n in names}
    clock = time.perf_counter
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            fn, k = sides[name], calls[name]
            each = [0.0] * k
            for i in range(k):
                start = clock()
                fn()
                each[i] = clock() - start
            out[name].append(statistics.median(each))  # the median call: a preemption by the machine's other jobs hits single calls
    return out


def ratios(times: dict, side: str, anchor: str = "onnxruntime") -> dict:
    per = np.array(times[side]) / np.array(times[anchor])
    return {"ratio": float(np.median(per)), "p10": float(np.percentile(per, 10)), "p90": float(np.percentile(per, 90))}


def max_diff(got: dict, want: dict) -> float:
    common = [k for k in want if k in got]
    if not common:
        return float("nan")
    return max(float(np.abs(np.asarray(got[k], np.float64) - np.asarray(want[k], np.float64)).max()) for k in common)


def three_sides(onnx_path: Path, feed: dict, input_flag: str | None, shapes: dict, rounds: int, tmp: Path, tag: str) -> dict:
    """Time ovrnn's IR, OpenVINO's import and onnxruntime on one model; check the outputs."""
    import openvino as ov

    import ovrnn

    xml = ovrnn.convert_model(str(onnx_path), input=input_flag, device="CPU").save(
        tmp / tag / "model.xml"
    )  # the forms measured for this CPU
    session = ort_session(onnx_path)
    want = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    ours, request = ov_side(str(xml), feed)
    row = {"max_diff": max_diff(ov_outputs(request), want), "forms": ir_forms(xml)}
    sides = {"ovrnn": ours, "onnxruntime": lambda: session.run(None, feed)}
    try:
        imported = ov.Core().read_model(str(onnx_path))
        imported.reshape({name: shape for name, shape in shapes.items() if name in {p.get_any_name() for p in imported.inputs}})
        theirs, their_request = ov_side(imported, feed)
        sides["openvino"] = theirs
        row["openvino_max_diff"] = max_diff(ov_outputs(their_request), want)
    except Exception as e:  # noqa: BLE001 (OpenVINO's import refusing a model is a result)
        row["openvino_error"] = brief(e)
    times = alternate(sides, rounds)
    row |= {f"{k}_us": statistics.median(v) * 1e6 for k, v in times.items()}
    row["vs_onnxruntime"] = ratios(times, "ovrnn")
    if "openvino" in times:
        row["vs_openvino"] = ratios(times, "ovrnn", "openvino")
        row["openvino_vs_onnxruntime"] = ratios(times, "openvino")
    return row


# ----------------------------------------------------------------------------- arch


def models_dir() -> Path:
    return Path(os.environ.get("OVRNN_BENCH_MODELS") or ROOT / "bench_results" / "models")


def ensure_models(directory: Path) -> tuple[dict, list]:
    """The manifest of the models there, building the missing ones with the Pythons named in the environment."""
    import json

    sys.path.insert(0, str(ROOT / "tools"))
    import make_bench_models

    names = list(make_bench_models.available())
    manifest_path = directory / "manifest.json"

    def missing():
        have = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        return [n for n in names if n not in have or not (directory / f"{n}.onnx").exists()]

    for python in filter(None, (sys.executable, os.environ.get("OVRNN_BENCH_TORCH_PYTHON"), os.environ.get("OVRNN_BENCH_TF_PYTHON"))):
        todo = missing()
        if not todo:
            break
        log(f"building {', '.join(todo)} with {python}")
        subprocess.run(
            [python, str(ROOT / "tools" / "make_bench_models.py"), "--out", str(directory), *[a for n in todo for a in ("--only", n)]],
            capture_output=True,
            text=True,
        )
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    return {n: manifest[n] for n in names if n not in missing()}, missing()


def model_feed(spec: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    feed = {}
    for name, (shape, dtype) in spec["inputs"].items():
        if dtype.startswith("int"):
            feed[name] = rng.integers(0, 100, shape).astype(dtype)
        else:
            feed[name] = rng.uniform(-1, 1, shape).astype(dtype) * (0.1 if name == "input" else 1.0)
    return feed


def s_arch(tmp: Path, rounds: int) -> dict:
    start = machine()
    directory = models_dir()
    manifest, missing = ensure_models(directory)
    rows = []
    for i, (name, spec) in enumerate(manifest.items()):
        feed = model_feed(spec, i)
        if name == "silero_vad":
            feed["sr"] = np.array(16000, np.int64)
        shapes = {n: s for n, (s, _) in spec["inputs"].items()}
        try:
            row = three_sides(directory / f"{name}.onnx", feed, spec["input_flag"], shapes, rounds, tmp, name)
        except Exception as e:  # noqa: BLE001 (a model ovrnn cannot convert is a row, not the end of the run)
            rows.append({"model": name, "description": spec["description"], "error": brief(e)})
            log(f"{name}: {rows[-1]['error']}")
            continue
        rows.append({"model": name, "description": spec["description"], "recurrent": spec["recurrent"], **row})
        v = row["vs_onnxruntime"]
        log(
            f"{name}: ovrnn {row['ovrnn_us']:.0f} µs, ÷ onnxruntime {v['ratio']:.2f} ({v['p10']:.2f}-{v['p90']:.2f}), ÷ "
            f"OpenVINO {row.get('vs_openvino', {}).get('ratio', float('nan')):.2f}, max diff {row['max_diff']:.1e}"
        )
    timed = [r["vs_onnxruntime"]["ratio"] for r in rows if "vs_onnxruntime" in r]
    out = {
        "machine": start,
        "rows": rows,
        "missing": missing,
        "models_dir": str(directory),
        "streams": s_streams(tmp, directory, manifest, rounds),
    }
    if timed:
        vs_ov = [r["vs_openvino"]["ratio"] for r in rows if "vs_openvino" in r]
        out["arch_median"] = {"ratio": statistics.median(timed)}
        out["arch_worst"] = {"ratio": max(timed)}
        out["summary"] = {
            "models": len(timed),
            "failed": [r["model"] for r in rows if "error" in r],
            "at_or_below_1": sum(r <= 1.0 for r in timed),
            "median_vs_openvino": statistics.median(vs_ov) if vs_ov else None,
        }
    for key in ("stream_lstm_H128_K1", "stream_silero"):
        if key in out["streams"]:
            out[key] = {"ratio": out["streams"][key]["vs_onnxruntime"]["ratio"]}
    return out


def s_streams(tmp: Path, directory: Path, manifest: dict, rounds: int) -> dict:
    """Per-call latency of a stateful IR (state inside, input set once) ÷ onnxruntime with the state carried by hand."""
    import ovrnn

    out = {}
    lstm = one_node(tmp / "stream_lstm.onnx", "LSTM", 1, 128, "forward", state_inputs=True)
    cases = {
        "stream_lstm_H128_K1": (
            lstm,
            None,
            ["initial_h=Y_h", "initial_c=Y_c"],
            {"X": (1, 1, 128)},
            {"initial_h": "Y_h", "initial_c": "Y_c"},
        )
    }
    if "silero_vad" in manifest:
        cases["stream_silero"] = (
            directory / "silero_vad.onnx",
            manifest["silero_vad"]["input_flag"],
            ["state=stateN"],
            {"input": (1, 512)},
            {"state": "stateN"},
        )
    for key, (path, flag, stateful, chunk, carried) in cases.items():
        try:
            xml = ovrnn.convert_model(str(path), input=flag, stateful=stateful, device="CPU").save(tmp / key / "model.xml")
            rng = np.random.default_rng(7)
            x = {n: (rng.standard_normal(s) * 0.1).astype(np.float32) for n, s in chunk.items()}
            session = ort_session(path)
            state = {n: np.zeros(_shape(session, n), np.float32) for n in carried}
            extra = {"sr": np.array(16000, np.int64)} if key == "stream_silero" else {}
            out_names = [o.name for o in session.get_outputs()]

            def ort_call(session=session, out_names=out_names, x=x, state=state, extra=extra, carried=carried):
                result = dict(zip(out_names, session.run(None, {**x, **state, **extra})))
                for n, o in carried.items():
                    state[n] = result[o]
                return result

            ours, request = ov_side(str(xml), x)
            want = [ort_call() for _ in range(5)]
            request.reset_state()
            got = []
            for _ in range(5):
                request.infer()
                got.append(ov_outputs(request))
            diff = max(max_diff(g, {k: v for k, v in w.items() if k not in carried.values()}) for g, w in zip(got, want))
            times = alternate({"ovrnn": ours, "onnxruntime": ort_call}, 6 * rounds, ROUND_S / 4)  # a call is short: many short rounds
            out[key] = {
                "ovrnn_us": statistics.median(times["ovrnn"]) * 1e6,
                "onnxruntime_us": statistics.median(times["onnxruntime"]) * 1e6,
                "vs_onnxruntime": ratios(times, "ovrnn"),
                "max_diff_5_calls": diff,
            }
            log(
                f"{key}: ovrnn {out[key]['ovrnn_us']:.1f} µs, onnxruntime {out[key]['onnxruntime_us']:.1f} µs, ratio "
                f"{out[key]['vs_onnxruntime']['ratio']:.2f}, max diff {diff:.1e}"
            )
        except Exception as e:  # noqa: BLE001
            out[key + "_error"] = brief(e)
            log(f"{key}: {out[key + '_error']}")
    return out


def _shape(session, name: str) -> list:
    shape = next(i.shape for i in session.get_inputs() if i.name == name)
    return [d if isinstance(d, int) else 1 for d in shape]


# ----------------------------------------------------------------------------- kernels

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def one_node(path: Path, op: str, T: int, H: int, direction: str, lbr: int = 0, state_inputs: bool = False) -> Path:
    """One ONNX RNN (tanh) / GRU / LSTM node, I = H, batch 1, uniform(±1/√H) weights (a stable recurrence)."""
    D, G = (2 if direction == "bidirectional" else 1), GATES[op]
    rng = np.random.default_rng(T * 7 + H + lbr)
    s = 1 / np.sqrt(H)
    inits = [
        numpy_helper.from_array(rng.uniform(-s, s, shape).astype(np.float32), n)
        for n, shape in (("W", (D, G * H, H)), ("R", (D, G * H, H)), ("B", (D, 2 * G * H)))
    ]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, 1, H])]
    node_inputs = ["X", "W", "R", "B"]
    if state_inputs:
        node_inputs += ["", "initial_h"] + (["initial_c"] if op == "LSTM" else [])
        inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [D, 1, H]) for n in node_inputs[5:]]
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    attrs = {"hidden_size": H, "direction": direction}
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    node = helper.make_node(op, node_inputs, outputs, **attrs)
    graph = helper.make_graph([node], "kernel", inputs, [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs], inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    return path


KERNELS = [("RNN", 0), ("GRU", 0), ("GRU", 1), ("LSTM", 0)]
VERBOSE_CHILD = """
import sys, numpy as np, openvino as ov
c = ov.Core().compile_model(sys.argv[1], "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1})
c.create_infer_request().infer({p.get_any_name(): np.zeros(tuple(p.get_shape()), np.float32) for p in c.inputs})
"""


def onednn_kernels(xml: Path) -> list[str]:
    """The oneDNN primitives one infer of the IR executes, as `kind implementation` (ONEDNN_VERBOSE=1, a child process).

    OpenVINO labels every RNNSeq `ref_any_*`; this is the kernel that runs (the reason GRU lbr=0 is slow in f32)."""
    r = subprocess.run(
        [sys.executable, "-c", VERBOSE_CHILD, str(xml)], capture_output=True, text=True, env={**os.environ, "ONEDNN_VERBOSE": "1"}
    )
    seen = []
    for line in r.stdout.splitlines():
        parts = line.split(",")
        if len(parts) > 6 and parts[2:4] == ["primitive", "exec"] and parts[5] != "reorder":
            name = f"{parts[5]} {parts[6]}"
            if name not in seen:
                seen.append(name)
    return seen


def kernel_name(op: str, lbr: int) -> str:
    return f"GRU lbr={lbr}" if op == "GRU" else op


def s_kernels(tmp: Path, rounds: int) -> dict:
    start, rows = machine(), []
    grid = [(op, lbr, H, T, d) for op, lbr in KERNELS for H in (64, 128, 256) for T in (1, 16, 64) for d in ("forward", "bidirectional")]
    for op, lbr, H, T, direction in grid:
        tag = f"k_{op}{lbr}_{H}_{T}_{direction}"
        path = one_node(tmp / f"{tag}.onnx", op, T, H, direction, lbr)
        x = {"X": np.random.default_rng(H + T).uniform(-1, 1, (T, 1, H)).astype(np.float32)}
        row = three_sides(path, x, None, {"X": [T, 1, H]}, rounds, tmp, tag)
        rows.append({"op": kernel_name(op, lbr), "H": H, "T": T, "direction": direction, **row})
        log(
            f"{kernel_name(op, lbr)} H={H} T={T} {direction}: ÷ onnxruntime {row['vs_onnxruntime']['ratio']:.2f}, ÷ OpenVINO "
            f"{row.get('vs_openvino', {}).get('ratio', float('nan')):.2f}, max diff {row['max_diff']:.1e}"
        )
    pick = lambda **kw: [r for r in rows if all(r[k] == v for k, v in kw.items())]  # noqa: E731
    out = {
        "machine": start,
        "rows": rows,
        "onednn": {kernel_name(op, lbr): onednn_kernels(tmp / f"k_{op}{lbr}_128_16_forward" / "model.xml") for op, lbr in KERNELS},
    }
    out["gru_lbr0_T64"] = {"ratio": max(r["vs_onnxruntime"]["ratio"] for r in pick(op="GRU lbr=0", T=64, direction="forward"))}
    out["bilstm_H256_T64"] = {"ratio": pick(op="LSTM", H=256, T=64, direction="bidirectional")[0]["vs_onnxruntime"]["ratio"]}
    out["per_op"] = {}
    for op, lbr in KERNELS:
        vals = [r["vs_onnxruntime"]["ratio"] for r in pick(op=kernel_name(op, lbr))]
        out["per_op"][kernel_name(op, lbr)] = {
            "median": statistics.median(vals),
            "worst": max(vals),
            "best": min(vals),
            "at_or_below_1": sum(v <= 1.0 for v in vals),
            "cases": len(vals),
        }
    return out


# ----------------------------------------------------------------------------- report


def _r(v: dict | None) -> str:
    return "" if not v else f"{v['ratio']:.2f} ({v['p10']:.2f}-{v['p90']:.2f})"


def render(R: dict) -> list[str]:
    lines = []
    figures = {k: v for k, v in R.items() if k in TARGETS}
    if figures:
        lines += ["", "| figure (÷ onnxruntime, same run, 1 thread each, f32, batch 1) | ratio | target | |", "|---|---|---|---|"]
        for key, (target, what) in TARGETS.items():
            if key in figures:
                r = figures[key]["ratio"]
                lines.append(f"| {what} | **{r:.2f}** | ≤ {target} | {'met' if r <= target else 'NOT met'} |")
    arch = R.get("arch")
    if arch:
        lines += ["", f"Whole models on {arch['machine']}."]
        s = arch.get("summary")
        if s:
            failed = f"; not converted: {', '.join(s['failed'])} (their rows say why)" if s["failed"] else ""
            lines += [
                "",
                (
                    f"Whole models: {s['models']} timed, {s['at_or_below_1']} at or below 1.0 ÷ onnxruntime; median ÷ OpenVINO's "
                    f"import {s['median_vs_openvino']:.2f}{failed}."
                ),
            ]
        if arch["missing"]:
            lines += [
                "",
                (
                    f"Not built (so not timed): {', '.join(arch['missing'])}. Build them with a Python that has torch / "
                    f"tensorflow+tf2onnx+tf-keras: `python tools/make_bench_models.py --out {arch['models_dir']}` (or set "
                    "OVRNN_BENCH_TORCH_PYTHON / OVRNN_BENCH_TF_PYTHON)."
                ),
            ]
        lines += [
            "",
            (
                "| model | ovrnn forms (directions) | ovrnn µs | OpenVINO import µs | onnxruntime µs | ovrnn ÷ onnxruntime | ovrnn "
                "÷ OpenVINO | OpenVINO ÷ onnxruntime | max abs diff (ovrnn / OpenVINO vs onnxruntime) |"
            ),
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in arch["rows"]:
            if "error" in r:
                lines.append(f"| {r['model']} | {r['error']} | | | | | | | |")
                continue
            ov_us = f"{r['openvino_us']:.0f}" if "openvino_us" in r else r.get("openvino_error", "")
            ov_diff = f"{r['openvino_max_diff']:.1e}" if "openvino_max_diff" in r else "-"
            lines.append(
                f"| {r['model']}: {r['description']} | {r.get('forms', '')} | {r['ovrnn_us']:.0f} | {ov_us} | "
                f"{r['onnxruntime_us']:.0f} | **{_r(r['vs_onnxruntime'])}** | {_r(r.get('vs_openvino'))} | "
                f"{_r(r.get('openvino_vs_onnxruntime'))} | {r['max_diff']:.1e} / {ov_diff} |"
            )
        st = arch.get("streams", {})
        if st:
            lines += [
                "",
                "| stream, per call | ovrnn stateful µs | onnxruntime (state by hand) µs | ratio | max abs diff, 5 calls |",
                "|---|---|---|---|---|",
            ]
            lines += [
                f"| {k} | {v['ovrnn_us']:.1f} | {v['onnxruntime_us']:.1f} | **{_r(v['vs_onnxruntime'])}** | {v['max_diff_5_calls']:.1e} |"
                for k, v in st.items()
                if isinstance(v, dict)
            ]
            lines += [f"| {k} | {v} | | | |" for k, v in st.items() if isinstance(v, str)]
    ker = R.get("kernels")
    if ker:
        lines += [
            "",
            f"Kernels on {ker['machine']}.",
            "",
            "| kernel (1 thread, I=H, batch 1) | cases | median ÷ onnxruntime | best | worst | at or below 1.0 |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {op} | {v['cases']} | {v['median']:.2f} | {v['best']:.2f} | {v['worst']:.2f} | {v['at_or_below_1']} |"
            for op, v in ker["per_op"].items()
        ]
        lines += [
            "",
            "oneDNN primitives ovrnn's IR runs (ONEDNN_VERBOSE=1, H=128, T=16 forward; none: no oneDNN primitive, e.g. an "
            "explicit MatMul chain on MLAS FullyConnected): "
            + "; ".join(f"{op}: {', '.join(k) or 'none'}" for op, k in ker.get("onednn", {}).items()),
        ]
        lines += [
            "",
            (
                "| op | H | T | direction | ovrnn form | ovrnn µs | OpenVINO µs | onnxruntime µs | ovrnn ÷ onnxruntime | ovrnn ÷ "
                "OpenVINO | max abs diff |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['op']} | {r['H']} | {r['T']} | {r['direction']} | {r.get('forms', '')} | {r['ovrnn_us']:.0f} | "
            f"{r.get('openvino_us', float('nan')):.0f} | {r['onnxruntime_us']:.0f} | **{_r(r['vs_onnxruntime'])}** | "
            f"{_r(r.get('vs_openvino'))} | {r['max_diff']:.1e} |"
            for r in ker["rows"]
        ]
    return lines

"""A bidirectional layer at batch 1: which way of running its two directions is fastest on this CPU.

    python tools/bench_bidir.py [--op LSTM] [--H 64,128,256,512] [--T 64] [--rounds 15] [--paired]

One bidirectional node (default activations, I = H, batch 1, seeded weights), timed in one process
against onnxruntime on one thread, sides alternated (the order reverses every round), every call
timed, a round's figure its median call, the ratio taken round by round; the median and the
10th-90th percentiles over the rounds are printed. Every side's Y is checked against
onnxruntime's. The sides (docs/performance.md#both-directions-at-once-measured-not-adopted):

* ``ovrnn 1`` / ``ovrnn 2``: ovrnn's IR (``convert_model(device="CPU")``) on 1 and 2 threads;
* ``import 1`` / ``import 2``: OpenVINO's own import of the .onnx (one bidirectional sequence);
* ``tensor parallel 2``: ovrnn's IR on 2 threads with MODEL_DISTRIBUTION_POLICY=TENSOR_PARALLEL;
* ``two requests``: the forward and the reverse direction as two IRs of one thread each, both
  started with ``start_async()`` and then waited for: the two directions at once, which no single
  request does (a runtime split, not an IR form);
* ``onnxruntime all``: onnxruntime with its default threads.

``--model NAME`` times a whole model of ``tools/make_bench_models.py`` (from ``--models``, default
$OVRNN_BENCH_MODELS or bench_results/models) instead: ovrnn's IR on 1 and 2 threads and **split**,
the same IR cut by ovrnn's layer names (``<node>/fwd/...``, ``<node>/rev/...``) into stages run one
after the other, the ops between bidirectional layers as one request on 2 threads and each layer's
two directions as two one-thread requests at once; its outputs must equal the uncut IR's
(``--ort-all`` adds onnxruntime on all cores, whose spinning pool slows the other sides).

``--paired`` times, on one thread, the forms that put both directions into one chain (one forward
node of hidden 2H over [x_t, x_(T-1-t)] with block-diagonal W/R/B, written as ONNX and converted by
ovrnn as cells and as a MatMul chain) against ovrnn's two chains in both forms.

A side with two threads disturbs the others in one process (docs/performance.md#threads-at-batch-1):
its rows are indicative; tools/bench_threads.py runs a process per side. It asserts nothing. On a
machine shared with other work, say so beside the numbers (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, load, numpy_helper, save

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
import bench  # noqa: E402 (beside this file)

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
PROPS = {"INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": False, "PERFORMANCE_HINT": "LATENCY"}


def weights(onnx_path: Path) -> dict:
    return {t.name: numpy_helper.to_array(t) for t in load(str(onnx_path)).graph.initializer}


def node_model(path: Path, op: str, T: int, I: int, H: int, w: dict, direction: str, extra: list | None = None, x: str = "X") -> Path:
    """One op node with initializers W/R/B over the graph input X [T, 1, I] (or over `x`, made from X
    by `extra`: (nodes before, nodes after, their initializers))."""
    outs = ["Y", "Y_h"]
    node = helper.make_node(
        op,
        [x, "W", "R", "B"],
        outs if not extra else ["Yn", "Y_hn"],
        hidden_size=H,
        direction=direction,
        **({"activations": ["Tanh"]} if op == "RNN" and direction != "bidirectional" else {}),
    )
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    nodes = [node]
    if extra:
        nodes = extra[0] + nodes + extra[1]
        inits += extra[2]
    graph = helper.make_graph(
        nodes,
        "bidir",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, 1, I if x == "X" else I // 2])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs],
        inits,
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    return path


def paired_model(path: Path, op: str, T: int, I: int, H: int, w: dict) -> Path:
    """One forward node of hidden 2H over [x_t, x_(T-1-t)]: gate k's rows are [direction 0 | direction 1],
    W/R block-diagonal (the zero blocks add exact zeros), the reverse half of Y reversed back."""
    g, H2 = GATES[op], 2 * H
    W, R, B = w["W"], w["R"], w["B"]
    pw, pr, pb = np.zeros((1, g * H2, 2 * I), np.float32), np.zeros((1, g * H2, H2), np.float32), np.zeros((1, 2 * g * H2), np.float32)
    for d in range(2):
        for k in range(g):
            rows, src = slice(k * H2 + d * H, k * H2 + (d + 1) * H), slice(k * H, (k + 1) * H)
            pw[0, rows, d * I : (d + 1) * I], pr[0, rows, d * H : (d + 1) * H] = W[d, src], R[d, src]
            pb[0, rows], pb[0, g * H2 :][rows] = B[d, src], B[d, g * H :][src]
    back = numpy_helper.from_array(np.arange(T - 1, -1, -1, dtype=np.int64), "back")
    halves, state = (
        numpy_helper.from_array(np.array([H, H], np.int64), "halves"),
        numpy_helper.from_array(np.array([2, 1, H], np.int64), "state"),
    )
    before = [helper.make_node("Gather", ["X", "back"], ["Xr"], axis=0), helper.make_node("Concat", ["X", "Xr"], ["Xp"], axis=2)]
    after = [
        helper.make_node("Split", ["Yn", "halves"], ["Yf", "Yb"], axis=3),
        helper.make_node("Gather", ["Yb", "back"], ["Ybr"], axis=0),
        helper.make_node("Concat", ["Yf", "Ybr"], ["Y"], axis=1),
        helper.make_node("Reshape", ["Y_hn", "state"], ["Y_h"]),
    ]
    return node_model(path, op, T, 2 * I, H2, {"W": pw, "R": pr, "B": pb}, "forward", [before, after, [back, halves, state]], x="Xp")


def median_call_rounds(sides: dict, rounds: int, seconds: float = 0.02) -> dict:
    """{side: per-round median call (s)}, the order reversed every other round."""
    names, clock = list(sides), time.perf_counter
    calls = {}
    for n in names:
        for _ in range(3):
            sides[n]()
        start = clock()
        sides[n]()
        calls[n] = max(5, min(2000, int(seconds / max(clock() - start, 1e-7))))
    out = {n: [] for n in names}
    for r in range(rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            fn, each = sides[n], []
            for _ in range(calls[n]):
                start = clock()
                fn()
                each.append(clock() - start)
            out[n].append(float(np.median(each)))
    return {n: np.array(v) for n, v in out.items()}


def preset(compiled, x: np.ndarray):
    import openvino as ov

    request = compiled.create_infer_request()
    request.set_tensor(compiled.inputs[0], ov.Tensor(x, shared_memory=True))
    return request


def y_of(request, compiled) -> np.ndarray:
    return next(request.get_tensor(p).data for p in compiled.outputs if "Y" in p.get_names())


def sides_for(op: str, T: int, H: int, tmp: Path, x: np.ndarray, paired: bool) -> dict:
    """{side: (call, Y after one call)}; ovrnn's IRs as convert_model writes them."""
    import onnxruntime as ort
    import openvino as ov

    import ovrnn

    core = ov.Core()
    path = bench.make_rnn(tmp / f"{op}_{H}.onnx", T, H, H, "bidirectional", 1, op=op)
    w = weights(path)

    def compiled(model, threads: int, extra: dict | None = None):
        return core.compile_model(model, "CPU", PROPS | {"INFERENCE_NUM_THREADS": threads} | (extra or {}))

    def ov_side(model, threads: int, extra: dict | None = None):
        c = compiled(model, threads, extra)
        request = preset(c, x)
        request.infer()
        return request.infer, y_of(request, c)

    def ir(onnx_path: Path, **kw) -> str:
        return str(
            ovrnn.convert_model(str(onnx_path), **kw).save(
                onnx_path.with_name(onnx_path.stem + "_" + "_".join(f"{v}" for v in kw.values()) + ".xml")
            )
        )

    out = {}
    for threads in (1, 0):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        out["onnxruntime " + ("1" if threads else "all")] = (lambda s=session: s.run(None, {"X": x}), session.run(None, {"X": x})[0])
        if paired:
            break
    if paired:
        pair = paired_model(tmp / f"{op}_{H}_paired.onnx", op, T, H, H, w)
        for name, (src, kw) in {
            "two chains, CPU forms": (path, {"device": "CPU"}),
            "two MatMul chains": (path, {"lowering": "matmul"}),
            "paired MatMul chain": (pair, {"lowering": "matmul"}),
            "paired cell chain": (pair, {"lowering": "cell"}),
        }.items():
            out[name] = ov_side(ir(src, **kw), 1)
        return out
    xml = ir(path, device="CPU")
    out["ovrnn 1"], out["ovrnn 2"] = ov_side(xml, 1), ov_side(xml, 2)
    imported = core.read_model(str(path))
    out["import 1"], out["import 2"] = ov_side(imported, 1), ov_side(imported, 2)
    out["tensor parallel 2"] = ov_side(xml, 2, {"MODEL_DISTRIBUTION_POLICY": {ov.properties.hint.ModelDistributionPolicy.TENSOR_PARALLEL}})
    halves = []
    for d, direction in enumerate(("forward", "reverse")):
        half = node_model(tmp / f"{op}_{H}_{direction}.onnx", op, T, H, H, {k: v[d : d + 1] for k, v in w.items()}, direction)
        c = compiled(ir(half, device="CPU"), 1, {"NUM_STREAMS": 1})
        halves.append((preset(c, x), c))

    def both():
        for request, _ in halves:
            request.start_async()
        for request, _ in halves:
            request.wait()

    both()
    out["two requests"] = (both, np.concatenate([y_of(r, c) for r, c in halves], axis=1))
    return out


def direction_of(name: str) -> str | None:
    """'<node>/fwd' or '<node>/rev' for a layer of a direction's chain in ovrnn's IR, else None."""
    found = re.search(r"^(.*?/(fwd|rev))/", name)
    return found.group(1) if found else None


def stages(model) -> list[list[set]]:
    """The IR's computing ops in stages: even stages one set (the ops between bidirectional layers),
    odd stages one set per direction chain that may run at once; a fixed point over the ops."""
    ops = [o for o in model.get_ordered_ops() if o.get_type_name() not in ("Constant", "Parameter", "Result")]
    stage, chain_stage = {o.get_friendly_name(): 0 for o in ops}, {}
    for _ in range(len(ops)):
        changed = False
        for o in ops:
            name, chain = o.get_friendly_name(), direction_of(o.get_friendly_name())
            at = chain_stage.get(chain, 1) if chain else 0
            for i in o.inputs():
                p = i.get_source_output().get_node().get_friendly_name()
                if p not in stage:
                    continue
                theirs = direction_of(p)
                at = max(
                    at,
                    stage[p] + (theirs is not None)
                    if chain is None
                    else stage[p]
                    if theirs == chain
                    else stage[p] + 1 + (theirs is not None),
                )
            if chain:
                at += at % 2 == 0
                chain_stage[chain] = max(chain_stage.get(chain, 1), at)
            changed |= stage[name] != at
            stage[name] = at
        for name in stage:
            if direction_of(name) and stage[name] != chain_stage[direction_of(name)]:
                stage[name], changed = chain_stage[direction_of(name)], True
        if not changed:
            break
    units: dict = {}
    for name, at in stage.items():
        units.setdefault(at, {}).setdefault(direction_of(name), set()).add(name)
    return [list(units[at].values()) for at in sorted(units)]


def cut(xml: str, names: set):
    """A model of the ops `names` from a fresh read of `xml`: a Parameter for every value it takes from
    outside (keyed (op, port), or ("input", name) for the IR's own inputs), a Result for every value
    that leaves it (keyed (op, port, the IR's Result name or None))."""
    import openvino as ov

    from ovrnn.device.ov import opset

    o13 = opset(13)
    model = ov.Core().read_model(xml)
    ops = {o.get_friendly_name(): o for o in model.get_ordered_ops()}
    params, sources, results, outs = [], [], [], []
    for name in sorted(names):
        for i in ops[name].inputs():
            src = i.get_source_output()
            node = src.get_node()
            if node.get_friendly_name() in names or node.get_type_name() == "Constant":
                continue
            sources.append(
                ("input", node.get_friendly_name()) if node.get_type_name() == "Parameter" else (node.get_friendly_name(), src.get_index())
            )
            params.append(o13.parameter(src.get_partial_shape(), src.get_element_type()))
            i.replace_source_output(params[-1].output(0))
    for name in sorted(names):
        for k, out in enumerate(ops[name].outputs()):
            users = [t.get_node() for t in out.get_target_inputs()]
            if any(u.get_friendly_name() not in names for u in users):
                final = next((u.get_friendly_name() for u in users if u.get_type_name() == "Result"), None)
                results.append(o13.result(out))
                outs.append((name, k, final))
    return ov.Model(results, params), sources, outs


def split_runner(xml: str, feed: dict, shared_threads: int = 2):
    """(call, {IR Result name: its output tensor}): the IR run as stages (see stages())."""
    import openvino as ov

    core, plan, made = ov.Core(), [], {}
    by_name = {p.get_friendly_name(): p.output(0).get_any_name() for p in core.read_model(xml).get_parameters()}
    for units in stages(core.read_model(xml)):
        step = []
        for names in units:
            model, sources, outs = cut(xml, names)
            threads = 1 if direction_of(next(iter(names))) else shared_threads
            request = core.compile_model(model, "CPU", PROPS | {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1}).create_infer_request()
            for i, key in enumerate(sources):  # static shapes: a producer's output tensor stays put, bound once
                request.set_input_tensor(i, ov.Tensor(feed[by_name[key[1]]], shared_memory=True) if key[0] == "input" else made[key])
            request.infer()
            for j, (name, k, _) in enumerate(outs):
                made[(name, k)] = request.get_output_tensor(j)
            step.append((request, outs))
        plan.append(step)
    finals = {
        final: request.get_output_tensor(j) for step in plan for request, outs in step for j, (_, _, final) in enumerate(outs) if final
    }

    def call():
        for step in plan:
            if len(step) == 1:
                step[0][0].infer()
                continue
            for request, _ in step:
                request.start_async()
            for request, _ in step:
                request.wait()

    return call, finals


def whole_model(name: str, directory: Path, tmp: Path, rounds: int, ort_all: bool) -> None:
    import json

    import onnxruntime as ort
    import openvino as ov

    import ovrnn

    entry = json.loads((directory / "manifest.json").read_text())[name]
    rng = np.random.default_rng(0)
    feed = {
        k: rng.integers(0, 60, shape).astype(np.int64) if dtype == "int64" else rng.standard_normal(shape).astype(dtype)
        for k, (shape, dtype) in entry["inputs"].items()
    }
    xml = str(ovrnn.convert_model(str(directory / f"{name}.onnx"), input=entry["input_flag"], device="CPU").save(tmp / f"{name}.xml"))
    sides, outputs = {}, {}
    for threads in (1, 2):
        compiled = ov.Core().compile_model(xml, "CPU", PROPS | {"INFERENCE_NUM_THREADS": threads})
        request = compiled.create_infer_request()
        for port in compiled.inputs:
            request.set_tensor(port, ov.Tensor(feed[port.get_any_name()], shared_memory=True))
        request.infer()
        sides[f"ovrnn {threads}"] = request.infer
        if threads == 1:  # the compiled model's outputs come in the order of the IR's Results
            results = [r.get_friendly_name() for r in ov.Core().read_model(xml).get_results()]
            outputs = {r: request.get_output_tensor(i).data.copy() for i, r in enumerate(results)}
    sides["split"], finals = split_runner(xml, feed)
    sides["split"]()
    diff = max(float(np.abs(finals[k].data - v).max()) for k, v in outputs.items())
    for threads in (1, 0) if ort_all else (1,):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(str(directory / f"{name}.onnx"), options, providers=["CPUExecutionProvider"])
        sides["onnxruntime " + ("1" if threads else "all")] = lambda s=session: s.run(None, feed)
    report(f"{name}, batch 1 (split: max |split - uncut IR| {diff:.1e})", median_call_rounds(sides, rounds))


def report(title: str, times: dict, checks: dict | None = None) -> None:
    print(f"{title}: onnxruntime 1 thread {np.median(times['onnxruntime 1']) * 1e6:.0f} µs; load {os.getloadavg()[0]:.1f}")
    for name, per in times.items():
        if name != "onnxruntime 1":
            ratio = per / times["onnxruntime 1"]
            check = f"; max |Y - onnxruntime| {checks[name]:.1e}" if checks else ""
            print(
                f"  {name:22s} ÷ onnxruntime 1 thread {np.median(ratio):.2f} "
                f"({np.percentile(ratio, 10):.2f}-{np.percentile(ratio, 90):.2f}){check}"
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", default="LSTM", choices=sorted(GATES))
    p.add_argument("--H", default="64,128,256,512", help="hidden sizes, comma-separated")
    p.add_argument("--T", type=int, default=64)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--paired", action="store_true", help="the one-chain forms, one thread")
    p.add_argument("--model", action="append", default=[], help="a whole model of tools/make_bench_models.py (repeatable)")
    p.add_argument("--models", type=Path, default=Path(os.environ.get("OVRNN_BENCH_MODELS") or ROOT / "bench_results" / "models"))
    p.add_argument("--ort-all", action="store_true", help="with --model: onnxruntime on all cores too")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.model:
            whole_model(name, args.models, Path(tmp), args.rounds, args.ort_all)
        for H in (int(h) for h in args.H.split(",")) if not args.model else ():
            x = np.random.default_rng(1).uniform(-1, 1, (args.T, 1, H)).astype(np.float32)
            sides = sides_for(args.op, args.T, H, Path(tmp), x, args.paired)
            want = sides["onnxruntime 1"][1]
            times = median_call_rounds({k: fn for k, (fn, _) in sides.items()}, args.rounds)
            diffs = {
                k: float(np.abs(np.asarray(y, np.float64).reshape(-1) - np.asarray(want, np.float64).reshape(-1)).max())
                for k, (_, y) in sides.items()
            }
            report(f"{args.op} bidirectional H={H} T={args.T}, batch 1", times, diffs)


if __name__ == "__main__":
    main()

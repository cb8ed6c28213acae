"""Measure which exact f32 step form of a recurrent node runs fastest on this machine's CPU, and
write the table ovrnn's conversion for CPU reads (ovrnn/data/cpu_forms.json).

For each cell kind (RNN, GRU with linear_before_reset 0, GRU-lbr1, LSTM), hidden size, batch and
direction count it builds one ONNX node (T steps, I = H, default activations), converts it with
each form ovrnn can write (`cell`: the cell chain the CPU folds into its RNNSeq kernel; `matmul`:
X·Wᵀ hoisted into one MatMul and one MatMul per step), compiles each on CPU at f32, and times them
in one process against onnxruntime on the same weights: input tensors set once, `infer()` with no
argument, the order of the sides reversed every round, the ratio to the cell chain taken round by
round. A form whose outputs differ from onnxruntime's by more than 1e-5 is never chosen. The cell
chain stays where OpenVINO's kernel is fast (not slower than onnxruntime, one thread each: the
kernels compared, not onnxruntime's thread pool); elsewhere another form
replaces it where it is faster by at least `--margin` (default 10%: the median ratio to the cell
chain ≤ 0.9) and faster in at least 8 rounds of 10, at every thread count measured.

The entry is keyed by the OpenVINO release and the CPU's ISA (ovrnn.device.cpu_forms.machine_key()); a
run replaces the rows it measured in the entry of its own key and keeps the others. The machine's load is recorded with
each row: on a shared machine, run it when it is quiet, or read the spreads.

With ``--stream`` each form is converted ``--stateful`` (a stream of T steps a call, the state kept
by OpenVINO between calls) and timed as ``ovrnn.Stream.feed`` runs it (a new chunk each call),
against onnxruntime on the node with initial_h (initial_c) inputs, the state
carried by hand: the rows a one-step or short stream reads (``steps`` T, ``stream`` true). A run
merges its rows into its key's entry: a row of the same op, hidden size, batch, direction and
steps is replaced, the others are kept.

    python tools/measure_forms.py                    # the full grid, merged into ovrnn/data/cpu_forms.json
    python tools/measure_forms.py --kinds LSTM --directions forward --steps 1 --stream --threads 1
    python tools/measure_forms.py --quick --out t.json   # H 64 and 256, forward and bidirectional, fewer rounds
    python tools/measure_forms.py --show             # the entry for this machine, as a table
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ovrnn.device import cpu_forms  # noqa: E402

KINDS = {"RNN": ("RNN", 0), "GRU": ("GRU", 0), "GRU-lbr1": ("GRU", 1), "LSTM": ("LSTM", 0)}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
FORMS = ("cell", "matmul")
TOLERANCE = 1e-5


def make_node(path: Path, kind: str, T: int, H: int, batch: int, bidirectional: bool, states: bool = False) -> Path:
    """One ONNX node of `kind`, default activations, I = H, uniform(±1/√H) weights (seeded);
    `states`: initial_h (initial_c) graph inputs, what a stream carries."""
    op, lbr = KINDS[kind]
    D, G = (2 if bidirectional else 1), GATES[op]
    rng = np.random.default_rng(H * 31 + T + D)
    s = 1 / np.sqrt(H)
    init = lambda n, shape: numpy_helper.from_array(rng.uniform(-s, s, shape).astype(np.float32), n)  # noqa: E731
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    attrs = {"hidden_size": H, "direction": "bidirectional" if bidirectional else "forward"}
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    state_names = (["initial_h"] + (["initial_c"] if op == "LSTM" else [])) if states else []
    node = helper.make_node(op, ["X", "W", "R", "B"] + (["", *state_names] if states else []), outputs, name=kind.lower(), **attrs)
    graph = helper.make_graph(
        [node],
        "forms",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, batch, H])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, [D, batch, H]) for n in state_names],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [init("W", (D, G * H, H)), init("R", (D, G * H, H)), init("B", (D, 2 * G * H))],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    return path


def sides_for(onnx_path: Path, x: np.ndarray, threads: int, work: Path) -> tuple[dict, dict]:
    """{side: call} for onnxruntime and every form, and {form: max |form - onnxruntime|}."""
    import onnxruntime as ort
    import openvino as ov

    import ovrnn

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # idle spinning would eat OpenVINO's turn
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    want = session.run(None, {"X": x})
    sides = {"onnxruntime": lambda: session.run(None, {"X": x})}
    errors = {}
    config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    core = ov.Core()
    for form in FORMS:
        xml = work / f"{onnx_path.stem}_{form}.xml"
        ovrnn.convert_model(str(onnx_path), lowering=form).save(xml)
        request = core.compile_model(str(xml), "CPU", config).create_infer_request()
        request.set_tensor("X", ov.Tensor(x, shared_memory=True))
        request.infer()
        got = [request.get_output_tensor(i).data for i in range(len(want))]
        errors[form] = max(float(np.max(np.abs(g.astype(np.float64) - w))) for g, w in zip(got, want))
        sides[form] = request.infer
    return sides, errors


def stream_sides_for(onnx_path: Path, chunks: list, threads: int, work: Path) -> tuple[dict, dict]:
    """{side: call} of a stream, each call the next chunk: onnxruntime with the state carried by
    hand, and every form as `ovrnn convert --stateful` fed by ovrnn.Stream (what a stream's call
    costs; the state kept by OpenVINO); and {form: max |form - onnxruntime|} of Y over as many
    calls as there are chunks."""
    import onnxruntime as ort

    import ovrnn

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    carried = [i.name for i in session.get_inputs() if i.name != "X"]
    shape = lambda name: [d if isinstance(d, int) else 1 for d in next(i.shape for i in session.get_inputs() if i.name == name)]  # noqa: E731

    def ort_stream():
        state = {n: np.zeros(shape(n), np.float32) for n in carried}
        at = {"i": 0}

        def call():
            at["i"] = (at["i"] + 1) % len(chunks)
            out = session.run(None, {"X": chunks[at["i"]], **state})
            for k, name in enumerate(carried):  # Y_h (Y_c) back in as initial_h (initial_c)
                state[name] = out[1 + k]
            return out[0]

        return call

    def ov_stream(xml):
        stream = ovrnn.Stream(xml, threads=threads)
        at = {"i": 0}

        def call():
            at["i"] = (at["i"] + 1) % len(chunks)
            return stream.feed({"X": chunks[at["i"]]})["Y"]

        return call

    want = ort_stream()
    want = np.concatenate([np.array(want()) for _ in chunks])
    sides, errors = {"onnxruntime": ort_stream()}, {}
    for form in FORMS:
        xml = work / f"{onnx_path.stem}_{form}_stream.xml"
        ovrnn.convert_model(str(onnx_path), lowering=form, stateful=True).save(xml)
        check = ov_stream(xml)
        got = np.concatenate([np.array(check()) for _ in chunks])
        errors[form] = float(np.max(np.abs(got.astype(np.float64) - want)))
        sides[form] = ov_stream(xml)
    return sides, errors


def alternate(sides: dict, rounds: int, block_s: float = 0.015) -> dict:
    """Seconds per call of each side, per round; each side runs back to back for about `block_s`,
    and the order of the sides is reversed every other round."""
    names = list(sides)
    calls = {}
    for n in names:
        for _ in range(3):
            sides[n]()
        start = time.perf_counter()
        for _ in range(3):
            sides[n]()
        calls[n] = max(3, min(2000, int(block_s / max((time.perf_counter() - start) / 3, 1e-7))))
    per = {n: [] for n in names}
    for r in range(rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            f, k = sides[n], calls[n]
            start = time.perf_counter()
            for _ in range(k):
                f()
            per[n].append((time.perf_counter() - start) / k)
    return {n: np.array(v) for n, v in per.items()}


def cell_slower(times: dict) -> bool:
    """The cell chain slower than onnxruntime in the median ratio."""
    return float(np.median(times["cell"] / times["onnxruntime"])) > 1.0


def choose(times: dict, errors: dict, margin: float, cell_slow: bool | None = None) -> tuple[str, dict]:
    """The cell chain where OpenVINO's kernel is fast; elsewhere the exact form that beats it.

    Another form replaces the cell chain only where the cell chain is slower than onnxruntime
    (`cell_slow`: measure() judges it kernel against kernel, one thread each; None: from `times`)
    and that form is faster than the cell chain by `margin` in the median ratio and in at least 8
    rounds of 10. (choice, {form: [median, p10, p90, share of rounds faster] of form ÷ cell})."""
    ratios = {}
    for form in FORMS:
        r = times[form] / times["cell"]
        ratios[form] = [
            round(float(np.median(r)), 3),
            round(float(np.percentile(r, 10)), 3),
            round(float(np.percentile(r, 90)), 3),
            round(float(np.mean(r < 1.0)), 2),
        ]
    cell_slow = cell_slower(times) if cell_slow is None else cell_slow
    exact = [f for f in FORMS if errors[f] <= TOLERANCE]
    winners = [f for f in exact if f != "cell" and cell_slow and ratios[f][0] <= 1 - margin and ratios[f][3] >= 0.8]
    if "cell" not in exact and not winners:
        winners = exact[:1]
    return (min(winners, key=lambda f: ratios[f][0]) if winners else "cell"), ratios


def measure(args) -> dict:
    # one thread first: whether OpenVINO's kernel is fast is judged there, kernel against kernel
    # (onnxruntime on all cores pays its thread pool on every batch-1 call: at T=1 it made cell
    # chains 1.2-2.9x slower than onnxruntime on one thread look "ahead" of it)
    threads = sorted((int(t) for t in args.threads.split(",")), key=lambda t: t != 1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ovrnn-forms-") as tmp:
        work = Path(tmp)
        for kind in args.kinds.split(","):
            for H in map(int, args.hidden.split(",")):
                for batch in map(int, args.batch.split(",")):
                    for bidirectional in {"forward": (False,), "bidirectional": (True,), "both": (False, True)}[args.directions]:
                        path = make_node(
                            work / f"{kind}_H{H}_B{batch}_{int(bidirectional)}.onnx",
                            kind,
                            args.steps,
                            H,
                            batch,
                            bidirectional,
                            states=args.stream,
                        )
                        x = np.random.default_rng(1).uniform(-1, 1, (args.steps, batch, H)).astype(np.float32)
                        chunks = [np.random.default_rng(i).uniform(-1, 1, x.shape).astype(np.float32) for i in range(8)]
                        per_thread, choices, kernel_slow = {}, [], None
                        for th in threads:
                            sides, errors = stream_sides_for(path, chunks, th, work) if args.stream else sides_for(path, x, th, work)
                            load = os.getloadavg()[0]
                            times = alternate(sides, args.rounds)
                            if th == 1:
                                kernel_slow = cell_slower(times)
                            choice, ratios = choose(times, errors, args.margin, kernel_slow)
                            choices.append(choice)
                            per_thread[str(th)] = {
                                "us": {k: round(float(np.median(v)) * 1e6, 1) for k, v in times.items()},
                                "vs_cell": ratios,
                                "vs_onnxruntime": {f: round(float(np.median(times[f] / times["onnxruntime"])), 3) for f in FORMS},
                                "max_error": {f: float(f"{e:.2g}") for f, e in errors.items()},
                                "load": round(load, 2),
                            }
                        # a form other than the cell only where it wins at every thread count
                        choice = choices[0] if len(set(choices)) == 1 else "cell"
                        first = per_thread[str(threads[0])]
                        row = {
                            "op": kind,
                            "hidden": H,
                            "batch": batch,
                            "direction": "bidirectional" if bidirectional else "forward",
                            "steps": args.steps,
                            "choice": choice,
                            "us": {f: first["us"][f] for f in FORMS},
                            "threads": per_thread,
                        }
                        if args.stream:
                            row["stream"] = True
                        row["rounds"], row["measured"] = args.rounds, datetime.date.today().isoformat()
                        rows.append(row)
                        print(line(row), flush=True)
    release, isa = cpu_forms.machine_key()
    return {
        "openvino": release,
        "isa": isa,
        "measured": datetime.date.today().isoformat(),
        "rounds": args.rounds,
        "margin": args.margin,
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "rows": rows,
    }


def line(row: dict) -> str:
    parts = []
    what = f"T{row.get('steps', '?')}" + (" stream" if row.get("stream") else "")
    for th, m in row["threads"].items():
        ratio = " ".join(f"{f} {m['vs_onnxruntime'][f]:.2f}" for f in FORMS)
        parts.append(
            f"th{th} ÷ort: {ratio} | matmul÷cell {m['vs_cell']['matmul'][0]:.2f} "
            f"({m['vs_cell']['matmul'][1]:.2f}-{m['vs_cell']['matmul'][2]:.2f}), load {m['load']}"
        )
    return f"{row['op']:8} H{row['hidden']:<4} B{row['batch']} {what:10} {row['direction']:13} -> {row['choice']:6} " + "; ".join(parts)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((ln.partition(":")[2].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        return ""


def row_key(row: dict) -> tuple:
    return row["op"], row["hidden"], row["batch"], row["direction"], row.get("steps")


def merge(path: Path, entry: dict) -> None:
    """Merge `entry`'s rows into the entry of the same (release, ISA): a row of the same op,
    hidden size, batch, direction and steps is replaced, the others kept (other keys' entries
    too); written atomically."""
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    key = (entry["openvino"], entry["isa"])
    old = next((e for e in table.get("entries", []) if (e.get("openvino"), e.get("isa")) == key), None)
    entries = [e for e in table.get("entries", []) if (e.get("openvino"), e.get("isa")) != key]
    if old is not None:
        new_keys = {row_key(r) for r in entry["rows"]}
        entry = {**old, **entry, "rows": [r for r in old.get("rows", []) if row_key(r) not in new_keys] + entry["rows"]}
    entries.append(entry)
    entries.sort(key=lambda e: (e["openvino"], e["isa"]))
    text = (
        json.dumps(
            {"about": "measured by tools/measure_forms.py; read by ovrnn/device/cpu_forms.py", "entries": entries},
            indent=1,
            ensure_ascii=False,
        )
        + "\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def show(path: Path) -> int:
    entry = cpu_forms.entry_for(table=tuple(json.loads(path.read_text()).get("entries", ())) if path.exists() else ())
    key = cpu_forms.machine_key()
    if entry is None:
        print(f"no entry for OpenVINO {key[0]} on {key[1]} in {path}: convert keeps the cell chain")
        return 1
    print(f"OpenVINO {entry['openvino']}, {entry['isa']} ({entry.get('cpu', '')}), measured {entry['measured']}")
    for row in entry["rows"]:
        print(line(row))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default=",".join(KINDS), help="cell kinds (default: %(default)s)")
    ap.add_argument("--hidden", default="64,128,256,512", help="hidden sizes (default: %(default)s)")
    ap.add_argument("--batch", default="1", help="batch sizes (default: %(default)s)")
    ap.add_argument("--directions", choices=("forward", "bidirectional", "both"), default="both")
    ap.add_argument("--steps", type=int, default=64, help="T (default: %(default)s)")
    ap.add_argument(
        "--stream",
        action="store_true",
        help="time each form as a stateful stream of --steps steps a call (convert --stateful), onnxruntime with the state carried by hand",
    )
    ap.add_argument(
        "--threads", default="1,0", help="INFERENCE_NUM_THREADS values, 0 = OpenVINO's default (all cores) (default: %(default)s)"
    )
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument(
        "--margin", type=float, default=0.1, help="how much faster a form must be to replace the cell chain (default: %(default)s)"
    )
    ap.add_argument("--quick", action="store_true", help="H 64 and 256, 7 rounds")
    ap.add_argument("--out", type=Path, default=cpu_forms.TABLE, help="the table to merge into (default: the package's)")
    ap.add_argument("--show", action="store_true", help="print this machine's entry of --out and exit")
    args = ap.parse_args(argv)
    if args.show:
        return show(args.out)
    if args.quick:
        args.hidden, args.rounds = "64,256", 7
    entry = measure(args)
    merge(args.out, entry)
    print(f"wrote the entry for OpenVINO {entry['openvino']} on {entry['isa']} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

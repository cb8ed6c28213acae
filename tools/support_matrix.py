"""Run the case table (RNN, GRU, LSTM) through ovrnn, OpenVINO's own ONNX import and onnxruntime.

Each tool's outputs are graded against ovrnn's float64 reference at the case's tolerance
(tests/cases.py TOL): "ok", "wrong" (ran, outside tolerance, no error) or "refused" (error or crash).
Prints one Markdown table per op, rows grouped by feature, as in the README's "Support table".

    python tools/support_matrix.py [--op GRU ...] [--json verdicts.json] [--cases] [-j 2]
    python tools/support_matrix.py --from verdicts.json     # the tables again, from a --json file

Every tool runs in child processes (a batch of cases each): OpenVINO's import of a layout=1 LSTM
with dynamic dims corrupts the heap, so layout=1 cases get a child of their own there, and a child
that dies marks its current case refused and the rest of its batch runs in a fresh child.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from cases import GRU_CASES, LSTM_CASES, NATIVE, RNN_CASES, TOL, Case, make_model  # noqa: E402

OPS = {"RNN": RNN_CASES, "GRU": GRU_CASES, "LSTM": LSTM_CASES}
TOOLS = ("ovrnn", "OpenVINO ONNX import", "onnxruntime")
BATCH = 24  # cases per child process
DTYPE_LABEL = {"float16": "float16", "float64": "float64", "bfloat16": "bfloat16"}


# ---- the feature rows (a case can sit in several rows) ----------------------------------------


def _bidir_differ(c: Case) -> bool:
    acts = c.direction_activations()
    return len(acts) == 2 and acts[0] != acts[1]


def _other_acts(c: Case) -> bool:
    return any(a.lower() not in NATIVE for slots in c.direction_activations() for a in slots)


_SPECIAL = {  # row label -> predicate; "relu/tanh/sigmoid" below is every case in none of these
    "bidirectional, different activations per direction": _bidir_differ,
    "the 8 other activations": _other_acts,
    "clip > 0": lambda c: c.clip is not None and c.clip > 0,
    "clip = 0": lambda c: c.clip == 0,
    "sequence_lens": lambda c: c.lens is not None,
    "layout = 1": lambda c: c.layout == 1,
    "W/R/B as graph inputs": lambda c: c.weights_as_inputs,
    "dynamic batch or sequence": lambda c: c.dyn_batch or c.dyn_seq,
    "GRU linear_before_reset ≠ 0": lambda c: c.op == "GRU" and bool(c.linear_before_reset),
    "LSTM peepholes P": lambda c: c.op == "LSTM" and c.peepholes,
    "LSTM input_forget ≠ 0": lambda c: c.op == "LSTM" and bool(c.input_forget),
    "LSTM initial_c": lambda c: c.op == "LSTM" and c.c0,
}


def rows(cases: list[Case]) -> list[tuple[str, list[list[Case]]]]:
    """(label, groups): one group per row, or one per sub-column (opsets, dtypes) shown as a · b."""
    out = [
        (
            "relu/tanh/sigmoid, all directions, nothing else",
            [[c for c in cases if not any(p(c) for p in _SPECIAL.values()) and c.opset == 14 and c.dtype == "float32"]],
        )
    ]
    for label, pred in _SPECIAL.items():
        group = [c for c in cases if pred(c)]
        if group:
            out.append((label, [group]))
    opsets = sorted({c.opset for c in cases} - {14})
    out.append(("opset " + " · ".join(map(str, opsets)), [[c for c in cases if c.opset == o] for o in opsets]))
    dtypes = [d for d in DTYPE_LABEL if any(c.dtype == d for c in cases)]
    out.append((" / ".join(dtypes), [[c for c in cases if c.dtype == d] for d in dtypes]))
    return out


# What the wrong cells of OpenVINO's import and onnxruntime are (checked case by case; see README)
NOTES = {
    ("bidirectional, different activations per direction", "OpenVINO ONNX import"): "forward activations used for both",
    ("the 8 other activations", "onnxruntime"): "default alpha/beta",
    ("clip = 0", "OpenVINO ONNX import"): 'read as "no clip"',
    ("dynamic batch or sequence", "OpenVINO ONNX import"): "sequence_lens ignored",
    ("layout = 1", "OpenVINO ONNX import"): "layout ignored",
    ("LSTM peepholes P", "OpenVINO ONNX import"): "P dropped",
    ("LSTM input_forget ≠ 0", "OpenVINO ONNX import"): "input_forget dropped",
}


def _cell(verdicts: list[str], note: str | None) -> str:
    ok, wrong = verdicts.count("ok"), verdicts.count("wrong")
    text = f"{ok}/{len(verdicts)}"
    if wrong:
        text += f" ({wrong} wrong{': ' + note if note else ''})"
    elif ok == 0 and verdicts:
        text += " (refused)"
    return text


def table(op: str, verdicts: dict[str, dict[str, str]]) -> str:
    """verdicts[tool][case id] -> ok | wrong | refused."""
    cases = OPS[op]
    lines = [f"| {op} feature (cases) | " + " | ".join(TOOLS) + " |", "|---|" + "---|" * len(TOOLS)]
    for label, groups in rows(cases):
        counts = " · ".join(str(len(g)) for g in groups)
        cells = []
        for tool in TOOLS:
            parts = [[verdicts[tool][c.id] for c in g] for g in groups]
            cells.append(" · ".join(_cell(p, NOTES.get((label, tool))) for p in parts))
        lines.append(f"| {label} ({counts}) | " + " | ".join(cells) + " |")
    totals = []
    for tool in TOOLS:
        v = [verdicts[tool][c.id] for c in cases]
        ok, wrong, refused = v.count("ok"), v.count("wrong"), v.count("refused")
        totals.append(f"**{ok}** ({wrong} wrong, {refused} refused)")
    lines.append(f"| **all {len(cases)} {op} cases** | " + " | ".join(totals) + " |")
    return "\n".join(lines)


# ---- the tools (run in the child) --------------------------------------------------------------


def run_ovrnn(model, feeds, flags):
    import ovrnn

    return ovrnn.run(ovrnn.convert_model(model, flags or None), feeds)


def run_openvino_import(model, feeds, flags):
    import onnx

    import ovrnn  # noqa: F401  (hygiene: no telemetry, no writes under ~)
    from ovrnn.runtime.engine import make_tensor, ov, to_numpy

    o = ov()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(model, path)
        converted = o.Core().read_model(str(path))  # OpenVINO's ONNX frontend, shapes as written
    compiled = o.Core().compile_model(converted, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    request.infer({name: make_tensor(next(p for p in compiled.inputs if name in p.get_names()), v, name) for name, v in feeds.items()})
    return {o_.get_any_name(): to_numpy(request.get_tensor(o_)) for o_ in compiled.outputs}


def run_onnxruntime(model, feeds, flags):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


RUNNERS = {"ovrnn": run_ovrnn, "OpenVINO ONNX import": run_openvino_import, "onnxruntime": run_onnxruntime}
BY_ID = {(c.op, c.id): c for cases in OPS.values() for c in cases}


def grade(case: Case, tool: str) -> tuple[str, str]:
    import numpy as np

    from ovrnn import reference

    model, feeds, flags = make_model(case)
    want = reference.run_model(model, feeds)
    try:
        got = RUNNERS[tool](model, feeds, flags)
    except Exception as exc:  # noqa: BLE001 (any refusal is a verdict)
        return "refused", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]
    atol, rtol = TOL[case.dtype]
    worst = 0.0
    for name, w in want.items():
        if name not in got:
            return "wrong", f"no output {name}"
        g = np.asarray(got[name], dtype=np.float64)
        if g.shape != w.shape:
            return "wrong", f"{name} shape {list(g.shape)}, want {list(w.shape)}"
        err = np.abs(g - w)
        if not np.all(err <= atol + rtol * np.abs(w)):  # NaN fails too
            return "wrong", f"{name} max error {np.nanmax(err) if err.size else 0:.3g}"
        worst = max(worst, float(err.max()) if err.size else 0.0)
    return "ok", f"max error {worst:.3g}"


def child(tool: str, keys: list[str]) -> int:
    for key in keys:
        op, case_id = key.split(":", 1)
        verdict, detail = grade(BY_ID[(op, case_id)], tool)
        print(json.dumps({"key": key, "verdict": verdict, "detail": detail}), flush=True)
    return 0


# ---- the parent -----------------------------------------------------------------------------


def run_batch(tool: str, keys: list[str]) -> dict[str, tuple[str, str]]:
    """Run keys in a child; a crash marks the case in progress refused and the rest go on."""
    done: dict[str, tuple[str, str]] = {}
    while keys:
        proc = subprocess.run([sys.executable, "-I", __file__, "--child", tool, *keys], capture_output=True, text=True, timeout=900)
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                done[r["key"]] = (r["verdict"], r["detail"])
        keys = [k for k in keys if k not in done]
        if keys:  # the child died on keys[0]
            done[keys[0]] = ("refused", f"child process died (exit status {proc.returncode})")
            keys = keys[1:]
    return done


def batches(ops: list[str]) -> list[tuple[str, list[str]]]:
    out = []
    for tool in TOOLS:
        for op in ops:
            alone = [f"{op}:{c.id}" for c in OPS[op] if tool == "OpenVINO ONNX import" and c.layout == 1]
            rest = [f"{op}:{c.id}" for c in OPS[op] if f"{op}:{c.id}" not in alone]
            out += [(tool, [k]) for k in alone] + [(tool, rest[i : i + BATCH]) for i in range(0, len(rest), BATCH)]
    return out


def versions() -> str:
    code = (
        "import ovrnn, openvino, onnxruntime, onnx; print(openvino.get_version().split('-')[0], onnxruntime.__version__, onnx.__version__)"
    )
    ov_v, ort_v, onnx_v = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return f"openvino {ov_v}, onnxruntime {ort_v}, onnx {onnx_v}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1], argv[2:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", action="append", choices=list(OPS), help="only these ops (repeatable)")
    p.add_argument("--json", type=Path, help="also write every verdict with its detail here")
    p.add_argument("--cases", action="store_true", help="also print one line per case")
    p.add_argument("-j", type=int, default=2, help="child processes at a time (default 2)")
    p.add_argument("--from", dest="source", type=Path, help="print the tables from a --json file instead of running")
    args = p.parse_args(argv)
    ops = args.op or list(OPS)
    results: dict[str, tuple[str, str]] = {}
    if args.source:
        results = {k: (v["verdict"], v["detail"]) for k, v in json.loads(args.source.read_text()).items()}
    else:
        with ThreadPoolExecutor(max(1, args.j)) as pool:
            futures = [(tool, pool.submit(run_batch, tool, keys)) for tool, keys in batches(ops)]
            for tool, future in futures:
                for key, v in future.result().items():
                    results[f"{tool}|{key}"] = v
        print(f"Versions: {versions()}; CPU, INFERENCE_PRECISION_HINT=f32.\n")
    for op in ops:
        verdicts = {t: {c.id: results[f"{t}|{op}:{c.id}"][0] for c in OPS[op]} for t in TOOLS}
        print(table(op, verdicts) + "\n")
        if args.cases:
            for c in OPS[op]:
                print(f"    {op} {c.id:<40}" + "".join(f"{results[f'{t}|{op}:{c.id}'][0]:<9}" for t in TOOLS))
            print()
    if args.json:
        args.json.write_text(json.dumps({k: {"verdict": v, "detail": d} for k, (v, d) in sorted(results.items())}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

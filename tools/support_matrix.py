"""Run the case table through ovrnn, OpenVINO's own ONNX import and onnxruntime; print the matrix.

Each tool's outputs are compared with ovrnn's float64 reference (tolerances per dtype, as in the
tests). A tool "fails" a case when it errors (refuses) or, worse, runs and returns wrong numbers.

    python tools/support_matrix.py [--markdown]
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from cases import RNN_CASES, TOL, make_model  # noqa: E402

import ovrnn  # noqa: E402
from ovrnn import runtime  # noqa: E402
from ovrnn.validation import reference


def _close(got: dict, want: dict, dtype: str) -> bool:
    atol, rtol = TOL[dtype]
    for name, w in want.items():
        g = np.asarray(got.get(name), dtype=np.float64)
        if g.shape != w.shape or not np.all(np.abs(g - w) <= atol + rtol * np.abs(w)):
            return False
    return True


def run_ovrnn(model, feeds, flags):
    return runtime.run(ovrnn.convert_model(model, flags), feeds)


def run_openvino_import(model, feeds, flags):
    import openvino as ov

    shapes = {}
    for f in flags:  # "X[4,?,3]" -> the same --input for ov.convert_model
        name, dims = f.rstrip("]").split("[")
        shapes[name] = ov.PartialShape([-1 if d == "?" else int(d) for d in dims.split(",")])
    with tempfile.TemporaryDirectory() as tmp:  # convert_model takes a path, not a ModelProto
        path = Path(tmp) / "model.onnx"
        onnx.save(model, path)
        converted = ov.convert_model(str(path), input=shapes or None)
    compiled = ov.Core().compile_model(converted, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    tensors = {name: runtime.make_tensor(next(p for p in compiled.inputs if name in p.get_names()), v, name) for name, v in feeds.items()}
    request = compiled.create_infer_request()
    request.infer(tensors)
    return {o.get_any_name(): runtime.to_numpy(request.get_tensor(o)) for o in compiled.outputs}


def run_onnxruntime(model, feeds, flags):
    import onnxruntime as ort

    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ir_version = min(m.ir_version, 10)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


TOOLS = {"ovrnn": run_ovrnn, "OpenVINO ONNX import": run_openvino_import, "onnxruntime": run_onnxruntime}


def main() -> int:
    tally = {t: Counter() for t in TOOLS}
    rows = []
    for case in RNN_CASES:
        model, feeds, flags = make_model(case)
        want = reference.run_model(model, feeds)
        row = [case.id]
        for tool, fn in TOOLS.items():
            try:
                verdict = "ok" if _close(fn(model, feeds, flags), want, case.dtype) else "WRONG"
            except Exception:
                verdict = "refused"
            tally[tool][verdict] += 1
            row.append(verdict)
        rows.append(row)
    md = "--markdown" in sys.argv
    if md:
        print("| case | " + " | ".join(TOOLS) + " |\n|---|" + "---|" * len(TOOLS))
    for row in rows:
        print(("| " + " | ".join(row) + " |") if md else f"{row[0]:<40}" + "".join(f"{v:<22}" for v in row[1:]))
    print()
    for tool, c in tally.items():
        print(f"{tool}: {c['ok']}/{len(RNN_CASES)} correct, {c['WRONG']} silently wrong, {c['refused']} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())

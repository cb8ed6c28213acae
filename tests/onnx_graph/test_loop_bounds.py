"""A Loop left to OpenVINO whose trip count M or starting condition is a run-time value runs as
ONNX says (onnx/for_frontend/loop_bounds.py): a negative M or a condition fed false runs no
iteration (outputs: the states as given, scan outputs with no rows), 0 too, and every other value
the iterations onnxruntime runs. Before, on main dea113e, OpenVINO's Loop hung on M = -1 (no bound
for it) and gave M rows of zeros or memory garbage (2.2e17) as scan outputs when the condition
started false, with the states right: a float16 LSTM-cell Loop (float16 bodies are left to
OpenVINO) and a counter body in float32 and float16. Values on both sides of 0: a probe at 0 alone
would pass without the bound."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn

vi = helper.make_tensor_value_info
LIMIT = 4.0  # the no-bound case's body stops once sum(s) reaches it


def _loop(dtype: int, trips: str | int, cond: str, stops: bool = True) -> onnx.ModelProto:
    """sT, ys = Loop(M, go, s0): s <- s + 0.25, ys the stacked s; the body's condition: go, and (`stops`)
    sum(s) < LIMIT. `trips`/`cond`: "input" (fed at run time) or "" (absent); `trips` an int: M a constant.
    Without `stops` the body hands its condition on as it is (a `for` loop's export), which OpenVINO
    runs M times whatever the condition started as."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s", "step"], ["s2"]),
            helper.make_node("ReduceSum", ["s2"], ["total"], keepdims=0),
            helper.make_node("Less", ["total", "limit"], ["below"]),
            helper.make_node("And", ["c", "below"], ["c2"]) if stops else helper.make_node("Identity", ["c"], ["c2"]),
            helper.make_node("Identity", ["s2"], ["scan"]),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("s", dtype, [2, 3])],
        [vi("c2", TensorProto.BOOL, []), vi("s2", dtype, [2, 3]), vi("scan", dtype, [2, 3])],
        [numpy_helper.from_array(np.full((2, 3), 0.25, np_type), "step"), numpy_helper.from_array(np.array(LIMIT, np_type), "limit")],
    )
    inputs = [vi("s0", dtype, [2, 3])]
    inputs += [vi("M", TensorProto.INT64, [])] if trips == "input" else []
    inputs += [vi("go", TensorProto.BOOL, [])] if cond else []
    inits = [numpy_helper.from_array(np.array(trips, np.int64), "M")] if isinstance(trips, int) else []
    node = helper.make_node("Loop", ["M" if trips != "" else "", "go" if cond else "", "s0"], ["sT", "ys"], body=body, name="loop")
    graph = helper.make_graph([node], "g", inputs, [vi("sT", dtype, None), vi("ys", dtype, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


DTYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
CASES = {  # (M, go) fed; None: the input is absent; ("const", n): M the constant n
    "M-1-go-true": (1, True),
    "M-3-go-true": (3, True),
    "M-0-go-true": (0, True),
    "M-3-go-false": (3, False),
    "M-5-go-false": (5, False),
    "M-3-no-go": (3, None),
    "M-0-no-go": (0, None),
    "constant-M-3-go-true": (("const", 3), True),
    "constant-M-5-go-false": (("const", 5), False),
    "constant-M-2-go-false": (("const", 2), False),
    "no-M-go-true-body-stops": (None, True),
    "no-M-go-false": (None, False),
}


@pytest.mark.parametrize("body", ["stops-on-sum", "hands-its-condition-on"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_a_run_time_trip_count_or_start_runs_the_iterations_onnx_runs(dtype, case, body):
    trips, go = CASES[case]
    if trips is None and go and body == "hands-its-condition-on":
        pytest.skip("no bound and a condition that stays true: ONNX's Loop never ends either")
    constant = trips[1] if isinstance(trips, tuple) else None
    model = _loop(
        DTYPES[dtype],
        constant if constant is not None else "input" if trips is not None else "",
        "input" if go is not None else "",
        stops=body == "stops-on-sum",
    )
    feeds = {"s0": (np.arange(6).reshape(2, 3) * 0.1 - 0.2).astype(helper.tensor_dtype_to_np_dtype(DTYPES[dtype]))}
    feeds |= {"M": np.array(trips, np.int64)} if trips is not None and constant is None else {}
    feeds |= {"go": np.array(go)} if go is not None else {}
    want = dict(zip(("sT", "ys"), ort.InferenceSession(model.SerializeToString()).run(None, feeds)))
    got = ovrnn.run(ovrnn.convert_model(model), feeds)
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, (name, got[name].shape, value.shape)
        np.testing.assert_array_equal(got[name], value)


CHILD = """
import json, sys
import numpy as np, onnx, ovrnn
model = onnx.load(sys.argv[1])
s0 = np.zeros((2, 3), np.float16 if sys.argv[3] == "float16" else np.float32)
out = ovrnn.run(ovrnn.convert_model(model), {"s0": s0, "M": np.array(int(sys.argv[2]), np.int64), "go": np.array(True)})
print(json.dumps({k: [list(v.shape), v.tolist()] for k, v in out.items()}))
"""


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("trips", [-1, -7])
def test_a_negative_trip_count_runs_no_iteration(tmp_path, dtype, trips):
    """In a child process with a time limit: OpenVINO took M = -1 for no bound and never returned."""
    path = tmp_path / "loop.onnx"
    model = _loop(DTYPES[dtype], "input", "input")
    onnx.save(model, path)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), str(trips), dtype], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    s0 = np.zeros((2, 3), helper.tensor_dtype_to_np_dtype(DTYPES[dtype]))
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"s0": s0, "M": np.array(trips, np.int64), "go": np.array(True)})
    assert got["sT"] == [[2, 3], want[0].tolist()] and got["ys"][0] == [0, 2, 3] == list(want[1].shape)

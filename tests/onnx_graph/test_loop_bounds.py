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


def _variant(kind: str) -> onnx.ModelProto:
    """_loop(float32, M input, go input, the body passing its condition on), changed: `cond-1d` its
    condition a [1] tensor; `inner-loop` the body runs a Loop of i iterations (a run-time M inside
    a body, 0 at the first iteration); `in-if` the Loop inside an If branch chosen at run time."""
    model = _loop(TensorProto.FLOAT, "input", "input", stops=False)
    graph, loop = model.graph, model.graph.node[0]
    body = loop.attribute[0].g
    if kind == "cond-1d":
        for info in (graph.input[2], body.input[1], body.output[0]):
            info.type.tensor_type.shape.dim.add().dim_value = 1
    elif kind == "inner-loop":  # s2 = (s + 0.25) + 0.5 * i
        inner = helper.make_graph(
            [helper.make_node("Add", ["t", "half"], ["t2"]), helper.make_node("Identity", ["ci"], ["co"])],
            "inner",
            [vi("j", TensorProto.INT64, []), vi("ci", TensorProto.BOOL, []), vi("t", TensorProto.FLOAT, [2, 3])],
            [vi("co", TensorProto.BOOL, []), vi("t2", TensorProto.FLOAT, [2, 3])],
            [numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), "half")],
        )
        body.node[0].output[0] = "s1"
        body.node.insert(1, helper.make_node("Loop", ["i", "", "s1"], ["s2"], body=inner, name="inner"))
    elif kind == "in-if":
        branch = helper.make_graph([loop], "then", [], [vi("sT", TensorProto.FLOAT, None), vi("ys", TensorProto.FLOAT, None)])
        other = helper.make_graph(
            [helper.make_node("Identity", ["s0"], ["a"]), helper.make_node("Unsqueeze", ["s0", "axis0"], ["b"])],
            "else",
            [],
            [vi("a", TensorProto.FLOAT, None), vi("b", TensorProto.FLOAT, None)],
        )
        del graph.node[:]
        graph.node.append(helper.make_node("If", ["pick"], ["sT", "ys"], then_branch=branch, else_branch=other))
        graph.input.append(vi("pick", TensorProto.BOOL, []))
        graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "axis0"))
    return model


@pytest.mark.parametrize("kind", ["plain", "cond-1d", "inner-loop", "in-if"])
def test_one_runner_answers_each_call_for_itself(kind):
    """One Runner (one infer request) over calls of 3, 0, 2, -2 iterations and a false start: with
    no iteration OpenVINO's Loop left the scan output of the request's previous call (3 rows of
    its values), so every scan output is cut to no rows when the bounded trip count is 0."""
    model = _variant(kind) if kind != "plain" else _loop(TensorProto.FLOAT, "input", "input", stops=False)
    session, runner = ort.InferenceSession(model.SerializeToString()), ovrnn.Runner(ovrnn.convert_model(model))
    x = (np.arange(6).reshape(2, 3) * 0.1).astype(np.float32)
    for trips, go in [(3, True), (0, True), (2, True), (3, False), (-2, True), (1, True)]:
        feeds = {"s0": x, "M": np.array(trips, np.int64), "go": np.array([go] if kind == "cond-1d" else go)}
        feeds |= {"pick": np.array(True)} if kind == "in-if" else {}
        want = dict(zip(("sT", "ys"), session.run(None, feeds)))
        got = runner(feeds)
        for name, value in want.items():
            assert got[name].shape == value.shape, (trips, go, name, got[name].shape, value.shape)
            np.testing.assert_array_equal(got[name], value)

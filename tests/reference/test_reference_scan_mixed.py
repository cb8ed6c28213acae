"""Scans whose inputs and outputs each take their own axis and direction, negative axes included
(redteam, session 6: the float64 reference could not run Scan with axis 1 or reverse; a13577a).
The reference and ovrnn's IR are each checked against onnxruntime: two scan inputs (one reversed on
a middle or last axis, one forward on another), two scan outputs with other axes and directions, a
state, and a weight read from the outer scope. One combination for each would pass a Scan that
mixed up which axis or direction belongs to which input or output only when they happen to agree."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ovrnn
from ovrnn import reference

T = 4


def _shape(axis: int) -> list[int]:
    shape = [2, 3]
    shape.insert(axis % 3, T)
    return shape


def _scan(a1, d1, a2, d2, oa1, od1, oa2, od2):
    """s <- tanh(s + x1*w - x2); y1 = s*x2, y2 = s + x1 (w: a graph input the body reads from outside)."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["x1", "w"], ["xw"]),
            helper.make_node("Add", ["s", "xw"], ["a"]),
            helper.make_node("Sub", ["a", "x2"], ["b"]),
            helper.make_node("Tanh", ["b"], ["s2"]),
            helper.make_node("Mul", ["s2", "x2"], ["y1"]),
            helper.make_node("Add", ["s2", "x1"], ["y2"]),
        ],
        "body",
        [vi("s", TensorProto.FLOAT, [2, 3]), vi("x1", TensorProto.FLOAT, [2, 3]), vi("x2", TensorProto.FLOAT, [2, 3])],
        [vi("s2", TensorProto.FLOAT, [2, 3]), vi("y1", TensorProto.FLOAT, [2, 3]), vi("y2", TensorProto.FLOAT, [2, 3])],
    )
    node = helper.make_node(
        "Scan",
        ["s0", "X1", "X2"],
        ["sT", "Y1", "Y2"],
        body=body,
        num_scan_inputs=2,
        scan_input_axes=[a1, a2],
        scan_input_directions=[d1, d2],
        scan_output_axes=[oa1, oa2],
        scan_output_directions=[od1, od2],
    )
    inputs = [("s0", [2, 3]), ("X1", _shape(a1)), ("X2", _shape(a2)), ("w", [3])]
    graph = helper.make_graph(
        [node],
        "mixed_scan",
        [vi(n, TensorProto.FLOAT, s) for n, s in inputs],
        [vi(n, TensorProto.FLOAT, None) for n in ("sT", "Y1", "Y2")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8), inputs


# (input 1 axis, dir, input 2 axis, dir, output 1 axis, dir, output 2 axis, dir)
CASES = {
    "in1_ax1_rev-in2_ax0-out1_ax2_rev-out2_ax1": (1, 1, 0, 0, 2, 1, 1, 0),
    "in1_ax-2_rev-in2_ax0-out1_ax-1_rev-out2_ax1": (-2, 1, 0, 0, -1, 1, 1, 0),
    "in1_ax2_rev-in2_ax-3-out1_ax2-out2_ax-2_rev": (2, 1, -3, 0, 2, 0, -2, 1),
    "in1_ax1-in2_ax-1_rev-out1_ax-3_rev-out2_ax0_rev": (1, 0, -1, 1, -3, 1, 0, 1),
    "all_last_axis_reversed": (-1, 1, -1, 1, -1, 1, -1, 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_scan_of_mixed_axes_and_directions_runs_as_onnxruntime_does(case):
    model, inputs = _scan(*CASES[case])
    rng = np.random.default_rng(sorted(CASES).index(case))
    feeds = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in inputs}
    want = dict(zip(("sT", "Y1", "Y2"), ort.InferenceSession(model.SerializeToString()).run(None, feeds)))
    assert np.abs(want["Y1"]).min() > 0  # no output hides at zero
    got = reference.run_model(model, feeds)
    ran = ovrnn.run(ovrnn.convert_model(model), feeds)
    for name, value in want.items():
        assert got[name].shape == value.shape and np.abs(got[name] - value).max() < 1e-6, (name, "reference")
        assert ran[name].shape == value.shape and np.abs(ran[name] - value).max() < 1e-6, (name, "ovrnn")

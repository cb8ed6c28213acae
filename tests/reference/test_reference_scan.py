"""The float64 reference runs Scan (opset 9 on) with every scan axis and direction, as the spec
reads it (onnx.reference's own Scan takes axis 0 forward only, so such models had no reference and
`validate --no-onnxruntime` could not judge them). Checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ovrnn
from ovrnn import reference


def _scan(in_axis: int, in_dir: int, out_axis: int, out_dir: int) -> onnx.ModelProto:  # noqa: F821
    """s_T, ys = Scan(s0, X): s <- tanh(s + x_t * w), y_t = s * 2 (X [B, T, F] or [T, B, F] by in_axis)."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("Add", ["s", "xw"], ["a"]),
            helper.make_node("Tanh", ["a"], ["s2"]),
            helper.make_node("Add", ["s2", "s2"], ["y"]),
        ],
        "body",
        [vi("s", TensorProto.FLOAT, [2, 3]), vi("x", TensorProto.FLOAT, [2, 3])],
        [vi("s2", TensorProto.FLOAT, [2, 3]), vi("y", TensorProto.FLOAT, [2, 3])],
    )
    node = helper.make_node(
        "Scan",
        ["s0", "X"],
        ["sT", "ys"],
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[in_axis],
        scan_input_directions=[in_dir],
        scan_output_axes=[out_axis],
        scan_output_directions=[out_dir],
    )
    x_shape = [5, 2, 3] if in_axis == 0 else [2, 5, 3]
    graph = helper.make_graph(
        [node],
        "g",
        [vi("s0", TensorProto.FLOAT, [2, 3]), vi("X", TensorProto.FLOAT, x_shape), vi("w", TensorProto.FLOAT, [3])],
        [vi("sT", TensorProto.FLOAT, None), vi("ys", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


CASES = [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 1, 1), (0, 0, 1, 0), (0, 0, 0, 1), (1, 1, 0, 1)]


@pytest.mark.parametrize("in_axis, in_dir, out_axis, out_dir", CASES, ids=str)
def test_the_reference_runs_every_scan_axis_and_direction(in_axis, in_dir, out_axis, out_dir):
    model = _scan(in_axis, in_dir, out_axis, out_dir)
    rng = np.random.default_rng(in_axis * 8 + in_dir * 4 + out_axis * 2 + out_dir)
    feeds = {
        "s0": rng.uniform(-1, 1, (2, 3)).astype(np.float32),
        "X": rng.uniform(-1, 1, [5, 2, 3] if in_axis == 0 else [2, 5, 3]).astype(np.float32),
        "w": rng.uniform(0.5, 1.5, 3).astype(np.float32),
    }
    want = dict(zip(["sT", "ys"], ort.InferenceSession(model.SerializeToString()).run(None, feeds)))
    got = reference.run_model(model, feeds)
    for name in ("sT", "ys"):
        assert got[name].shape == want[name].shape and np.abs(got[name] - want[name]).max() < 1e-6, name


def test_validate_judges_a_reversed_axis_1_scan_without_onnxruntime(tmp_path):
    import onnx

    path = tmp_path / "scan.onnx"
    onnx.save(_scan(1, 1, 1, 1), path)
    report = ovrnn.validate(path, use_onnxruntime=False, drift=False)
    assert report.passed and [c.oracle for c in report.comparisons] == ["reference", "reference"], report.format()

"""A Loop that runs no iteration (a constant trip count of 0, or a condition that starts false,
after frozen inputs and folding) is refused with one error: OpenVINO 2026.4.1's frontend reads it
wrong whatever its element type (the IR lost the Loop's inputs; a trip count of 0 killed the
process with SIGFPE). One iteration or more converts and matches onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import ovrnn_cli
from onnx import TensorProto, helper, numpy_helper

import ovrnn


def _loop(dtype: int, trips: int | None, start: bool) -> onnx.ModelProto:
    """s_T, ys = Loop(M, cond, s0) with s <- s + 1 and ys the stacked s; M a graph input when None."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s", "one"], ["s2"]),
            helper.make_node("Identity", ["c"], ["c2"]),
            helper.make_node("Identity", ["s2"], ["scan"]),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("s", dtype, [2, 3])],
        [vi("c2", TensorProto.BOOL, []), vi("s2", dtype, [2, 3]), vi("scan", dtype, [2, 3])],
        [numpy_helper.from_array(np.ones((2, 3), np_type), "one")],
    )
    inits = [numpy_helper.from_array(np.array(start), "cond0")] + (
        [] if trips is None else [numpy_helper.from_array(np.array(trips, np.int64), "M")]
    )
    inputs = [vi("s0", dtype, [2, 3])] + ([vi("M", TensorProto.INT64, [])] if trips is None else [])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond0", "s0"], ["sT", "ys"], body=body, name="loop")],
        "g",
        inputs,
        [vi("sT", dtype, None), vi("ys", dtype, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _message(why: str) -> str:
    return (
        f"Loop node 'loop' runs no iteration ({why}), which OpenVINO's ONNX frontend reads wrong (its inputs or outputs are lost, or the "
        "compiled model crashes); its outputs would be its initial values and empty scan outputs: remove the Loop, or give it "
        "a trip count of at least 1"
    )


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16], ids=["float32", "float16"])
@pytest.mark.parametrize(
    "trips, start, why",
    [(0, True, "its trip count is 0"), (5, False, "its condition starts false")],
    ids=["trip-count-0", "condition-starts-false"],
)
def test_a_loop_without_iterations_is_refused(dtype, trips, start, why):
    with pytest.raises(ovrnn.UnsupportedFeatureError) as info:
        ovrnn.convert_model(_loop(dtype, trips, start))
    assert str(info.value) == _message(why)


def test_a_trip_count_frozen_to_0_is_refused_on_the_command_line(tmp_path):
    """In a child process: before the refusal, such an IR crashed the process."""
    onnx.save(_loop(TensorProto.FLOAT, None, True), tmp_path / "m.onnx")
    proc = ovrnn_cli("convert", tmp_path / "m.onnx", "-o", tmp_path / "out.xml", "--input", "M->0")
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: {_message('its trip count is 0')}", proc.stderr
    assert not (tmp_path / "out.xml").exists()


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16], ids=["float32", "float16"])
@pytest.mark.parametrize("trips", [1, 3], ids=["one-iteration", "three-iterations"])
def test_a_loop_with_iterations_converts_right(dtype, trips):
    model = _loop(dtype, trips, True)
    x = np.arange(6).reshape(2, 3).astype(helper.tensor_dtype_to_np_dtype(dtype))
    got = ovrnn.run(ovrnn.convert_model(model), {"s0": x})
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"s0": x})
    assert got["sT"].shape == want[0].shape and np.array_equal(got["sT"], want[0])
    assert got["ys"].shape == want[1].shape and np.array_equal(got["ys"], want[1])

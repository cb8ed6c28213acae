"""A Loop that runs no iteration because of a trip count or condition the graph computes from
constants and static shapes (Not(True), Equal(Shape(s0)[0], 99), Shape(s0)[0] - 2) is refused like
a constant one (test_zero_trip_loops.py). Before, the refusal read initializers and Constant nodes
only: a float16 Loop (left to OpenVINO's frontend, which folds the condition itself) converted
"successfully" with its inputs lost ('h0' is not an input of the model) or died of SIGFPE at its
first call (trip count Shape - 5 = 0: exit 136). The same computations giving 1 or more iterations
convert and match onnxruntime, so the fold decides, not the presence of a computation."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn

from .test_zero_trip_loops import _loop, _message


def _computed(dtype: int, what: str, value: int) -> onnx.ModelProto:
    """_loop's model (s0 [2, 3]) with its condition or trip count computed in the graph; `value`
    picks the case: the condition is true / the trip count is `value` (0: no iteration)."""
    model = _loop(dtype, 3, True)
    graph = model.graph
    loop = graph.node[0]
    consts = {
        "zero": np.array([0], np.int64),
        "k": np.array([2 - value], np.int64),
        "flag": np.array(not value),
        "two": np.array(2, np.int64),
    }
    graph.initializer.extend(numpy_helper.from_array(v, n) for n, v in consts.items())
    if what == "cond-not":  # Not(True): starts false
        nodes, port, out = [helper.make_node("Not", ["flag"], ["cond_c"])], 1, "cond_c"
    elif what == "cond-shape-equal":  # Equal(Shape(s0)[0], 2 or 99)
        graph.initializer.append(numpy_helper.from_array(np.array([2 if value else 99], np.int64), "want"))
        nodes = [
            helper.make_node("Shape", ["s0"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["s_0"], axis=0),
            helper.make_node("Equal", ["s_0", "want"], ["eq"]),
            helper.make_node("Squeeze", ["eq"], ["cond_c"]),
        ]
        port, out = 1, "cond_c"
    else:  # trip count Shape(s0)[0] - (2 - value) = value
        nodes = [
            helper.make_node("Shape", ["s0"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["s_0"], axis=0),
            helper.make_node("Sub", ["s_0", "k"], ["m"]),
            helper.make_node("Squeeze", ["m"], ["trips_c"]),
        ]
        port, out = 0, "trips_c"
    loop.input[port] = out
    for i, node in enumerate(nodes):
        graph.node.insert(i, node)
    return model


CASES = [
    ("cond-not", "its condition starts false"),
    ("cond-shape-equal", "its condition starts false"),
    ("trip-shape-sub", "its trip count is 0"),
]


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16], ids=["float32", "float16"])
@pytest.mark.parametrize("what, why", CASES, ids=[c[0] for c in CASES])
def test_a_loop_whose_computed_trip_count_or_condition_gives_no_iteration_is_refused(dtype, what, why):
    model = _computed(dtype, what, 0)
    assert ort.InferenceSession(model.SerializeToString()).run(None, {"s0": np.zeros((2, 3), helper.tensor_dtype_to_np_dtype(dtype))})[
        1
    ].shape == (0, 2, 3)
    with pytest.raises(ovrnn.UnsupportedFeatureError) as info:
        ovrnn.convert_model(model)
    assert str(info.value) == _message(why)


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16], ids=["float32", "float16"])
@pytest.mark.parametrize("what", [c[0] for c in CASES])
def test_the_same_computations_with_iterations_convert_right(dtype, what):
    model = _computed(dtype, what, 1 if what == "trip-shape-sub" else 3)
    x = (np.arange(6).reshape(2, 3) * 0.5 - 1).astype(helper.tensor_dtype_to_np_dtype(dtype))
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"s0": x})
    got = ovrnn.run(ovrnn.convert_model(model), {"s0": x})
    for name, value in zip(("sT", "ys"), want):
        assert got[name].shape == value.shape and value.shape[0] >= 1, name
        np.testing.assert_array_equal(got[name], value)

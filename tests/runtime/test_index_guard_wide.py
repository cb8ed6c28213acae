"""Adversarial probes of runtime/index_guard.py (redteam5, session 9): an int64 index input beyond
int32, and an index shared by two Gathers.

OpenVINO 2026.4.1's CPU plugin computes int64 values as int32, so idx = 2**32 fed to Gather(T, idx + 1)
was read as index 1: the guard saw a valid index and Runner returned row 1 (ovrnn on main ea79cdf), where
onnxruntime raises "indices element out of data bounds, idx=4294967297". Such a call is refused now; the
same Runner's next good call gets onnxruntime's numbers. Values on both sides of each bound (+-2**31)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn.errors import UsageError

RNG = np.random.default_rng(20261128 + 5)
TABLE = RNG.uniform(-1, 1, (5, 3)).astype(np.float32)
vi = helper.make_tensor_value_info


def _model(shared: bool) -> onnx.ModelProto:
    """O = Gather(T, idx + 1) (and, `shared`, P = Gather(T, same index, axis 0) of T's transpose view: two Gathers, one index)."""
    nodes = [helper.make_node("Add", ["idx", "one"], ["i1"]), helper.make_node("Gather", ["T", "i1"], ["O"], axis=0)]
    outputs = [vi("O", TensorProto.FLOAT, None)]
    if shared:
        nodes.append(helper.make_node("Gather", ["U", "i1"], ["P"], axis=1))
        outputs.append(vi("P", TensorProto.FLOAT, None))
    inits = [
        numpy_helper.from_array(TABLE, "T"),
        numpy_helper.from_array(np.ascontiguousarray(TABLE.T * 2), "U"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
    ]
    graph = helper.make_graph(nodes, "g", [vi("idx", TensorProto.INT64, [2])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


CALLS = {  # idx fed: onnxruntime's answer, or a refusal
    "wraps-to-valid-2**32": [2**32, 0],
    "wraps-to-valid-2**32+2-and-negative-valid": [2**32 + 2, -6],
    "wraps-to-valid-below-minus-2**32": [-(2**32) - 3, 1],
    "just-above-int32": [2**31, 0],
    "just-below-int32": [-(2**31) - 1, 0],
    "int32-max-out-of-range": [2**31 - 1, 0],
    "valid-both-ends": [3, -6],
}


@pytest.mark.parametrize("shared", [False, True], ids=["one-gather", "index-shared-by-two-gathers"])
def test_an_int64_index_beyond_int32_is_refused_not_wrapped(shared):
    model = _model(shared)
    session, runner = ort.InferenceSession(model.SerializeToString()), ovrnn.Runner(ovrnn.convert_model(model))
    for case, idx in CALLS.items():
        feeds = {"idx": np.array(idx, np.int64)}
        try:
            want = session.run(None, feeds)
        except Exception:  # noqa: BLE001 (onnxruntime's out-of-range error)
            want = None
        if want is None:
            with pytest.raises(UsageError, match=r"^(input 'idx' holds|Gather '[OP]' got index)"):
                runner(feeds)
        else:
            got = runner(feeds)
            for name, value in zip(("O", "P"), want):
                np.testing.assert_array_equal(got[name], value, err_msg=case)
        assert (want is None) == (case != "valid-both-ends"), case
    good = {"idx": np.array([1, -5], np.int64)}  # after the refusals, a good call is still right
    for name, value in zip(("O", "P"), session.run(None, good)):
        np.testing.assert_array_equal(runner(good)[name], value)


def test_the_int32_refusal_names_the_input_and_the_value():
    runner = ovrnn.Runner(ovrnn.convert_model(_model(False)))
    with pytest.raises(UsageError) as err:
        runner({"idx": np.array([0, 2**32], np.int64)})
    assert str(err.value).startswith(
        "input 'idx' holds 4294967296 at [1], beyond the int32 range an index computed from it can take here: "
        "OpenVINO's CPU plugin computes int64 values as int32 (2**32 + 1 would index as 1), so the call's outputs are not returned"
    )

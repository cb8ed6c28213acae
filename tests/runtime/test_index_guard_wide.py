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


def _if_model() -> onnx.ModelProto:
    """O = If(c, then: Gather(T, idx + 1), else: Gather(T, idx + 2)): computed indices in both branches."""

    def branch(name: str, k: str) -> onnx.GraphProto:
        nodes = [helper.make_node("Add", ["idx", k], [f"{name}_i"]), helper.make_node("Gather", ["T", f"{name}_i"], [f"{name}_o"], axis=0)]
        return helper.make_graph(nodes, name, [], [vi(f"{name}_o", TensorProto.FLOAT, None)])

    node = helper.make_node("If", ["c"], ["O"], then_branch=branch("th", "one"), else_branch=branch("el", "two"), name="pick")
    inits = [numpy_helper.from_array(a, n) for a, n in ((TABLE, "T"), (np.array([1], np.int64), "one"), (np.array([2], np.int64), "two"))]
    graph = helper.make_graph(
        [node], "g", [vi("idx", TensorProto.INT64, [2]), vi("c", TensorProto.BOOL, [])], [vi("O", TensorProto.FLOAT, None)], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _loop_model() -> onnx.ModelProto:
    """ys = Loop(M): each iteration gathers T[[i + 1]] (a rank-1 index the body computes)."""
    body = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["i", "ax0"], ["i1"]),
            helper.make_node("Add", ["i1", "one"], ["i2"]),
            helper.make_node("Gather", ["T", "i2"], ["row"], axis=0),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, [])],
        [vi("c2", TensorProto.BOOL, []), vi("row", TensorProto.FLOAT, [1, 3])],
    )
    node = helper.make_node("Loop", ["M", ""], ["ys"], body=body, name="rows")
    inits = [numpy_helper.from_array(a, n) for a, n in ((TABLE, "T"), (np.array([1], np.int64), "one"), (np.array([0], np.int64), "ax0"))]
    graph = helper.make_graph([node], "g", [vi("M", TensorProto.INT64, [])], [vi("ys", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


IF_CALLS = [([0, -6], True), ([3, -6], True), ([4, 0], True), ([-7, 0], True), ([2, -7], False), ([3, 0], False), ([1, -2], False)]


def test_an_index_computed_in_an_if_branch_is_checked():
    """redteam5 (main 9f4c57c): If branches were not guarded: idx = [4, 0] in the then branch (index 5 of
    5 rows) answered a row of zeros where onnxruntime raises; each branch's indices are checked now."""
    model = _if_model()
    session, runner = ort.InferenceSession(model.SerializeToString()), ovrnn.Runner(ovrnn.convert_model(model))
    refused = 0
    for idx, c in IF_CALLS:
        feeds = {"idx": np.array(idx, np.int64), "c": np.array(c)}
        try:
            want = session.run(None, feeds)[0]
        except Exception:  # noqa: BLE001 (onnxruntime's out-of-range error)
            with pytest.raises(
                UsageError, match=r"^an index computed in a branch of If '[^']*' went out of range \(in Gather 'th_o', Gather 'el_o'\)"
            ):
                runner(feeds)
            refused += 1
            continue
        np.testing.assert_array_equal(runner(feeds)["O"], want, err_msg=str((idx, c)))
    assert refused == 3


def test_a_rank_1_index_computed_in_a_loop_body_is_checked():
    """redteam5 (main 9f4c57c): a Loop body's index of rank 1 made Runner raise a bare TypeError
    (opset13's squeeze/range called without their axes/output type) before any call."""
    model = _loop_model()
    session, runner = ort.InferenceSession(model.SerializeToString()), ovrnn.Runner(ovrnn.convert_model(model))
    for trips in (4, 1, 5, 0, 3):  # 5: the last iteration reads T[5]
        feeds = {"M": np.array(trips, np.int64)}
        if trips == 5:
            with pytest.raises(UsageError, match=r"^an index computed in the body of Loop '[^']*' went out of range at some iteration"):
                runner(feeds)
            continue
        want = session.run(None, feeds)[0]
        got = runner(feeds)["ys"]
        assert got.shape == want.shape, (trips, got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=f"M = {trips}")


def _nested_model(in_if: bool) -> onnx.ModelProto:
    """ys = Loop(M) whose body runs Loop(2) gathering T[[i + j]] (i: the outer iteration); `in_if`: the
    outer Loop sits in an If's then branch (the else branch gives zeros [1, 2, 1, 3])."""
    inner = helper.make_graph(
        [
            helper.make_node("Add", ["i", "j"], ["ij"]),
            helper.make_node("Unsqueeze", ["ij", "ax0"], ["ij1"]),
            helper.make_node("Gather", ["T", "ij1"], ["row"], axis=0),
            helper.make_node("Identity", ["ci"], ["co"]),
        ],
        "inner",
        [vi("j", TensorProto.INT64, []), vi("ci", TensorProto.BOOL, [])],
        [vi("co", TensorProto.BOOL, []), vi("row", TensorProto.FLOAT, [1, 3])],
    )
    outer = helper.make_graph(
        [helper.make_node("Loop", ["two", ""], ["rows"], body=inner, name="inner"), helper.make_node("Identity", ["c"], ["c2"])],
        "outer",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, [])],
        [vi("c2", TensorProto.BOOL, []), vi("rows", TensorProto.FLOAT, [2, 1, 3])],
    )
    loop = helper.make_node("Loop", ["M", ""], ["ys"], body=outer, name="outer")
    inits = [numpy_helper.from_array(a, n) for a, n in ((TABLE, "T"), (np.array(2, np.int64), "two"), (np.array([0], np.int64), "ax0"))]
    inputs = [vi("M", TensorProto.INT64, [])]
    nodes = [loop]
    if in_if:
        then = helper.make_graph([loop], "then", [], [vi("ys", TensorProto.FLOAT, None)])
        other = helper.make_graph([helper.make_node("Identity", ["zeros"], ["zs"])], "else", [], [vi("zs", TensorProto.FLOAT, None)])
        nodes = [helper.make_node("If", ["go"], ["out"], then_branch=then, else_branch=other, name="maybe")]
        inputs.append(vi("go", TensorProto.BOOL, []))
        inits.append(numpy_helper.from_array(np.zeros((1, 2, 1, 3), np.float32), "zeros"))
    graph = helper.make_graph(nodes, "g", inputs, [vi("out" if in_if else "ys", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("in_if", [False, True], ids=["loop-in-a-loop-body", "loop-in-a-loop-in-an-if-branch"])
def test_an_index_computed_in_a_nested_body_is_checked(in_if):
    """redteam5 (main bcef157): a Loop nested in a Loop's body was not guarded: M = 5 read T[5] at the
    outer iteration 4 and answered a row of zeros where onnxruntime raises."""
    model = _nested_model(in_if)
    session, runner = ort.InferenceSession(model.SerializeToString()), ovrnn.Runner(ovrnn.convert_model(model))
    for trips in (4, 5, 2):
        feeds = {"M": np.array(trips, np.int64)} | ({"go": np.array(True)} if in_if else {})
        if trips == 5:
            with pytest.raises(UsageError, match=r"^an index computed in (the body of Loop|a branch of If) '[^']*' went out of range"):
                runner(feeds)
            continue
        want = session.run(None, feeds)[0]
        np.testing.assert_array_equal(runner(feeds)["out" if in_if else "ys"], want, err_msg=f"M = {trips}")

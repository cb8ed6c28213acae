"""Indices the model computes (idx + 5, a Reshape or a Cast of an input, GatherND/ScatterND tuples)
are checked on every call (runtime/index_guard.py), not only indices that are graph inputs.

ONNX makes an out-of-range index an error (onnxruntime raises). OpenVINO 2026.4.1's CPU plugin gave
Gather zeros, GatherElements/GatherND memory read out of bounds, and with an LSTM before it the
LSTM's own output Y was off by 0.49 (redteam's ge_oob2.py on main c026703 .. dea113e: no error).
Each case: in-range indices at both ends (negative ones too) give onnxruntime's numbers, each
out-of-range one is one UsageError naming the op, the value and the axis, and a good call after a
bad one is still right (nothing corrupted). Values are picked on both sides of each bound: a
probe at 0 or 1 would pass with no check at all."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn

from .batching.index_models import scan_body_gathers_action_plus_1

H = 8
ORT_ERRORS = tuple(getattr(ort.capi.onnxruntime_pybind11_state, n) for n in ("Fail", "RuntimeException", "InvalidArgument"))
RNG = np.random.default_rng(20261128)
W = RNG.uniform(-0.6, 0.6, (1, 4 * H, 3)).astype(np.float32)
R = RNG.uniform(-0.6, 0.6, (1, 4 * H, H)).astype(np.float32)
B = RNG.uniform(-0.6, 0.6, (1, 8 * H)).astype(np.float32)
TABLE = RNG.uniform(-1, 1, (5, 3)).astype(np.float32)
GRID = RNG.uniform(-1, 1, (2, 3, 4)).astype(np.float32)


def _lstm_then(index_nodes, pick, idx_type=TensorProto.INT64, idx_shape=(1, 1), out_shape=None):
    """X [2,1,3] -> LSTM (Y, Yh [1,1,8]) -> Yh2 [1,8] -> `pick` over Yh2 with indices from idx."""
    nodes = [
        helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Yh"], hidden_size=H, name="lstm"),
        helper.make_node("Squeeze", ["Yh", "ax0"], ["Yh2"]),
        *index_nodes,
        pick,
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in ((W, "W"), (R, "R"), (B, "B"), (np.array([0], np.int64), "ax0"))]
    return nodes, inits, [("X", TensorProto.FLOAT, [2, 1, 3]), ("idx", idx_type, list(idx_shape))], ["Y", "O"]


def _const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _case(kind):
    """(nodes, initializers, inputs [(name, type, shape)], outputs, good idx values, bad (value, message tail))."""
    if kind == "gather_elements_idx_plus_5":
        nodes, inits, ins, outs = _lstm_then(
            [helper.make_node("Add", ["idx", "five"], ["i5"])], helper.make_node("GatherElements", ["Yh2", "i5"], ["O"], axis=1)
        )
        return nodes, [*inits, _const("five", np.array([[5]], np.int64))], ins, outs
    if kind == "gather_elements_reshaped":
        nodes, inits, ins, outs = _lstm_then(
            [helper.make_node("Reshape", ["idx", "shape"], ["ir"])],
            helper.make_node("GatherElements", ["Yh2", "ir"], ["O"], axis=1),
            idx_shape=(1,),
        )
        return nodes, [*inits, _const("shape", np.array([-1, 1], np.int64))], ins, outs
    if kind == "gather_elements_cast_from_float":
        nodes, inits, ins, outs = _lstm_then(
            [helper.make_node("Cast", ["idx"], ["ic"], to=TensorProto.INT64)],
            helper.make_node("GatherElements", ["Yh2", "ic"], ["O"], axis=1),
            idx_type=TensorProto.FLOAT,
        )
        return nodes, inits, ins, outs
    if kind == "gather_nd_input_batch_dims_1":
        return _lstm_then([], helper.make_node("GatherND", ["Yh2", "idx"], ["O"], batch_dims=1))
    if kind == "gather_idx_plus_1":  # Gather's own answer out of range: zeros
        nodes = [helper.make_node("Add", ["idx", "one"], ["i1"]), helper.make_node("Gather", ["T", "i1"], ["O"], axis=0)]
        return nodes, [_const("T", TABLE), _const("one", np.array([1], np.int64))], [("idx", TensorProto.INT64, [2])], ["O"]
    if kind == "gather_nd_tuple_plus_1":  # an index tuple: its second part runs over axis 1 (size 3)
        nodes = [helper.make_node("Add", ["idx", "one"], ["i1"]), helper.make_node("GatherND", ["G", "i1"], ["O"])]
        return nodes, [_const("G", GRID), _const("one", np.array([1], np.int64))], [("idx", TensorProto.INT64, [1, 2])], ["O"]
    if kind == "scatter_nd_idx_plus_1":
        nodes = [helper.make_node("Add", ["idx", "one"], ["i1"]), helper.make_node("ScatterND", ["T", "i1", "U"], ["O"])]
        inits = [_const("T", TABLE), _const("one", np.array([1], np.int64)), _const("U", np.full((1, 3), 9.0, np.float32))]
        return nodes, inits, [("idx", TensorProto.INT64, [1, 1])], ["O"]
    if kind == "scatter_elements_idx_plus_1":
        nodes = [helper.make_node("Add", ["idx", "one"], ["i1"]), helper.make_node("ScatterElements", ["T", "i1", "U"], ["O"], axis=1)]
        inits = [_const("T", TABLE), _const("one", np.array([1], np.int64)), _const("U", np.full((5, 1), 9.0, np.float32))]
        return nodes, inits, [("idx", TensorProto.INT64, [5, 1])], ["O"]
    raise AssertionError(kind)


# kind: (good index values, bad values with the message's index position, axis and size)
CASES = {
    "gather_elements_idx_plus_5": ([2, -13, -6], [(3, 8), (-14, -9), (94, 99)], "GatherElements 'O'", "[0, 0]", 1, H),
    "gather_elements_reshaped": ([7, -8, 0], [(8, 8), (-9, -9)], "GatherElements 'O'", "[0, 0]", 1, H),
    "gather_elements_cast_from_float": ([7.9, -8.9, 3.0], [(8.0, 8), (-9.0, -9), (8.5, 8)], "GatherElements 'O'", "[0, 0]", 1, H),
    "gather_nd_input_batch_dims_1": ([7, -8, 3], [(8, 8), (-9, -9)], "GatherND 'O'", "[0, 0]", 1, H),
    "gather_idx_plus_1": ([3, -6, 0], [(4, 5), (-7, -6)], "Gather 'O'", "[1]", 0, 5),
    "gather_nd_tuple_plus_1": ([1, -3], [(2, 3), (-5, -4)], "GatherND 'O'", "[0, 1]", 1, 3),
    "scatter_nd_idx_plus_1": ([3, -6], [(4, 5), (-7, -6)], "ScatterNDUpdate 'O'", "[0, 0]", 0, 5),
    "scatter_elements_idx_plus_1": ([1, -4], [(2, 3), (-5, -4)], "ScatterElementsUpdate 'O'", "[4, 0]", 1, 3),
}


def _model(kind):
    nodes, inits, ins, outs = _case(kind)
    graph = helper.make_graph(
        nodes,
        kind,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in ins],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), ins


def _feeds(ins, kind, value):
    """The inputs with every index `value` but one in-range value first (the bad one sits last)."""
    name, etype, shape = ins[-1]
    dtype = np.float32 if etype == TensorProto.FLOAT else np.int64
    idx = np.full(shape, value, dtype)
    if kind == "gather_nd_tuple_plus_1":  # first part 0 (in range), the value in the second
        idx = np.array([[0, value]], dtype)
    elif kind in ("gather_idx_plus_1", "scatter_elements_idx_plus_1") and idx.size > 1:
        idx.reshape(-1)[:-1] = 0
    feeds = {name: idx}
    if ins[0][0] == "X":
        feeds["X"] = np.random.default_rng(7).uniform(-1, 1, (2, 1, 3)).astype(np.float32)
    return feeds


@pytest.mark.parametrize("kind", list(CASES))
def test_a_computed_index_out_of_range_is_refused_and_in_range_ones_are_onnxruntimes(kind):
    good, bad, what, where, axis, size = CASES[kind]
    model, ins = _model(kind)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    runner = ovrnn.Runner(ovrnn.convert_model(model))
    for value in good:
        feeds = _feeds(ins, kind, value)
        for got, want in zip(runner(feeds).values(), session.run(None, feeds)):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    source = {"gather_nd_input_batch_dims_1": "input 'idx' as it is", "gather_elements_cast_from_float": "input 'idx' converted"}.get(
        kind, "computed in the model from its inputs"
    )
    for value, seen in bad:
        feeds = _feeds(ins, kind, value)
        with pytest.raises(ORT_ERRORS):  # onnxruntime: an error, as ONNX says
            session.run(None, feeds)
        with pytest.raises(ovrnn.UsageError) as caught:
            runner(feeds)
        assert str(caught.value) == (
            f"{what} got index {seen} at {where} ({source}), out of range for axis {axis} of its data (size {size}): "
            f"expected {-size} <= index <= {size - 1}. ONNX makes this an error; OpenVINO would have returned zeros or "
            "memory garbage, so the call's outputs are not returned"
        )
    feeds = _feeds(ins, kind, good[0])  # after the refusals: right again
    for got, want in zip(runner(feeds, share_outputs=True).values(), session.run(None, feeds)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_the_axis_size_is_read_each_call_where_the_data_is_dynamic():
    """The table is an input with a dynamic row count: index 3 (idx 2 + 1) is in range for 5 rows
    and out of range for 3; the size comes from the call, not from the IR."""
    nodes = [helper.make_node("Add", ["idx", "one"], ["i1"]), helper.make_node("Gather", ["T", "i1"], ["O"], axis=0)]
    graph = helper.make_graph(
        nodes,
        "dynamic_table",
        [helper.make_tensor_value_info("T", TensorProto.FLOAT, ["rows", 3]), helper.make_tensor_value_info("idx", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("O", TensorProto.FLOAT, None)],
        [_const("one", np.array([1], np.int64))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    runner, idx = ovrnn.Runner(ovrnn.convert_model(model)), np.array([2], np.int64)
    np.testing.assert_array_equal(runner({"T": TABLE, "idx": idx})["O"], TABLE[[3]])
    with pytest.raises(
        ovrnn.UsageError, match=r"^Gather 'O' got index 3 at \[0\] .* axis 0 of its data \(size 3\): expected -3 <= index <= 2\."
    ):
        runner({"T": TABLE[:3], "idx": idx})
    np.testing.assert_array_equal(runner({"T": TABLE[:4], "idx": idx})["O"], TABLE[[3]])


def test_a_stream_refused_after_its_call_keeps_the_states_it_had():
    """Stateful: s' = s + X, O = s'[idx + 5]. The refused call ran (its states moved inside
    OpenVINO); the stream puts them back, so the next chunk continues from the last good one."""
    nodes = [
        helper.make_node("Add", ["s", "X"], ["sn"]),
        helper.make_node("Add", ["idx", "five"], ["i5"]),
        helper.make_node("GatherElements", ["sn", "i5"], ["O"], axis=1),
        helper.make_node("Neg", ["sn"], ["Y"]),  # two static f32 outputs: the stream compiles them packed into one
    ]
    graph = helper.make_graph(
        nodes,
        "stateful_pick",
        [
            helper.make_tensor_value_info(n, t, s)
            for n, t, s in (("X", TensorProto.FLOAT, [1, H]), ("s", TensorProto.FLOAT, [1, H]), ("idx", TensorProto.INT64, [1, 1]))
        ],
        [
            helper.make_tensor_value_info("sn", TensorProto.FLOAT, [1, H]),
            helper.make_tensor_value_info("O", TensorProto.FLOAT, [1, 1]),
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, H]),
        ],
        [_const("five", np.array([[5]], np.int64))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    stream = ovrnn.Stream(ovrnn.convert_model(model, stateful="s=sn"))
    x = RNG.uniform(-1, 1, (1, H)).astype(np.float32)
    assert stream.compiled.packed is not None and stream.compiled.index_guards is not None
    first = stream.feed({"X": x, "idx": np.array([[2]])})
    assert first["O"][0, 0] == x[0, 7] and list(first) == ["O", "Y"]
    np.testing.assert_array_equal(first["Y"], -x)
    with pytest.raises(ovrnn.UsageError, match=r"^GatherElements 'O' got index 8 at \[0, 0\]"):
        stream.feed({"X": x, "idx": np.array([[3]])})
    np.testing.assert_array_equal(stream.state["s"], x)
    second = stream.feed({"X": x, "idx": np.array([[-13]])})
    assert second["O"][0, 0] == 2 * x[0, 0]
    np.testing.assert_array_equal(second["Y"], -2 * x)


GRID_CASES = {  # op node over D [2, 3, 4] with indices idx + 1; index type, index shape, the size of the axis it runs over
    "gather-scalar-index": (lambda: helper.make_node("Gather", ["D", "i1"], ["O"], axis=1), TensorProto.INT64, [], 3),
    "gather-axis-minus-1-int32": (lambda: helper.make_node("Gather", ["D", "i1"], ["O"], axis=-1), TensorProto.INT32, [2], 4),
    "gather-axis-minus-2": (lambda: helper.make_node("Gather", ["D", "i1"], ["O"], axis=-2), TensorProto.INT64, [2], 3),
    "gather-elements-axis-minus-1": (
        lambda: helper.make_node("GatherElements", ["D", "i1"], ["O"], axis=-1),
        TensorProto.INT64,
        [2, 3, 1],
        4,
    ),
    "gather-nd-batch-dims-1-pairs": (lambda: helper.make_node("GatherND", ["D", "i1"], ["O"], batch_dims=1), TensorProto.INT64, [2, 2], 3),
}


@pytest.mark.parametrize("case", list(GRID_CASES))
def test_every_index_value_gets_onnxruntimes_answer_or_a_refusal(case):
    """Every value from below -size to above size - 1: the guard keeps the index's shape (a scalar
    index stays a scalar: an early version made it [1], and every in-range answer had a dim too
    many) and its type, and refuses exactly where onnxruntime raises."""
    make, etype, shape, size = GRID_CASES[case]
    dtype = np.int32 if etype == TensorProto.INT32 else np.int64
    graph = helper.make_graph(
        [helper.make_node("Add", ["idx", "one"], ["i1"]), make()],
        case,
        [helper.make_tensor_value_info("idx", etype, shape)],
        [helper.make_tensor_value_info("O", TensorProto.FLOAT, None)],
        [_const("D", GRID), _const("one", np.array(1, dtype))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session, runner = ort.InferenceSession(model.SerializeToString()), ovrnn.Runner(ovrnn.convert_model(model))
    refused = 0
    for value in range(-size - 3, size + 1):
        feeds = {"idx": np.full(shape, value, dtype)}
        try:
            want = session.run(None, feeds)[0]
        except ORT_ERRORS:
            with pytest.raises(ovrnn.UsageError, match="out of range for axis"):
                runner(feeds)
            refused += 1
            continue
        got = runner(feeds)["O"]
        assert got.shape == want.shape, value
        np.testing.assert_array_equal(got, want)
    assert refused == 4  # idx + 1 below -size (two values), at size and above it


def test_a_first_call_refused_on_a_dynamic_batch_leaves_the_stream_as_reset():
    """A dynamic batch: right after a reset the state is empty (its initializer makes it from the
    first call's inputs). A refused first call must leave it so, not set it to the empty array it
    read (then the next good call was refused with the stale index)."""
    nodes = [
        helper.make_node("Add", ["s", "X"], ["sn"]),
        helper.make_node("Add", ["idx", "five"], ["i5"]),
        helper.make_node("GatherElements", ["sn", "i5"], ["O"], axis=1),
    ]
    ins = [("X", TensorProto.FLOAT, ["B", H]), ("s", TensorProto.FLOAT, ["B", H]), ("idx", TensorProto.INT64, ["B", 1])]
    graph = helper.make_graph(
        nodes,
        "dynamic_batch_pick",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in ins],
        [helper.make_tensor_value_info("sn", TensorProto.FLOAT, ["B", H]), helper.make_tensor_value_info("O", TensorProto.FLOAT, ["B", 1])],
        [_const("five", np.array([[5]], np.int64))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    stream = ovrnn.Stream(ovrnn.convert_model(model, stateful="s=sn"))
    x = RNG.uniform(-1, 1, (2, H)).astype(np.float32)
    with pytest.raises(ovrnn.UsageError, match=r"^GatherElements 'O' got index 8 at \[0, 0\]"):
        stream.feed({"X": x, "idx": np.array([[3], [0]])})
    assert stream.state["s"].shape == (0, H)
    np.testing.assert_array_equal(stream.feed({"X": x, "idx": np.array([[2], [-13]])})["O"], np.array([[x[0, 7]], [x[1, 0]]]))
    with pytest.raises(ovrnn.UsageError, match=r"^GatherElements 'O' got index 8 at \[1, 0\]"):
        stream.feed({"X": x, "idx": np.array([[0], [3]])})
    np.testing.assert_array_equal(stream.state["s"], x)
    np.testing.assert_array_equal(stream.feed({"X": x, "idx": np.array([[2], [-13]])})["O"], 2 * np.array([[x[0, 7]], [x[1, 0]]]))


def _reading_loop(dtype: int) -> onnx.ModelProto:
    """s_T, ys = Loop(M, s0) with s <- s + X[i] (X [5, 2, 3] from the outer graph, read at the
    iteration number: a Gather in the body), M fed at run time."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("Gather", ["X", "i"], ["x_i"], axis=0, name="read_x"),
            helper.make_node("Add", ["s", "x_i"], ["s2"]),
            helper.make_node("Identity", ["c"], ["c2"]),
            helper.make_node("Identity", ["s2"], ["y"]),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("s", dtype, [2, 3])],
        [vi("c2", TensorProto.BOOL, []), vi("s2", dtype, [2, 3]), vi("y", dtype, [2, 3])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "s0"], ["sT", "ys"], body=body, name="steps")],
        "reading_loop",
        [vi("X", dtype, [5, 2, 3]), vi("s0", dtype, [2, 3]), vi("M", TensorProto.INT64, [])],
        [vi("sT", dtype, None), vi("ys", dtype, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_an_index_out_of_range_inside_a_loop_body_is_refused():
    """The iteration number reads X[i]: with M = 6 over 5 steps of X, onnxruntime raises and
    OpenVINO read zeros for X[5] (a float16 LSTM-cell Loop answered 7 steps for 5, silently). The
    body carries a flag over its iterations; a call after a refused one (more or no iterations) is
    right, the flag starting False each call. Float16: the Loop is OpenVINO's (float32 with a
    run-time M is refused at conversion)."""
    model = _reading_loop(TensorProto.FLOAT16)
    session = ort.InferenceSession(model.SerializeToString())
    runner = ovrnn.Runner(ovrnn.convert_model(model))
    x, s0 = RNG.uniform(-1, 1, (5, 2, 3)).astype(np.float16), RNG.uniform(-1, 1, (2, 3)).astype(np.float16)
    for trips in (5, 6, 3, 0, 9, 2):
        feeds = {"X": x, "s0": s0, "M": np.array(trips, np.int64)}
        if trips > 5:
            with pytest.raises(ORT_ERRORS):
                session.run(None, feeds)
            with pytest.raises(ovrnn.UsageError) as caught:
                runner(feeds)
            assert re.fullmatch(
                "an index computed in the body of Loop '[^']+' went out of range at some iteration [(]in Gather 'read_x'[)]; ONNX makes "
                "this an error; OpenVINO would have read zeros or memory garbage, so the call's outputs are not returned",
                str(caught.value),
            ), str(caught.value)
            continue
        got, want = runner(feeds), dict(zip(("sT", "ys"), session.run(None, feeds)))
        for name, value in want.items():
            assert got[name].shape == value.shape, (trips, name)
            np.testing.assert_allclose(got[name], value, rtol=0, atol=2e-3)


def test_an_index_out_of_range_inside_a_scan_body_is_refused():
    """batchidx (session 9): an ONNX Scan becomes a TensorIterator, whose body the guard did not reach:
    action 4 read table[5] as zeros, y = x + rows with no error, where onnxruntime raises. Its body now
    carries the flag a Loop's does; in-range and negative indices are onnxruntime's answers."""
    model = scan_body_gathers_action_plus_1()  # table [5, 4]: an action of 4 reads table[5], -6 reads table[-5]
    session = ort.InferenceSession(model.SerializeToString())
    runner = ovrnn.Runner(ovrnn.convert_model(model))
    x, h = RNG.uniform(-1, 1, (2, 4)).astype(np.float32), RNG.uniform(-1, 1, (2, 4)).astype(np.float32)
    for action in ([[0, 1, 2], [3, 3, 3]], [[0, 1, 4], [0, 0, 0]], [[-6, -1, 0], [2, 2, 2]], [[0, 0, 0], [0, -7, 0]]):
        feeds = {"x": x, "h": h, "action": np.array(action, np.int64)}
        if np.asarray(action).max() >= 4 or np.asarray(action).min() < -6:
            with pytest.raises(ORT_ERRORS):
                session.run(None, feeds)
            with pytest.raises(ovrnn.UsageError, match=r"^an index computed in the body of TensorIterator '[^']+' went out of range"):
                runner(feeds)
            continue
        np.testing.assert_allclose(runner(feeds)["y"], session.run(["y"], feeds)[0], rtol=0, atol=1e-5, err_msg=str(action))


def test_a_constant_index_out_of_range_is_refused():
    """The same Loop with the constant M = 6 in float32: ovrnn unrolls it, and the sixth copy reads
    X[5] with a constant index on an axis of 5 (OpenVINO: zeros, sT 5 where every step adds 1).
    Constant indices in range of a static axis are not guarded (no cost)."""
    model = _reading_loop(TensorProto.FLOAT)
    del model.graph.input[2]
    model.graph.initializer.append(numpy_helper.from_array(np.array(6, np.int64), "M"))
    feeds = {"X": np.ones((5, 2, 3), np.float32), "s0": np.zeros((2, 3), np.float32)}
    with pytest.raises(ORT_ERRORS):
        ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    runner = ovrnn.Runner(ovrnn.convert_model(model))
    assert len(runner.compiled.index_guards.guards) == 1  # the sixth read only
    with pytest.raises(
        ovrnn.UsageError,
        match=r"^Gather '[^']*read_x' got index 5 at \[\] \(a constant of the model\), out of range for axis 0 of its data \(size 5\)",
    ):
        runner(feeds)

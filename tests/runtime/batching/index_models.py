"""Look-alike models for the batcher's index refusal (test_batcher_indices.py): a stream x [B,4], state h [B,4] -> hn = tanh(x + h),
plus one output whose index the model computes (or a constant, or a state), built to be served silently wrong by a batcher that
checks only direct index inputs; and the models that take indices and must still be served."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TABLE = (np.arange(20, dtype=np.float32).reshape(5, 4) + 1) / 10  # 5 rows: an index of 5 or more is out of range


def _const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _frame(nodes, inits, extra_inputs, outputs, extra_states=(), opset: int = 17) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    ins = [vi("x", TensorProto.FLOAT, ["B", 4]), vi("h", TensorProto.FLOAT, ["B", 4]), *extra_inputs, *extra_states]
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "h"], ["s"]), helper.make_node("Tanh", ["s"], ["hn"]), *nodes],
        "look_alike",
        ins,
        [vi("hn", TensorProto.FLOAT, None), *[vi(n, TensorProto.FLOAT, None) for n in outputs]],
        [_const("table", TABLE), *inits],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _action(etype=TensorProto.INT64, shape=("B", 1)):
    return [helper.make_tensor_value_info("action", etype, list(shape))]


def loop_body_reads_past_its_end() -> onnx.ModelProto:
    """y = Loop(M = max(action), acc0 = x) with acc <- acc + table[i] in its body (i: the iteration number), in float16 (ovrnn
    refuses to convert a float32 Loop of run-time trip count, OpenVINO's frontend takes this one): action 7 reads table[5], table[6]."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("Gather", ["table16", "i"], ["row"], axis=0, name="read_table"),
            helper.make_node("Add", ["acc", "row"], ["acc2"]),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("acc", TensorProto.FLOAT16, ["B", 4])],
        [vi("c2", TensorProto.BOOL, []), vi("acc2", TensorProto.FLOAT16, ["B", 4])],
    )
    nodes = [
        helper.make_node("ReduceMax", ["action"], ["M"], keepdims=0),
        helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16),
        helper.make_node("Loop", ["M", "", "x16"], ["y16"], body=body, name="steps"),
        helper.make_node("Cast", ["y16"], ["y"], to=TensorProto.FLOAT),
    ]
    return _frame(nodes, [_const("table16", TABLE.astype(np.float16))], _action(), ["y"])


def gather_elements_action_plus_1() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Add", ["action", "one"], ["index"]),
        helper.make_node("GatherElements", ["hn", "index"], ["y"], axis=1, name="picked"),
    ]
    return _frame(nodes, [_const("one", np.ones((1, 1), np.int64))], _action(), ["y"])


def gather_nd_action_plus_1() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Add", ["action", "one"], ["index"]),
        helper.make_node("GatherND", ["hn", "index"], ["y"], batch_dims=1, name="picked"),
    ]
    return _frame(nodes, [_const("one", np.ones((1, 1), np.int64))], _action(), ["y"])


def scatter_elements_action_plus_1() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Add", ["action", "one"], ["index"]),
        helper.make_node("ScatterElements", ["hn", "index", "x1"], ["y"], axis=1, name="marked"),
        helper.make_node("Slice", ["x", "zero", "one1", "one1"], ["x1"]),
    ]
    inits = [_const("one", np.ones((1, 1), np.int64)), _const("zero", np.array([0], np.int64)), _const("one1", np.array([1], np.int64))]
    return _frame(nodes, inits, _action(), ["y"])


def gather_cast_of_a_float_input() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Cast", ["action"], ["index"], to=TensorProto.INT64),
        helper.make_node("Gather", ["table", "index"], ["y"], axis=0, name="emb"),
    ]
    return _frame(nodes, [], _action(TensorProto.FLOAT), ["y"])


def gather_reshape_of_an_input() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Reshape", ["action", "shape"], ["index"]),
        helper.make_node("Gather", ["table", "index"], ["y"], axis=0, name="emb"),
    ]
    return _frame(nodes, [_const("shape", np.array([-1], np.int64))], _action(), ["y"])


def gather_index_from_a_state() -> onnx.ModelProto:
    """A counter state k -> k + 1 and y = table[k]: the index is the model's own output of the last chunk (k 5 after 5 chunks)."""
    nodes = [
        helper.make_node("Add", ["k", "one"], ["kn"]),
        helper.make_node("Gather", ["table", "k"], ["y"], axis=0, name="emb"),
    ]
    k = [helper.make_tensor_value_info("k", TensorProto.INT64, ["B"])]
    model = _frame(nodes, [_const("one", np.ones(1, np.int64))], [], ["y"], extra_states=k)
    model.graph.output.append(helper.make_tensor_value_info("kn", TensorProto.INT64, None))
    return model


def gather_constant_out_of_range() -> onnx.ModelProto:
    nodes = [helper.make_node("Gather", ["hn", "four"], ["y"], axis=1, name="fifth")]
    return _frame(nodes, [_const("four", np.array([4], np.int64))], [], ["y"])


def gather_constant_in_range() -> onnx.ModelProto:
    nodes = [helper.make_node("Gather", ["hn", "two"], ["y"], axis=1, name="third")]
    return _frame(nodes, [_const("two", np.array([2], np.int64))], [], ["y"])


def scan_body_gathers_action_plus_1() -> onnx.ModelProto:
    """y = Scan over action [B, 3] (axis 1) with acc <- acc + table[action_t + 1] in its body (OpenVINO: a TensorIterator, whose
    body index_guard does not guard): an action of 4 reads table[5]."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("Add", ["a_t", "one"], ["index"]),
            helper.make_node("Gather", ["table", "index"], ["row"], axis=0, name="read_table"),
            helper.make_node("Add", ["acc", "row"], ["acc2"]),
        ],
        "body",
        [vi("acc", TensorProto.FLOAT, ["B", 4]), vi("a_t", TensorProto.INT64, ["B"])],
        [vi("acc2", TensorProto.FLOAT, ["B", 4])],
        [_const("one", np.ones(1, np.int64))],
    )
    nodes = [helper.make_node("Scan", ["x", "action"], ["y"], body=body, num_scan_inputs=1, scan_input_axes=[1], name="steps")]
    return _frame(nodes, [], _action(shape=("B", 3)), ["y"])

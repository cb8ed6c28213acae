"""The prepare-stage rewrites of the ONNX stage each state a precondition and check it (the list:
docs/control_flow.md, "Prepare-stage rewrites"); here the inputs built to fool them, which must be
left alone or refused, never rewritten into something else. (Frontend fixes: test_frontend_fixes.py;
body types: test_body_types.py; no-op Slices: test_noop_slice.py.)"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import assert_close, run_ir
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn.errors import UsageError
from ovrnn.onnx.control_flow.scan_loop import as_loop
from ovrnn.onnx.reading.fold import fold_constants

vi = helper.make_tensor_value_info


def model_of(nodes, inputs, outputs, value_info=(), inits=(), opset=17):
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info)),
        opset_imports=[helper.make_opsetid("", opset)],
    )
    model.ir_version = 8
    return model


# --- fold.py: a shape is static only when the graph inputs and constants make it so ----------------


def size_times_x(declare: str) -> onnx.ModelProto:
    """y = x * Size(Relu(x)) with a dynamic batch; the exporter declared Relu's output [2, 3] (a
    traced shape) in value_info, or as a graph output."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Size", ["r"], ["n"]),
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "nf"], ["y"]),
    ]
    outputs = [vi("y", TensorProto.FLOAT, ["batch", 3])]
    traced = vi("r", TensorProto.FLOAT, [2, 3])
    if declare == "value_info":
        return model_of(nodes, [vi("x", TensorProto.FLOAT, ["batch", 3])], outputs, [traced])
    return model_of(nodes, [vi("x", TensorProto.FLOAT, ["batch", 3])], outputs + [traced])


@pytest.mark.parametrize("declare", ["value_info", "graph_output"])
def test_a_declared_shape_is_no_proof(declare):
    """Before: Size(r) folded to 6 from the declaration, and batch 5 gave x * 6 (onnxruntime: x * 15)."""
    model = size_times_x(declare)
    folded, names = fold_constants(model)
    assert "n" not in names and folded.graph.value_info == model.graph.value_info
    x = np.ones((5, 3), np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]
    got = run_ir(ovrnn.convert_model(model), {"x": x})["y"]
    assert_close(got, want.astype(np.float64), 0, 0, "y")
    assert want[0, 0] == 15.0


def test_the_shape_the_inputs_fix_still_folds():
    model = size_times_x("value_info")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4  # the batch is static now
    folded, names = fold_constants(model)
    assert "n" in names and numpy_helper.to_array(next(t for t in folded.graph.initializer if t.name == "n")) == 12


def test_the_callers_model_keeps_its_declarations():
    model = size_times_x("graph_output")
    before = model.SerializeToString()
    fold_constants(model)
    assert model.SerializeToString() == before


def test_random_ops_are_never_folded():
    nodes = [helper.make_node("RandomUniform", [], ["u"], shape=[2, 3], seed=1.0), helper.make_node("Add", ["x", "u"], ["y"])]
    model = model_of(nodes, [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])])
    assert fold_constants(model) == (model, [])


# --- freeze.py: only a tensor input takes a value ----------------------------------------------------


def test_a_sequence_input_cannot_be_frozen():
    nodes = [helper.make_node("SequenceAt", ["s", "i"], ["y"])]
    model = model_of(
        nodes,
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2]), vi("i", TensorProto.INT64, [])],
        [vi("y", TensorProto.FLOAT, [2])],
    )
    with pytest.raises(UsageError) as refused:
        ovrnn.convert_model(model, input="s{f32}->[1 2]")
    assert str(refused.value) == "input 's{f32}->[1 2]': input 's' is declared a sequence, not a tensor; only a tensor input can be frozen"


# --- scan_loop.py: Scan-8 is another operator ------------------------------------------------------------


def scan(opset: int) -> onnx.NodeProto:
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x_t"], ["s2"]), helper.make_node("Identity", ["s2"], ["y_t"])],
        "b",
        [vi("s", TensorProto.FLOAT, [2]), vi("x_t", TensorProto.FLOAT, [2])],
        [vi("s2", TensorProto.FLOAT, [2]), vi("y_t", TensorProto.FLOAT, [2])],
    )
    inputs = ["", "s0", "X"] if opset == 8 else ["s0", "X"]  # Scan-8: sequence_lens first (absent), batched [B, T, ...]
    return helper.make_node("Scan", inputs, ["s_last", "ys"], name="scan", num_scan_inputs=1, body=body)


def test_scan_8_is_not_taken_for_scan_9():
    names = iter(range(1000))

    def fresh(n):
        return f"{n}_{next(names)}"

    shapes = {"X": [5, 2], "s0": [2]}.get
    assert as_loop(scan(9), shapes, fresh, 9) is not None
    assert as_loop(scan(8), {"X": [1, 5, 2], "s0": [1, 2]}.get, fresh, 8) is None


def test_a_scan_whose_body_does_not_match_its_inputs_is_left():
    node = scan(9)
    body = next(a.g for a in node.attribute if a.name == "body")
    body.input.append(vi("extra", TensorProto.FLOAT, [2]))
    assert as_loop(node, {"X": [5, 2], "s0": [2]}.get, lambda n: n + "_1", 9) is None


def test_a_graph_inputs_values_are_never_folded():
    """x has a static shape, so Shape(x) folds; ReduceSum(x) reads its values and must not."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ReduceSum", ["x"], ["t"], keepdims=0),
        helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["sf", "t"], ["y"]),
    ]
    model = model_of(nodes, [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [1])], opset=11)
    _folded, names = fold_constants(model)
    assert "s" in names and "t" not in names and "y" not in names


@pytest.mark.parametrize(
    "node, message",
    [
        (
            helper.make_node("LSTM", ["x", "w", "r", "", "", "h0"], ["y"], hidden_size=2, name="lstm"),
            "LSTM node 'lstm': input 'initial_h' is tensor 'h0', which no graph input, initializer or node provides",
        ),
        (
            helper.make_node("Add", ["x", "nowhere"], ["y"]),
            "Add node 'y': input 1 is tensor 'nowhere', which no graph input, initializer or node provides",
        ),
    ],
    ids=["recurrent-node-names-the-role", "other-op-names-the-slot"],
)
def test_an_input_nothing_provides_is_an_invalid_model(node, message):
    from ovrnn.errors import InvalidModelError
    from ovrnn.onnx.reading.static_check import check_every_input_is_produced

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.zeros((1, 8, 2), np.float32), "w")
    r = numpy_helper.from_array(np.zeros((1, 8, 2), np.float32), "r")
    graph = helper.make_graph([node], "g", [x], [y], [w, r])
    with pytest.raises(InvalidModelError) as caught:
        check_every_input_is_produced(graph)
    assert str(caught.value) == message
    graph.input.append(helper.make_tensor_value_info(node.input[-1], TensorProto.FLOAT, None))
    check_every_input_is_produced(graph)  # provided as a graph input: nothing to say

"""The ONNX-graph toolkit (ovrnn/onnx/graphs.py): the one opset lookup, walk, label, constant reader
and name maker every module asks."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper, numpy_helper

from ovrnn.errors import InvalidModelError, UnsupportedFeatureError
from ovrnn.onnx import graphs

NEWEST = onnx.defs.onnx_opset_version()


def _vi(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])


def _model(nodes, opsets, inputs=("x",), outputs=("y",)) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [_vi(i) for i in inputs], [_vi(o) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=8)


def _if_with_relu_inside(domain_of_if: str = "") -> onnx.NodeProto:
    branch = helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "b", [], [_vi("r")])
    return helper.make_node("If", ["c"], ["y"], domain=domain_of_if, then_branch=branch, else_branch=branch, name="choose")


RELU = [helper.make_node("Relu", ["x"], ["y"])]
CUSTOM = [helper.make_node("Foo", ["x"], ["y"], domain="custom")]


@pytest.mark.parametrize(
    "nodes, opsets, expected",
    [
        (RELU, [("", 14)], 14),
        (RELU, [("ai.onnx", 11)], 11),
        (RELU, [("", 13), ("ai.onnx", 17), ("custom", 99)], 17),
        (CUSTOM, [("custom", 1)], NEWEST),
    ],
    ids=["default-domain", "ai-onnx-spelling", "both-spellings-newest-wins", "no-ai-onnx-node-needs-no-import"],
)
def test_opset_reads_the_default_domain(nodes, opsets, expected):
    assert graphs.opset(_model(nodes, opsets)) == expected


@pytest.mark.parametrize(
    "model, error, message",
    [
        (lambda: _model(RELU, [("custom", 1)]), InvalidModelError, "model declares no ai.onnx opset in opset_import"),
        (
            lambda: _model([_if_with_relu_inside("custom")], [("custom", 1)], inputs=("x", "c")),
            InvalidModelError,
            "model declares no ai.onnx opset in opset_import",
        ),
        (lambda: _model(RELU, [("", 0)]), InvalidModelError, "model opset_import: expected an ai.onnx opset >= 1, got 0"),
        (
            lambda: _model(RELU, [("", NEWEST + 1)]),
            UnsupportedFeatureError,
            (
                f"model opset_import: ai.onnx opset {NEWEST + 1} is newer than the newest this onnx {onnx.__version__} knows ({NEWEST}); "
                f"expected an opset between 1 and {NEWEST}"
            ),
        ),
    ],
    ids=["ai-onnx-node-without-import", "ai-onnx-node-only-in-a-body", "opset-zero", "future-opset"],
)
def test_opset_refuses_what_the_spec_refuses(model, error, message):
    with pytest.raises(error) as raised:
        graphs.opset(model())
    assert str(raised.value) == message


def test_the_spec_agrees_on_what_needs_an_import():
    """onnx's own checker: an ai.onnx node without an ai.onnx import is invalid, a graph of other domains is not."""
    with pytest.raises(onnx.checker.ValidationError, match="No opset import for domain ''"):
        onnx.checker.check_model(_model(RELU, [("custom", 1)]))
    onnx.checker.check_model(_model(CUSTOM, [("custom", 1)]))


def test_walk_visits_bodies_with_their_owner():
    model = _model([_if_with_relu_inside()], [("", 17)], inputs=("x", "c"))
    seen = [(node.op_type, graph.name, owner.name if owner is not None else None) for node, graph, owner in graphs.walk(model.graph)]
    assert seen == [("If", "g", None), ("Relu", "b", "choose"), ("Relu", "b", "choose")]
    assert [a for a, _ in graphs.subgraphs(model.graph.node[0])] == ["else_branch", "then_branch"]  # attribute order (make_node sorts them)
    assert [g.name for g in graphs.all_graphs(model.graph)] == ["g", "b", "b"]


def test_walk_bodies_first_yields_each_body_before_its_holder_with_its_path():
    inner = helper.make_node("Loop", ["n", "c"], ["z"], name="inner", body=helper.make_graph(RELU, "deep", [], [_vi("y")]))
    branch = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["s"]), inner], "b", [], [_vi("z")])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch, name="choose")
    model = _model([helper.make_node("Tanh", ["x"], ["t"]), node], [("", 17)], inputs=("x", "c"))
    seen = [
        (n.op_type, index, [(holder.name, attribute, g.name) for holder, attribute, g in path])
        for n, index, path in graphs.walk_bodies_first(model.graph)
    ]
    in_else = [("choose", "else_branch", "b")]
    in_then = [("choose", "then_branch", "b")]
    assert seen == [
        ("Tanh", 0, []),
        ("Sigmoid", 0, in_else),
        ("Relu", 0, [*in_else, ("inner", "body", "deep")]),
        ("Loop", 1, in_else),
        ("Sigmoid", 0, in_then),
        ("Relu", 0, [*in_then, ("inner", "body", "deep")]),
        ("Loop", 1, in_then),
        ("If", 1, []),
    ]


@pytest.mark.parametrize(
    "node, label",
    [
        (helper.make_node("LSTM", ["X"], ["Y"], name="lstm_1"), "lstm_1"),
        (helper.make_node("LSTM", ["X"], ["Y", "Y_h"]), "Y"),
        (helper.make_node("Foo", [], []), "Foo"),
    ],
    ids=["named", "unnamed-first-output", "neither"],
)
def test_node_label(node, label):
    assert graphs.node_label(node) == label
    assert graphs.describe_node(node) == f"{node.op_type} node '{label}'"


def test_producers_consumers_upstream():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["a", "x"], ["b"]), helper.make_node("Neg", ["w"], ["y"])]
    graph = _model(nodes, [("", 17)], inputs=("x", "w")).graph
    assert {k: n.op_type for k, n in graphs.producers(graph).items()} == {"a": "Relu", "b": "Add", "y": "Neg"}
    assert {k: [n.op_type for n in ns] for k, ns in graphs.consumers(graph).items()} == {"x": ["Relu", "Add"], "a": ["Add"], "w": ["Neg"]}
    assert graphs.upstream(graph, ["b"]) == {"b", "a", "x"}


@pytest.mark.parametrize(
    "attribute, value, expected",
    [
        ("value", numpy_helper.from_array(np.array([1, 2], dtype=np.int32)), np.array([1, 2], dtype=np.int32)),
        ("value_ints", [3, 4], np.array([3, 4], dtype=np.int64)),
        ("value_float", 0.5, np.array(0.5, dtype=np.float32)),
        ("value_floats", [0.25], np.array([0.25], dtype=np.float32)),
        ("value_string", "s", np.array("s")),
    ],
    ids=["tensor", "ints-are-int64", "float-is-float32", "floats-are-float32", "string-through-onnx-reference"],
)
def test_constant_value_of_a_constant_node(attribute, value, expected):
    graph = helper.make_graph([helper.make_node("Constant", [], ["k"], **{attribute: value})], "g", [], [])
    got = graphs.constant_value(graph, "k")
    assert got.dtype == expected.dtype and got.shape == expected.shape and (got == expected).all()


def test_constant_value_of_an_initializer_and_of_a_computed_tensor():
    graph = _model(RELU, [("", 17)]).graph
    graph.initializer.append(numpy_helper.from_array(np.array([7.0], dtype=np.float64), "w"))
    assert graphs.constant_value(graph, "w").tolist() == [7.0]
    assert graphs.constant_value(graph, "y") is None and graphs.constant_value(graph, "x") is None


def test_fresh_names():
    taken = {"a", "a_1", "p/t", "p/t_2"}
    assert graphs.fresh("a", taken) == "a_2" and "a_2" in taken
    assert graphs.fresh("b", taken) == "b"
    assert graphs.fresh("p/t", taken, start=2) == "p/t_3"


def test_float_types_are_the_element_type_tables():
    assert graphs.FLOAT_TYPES == {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}

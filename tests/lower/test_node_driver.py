"""The one per-node driver (ovrnn/lower/driver.py): the emitter path and the frontend path lower a
node the same way and refuse a computed initial state under --stateful in the same words."""

from __future__ import annotations

import numpy as np
import pytest
from lxml import etree
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn.errors import UnsupportedFeatureError


def _chained(whole: bool):
    """GRU 'b' starts from GRU 'a''s Y_h: computed from graph input 'x' on every call."""
    rng = np.random.default_rng(2)
    w = lambda name, *shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.4).astype(np.float32), name)  # noqa: E731
    x = "x"
    nodes = []
    if whole:  # an op OpenVINO's frontend converts: the whole-model path
        nodes.append(helper.make_node("Relu", ["x"], ["xr"], name="relu"))
        x = "xr"
    nodes += [
        helper.make_node("GRU", [x, "Wa", "Ra"], ["Ya", "Yha"], hidden_size=4, name="a"),
        helper.make_node("GRU", [x, "Wb", "Rb", "", "", "Yha"], ["y"], hidden_size=4, name="b"),
    ]
    graph = helper.make_graph(
        nodes,
        "chained",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None), helper.make_tensor_value_info("Ya", TensorProto.FLOAT, None)],
        [w("Wa", 1, 12, 3), w("Ra", 1, 12, 4), w("Wb", 1, 12, 3), w("Rb", 1, 12, 4)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("whole", [False, True], ids=["emitter", "frontend"])
def test_a_computed_initial_state_is_refused_in_the_same_words_on_both_paths(whole):
    with pytest.raises(UnsupportedFeatureError) as info:
        ovrnn.convert_model(_chained(whole), stateful=True)
    assert str(info.value) == (  # the Python API spells the flags as keywords
        "stateful: GRU node 'b' reads initial_h from 'Yha', which is computed from graph input 'x' on every call; "
        "a stream carries the node's own state instead: give it a constant or graph-input initial state "
        '(if the model passes its state through graph inputs and outputs, name them: stateful="IN=OUT")'
    )


@pytest.mark.parametrize("whole", [False, True], ids=["emitter", "frontend"])
def test_both_paths_summarise_a_node_alike(whole):
    ir = ovrnn.convert_model(_chained(whole))
    assert [(r.label, r.op, [(c.direction, c.form, c.why) for c in r.chains]) for r in ir.rnns] == [
        ("a", "GRU", [("fwd", "cell", "cell")]),
        ("b", "GRU", [("fwd", "explicit", "shared input: walks X as node 'a' does")]),
    ]


@pytest.mark.parametrize(
    "outputs, ids",
    [(["Y", "Yh", "Yc"], ["Y/H", "Y/C"]), (["", "Yh", "Yc"], ["Yh/H", "Yh/C"]), (["", "", "c:out"], ["c_out/H", "c_out/C"])],
    ids=["Y", "Y_h", "Y_c"],
)
def test_an_unnamed_nodes_variables_are_named_after_its_first_output(outputs, ids):
    """docs/stateful_ir.md: variable ids are {node}/H and {node}/C, node = the ONNX node name, else
    its first output's name (made safe)."""
    rng = np.random.default_rng(4)
    inits = [
        numpy_helper.from_array(rng.standard_normal((1, 16, 3)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((1, 16, 4)).astype(np.float32), "R"),
    ]
    node = helper.make_node("LSTM", ["x", "W", "R"], outputs, hidden_size=4)
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o]
    graph = helper.make_graph([node], "unnamed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 3])], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    ir = ovrnn.convert_model(model, stateful=True)
    root = etree.fromstring(ir.xml)
    assert [layer.find("data").get("variable_id") for layer in root.iter("layer") if layer.get("type") == "ReadValue"] == ids

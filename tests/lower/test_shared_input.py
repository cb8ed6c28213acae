"""Two recurrent nodes that walk one X in the same direction: OpenVINO's CPU plugin computes wrong
numbers for folded cell chains that share their input, so every such node after the first is lowered
to explicit ops, with a note. A forward and a reverse walk of one X stay cells (test_end_to_end)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx import numpy_helper as nh

import ovrnn
from ovrnn import reference

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _model(ops: tuple[str, str], whole: bool) -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    T, B, I, H = 6, 2, 3, 4
    nodes, inits, outs = [], [], []
    x = "X"
    if whole:  # an op OpenVINO's frontend converts in front: the whole-model path
        nodes.append(helper.make_node("Relu", ["X"], ["Xr"], name="relu"))
        x = "Xr"
    for k, op in enumerate(ops):
        g = GATES[op]
        inits += [
            nh.from_array(rng.standard_normal((1, g * H, I)).astype(np.float32), f"W{k}"),
            nh.from_array(rng.standard_normal((1, g * H, H)).astype(np.float32), f"R{k}"),
        ]
        nodes.append(helper.make_node(op, [x, f"W{k}", f"R{k}"], [f"Y{k}"], hidden_size=H, name=f"{op.lower()}{k}"))
        outs.append(helper.make_tensor_value_info(f"Y{k}", TP.FLOAT, None))
    graph = helper.make_graph(nodes, "shared_x", [helper.make_tensor_value_info("X", TP.FLOAT, [T, B, I])], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("whole", [False, True], ids=["lone_nodes", "whole_model"])
@pytest.mark.parametrize("ops", [("RNN", "RNN"), ("GRU", "LSTM"), ("LSTM", "LSTM")], ids="_".join)
def test_nodes_sharing_x_match_the_reference(ops, whole):
    model = _model(ops, whole)
    x = np.random.default_rng(5).standard_normal((6, 2, 3)).astype(np.float32)
    want = reference.run_model(model, {"X": x})
    ir = ovrnn.convert_model(model)
    got = ovrnn.run(ir, {"X": x})
    for name in want:
        np.testing.assert_allclose(got[name], want[name], atol=2e-5, rtol=2e-5, err_msg=name)
    second = f"{ops[1].lower()}1"
    assert any(f"node '{second}' walks X" in n and "lowered to explicit ops" in n for n in ir.notes), ir.notes
    assert not any(f"node '{ops[0].lower()}0' walks X" in n for n in ir.notes)

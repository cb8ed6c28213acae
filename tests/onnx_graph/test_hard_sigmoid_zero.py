"""HardSigmoid with an alpha or beta of exactly 0: OpenVINO 2026.4.1's CPU plugin takes such a
parameter for its default (0.2 / 0.5), so ovrnn writes the equation, Clip(alpha*x + beta, 0, 1),
in recurrent nodes' explicit steps and in whole models (onnx/for_frontend/fixes.py). Checked against
onnxruntime and, for the recurrent ops, ovrnn's float64 reference."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn import reference

PARAMS = [(0.2, 0.0), (0.0, 0.5), (0.5, -0.0), (0.0, 0.0), (0.2, 0.5)]
IDS = ["beta-0", "alpha-0", "beta-minus-0", "both-0", "defaults-kept-as-HardSigmoid"]


@pytest.mark.parametrize("alpha, beta", PARAMS, ids=IDS)
@pytest.mark.parametrize("opset", [7, 17], ids=["opset7-clip-attributes", "opset17-clip-inputs"])
def test_a_plain_hard_sigmoid_node(alpha, beta, opset):
    vi = helper.make_tensor_value_info
    node = helper.make_node("HardSigmoid", ["X"], ["Y"], alpha=alpha, beta=beta, name="hs")
    model = helper.make_model(
        helper.make_graph([node], "m", [vi("X", TensorProto.FLOAT, [2, 7])], [vi("Y", TensorProto.FLOAT, [2, 7])]),
        opset_imports=[helper.make_opsetid("", opset)],
        ir_version=8,
    )
    x = np.linspace(-4, 4, 14, dtype=np.float32).reshape(2, 7)
    ir = ovrnn.convert_model(model)
    want = np.clip(alpha * x.astype(np.float64) + beta, 0, 1)
    assert np.abs(ovrnn.run(ir, {"X": x})["Y"] - want).max() < 1e-6
    assert np.abs(ort.InferenceSession(model.SerializeToString()).run(None, {"X": x})[0] - want).max() < 1e-6
    rewritten = [n for n in ir.notes if "zero alpha or beta" in n]
    assert bool(rewritten) == (alpha == 0 or beta == 0), ir.notes


@pytest.mark.parametrize("alpha, beta", PARAMS, ids=IDS)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_a_recurrent_node_with_hard_sigmoid(op, alpha, beta):
    rng = np.random.default_rng(7)
    H, I, T, B = 4, 3, 5, 2
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    acts = {"RNN": ["HardSigmoid"], "GRU": ["HardSigmoid", "Tanh"], "LSTM": ["HardSigmoid", "Tanh", "Tanh"]}[op]
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (1, gates * H, I)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.uniform(-1, 1, (1, gates * H, H)).astype(np.float32), "R"),
        numpy_helper.from_array(rng.uniform(-1, 1, (1, 2 * gates * H)).astype(np.float32), "B"),
    ]
    extra = {"activation_alpha": [alpha] + [0.0] * (len(acts) - 1), "activation_beta": [beta] + [0.0] * (len(acts) - 1)}
    node = helper.make_node(op, ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H, activations=acts, **extra)
    vi = helper.make_tensor_value_info
    model = helper.make_model(
        helper.make_graph(
            [node],
            "m",
            [vi("X", TensorProto.FLOAT, [T, B, I])],
            [vi("Y", TensorProto.FLOAT, None), vi("Y_h", TensorProto.FLOAT, None)],
            inits,
        ),
        opset_imports=[helper.make_opsetid("", 14)],
        ir_version=8,
    )
    x = rng.uniform(-2, 2, (T, B, I)).astype(np.float32)
    got = ovrnn.run(ovrnn.convert_model(model), {"X": x})
    want = reference.run_model(model, {"X": x})
    ort_out = dict(zip(["Y", "Y_h"], ort.InferenceSession(model.SerializeToString()).run(None, {"X": x})))
    for name in ("Y", "Y_h"):
        assert np.abs(got[name] - want[name]).max() < 1e-5, name
        assert np.abs(ort_out[name] - want[name]).max() < 1e-5, name  # the reference reads HardSigmoid as onnxruntime does

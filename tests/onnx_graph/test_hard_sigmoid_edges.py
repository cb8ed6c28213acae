"""HardSigmoid where an explicit alpha or beta could be taken for a missing one (redteam, session
6: OpenVINO 2026.4.1's CPU plugin reads 0 as its default 0.2 / 0.5; fixed in de6c696, cases of
test_hard_sigmoid_zero.py). These are the look-alikes around that fix: parameters that are not
0 but could flush to it (1e-40 is a float32 denormal), a float16 model, a HardSigmoid inside an
If branch and a Loop body (the frontend fix must reach bodies), and recurrent nodes whose
activation_alpha/beta lists hold zeros that belong to another activation or to the second
direction (the list is read in order: a 0 meant for Relu must not reach HardSigmoid, and a list
shorter than the activations leaves the defaults). Each against onnxruntime; the recurrent ones
also against ovrnn's float64 reference. All right on main dea113e: kept as regression tests."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn import reference

vi = helper.make_tensor_value_info
X = np.linspace(-4, 4, 14, dtype=np.float32).reshape(2, 7)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _plain(alpha, beta, dtype=TensorProto.FLOAT):
    node = helper.make_node("HardSigmoid", ["X"], ["Y"], alpha=alpha, beta=beta)
    return _model([node], [vi("X", dtype, [2, 7])], [vi("Y", dtype, [2, 7])])


def _in_if():
    then_g = helper.make_graph(
        [helper.make_node("HardSigmoid", ["X"], ["t"], alpha=0.2, beta=0.0)], "then", [], [vi("t", TensorProto.FLOAT, [2, 7])]
    )
    else_g = helper.make_graph([helper.make_node("Neg", ["X"], ["e"])], "else", [], [vi("e", TensorProto.FLOAT, [2, 7])])
    node = helper.make_node("If", ["c"], ["Y"], then_branch=then_g, else_branch=else_g)
    return _model([node], [vi("X", TensorProto.FLOAT, [2, 7]), vi("c", TensorProto.BOOL, [])], [vi("Y", TensorProto.FLOAT, [2, 7])])


def _in_loop():
    """s <- HardSigmoid(s - 0.3, alpha 0.7, beta 0), three times."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Sub", ["s", "k"], ["d"]),
            helper.make_node("HardSigmoid", ["d"], ["s2"], alpha=0.7, beta=0.0),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []), vi("s", TensorProto.FLOAT, [2, 7])],
        [vi("cond_out", TensorProto.BOOL, []), vi("s2", TensorProto.FLOAT, [2, 7])],
        [numpy_helper.from_array(np.array(0.3, np.float32), "k")],
    )
    node = helper.make_node("Loop", ["M", "", "X"], ["Y"], body=body)
    return _model(
        [node],
        [vi("X", TensorProto.FLOAT, [2, 7])],
        [vi("Y", TensorProto.FLOAT, [2, 7])],
        [numpy_helper.from_array(np.array(3, np.int64), "M")],
    )


WHOLE = {
    "alpha-1e-40-denormal": (lambda: _plain(1e-40, 0.5), {"X": X}),
    "beta-1e-40-denormal": (lambda: _plain(0.2, 1e-40), {"X": X}),
    "both-1e-40": (lambda: _plain(1e-40, 1e-40), {"X": X}),
    "float16-beta-0": (lambda: _plain(0.2, 0.0, TensorProto.FLOAT16), {"X": X.astype(np.float16)}),
    "in-if-branch-beta-0": (_in_if, {"X": X, "c": np.array(True)}),
    "in-loop-body-beta-0": (_in_loop, {"X": X}),
}


@pytest.mark.parametrize("case", list(WHOLE))
def test_hard_sigmoid_look_alikes_in_whole_models(case):
    make, feeds = WHOLE[case]
    model = make()
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got = ovrnn.run(ovrnn.convert_model(model), feeds)["Y"]
    defaults = np.clip(0.2 * feeds["X"].astype(np.float64) + 0.5, 0, 1)  # what a parameter taken for missing would give
    assert np.abs(want - defaults).max() > 0.1 if case.startswith(("alpha", "beta", "both")) else np.ptp(want) > 0.1
    assert got.dtype == want.dtype and np.abs(got.astype(np.float64) - want).max() <= (1e-3 if want.dtype == np.float16 else 1e-6)


H, I, T, B = 4, 3, 5, 2
RECURRENT = {  # activations (both directions), activation_alpha, activation_beta
    "gru-hs-relu-zeros-of-relu": (["HardSigmoid", "Relu"] * 2, [0.3, 0.0, 0.3, 0.0], [0.45, 0.0, 0.45, 0.0]),
    "gru-list-for-one-direction-only": (["HardSigmoid", "Relu"] * 2, [0.3, 0.0], [0.45, 0.0]),
    "gru-zero-beta-second-direction": (["HardSigmoid", "Tanh", "HardSigmoid", "Tanh"], [0.2, 0.0], [0.0, 0.5]),
    "gru-list-shorter-than-activations": (["HardSigmoid", "Tanh", "HardSigmoid", "Tanh"], [0.25], [0.0]),
    "gru-leakyrelu-alpha-0-before-hs": (["LeakyRelu", "HardSigmoid", "HardSigmoid", "Tanh"], [0.0, 0.3, 0.0, 0.0], [0.0, 0.0, 0.4, 0.0]),
}


@pytest.mark.parametrize("case", list(RECURRENT))
def test_activation_parameter_lists_reach_the_activation_they_belong_to(case):
    acts, alpha, beta = RECURRENT[case]
    rng = np.random.default_rng(sorted(RECURRENT).index(case))
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (2, 3 * H, I)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.uniform(-1, 1, (2, 3 * H, H)).astype(np.float32), "R"),
        numpy_helper.from_array(rng.uniform(-1, 1, (2, 6 * H)).astype(np.float32), "B"),
    ]
    node = helper.make_node(
        "GRU",
        ["X", "W", "R", "B"],
        ["Y", "Y_h"],
        hidden_size=H,
        activations=acts,
        direction="bidirectional",
        activation_alpha=alpha,
        activation_beta=beta,
    )
    model = _model(
        [node], [vi("X", TensorProto.FLOAT, [T, B, I])], [vi("Y", TensorProto.FLOAT, None), vi("Y_h", TensorProto.FLOAT, None)], inits, 14
    )
    x = rng.uniform(-2, 2, (T, B, I)).astype(np.float32)
    want = dict(zip(("Y", "Y_h"), ort.InferenceSession(model.SerializeToString()).run(None, {"X": x})))
    ref = reference.run_model(model, {"X": x})
    got = ovrnn.run(ovrnn.convert_model(model), {"X": x})
    assert np.abs(want["Y"]).max() > 0.1
    for name in ("Y", "Y_h"):
        assert np.abs(ref[name] - want[name]).max() < 1e-6, (name, "reference")
        assert np.abs(got[name] - want[name]).max() < 1e-5, (name, "ovrnn")

"""Adversarial runtime cases (redteam, issue 30): a graph output that is a graph input as it is comes back as
that input and leaves the other outputs right, whatever the output order, alone or behind a recurrence
(the CPU plugin read the input from the runner's own output buffer: zeros everywhere, no error)."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn

T, B, F, H = 5, 2, 3, 4


def _model(outputs: list[str], lstm: bool):
    if lstm:
        rng = np.random.default_rng(30)
        inits = [
            numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
            for name, shape in (("W", (1, 4 * H, F)), ("R", (1, 4 * H, H)), ("Bb", (1, 8 * H)))
        ]
        nodes = [helper.make_node("LSTM", ["X", "W", "R", "Bb"], ["Yseq", "Y"], hidden_size=H)]
        shapes = {"Y": [1, B, H], "X": [T, B, F]}
    else:
        inits, nodes, shapes = [], [helper.make_node("Relu", ["X"], ["Y"])], {"Y": [T, B, F], "X": [T, B, F]}
    graph = helper.make_graph(
        nodes,
        "passthrough",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, F])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for n in outputs],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize("lstm", [False, True], ids=["relu", "lstm"])
@pytest.mark.parametrize("outputs", [["X", "Y"], ["X"], ["Y", "X"]], ids=["input-first", "input-only", "input-last"])
def test_an_output_that_is_the_input_comes_back_as_the_input(outputs, lstm):
    model = _model(outputs, lstm)
    rng = np.random.default_rng(31)
    ir = ovrnn.convert_model(model)
    runner = ovrnn.Runner(ir)
    session = ort.InferenceSession(model.SerializeToString())
    for _ in range(2):
        x = rng.standard_normal((T, B, F)).astype(np.float32)
        want = dict(zip(outputs, session.run(None, {"X": x})))
        for got in (runner({"X": x}), ovrnn.run(ir, {"X": x})):
            assert list(got) == outputs
            np.testing.assert_array_equal(got["X"], x)
            if "Y" in outputs:
                np.testing.assert_allclose(got["Y"], want["Y"], rtol=1e-5, atol=1e-6)

"""Graph inputs that are initializers too (ONNX IR >= 4: inputs with a default value): converted as
constants, as ovc does, and said in a note; the numbers are the model's with its defaults."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn

T, B, F, H = 5, 2, 3, 4


def _model(ir_version: int, listed: tuple[str, ...]) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (1, 4 * H, F)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (1, 4 * H, H)).astype(np.float32), "R"),
        numpy_helper.from_array(np.array([2.0], np.float32), "scale"),
    ]
    shapes = {"W": [1, 4 * H, F], "R": [1, 4 * H, H], "scale": [1]}
    nodes = [helper.make_node("LSTM", ["X", "W", "R"], ["Y", "Yh"], hidden_size=H), helper.make_node("Mul", ["Y", "scale"], ["Ys"])]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, F])] + [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for n in listed
    ]
    outputs = [helper.make_tensor_value_info("Ys", TensorProto.FLOAT, None)]
    return helper.make_model(
        helper.make_graph(nodes, "m", inputs, outputs, inits), opset_imports=[helper.make_opsetid("", 14)], ir_version=ir_version
    )


def _note(ir) -> list[str]:
    return [n for n in ir.notes if "also initialized" in n]


@pytest.mark.parametrize(
    "ir_version, listed, expect",
    [
        (8, ("scale",), "graph input 'scale' is also initialized"),
        (8, ("W", "R", "scale"), "graph inputs 'W', 'R', 'scale' are also initialized"),
        (3, ("W", "R", "scale"), None),  # IR 3 lists every initializer among the inputs by rule
        (8, (), None),
    ],
    ids=["ir8-one-overridable", "ir8-three-overridable", "ir3-initializers-listed-by-rule", "ir8-none"],
)
def test_overridable_initializers_are_constants_with_a_note(ir_version, listed, expect):
    model = _model(ir_version, listed)
    ir = ovrnn.convert_model(model)
    notes = _note(ir)
    if expect is None:
        assert notes == []
    else:
        assert len(notes) == 1 and notes[0].startswith(expect), notes
        assert "as ovc does" in notes[0] and "remove its initializer" in notes[0]
    x = np.random.default_rng(1).standard_normal((T, B, F)).astype(np.float32)
    got = ovrnn.run(ir, {"X": x})["Ys"]
    want = ort.InferenceSession(model.SerializeToString() if ir_version >= 4 else _model(8, ()).SerializeToString()).run(None, {"X": x})[0]
    assert np.abs(got - want).max() < 1e-5
    with pytest.raises(ovrnn.UsageError, match="input 'scale' is not an input of the model"):
        ovrnn.run(ir, {"X": x, "scale": np.array([-3.0], np.float32)})

"""The oracle checked against independent implementations.

* onnxruntime on every case of the table it accepts (layout 0, float/float16, opset >= 7, ...),
  except the documented cases where onnxruntime deviates from the spec;
* those deviations, asserted, so the README's claims stay true;
* the ONNX backend's own expected outputs (test_onnx_backend.py).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from cases import RNN_CASES, TOL, Case, make_model
from conftest import assert_close, assert_onnxruntime_agrees

from ovrnn.validation import reference

ORT_CASES = [c for c in RNN_CASES if c.ort_supported]


def run_ort(model, feeds):
    model.ir_version = min(model.ir_version, 10)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def test_enough_cases_are_cross_checked():
    assert len(ORT_CASES) >= 50


@pytest.mark.parametrize("case", ORT_CASES, ids=lambda c: c.id)
def test_reference_agrees_with_onnxruntime(case):
    model, feeds, _ = make_model(case)
    want = reference.run_model(model, feeds)
    got = run_ort(model, feeds)
    atol, rtol = TOL[case.dtype]
    assert_onnxruntime_agrees(case.id, model, got, want, atol, rtol)


@pytest.mark.parametrize(
    "activation, attrs, ort_effective",
    [
        ("ThresholdedRelu", {}, lambda x: np.where(x > 0, x, 0)),  # alpha 0 instead of 1.0
        ("Affine", {}, lambda x: 0 * x),  # alpha=beta=0 instead of 1.0/0.0
        ("ScaledTanh", {}, lambda x: 0 * x),  # alpha=0: constant 0
    ],
)
def test_documented_onnxruntime_default_deviation(activation, attrs, ort_effective):
    """1x1 RNN with W=1, R=0: Y_t = f(x_t). onnxruntime's f differs from the spec default."""
    from onnx import TensorProto, helper, numpy_helper

    x = np.linspace(-3, 3, 13, dtype=np.float32).reshape(13, 1, 1)
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=1, activations=[activation], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [13, 1, 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "R")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    ours = reference.run_model(model, {"X": x})["Y"].reshape(-1)
    theirs = run_ort(model, {"X": x})["Y"].reshape(-1)
    np.testing.assert_allclose(theirs, ort_effective(x.reshape(-1)), atol=1e-6)
    spec_default = {"ThresholdedRelu": np.where(x >= 1.0, x, 0), "Affine": x, "ScaledTanh": np.tanh(x)}[activation].reshape(-1)
    np.testing.assert_allclose(ours, spec_default, atol=1e-6)


def test_reference_layout1_matches_onnx_reference():
    """onnx.reference is the one other implementation of layout=1 (Tanh, no lens/clip)."""
    from onnx.reference import ReferenceEvaluator

    case = Case("layout1-check", layout=1, direction="bidirectional", h0=True)
    model, feeds, _ = make_model(case)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = reference.run_model(model, feeds)
    assert_close(got["Y"], np.asarray(want[0], np.float64), 1e-6, 1e-6, "Y")
    assert_close(got["Y_h"], np.asarray(want[1], np.float64), 1e-6, 1e-6, "Y_h")

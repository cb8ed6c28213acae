"""validate's float64 reference runs a QDQ model's DequantizeLinear nodes as the spec says
(onnx.reference), not ovrnn's reading of them (onnx/reading/qdq.py), which the lowering's integer
weights come from: before, the reference ran the graph with each DequantizeLinear replaced by the
float value that same reading gave, so a misread scale (here: every scale read 1% too large) made
the IR and its reference agree (5e-8, PASS with --no-onnxruntime); onnxruntime alone could see it.
"""

from __future__ import annotations

import pytest
from conftest import FIXTURE_DIR

import ovrnn
from ovrnn.onnx.reading import qdq
from ovrnn.quantization import Quantized

QUANTIZED = FIXTURE_DIR / "quantized"
MODELS = {
    "lstm_qdq_rows": "an LSTM whose int8 W/R come through DequantizeLinear, one scale per row",
    "lstm_qdq_tensor_u8": "an LSTM whose uint8 W/R come through DequantizeLinear, one scale and zero point per tensor",
}
MODES = {"stateless": {}, "stateful": dict(stateful=True, chunks=2)}
CASES = [(m, k) for m in MODELS for k in MODES]


def _misread_scales(monkeypatch) -> list[str]:
    """Wrap ovrnn's reading of a DequantizeLinear so that its scales come out 1% too large (in both
    the integers it keeps and the float value it gives)."""
    real = qdq._quantized
    read: list[str] = []

    def wrong(node, view):
        got = real(node, view)
        if isinstance(got, str):
            return got
        rows, value = got
        read.append(node.output[0])
        return [Quantized(r.q, r.scale * 1.01, r.zero_point, r.bits) for r in rows], (value * 1.01).astype(value.dtype)

    monkeypatch.setattr(qdq, "_quantized", wrong)
    return read


@pytest.mark.parametrize("model, mode", CASES, ids=[f"{MODELS[m]} ({k})" for m, k in CASES])
def test_a_misread_dequantize_linear_fails_on_the_reference_alone(model, mode, monkeypatch):
    path = QUANTIZED / f"{model}.onnx"
    right = ovrnn.validate(path, use_onnxruntime=False, drift=False, **MODES[mode])
    assert right.passed, right.format()
    counted = [c for c in right.comparisons if c.counted and c.max_abs != 0.0]
    assert counted and all(c.max_abs < 1e-6 for c in counted), [(c.output, c.max_abs) for c in counted]
    assert any("W/R from DequantizeLinear, kept as integers" in n for n in right.notes)

    read = _misread_scales(monkeypatch)
    wrong = ovrnn.validate(path, use_onnxruntime=False, drift=False, **MODES[mode])
    assert read and not wrong.passed
    failed = [c for c in wrong.comparisons if c.counted and not c.passed]
    assert failed and all(c.oracle.startswith("reference") for c in failed), wrong.format()
    assert max(c.max_abs for c in failed) > 1e-3  # 1% of the weights: ~2e-3 measured

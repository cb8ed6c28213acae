"""validate PASSes the models that crashed or misjudged its float64 reference (issue 30), with the
numbers: tests/fixtures/validate, made by tools/make_validate_fixtures.py with the real exporters.

Before the fix: docTR's CRNN (both torch.onnx exporters) and the paddle2onnx CRNN at opset 14 were
``internal error: TypeError: metaclass conflict`` (HardSwish: onnx.reference computes it through
its schema's function); the paddle2onnx CRNN at opset 11 FAILed its reference row (max_abs 1.5e-4:
onnx.reference ran its BatchNormalization in training mode); the 0-d output was ``'numpy.float64'
object does not support item assignment``; the float16-weight LM FAILed at float32 tolerance.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import FIXTURE_DIR, ovrnn_cli

import ovrnn

FIXTURES = FIXTURE_DIR / "validate"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
F32 = (2e-5, 2e-5)
F16 = (1e-2, 1e-2)

# fixture -> (outputs, the tolerance, the largest max_abs allowed against each oracle)
CASES = {
    "doctr_crnn_mobilenet_v3_small.torchscript.onnx": (["logits"], F32, 1e-6),
    "doctr_crnn_mobilenet_v3_small.dynamo.onnx": (["logits"], F32, 1e-6),
    "paddleocr_crnn.opset11.onnx": (["fetch_name_0"], F32, 1e-6),
    "paddleocr_crnn.opset14.onnx": (["fetch_name_0"], F32, 1e-6),
    "lstm_energy_0d.onnx": (["energy", "Y"], F32, 1e-5),
    "lstm_lm_fp16_keep_io.onnx": (["logits"], F16, 2e-3),  # float16 rounding: above f32's tolerance, within f16's
}
IDS = {
    "doctr_crnn_mobilenet_v3_small.torchscript.onnx": (
        "docTR CRNN MobileNetV3-small, torch.onnx dynamo=False (HardSwish: was a metaclass conflict)"
    ),
    "doctr_crnn_mobilenet_v3_small.dynamo.onnx": (
        "docTR CRNN MobileNetV3-small, torch.onnx dynamo=True (HardSwish: was a metaclass conflict)"
    ),
    "paddleocr_crnn.opset11.onnx": (
        "PaddleOCR-style CRNN (paddle layers) by paddle2onnx opset 11 (BatchNormalization momentum: was a false FAIL)"
    ),
    "paddleocr_crnn.opset14.onnx": "PaddleOCR-style CRNN (paddle layers) by paddle2onnx opset 14 (HardSwish: was a metaclass conflict)",
    "lstm_energy_0d.onnx": "LSTM with a 0-d output (was an item assignment TypeError)",
    "lstm_lm_fp16_keep_io.onnx": "LSTM LM with float16 weights behind float32 io, keep_io_types (was a FAIL at f32 tolerance)",
}


def test_the_fixtures_are_small_and_readable_by_onnxruntime():
    assert set(MANIFEST) == set(CASES) == {p.name for p in FIXTURES.glob("*.onnx")}
    for name, entry in MANIFEST.items():
        model = onnx.load(FIXTURES / name)
        assert (FIXTURES / name).stat().st_size == entry["bytes"] < 800_000, name
        assert model.ir_version <= 10 and sorted({n.op_type for n in model.graph.node}) == entry["ops"]
    assert "HardSwish" in MANIFEST["doctr_crnn_mobilenet_v3_small.dynamo.onnx"]["ops"]
    assert "BatchNormalization" in MANIFEST["paddleocr_crnn.opset11.onnx"]["ops"]


@pytest.mark.parametrize("name", sorted(CASES), ids=[IDS[k] for k in sorted(CASES)])
def test_validate_passes_with_both_oracles_close(name):
    outputs, tolerance, bound = CASES[name]
    report = ovrnn.validate(FIXTURES / name, drift=False)
    assert report.passed, report.format()
    assert [(c.output, c.oracle) for c in report.comparisons] == [(o, oracle) for oracle in ("reference", "onnxruntime") for o in outputs]
    for c in report.comparisons:
        assert c.counted and c.passed and (c.atol, c.rtol) == tolerance, c
        assert c.max_abs <= bound, (c.output, c.oracle, c.max_abs)
    assert report.onnxruntime == "used"


@pytest.mark.parametrize("name", sorted(CASES), ids=[IDS[k] for k in sorted(CASES)])
def test_the_reference_alone_passes_them_too(name):
    """With onnxruntime switched off nothing is handed to it: the reference computes every node."""
    outputs, _tolerance, bound = CASES[name]
    report = ovrnn.validate(FIXTURES / name, use_onnxruntime=False, drift=False)
    assert report.passed and [c.output for c in report.comparisons] == outputs
    assert all(c.oracle == "reference" and c.max_abs <= bound for c in report.comparisons)
    assert not any("onnxruntime computed that node" in n for n in report.notes)


def test_the_0d_output_is_shown_with_an_empty_shape_in_every_report(tmp_path):
    proc = ovrnn_cli(
        "validate", FIXTURES / "lstm_energy_0d.onnx", "--no-drift", "--json", tmp_path / "r.json", "--report", tmp_path / "rep"
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    energy = [c for c in report["comparisons"] if c["output"] == "energy"]
    assert [c["shape"] for c in energy] == [[], []] and all(c["passed"] for c in energy)
    assert "| energy | reference |" in (tmp_path / "rep" / "report.md").read_text()
    assert proc.stdout.splitlines()[-2:] == ["PASS", f"wrote the report to {tmp_path / 'rep'}"]


def test_the_float16_model_says_why_it_is_judged_at_float16():
    report = ovrnn.validate(FIXTURES / "lstm_lm_fp16_keep_io.onnx", drift=False)
    why = [n for n in report.notes if n.startswith("the model computes in float16: ")]
    assert why == [
        (
            "the model computes in float16: 9 weights are float16 (e.g. 'emb.weight'); onnxruntime and the reference round to float16 "
            "where the graph does: judged at float16 tolerance"
        )
    ]
    assert max(c.max_abs for c in report.comparisons) > F32[0]  # the looser tolerance is needed, not a formality


def test_0d_inputs_reach_onnxruntime_as_arrays(tmp_path):
    """A 0-d float input (a gain) and a 0-d int64 output (a Cast of the 0-d energy): numpy's
    generators give scalars for shape [], which onnxruntime refused ("Unable to handle object of
    type <class 'numpy.float32'>"), so its row was missing."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
        for name, shape in (("W", (1, 16, 3)), ("R", (1, 16, 4)))
    ]
    nodes = [
        helper.make_node("LSTM", ["X", "W", "R"], ["", "Y_h"], hidden_size=4),
        helper.make_node("Mul", ["Y_h", "gain"], ["g"]),
        helper.make_node("ReduceSum", ["g"], ["energy"], keepdims=0),
        helper.make_node("Cast", ["energy"], ["whole"], to=TensorProto.INT64),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "zero_d_in",
        [vi("X", TensorProto.FLOAT, [5, 2, 3]), vi("gain", TensorProto.FLOAT, [])],
        [vi("energy", TensorProto.FLOAT, []), vi("whole", TensorProto.INT64, [])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), tmp_path / "m.onnx")
    report = ovrnn.validate(tmp_path / "m.onnx", drift=False)
    assert report.onnxruntime == "used" and report.passed
    assert [(c.output, c.oracle, c.shape) for c in report.comparisons] == [
        (o, oracle, []) for oracle in ("reference", "onnxruntime") for o in ("energy", "whole")
    ]
    assert all(c.max_abs < 1e-6 for c in report.comparisons)

"""Models that come quantized: onnxruntime's com.microsoft.DynamicQuantizeLSTM and QDQ weights
(DequantizeLinear -> W/R). Fixtures: tools/make_quantized_fixtures.py (tests/fixtures/quantized).

ovrnn keeps the integer weights in the IR and matches the float64 reference run with the
dequantized weights at f32 tolerance; onnxruntime's kernel also quantizes X and H (shown, not
counted); OpenVINO's own import of DynamicQuantizeLSTM ignores input_forget and refuses P
(checked in a child process).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import FIXTURE_DIR, assert_close
from lxml import etree
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn import reference
from ovrnn.errors import InvalidModelError, UnsupportedFeatureError
from ovrnn.onnx.reading.fold import fold_constants
from ovrnn.runtime import engine as runtime
from ovrnn.runtime.runner import infer
from ovrnn.validation.dequantized import dequantize_linear_weights, lstm_from_dynamic_quantize

FIXTURES = FIXTURE_DIR / "quantized"
DQ = sorted(p.stem for p in FIXTURES.glob("*.dq_*.onnx"))
QDQ = sorted(p.stem for p in FIXTURES.glob("*_qdq_*.onnx"))
T, BATCH, I = 6, 2, 8


def load(name):
    return onnx.load(FIXTURES / f"{name}.onnx")


def x_feed(seed=3):
    return {"X": np.random.default_rng(seed).uniform(-1, 1, (T, BATCH, I)).astype(np.float32)}


def int_consts(xml: bytes) -> list[tuple[str, str]]:
    return sorted(
        (d.get("element_type"), d.get("shape"))
        for el in etree.fromstring(xml).iter("layer")
        if el.get("type") == "Const"
        for d in [el.find("data")]
        if d.get("element_type") in ("i8", "u8")
    )


def run(ir, feeds):
    return infer(runtime.compile_ir(runtime.read_model(ir), "CPU", "f32"), feeds)


def assert_matches_the_dequantized_reference(ir, m, what: str = "") -> dict:
    """The IR of DynamicQuantizeLSTM model `m`, run on x_feed() at f32, is within 2e-5 of the float64 reference of `m` read
    as the float LSTM it computes, on every output; returns the reference's outputs."""
    feeds = x_feed()
    got = run(ir, feeds)
    want = reference.run_model(lstm_from_dynamic_quantize(m), feeds)
    for out in want:
        assert_close(got[out], want[out], 2e-5, 2e-5, f"{what} {out}".strip())
    return want


@pytest.mark.parametrize("name", DQ)
def test_dynamic_quantize_lstm_matches_the_dequantized_reference(name):
    m = load(name)
    ir = ovrnn.convert_model(m)
    D = 2 if "bidir" in name else 1
    # W [4H, I] and R [4H, H] per direction stay int8: LSTMCell reads [4H, K]; explicit steps read [K, 4H]
    explicit = "input_forget" in name or "peep" in name
    want_shapes = ["8, 64", "16, 64"] if explicit else ["64, 16", "64, 8"]
    assert int_consts(ir.xml) == sorted([("i8", s) for s in want_shapes] * D)
    assert ir.rnns[0].weights == "int8 from the model (no zero points): W, R; scales f32"
    want = assert_matches_the_dequantized_reference(ir, m, name)
    feeds = x_feed()
    # onnxruntime also quantizes X and H every step: close, but not at f32 tolerance
    ort_out = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    dev = max(float(np.abs(a - want[o.name]).max()) for a, o in zip(ort_out, m.graph.output))
    assert 1e-4 < dev < 0.05, dev


@pytest.mark.parametrize("name", ["lstm_input_forget.dq_channel", "lstm_peep_bidir.dq_tensor"])
def test_validate_counts_the_reference_and_shows_onnxruntime(name):
    report = ovrnn.validate(FIXTURES / f"{name}.onnx")
    assert report.passed
    ort_rows = [c for c in report.comparisons if c.oracle == "onnxruntime"]
    assert ort_rows and all(not c.counted for c in ort_rows)
    assert all("also quantizes X and H" in c.note for c in ort_rows)
    assert not any(c.oracle == "quantization" for c in report.comparisons)  # no float original to compare with


def test_validate_cli_json(tmp_path):
    from conftest import ovrnn_cli

    r = ovrnn_cli("validate", FIXTURES / "lstm_bidir.dq_channel.onnx", "--json", tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    oracles = {(c["output"], c["oracle"]): c for c in data["comparisons"]}
    assert oracles["Y", "reference"]["counted"] and oracles["Y", "reference"]["passed"]
    assert not oracles["Y", "onnxruntime"]["counted"]


_OPENVINO_IMPORT = r"""
import json, sys, numpy as np, openvino as ov
from ovrnn import reference
from ovrnn.validation.dequantized import lstm_from_dynamic_quantize
import onnx
m = onnx.load(sys.argv[1]); x = np.load(sys.argv[2])
try:
    c = ov.Core().compile_model(ov.Core().read_model(sys.argv[1]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    y = c({"X": x})[c.outputs[0]]
    want = reference.run_model(lstm_from_dynamic_quantize(m), {"X": x})["Y"]
    print(json.dumps({"error": float(np.abs(y - want).max())}))
except Exception as e:
    print(json.dumps({"refused": str(e).splitlines()[0][:300] if str(e) else type(e).__name__, "text": str(e)[-2000:]}))
"""


@pytest.mark.parametrize(
    "name, expect",
    [("lstm_input_forget.dq_channel", "wrong"), ("lstm_peep_bidir.dq_tensor", "refused"), ("lstm_fwd.dq_channel", "right")],
    ids=["input-forget-ignored", "peepholes-refused", "plain-lstm-right"],
)
def test_openvinos_own_import(tmp_path, name, expect):
    """OpenVINO 2026.4's importer (in a child process) silently ignores input_forget and refuses P;
    ovrnn matches the reference on both (above)."""
    np.save(tmp_path / "x.npy", x_feed()["X"])
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _OPENVINO_IMPORT, str(FIXTURES / f"{name}.onnx"), str(tmp_path / "x.npy")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if expect == "refused":
        assert "refused" in result and "peephole" in result["text"].lower(), result
    elif expect == "wrong":
        assert result.get("error", 0) > 1e-2, result
    else:
        assert result.get("error", 1) < 1e-4, result


def test_layout_comes_from_the_schema_when_k_equals_4h():
    """I = 4H: W [D, I, 4H] is square per direction, so only the schema tells its layout. uint8 with
    per-row zero points and scales: each row's zero point and scale travel with it through iofc -> fico."""
    rng = np.random.default_rng(5)
    H, K, D = 4, 16, 1
    Wq = rng.integers(0, 256, (D, K, 4 * H)).astype(np.uint8)
    Rq = rng.integers(0, 256, (D, H, 4 * H)).astype(np.uint8)
    Ws, Rs = (rng.uniform(0.002, 0.02, (D, 4 * H)).astype(np.float32) for _ in range(2))
    Wz, Rz = (rng.integers(100, 156, (D, 4 * H)).astype(np.uint8) for _ in range(2))
    B = rng.uniform(-0.1, 0.1, (D, 8 * H)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((Wq, "W"), (Rq, "R"), (B, "B"), (Ws, "Ws"), (Wz, "Wz"), (Rs, "Rs"), (Rz, "Rz"))]
    node = helper.make_node(
        "DynamicQuantizeLSTM",
        ["X", "W", "R", "B", "", "", "", "", "Ws", "Wz", "Rs", "Rz"],
        ["Y", "Y_h", "Y_c"],
        domain="com.microsoft",
        hidden_size=H,
        name="dq",
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [5, 2, K])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    ir = ovrnn.convert_model(m)
    assert int_consts(ir.xml) == [("u8", "16, 1"), ("u8", "16, 1"), ("u8", "16, 16"), ("u8", "16, 4")]  # zero points, W, R
    assert ir.rnns[0].weights == "uint8 from the model (with zero points): W, R; scales f32"
    feeds = {"X": rng.uniform(-1, 1, (5, 2, K)).astype(np.float32)}
    got = run(ir, feeds)
    # the reference, written out: W_float[d] = ((W[d] - zp) * scale)ᵀ
    Wf = ((Wq[0].astype(np.float64) - Wz[0]) * Ws[0]).T[None]
    Rf = ((Rq[0].astype(np.float64) - Rz[0]) * Rs[0]).T[None]
    want = dict(zip(("Y", "Y_h", "Y_c"), reference.run_node("LSTM", [feeds["X"], Wf, Rf, B], {"hidden_size": H})))
    for out in want:
        assert_close(got[out], want[out], 2e-5, 2e-5, out)
    # the transposed reading (a shape heuristic's other guess) is far off
    wrong = reference.run_node("LSTM", [feeds["X"], ((Wq[0].astype(np.float64) - Wz[0]) * Ws[0])[None], Rf, B], {"hidden_size": H})
    assert np.abs(wrong[0] - got["Y"]).max() > 1e-2


@pytest.mark.parametrize("name", QDQ)
def test_qdq_weights_stay_integer(name):
    m = load(name)
    ir = ovrnn.convert_model(m)
    kind = "u8" if "u8" in name else "i8"
    consts = int_consts(ir.xml)
    assert (kind, "64, 8") in consts and (kind, "64, 16") in consts, consts
    feeds = x_feed()
    got = run(ir, feeds)
    want = reference.run_model(dequantize_linear_weights(m), feeds)
    ort_out = dict(
        zip(
            [o.name for o in m.graph.output],
            ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds),
        )
    )
    for out in want:
        assert_close(got[out], want[out], 2e-5, 2e-5, f"{name} {out}")
        assert_close(ort_out[out], want[out], 2e-5, 2e-5, f"onnxruntime {name} {out}")


def test_fold_no_longer_folds_dequantize_linear_into_weights():
    """onnx/reading/fold.py used to turn DequantizeLinear(int8 initializer) -> W into a float initializer."""
    m = load("lstm_qdq_rows")
    folded, names = fold_constants(m)
    assert names == [] and [n.op_type for n in folded.graph.node].count("DequantizeLinear") == 2


def test_qdq_in_a_whole_model_stays_integer():
    m = load("lstm_qdq_rows")
    m.graph.node.append(helper.make_node("Relu", ["Y_h"], ["Z"]))
    m.graph.output.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    ir = ovrnn.convert_model(m)
    assert b'element_type="i8"' in ir.xml
    feeds = x_feed()
    got = run(ir, feeds)
    want = reference.run_model(dequantize_linear_weights(m), feeds)
    assert_close(got["Z"], np.maximum(want["Y_h"], 0), 2e-5, 2e-5, "Z")


def _dq_node(**changes):
    m = load("lstm_fwd.dq_tensor")
    inits = {t.name: t for t in m.graph.initializer}
    for name, value in changes.items():
        inits[name].CopyFrom(numpy_helper.from_array(value, name))
    return m


@pytest.mark.parametrize(
    "change, error, message",
    [
        (
            dict(W_quantized=np.zeros((1, 8, 64), np.float32)),
            InvalidModelError,
            "DynamicQuantizeLSTM node 'lstm0_quant': input W 'W_quantized': expected element type int8 or uint8, got float32",
        ),
        (
            dict(W_scale=np.ones((1, 3), np.float32)),
            InvalidModelError,
            (
                "DynamicQuantizeLSTM node 'lstm0_quant': input W_scale 'W_scale' has shape [1, 3], expected [1] (per tensor) or "
                "[1, 64] (per row)"
            ),
        ),
        (
            dict(R_zero_point=np.zeros((1,), np.uint8)),
            InvalidModelError,
            "DynamicQuantizeLSTM node 'lstm0_quant': input R_zero_point 'R_zero_point': expected the element type of R (int8), got uint8",
        ),
        (
            dict(R_quantized=np.zeros((1, 8, 64), np.int8)),
            InvalidModelError,
            (
                "DynamicQuantizeLSTM node 'lstm0_quant': input R 'R_quantized' has shape [1, 8, 64], expected [1, 16, 64] "
                "(num_directions, hidden_size, 4*hidden_size) from W 'W_quantized' [1, 8, 64]"
            ),
        ),
    ],
    ids=["float-weights", "scale-shape", "zero-point-type", "r-shape"],
)
def test_bad_dynamic_quantize_lstm(change, error, message):
    with pytest.raises(error) as exc:
        ovrnn.convert_model(_dq_node(**change))
    assert str(exc.value) == message


@pytest.mark.parametrize(
    "name, elem_type, message",
    [
        (
            "W_quantized",
            TensorProto.INT8,
            "input W 'W_quantized' is a graph input; DynamicQuantizeLSTM weights must be initializers (constant)",
        ),
        (
            "R_scale",
            TensorProto.FLOAT,
            "input R_scale 'R_scale' is a graph input; DynamicQuantizeLSTM scales must be initializers (constant)",
        ),
    ],
    ids=["weights", "scale"],
)
def test_runtime_quantized_weights_are_refused(name, elem_type, message):
    m = load("lstm_fwd.dq_tensor")
    w = next(t for t in m.graph.initializer if t.name == name)
    m.graph.input.append(helper.make_tensor_value_info(name, elem_type, list(w.dims)))
    keep = [t for t in m.graph.initializer if t.name != name]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    with pytest.raises(UnsupportedFeatureError) as exc:
        ovrnn.convert_model(m)
    assert str(exc.value) == f"DynamicQuantizeLSTM node 'lstm0_quant': {message}"  # the node is named (the scale's error did not)


def test_dynamic_quantize_lstm_in_a_whole_model():
    """Other ops around it: OpenVINO's frontend converts them, ovrnn lowers the DynamicQuantizeLSTM
    (OpenVINO's own conversion would refuse P and ignore input_forget)."""
    m = load("lstm_peep_bidir.dq_channel")
    m.graph.node.append(helper.make_node("Relu", ["Y_h"], ["Z"]))
    m.graph.output.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    ir = ovrnn.convert_model(m)
    assert ir.rnns[0].weights == "int8 from the model (no zero points): W, R; scales f32"
    assert len(int_consts(ir.xml)) == 4 and b"LSTMSequence" not in ir.xml
    assert_matches_the_dequantized_reference(ir, m)


def test_dynamic_quantize_lstm_clip_and_activations():
    """clip and non-default activations (with their alpha/beta) go through the LSTM lowering's explicit ops."""
    m = load("lstm_bidir.dq_tensor")
    node = m.graph.node[0]
    node.attribute.extend(
        [
            helper.make_attribute("clip", 0.7),
            helper.make_attribute("activations", ["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "LeakyRelu", "Tanh"]),
            helper.make_attribute("activation_alpha", [0.3, 0.05]),
            helper.make_attribute("activation_beta", [0.4]),
        ]
    )
    ir = ovrnn.convert_model(m)
    assert [c.form for c in ir.rnns[0].chains] == ["explicit", "explicit"]
    assert_matches_the_dequantized_reference(ir, m)


def test_validate_report_of_a_whole_model_whose_y_is_inner(tmp_path):
    """--report adds the recurrent node's inner Y as an output of the reference model: that model is
    the dequantized one (before: the original, and onnx.reference does not know DynamicQuantizeLSTM:
    an internal error)."""
    m = load("lstm_peep_bidir.dq_channel")
    m.graph.node.append(helper.make_node("Relu", ["Y_h"], ["Z"]))
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    report = ovrnn.validate(m, report_dir=tmp_path)
    assert report.passed, report.format()
    assert json.loads((tmp_path / "report.json").read_text())["passed"]


def test_int8_zero_points_onnxruntime_refuses_at_run_time(tmp_path):
    """DynamicQuantizeLSTM with int8 weights and non-zero zero points (the schema allows them;
    onnxruntime's kernel refuses them when it runs): ovrnn stores the zero points and matches the
    dequantized reference; validate says onnxruntime could not run it, in its own line only (before,
    onnxruntime's error log also went to stderr)."""
    from conftest import ovrnn_cli

    m = load("lstm_fwd.dq_channel")  # per-row scales [1, 64]: zero points per row too
    inits = {t.name: t for t in m.graph.initializer}
    rows = np.random.default_rng(9).integers(-4, 5, (2, 1, 64)).astype(np.int8)
    for name, value in (("W_zero_point", rows[0]), ("R_zero_point", rows[1])):
        inits[name].CopyFrom(numpy_helper.from_array(value, name))
    ir = ovrnn.convert_model(m)
    assert ir.rnns[0].weights == "int8 from the model (with zero points): W, R; scales f32"
    assert_matches_the_dequantized_reference(ir, m)
    onnx.save(m, tmp_path / "m.onnx")
    r = ovrnn_cli("validate", tmp_path / "m.onnx")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert (
        "onnxruntime: does not support this model ([ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status code" in r.stdout
        and r.stdout.rstrip().endswith("PASS")
    ), r.stdout


def test_qdq_model_that_also_quantizes_x_at_opset_13():
    """A QDQ model as quantizers write them at opset 13: QuantizeLinear -> DequantizeLinear on X too.
    The float64 reference runs opset 13's DequantizeLinear (onnx.reference has it from 19 on: an
    internal error before), and validate at f32 compiles with the CPU's low-precision transformations
    off (with a FakeQuantize on X and integer weights they ran the cells with 8-bit X and H: 7e-2 off)."""
    m = load("lstm_qdq_rows")
    m.graph.initializer.extend(
        [numpy_helper.from_array(np.array(0.01, np.float32), "x_scale"), numpy_helper.from_array(np.array(0, np.int8), "x_zero")]
    )
    next(n for n in m.graph.node if n.op_type == "LSTM").input[0] = "X_dq"
    nodes = [
        helper.make_node("QuantizeLinear", ["X", "x_scale", "x_zero"], ["X_q"]),
        helper.make_node("DequantizeLinear", ["X_q", "x_scale", "x_zero"], ["X_dq"]),
        *m.graph.node,
    ]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    m.opset_import[0].version = 13
    report = ovrnn.validate(m)
    assert report.passed, report.format()
    rows = [c for c in report.comparisons if c.oracle in ("reference", "onnxruntime")]
    assert len(rows) == 6 and all(c.counted and c.max_abs < 1e-6 for c in rows), report.format()

"""`--compress-weights int8|int4`: integer W/R for the cell chains (docs/compression.md).

One seeded case table; each case converts a small model with compressed weights, checks the numbers
against the float64 reference run on the dequantized weights (f32 tolerance), the IR structure (one
Const i8 -> Convert -> Multiply chain per node, direction and matrix, whatever T is) and what the CPU
plugin made of it (folded into RNNSeq, or kept int8 in FullyConnected).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import onnx
import pytest
from conftest import FIXTURE_DIR, assert_close, layer_counts, ovrnn_cli
from lxml import etree
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn import reference
from ovrnn.quantization import Compression, quantize
from ovrnn.runtime import engine as runtime
from ovrnn.runtime.runner import infer
from ovrnn.runtime.weight_precision import verdict
from ovrnn.validation.dequantized import compressed_reference, dequantized_model

G = {"RNN": 1, "GRU": 3, "LSTM": 4}
FIXTURES = FIXTURE_DIR
ATOL = RTOL = 2e-5


def model(
    op,
    T=5,
    direction="forward",
    hidden=8,
    inputs=4,
    batch=2,
    *,
    peep=False,
    input_forget=0,
    acts=None,
    lbr=0,
    runtime_w=False,
    relu_after=False,
    scale=0.4,
    seed=0,
):
    D = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(seed)
    rows = rng.lognormal(0, 1, (D, G[op] * hidden, 1))  # uneven rows, as trained gates are

    def arr(shape, s=scale):
        return (rng.uniform(-s, s, shape) * (rows if shape[1] == G[op] * hidden and len(shape) == 3 else 1)).astype(np.float32)

    W, R, B = arr((D, G[op] * hidden, inputs)), arr((D, G[op] * hidden, hidden)), arr((D, 2 * G[op] * hidden))
    inits = [numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B")]
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, batch, inputs])]
    if runtime_w:
        graph_inputs.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, list(W.shape)))
    else:
        inits.append(numpy_helper.from_array(W, "W"))
    names = ["X", "W", "R", "B"]
    attrs = {"hidden_size": hidden, "direction": direction}
    if op == "LSTM" and peep:
        inits.append(numpy_helper.from_array(arr((D, 3 * hidden)), "P"))
        names += ["", "", "", "P"]
    if input_forget:
        attrs["input_forget"] = 1
    if acts:
        attrs["activations"] = acts * D
    if lbr:
        attrs["linear_before_reset"] = 1
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    nodes = [helper.make_node(op, names, outs, name=f"{op.lower()}_node", **attrs)]
    graph_outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs]
    if relu_after:  # a whole model: OpenVINO's frontend converts the rest
        nodes.append(helper.make_node("Relu", ["Y_h"], ["Z"]))
        graph_outs.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "q", graph_inputs, graph_outs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    return m, W


def feeds_of(m, T=5, batch=2, inputs=4, W=None):
    rng = np.random.default_rng(7)
    feeds = {"X": rng.uniform(-1, 1, (T, batch, inputs)).astype(np.float32)}
    if any(i.name == "W" for i in m.graph.input):
        feeds["W"] = W
    return feeds


def compiled_of(ir):
    return runtime.compile_ir(runtime.read_model(ir), "CPU", "f32")


def runtime_types(c) -> Counter:
    return Counter(op.get_rt_info()["layerType"].astype(str) for op in c.compiled.get_runtime_model().get_ordered_ops())


def consts(xml: bytes) -> list[tuple[str, str]]:
    return [
        (el.find("data").get("element_type"), el.find("data").get("shape"))
        for el in etree.fromstring(xml).iter("layer")
        if el.get("type") == "Const"
    ]


# id -> (model kwargs, convert kwargs, what the CPU does with the weights: "folded" | "kept")
CASES = {
    "rnn-bidirectional-cells": (dict(op="RNN", direction="bidirectional"), {}, "folded"),
    "gru-cells": (dict(op="GRU"), {}, "folded"),
    "gru-linear-before-reset-cells": (dict(op="GRU", lbr=1, direction="reverse"), {}, "folded"),
    "lstm-bidirectional-cells": (dict(op="LSTM", direction="bidirectional"), {}, "folded"),
    "lstm-cells-70-steps-pieces-of-32": (dict(op="LSTM", T=70), dict(chunk_steps=32), "folded"),
    "rnn-lowering-matmul": (dict(op="RNN", direction="bidirectional"), dict(lowering="matmul"), "kept"),
    "gru-lowering-matmul": (dict(op="GRU"), dict(lowering="matmul"), None),
    "gru-linear-before-reset-matmul": (dict(op="GRU", lbr=1), dict(lowering="matmul"), None),
    "lstm-peepholes-input-forget": (dict(op="LSTM", peep=True, input_forget=1, direction="bidirectional"), {}, None),
    "lstm-non-native-activation": (dict(op="LSTM", acts=["HardSigmoid", "Tanh", "Tanh"]), {}, None),
    "rnn-leakyrelu": (dict(op="RNN", acts=["LeakyRelu"], scale=0.1), {}, None),
    "lstm-cells-fp16-scales": (dict(op="LSTM"), dict(compress_to_fp16=True), "folded"),
    "lstm-whole-model": (dict(op="LSTM", relu_after=True), {}, "folded"),
}


@pytest.fixture(scope="module")
def converted():
    made = {}
    for case, (mk, ck, _) in CASES.items():
        m, W = model(**mk)
        made[case] = (m, W, ovrnn.convert_model(m, compress_weights="int8", **ck), ovrnn.convert_model(m, **ck))
    return made


@pytest.mark.parametrize("case", list(CASES))
def test_int8_matches_the_dequantized_reference(case, converted):
    mk, ck, on_cpu = CASES[case]
    m, _W, ir, f32 = converted[case]
    T = mk.get("T", 5)
    feeds = feeds_of(m, T)
    c = compiled_of(ir)
    got = infer(c, feeds)
    assert ir.rnns[0].compression == Compression("int8"), ir.notes  # within the default error budget
    want = reference.run_model(compressed_reference(m, ir).model, feeds)
    original = reference.run_model(m, feeds)
    tol = 2e-3 if ck.get("compress_to_fp16") else ATOL  # f16 scales round each scale by 2^-11
    for name in want:
        assert_close(got[name], want[name], tol, tol, f"{case} {name}")
    # the compression is real: quantization moved the outputs, by what per-row int8 costs
    q_err = max(float(np.abs(want[n] - original[n]).max()) for n in want)
    assert 1e-6 < q_err < 0.05, q_err
    # B stays float; W and R are i8, with one scale per row
    D = 2 if mk.get("direction") == "bidirectional" else 1
    ints = [c_ for c_ in consts(ir.xml) if c_[0] == "i8"]
    assert len(ints) == 2 * D, ints  # W and R per direction
    assert len(ir.bin) < (0.8 if ck.get("compress_to_fp16") else 0.6) * len(f32.bin)  # tiny H: the float B and scales weigh in
    if on_cpu:
        assert on_cpu in c.integer_weights, c.integer_weights


def test_one_chain_per_node_direction_and_matrix_whatever_t():
    """The decompression chain is made once per node, direction and matrix: the XML's Converts and
    integer Consts do not grow with T, and every cell of every piece reads the same Multiply."""
    counts = {}
    for T in (5, 150):
        m, _ = model("LSTM", T=T, direction="bidirectional")
        ir = ovrnn.convert_model(m, compress_weights="int8")
        layers = layer_counts(ir.xml)
        counts[T] = (layers["Convert"], sum(1 for t, _ in consts(ir.xml) if t == "i8"))
        root = etree.fromstring(ir.xml)
        by_id = {el.get("id"): el for el in root.iter("layer")}
        cells = [el.get("id") for el in root.iter("layer") if el.get("type") == "LSTMCell"]
        w_sources = {e.get("from-layer") for e in root.iter("edge") if e.get("to-layer") in cells and e.get("to-port") == "3"}
        assert {by_id[s].get("type") for s in w_sources} == {"Multiply"} and len(w_sources) == 2, w_sources  # one per direction
    assert counts[5] == counts[150] == (4, 4), counts


def test_the_chain_still_folds_on_cpu():
    """SequenceFusion accepts the shared chain: each 64-step piece is one RNNSeq, and the CPU folds
    the int8 weights to f32 (the saving is on disk only)."""
    for op in ("RNN", "GRU", "LSTM"):
        m, _ = model(op, T=136, direction="bidirectional")
        c = compiled_of(ovrnn.convert_model(m, compress_weights="int8"))
        types = runtime_types(c)
        assert types["RNNSeq"] == 3 * 2 and not types[f"{op}Cell"] and not types["TensorIterator"], types
        assert c.integer_weights == "integer weights folded to f32 on CPU: the saving is on disk only"


def test_scales_per_row_after_the_gate_permutation():
    """The scale of each LSTMCell row (f, i, c, o order) is max|row| / 127 of that ONNX row (i, o, f, c)."""
    m, W = model("LSTM", hidden=4)
    ir = ovrnn.convert_model(m, compress_weights="int8")
    root = etree.fromstring(ir.xml)
    scale_el = next(el for el in root.iter("layer") if el.get("name") == "lstm_node/fwd/W/scale")
    d = scale_el.find("data")
    stored = np.frombuffer(ir.bin[int(d.get("offset")) : int(d.get("offset")) + int(d.get("size"))], np.float32)
    H = 4
    onnx_rows = np.abs(W[0]).max(axis=1) / 127
    fico = np.concatenate([onnx_rows[k * H : (k + 1) * H] for k in (2, 0, 3, 1)])
    np.testing.assert_allclose(stored, fico.astype(np.float32), rtol=1e-7)
    q = next(el for el in root.iter("layer") if el.get("name") == "lstm_node/fwd/W/quantized").find("data")
    assert (q.get("element_type"), q.get("shape")) == ("i8", "16, 4")


@pytest.mark.parametrize("whole", [False, True], ids=["lone-node", "whole-model"])
def test_fp16_scales_only_in_f16s_normal_range(whole):
    """--compress-to-fp16: scales (and B) f16, the integer weights kept. In a whole model too: there
    OpenVINO's save_model(compress_to_fp16=True) left a model with integer weights all f32 (it counts
    as compressed already), and validate judged it at f16 tolerance all the same."""
    m, _ = model("GRU", relu_after=whole)
    ir = ovrnn.convert_model(m, compress_weights="int8", compress_to_fp16=True)
    assert (
        ("f16", "24, 1") in consts(ir.xml)
        and ("i8", "24, 4") in consts(ir.xml)
        and not any(t == "f32" and "," in shape for t, shape in consts(ir.xml))
    ), consts(ir.xml)
    assert len(ir.bin) < len(ovrnn.convert_model(m, compress_weights="int8").bin)
    tiny, _ = model("GRU", scale=1e-4, relu_after=whole)  # max|row| / 127 < 6.1e-5: f16-subnormal scales
    ir = ovrnn.convert_model(tiny, compress_weights="int8", compress_to_fp16=True)
    assert ("f32", "24, 1") in consts(ir.xml)
    assert whole or any("outside float16's normal range" in n for n in ir.notes), ir.notes
    feeds = feeds_of(m)
    got = infer(compiled_of(ovrnn.convert_model(m, compress_weights="int8", compress_to_fp16=True)), feeds)
    want = reference.run_model(compressed_reference(m, ovrnn.convert_model(m, compress_weights="int8")).model, feeds)
    for name in want:
        assert_close(got[name], want[name], 2e-3, 2e-3, name)


def test_runtime_weights_stay_float_with_a_note():
    m, W = model("GRU", runtime_w=True)
    ir = ovrnn.convert_model(m, compress_weights="int8")
    assert [t for t, _ in consts(ir.xml) if t == "i8"] == ["i8"]  # R only
    assert (
        "GRU node 'gru_node': W 'W' is a graph input (runtime weights): kept float, --compress-weights applies to constant weights only"
        in " ".join(ir.notes).replace("compress_weights", "--compress-weights")
    )
    feeds = feeds_of(m, W=W)
    got = infer(compiled_of(ir), feeds)
    deq = dequantized_model(m, Compression("int8"))
    want = reference.run_model(deq, feeds)
    for name in want:
        assert_close(got[name], want[name], ATOL, RTOL, name)


def test_weights_with_nan_stay_float_with_a_note():
    """NaN or infinity in W: no scale exists, so the node keeps float weights and says why (before:
    'int8 quantization-only error nan ... is above --max-weight-error')."""
    m, W = model("GRU")
    W[0, 3, 1] = np.nan
    next(t for t in m.graph.initializer if t.name == "W").CopyFrom(numpy_helper.from_array(W, "W"))
    ir = ovrnn.convert_model(m, compress_weights="int8")
    assert ir.notes == ("GRU node 'gru_node': W 'W' has NaN or infinite values: its weights stay float",) and b'"i8"' not in ir.xml, (
        ir.notes
    )


@pytest.mark.parametrize("name", ["lstm_bidir.dq_tensor", "lstm_qdq_rows"], ids=["dynamic-quantize-lstm", "qdq"])
def test_weights_that_come_quantized_are_not_quantized_again(name):
    """--compress-weights int4 on a quantized model: its int8 W/R are stored as they are, and a note
    says so (before: silence, as if int4 had been applied)."""
    m = onnx.load(FIXTURES / "quantized" / f"{name}.onnx")
    plain, ir = ovrnn.convert_model(m), ovrnn.convert_model(m, compress_weights="int4")
    assert ir.bin == plain.bin and b'element_type="i4"' not in ir.xml
    node = next(n.name for n in m.graph.node if n.op_type in ("LSTM", "DynamicQuantizeLSTM"))
    assert ir.notes == (
        f"LSTM node '{node}': W and R come quantized in the model: stored as they are, --compress-weights does not quantize them again",
    ), ir.notes


@pytest.mark.parametrize(
    "model_consts, runtime_consts, device, expected",
    [
        ([("i8", (16, 4))], [("f32", (16, 4))], "CPU", "integer weights folded to f32 on CPU: the saving is on disk only"),
        (
            [("i8", (16, 4))],
            [("i8", (16, 4)), ("f16", (16, 1))],
            "NPU",
            "integer weights kept int8 on NPU: 64 weight values stay compressed in memory",
        ),
        (
            [("i8", (16, 4)), ("i8", (16, 16))],
            [("i8", (16, 4)), ("f32", (16, 16))],
            "CPU",
            "integer weights partly kept on CPU: 20% of the 320 weight values stay int8, the rest folded to f32 (saved on disk only)",
        ),
        ([("i4", (16, 64))], [("f16", (16, 64))], "GPU", "integer weights folded to f16 on GPU: the saving is on disk only"),
        ([("f32", (16, 4))], [("f32", (16, 4))], "CPU", ""),
    ],
    ids=["folded-cpu", "kept-npu", "partly-cpu", "int4-folded-gpu-f16", "no-integer-weights"],
)
def test_kept_or_folded_message(model_consts, runtime_consts, device, expected):
    assert verdict(model_consts, runtime_consts, device) == expected


def test_cli_convert_inspect_run(tmp_path):
    m, _ = model("LSTM", direction="bidirectional")
    onnx.save(m, tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "-o", tmp_path / "q.xml", "--compress-weights", "int8")
    assert r.returncode == 0, r.stderr
    r = ovrnn_cli("inspect", tmp_path / "q.xml")
    assert r.returncode == 0, r.stderr
    assert "integer weights: 4 i8 Const layers" in r.stdout
    assert "lstm_node: int8 symmetric, one scale per row: W, R; scales f32" in r.stdout
    assert "integer weights folded to f32 on CPU: the saving is on disk only" in r.stdout
    np.save(tmp_path / "x.npy", feeds_of(m)["X"])
    r = ovrnn_cli("run", tmp_path / "q.xml", "--input", f"X={tmp_path / 'x.npy'}")
    assert r.returncode == 0 and "integer weights folded to f32 on CPU: the saving is on disk only" in r.stdout, r.stdout + r.stderr
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "-o", tmp_path / "m.xml", "--compress-weights", "int8", "--lowering", "matmul")
    r = ovrnn_cli("run", tmp_path / "m.xml", "--input", f"X={tmp_path / 'x.npy'}")
    assert "integer weights kept int8 on CPU" in r.stdout, r.stdout + r.stderr
    # a stateful IR: run streams it, and says the same (it said nothing)
    forward, _ = model("LSTM")
    onnx.save(forward, tmp_path / "f.onnx")
    r = ovrnn_cli("convert", tmp_path / "f.onnx", "-o", tmp_path / "s.xml", "--compress-weights", "int8", "--stateful")
    assert r.returncode == 0, r.stderr
    r = ovrnn_cli("run", tmp_path / "s.xml", "--input", f"X={tmp_path / 'x.npy'}")
    assert (
        r.returncode == 0
        and r.stdout.startswith("streamed ")
        and "  integer weights folded to f32 on CPU: the saving is on disk only\n" in r.stdout
    ), r.stdout + r.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--compress-weights", "int2"],
            "ovrnn convert: argument --compress-weights: invalid choice: 'int2' (choose from 'int8', 'int4') (see ovrnn convert --help)",
        ),
        (["--compress-weights", "int8", "--group-size", "32"], "--group-size applies to --compress-weights int4 only"),
        (["--group-size", "64"], "--group-size applies to --compress-weights int4 only"),
        (["--compress-weights", "int4", "--group-size", "48"], "--group-size: expected 32, 64, 128 or -1 (one group per row), got 48"),
    ],
    ids=["bad-mode", "group-with-int8", "group-alone", "bad-group"],
)
def test_usage_errors(tmp_path, args, message):
    m, _ = model("RNN")
    onnx.save(m, tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "-o", tmp_path / "q.xml", *args)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"error: {message}"], r.stderr
    assert not (tmp_path / "q.xml").exists()


def test_validate_an_ir_converted_beforehand():
    """validate(model, ir=IR) judges the IR by the schemes it records per node (before: against the
    float weights, since no compress_weights was passed: FAIL at 2e-3)."""
    m, _ = model("GRU", lbr=1, direction="bidirectional")
    report = ovrnn.validate(m, ir=ovrnn.convert_model(m, compress_weights="int8"))
    assert report.passed, report.format()
    assert any(c.oracle == "quantization" for c in report.comparisons)


def test_validate_a_quantized_model_with_a_float_node_compressed():
    """A DynamicQuantizeLSTM beside a float GRU, --compress-weights int8: the GRU's quantization-only
    error is shown (the float original is the model with the LSTM's integers read as float; before,
    a quantized model had no 'quantization' row at all), and both stream and whole-sequence agree."""
    m = onnx.load(FIXTURES / "quantized" / "lstm_fwd.dq_tensor.onnx")
    gru, _ = model("GRU", T=6, inputs=8, seed=3)
    for t in gru.graph.initializer:
        t.name = f"gru_{t.name}"
    m.graph.initializer.extend(gru.graph.initializer)
    m.graph.node.append(helper.make_node("GRU", ["X", "gru_W", "gru_R", "gru_B"], ["Y2", "Y_h2"], hidden_size=8, name="gru"))
    m.graph.output.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y2", "Y_h2")])
    for report in (ovrnn.validate(m, compress_weights="int8"), ovrnn.validate(m, compress_weights="int8", stateful=True, chunks=2)):
        assert report.passed, report.format()
        q = {c.output: c.max_abs for c in report.comparisons if c.oracle == "quantization"}
        assert q["Y"] == 0 and 1e-5 < q["Y2"] < 0.05, report.format()


def test_validate_reports_the_three_figures():
    m, _ = model("GRU", direction="bidirectional")
    report = ovrnn.validate(m, compress_weights="int8") if hasattr(ovrnn, "validate") else None
    if report is None:
        from ovrnn.validation.validate import validate

        report = validate(m, compress_weights="int8")
    assert report.passed
    by = {(c.output, c.oracle): c for c in report.comparisons}
    assert by["Y", "reference"].counted and by["Y", "reference"].max_abs < 1e-5
    assert not by["Y", "quantization"].counted and 1e-6 < by["Y", "quantization"].max_abs < 0.05
    assert not by["Y", "onnxruntime"].counted
    assert "integer weights folded to f32 on CPU: the saving is on disk only" in report.notes


def test_quantize_is_symmetric_narrow_and_per_row():
    M = np.array([[1.0, -0.5, 0.25], [0.0, 0.0, 0.0], [-3.0, 1.5, 0.0]])
    q = quantize(M, Compression("int8"))
    assert q.q.dtype == np.int8 and q.q.tolist() == [[127, -64, 32], [0, 0, 0], [-127, 64, 0]]
    np.testing.assert_allclose(q.scale[:, 0], np.float32([1 / 127, 0, 3 / 127]))
    assert np.abs(q.dequantize() - M).max() <= q.scale.max() / 2 + 1e-12


@pytest.mark.parametrize("name", ["gru_lbr.f32", "rnn_bidir.f32", "lstm_peep_bidir.f32"])
def test_fixtures_validate_compressed(name):
    """The float fixtures of tools/make_quantized_fixtures.py, compressed: PASS against the
    dequantized reference, with the quantization-only error shown."""

    report = ovrnn.validate(FIXTURE_DIR / "quantized" / f"{name}.onnx", compress_weights="int8")
    assert report.passed, report.format()
    q = [c for c in report.comparisons if c.oracle == "quantization"]
    assert q and all(0 < c.max_abs < 0.05 and not c.counted for c in q)


def _unsqueezed_w(hidden=8):
    """W computed in the graph: Unsqueeze of a 2-D initializer (the lowering quantizes the folded value)."""
    m, _ = model("GRU", scale=0.3 * min(1, (8 / hidden) ** 0.5), hidden=hidden, inputs=hidden)
    w = next(t for t in m.graph.initializer if t.name == "W")
    w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w)[0], "W2"))
    m.graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "axes"))
    m.graph.node.insert(0, helper.make_node("Unsqueeze", ["W2", "axes"], ["W"]))
    return m


def _per_column_qdq():
    """W/R from DequantizeLinear with one scale per column (axis 2), a form onnx/reading/qdq.py does not
    keep: folded to float, then --compress-weights quantizes it per row."""
    m = onnx.load(FIXTURES / "quantized" / "lstm_fwd.f32.onnx")
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    nodes = []
    for name in ("W", "R"):
        scale = (np.abs(inits[name][0]).max(axis=0) / 127).astype(np.float32)
        q = np.clip(np.rint(inits[name] / scale), -127, 127).astype(np.int8)
        m.graph.initializer.extend([numpy_helper.from_array(q, f"{name}_q"), numpy_helper.from_array(scale, f"{name}_scale")])
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_scale"], [f"{name}_dq"], axis=2))
    m.graph.node[0].input[1], m.graph.node[0].input[2] = "W_dq", "R_dq"
    m.graph.node.extend(nodes + [m.graph.node[0]])
    del m.graph.node[0]
    return m


# id -> a model whose W/R are not plain initializers of the main graph
COMPUTED_OR_NESTED = {
    "w-from-unsqueeze": _unsqueezed_w,
    "w-from-unsqueeze-above-the-fold-limit": lambda: _unsqueezed_w(hidden=160),  # 76,800 values: was kept float as 'a graph input'
    "qdq-per-column-then-compressed": _per_column_qdq,  # was kept float as 'a graph input'
    "w-r-from-constant-nodes-spox": lambda: onnx.load(FIXTURES / "exporters" / "spox_rnn.onnx"),
    "gru-in-both-if-branches": lambda: onnx.load(FIXTURES / "bodies" / "if_gru.onnx"),
    "lstm-in-a-loop-body": lambda: onnx.load(FIXTURES / "bodies" / "loop_lstm.onnx"),
    "rnn-in-a-scan-body": lambda: onnx.load(FIXTURES / "bodies" / "scan_rnn.onnx"),
}


@pytest.mark.parametrize("case", list(COMPUTED_OR_NESTED))
def test_validate_compressed_weights_that_are_computed_or_in_bodies(case):
    """The dequantized reference quantizes W/R where the node reads them (a DequantizedWeights op in
    front of the node, in its own graph): before, only top-level initializers were replaced, so a
    computed W or a node in an If/Loop/Scan body was judged against its float weights and FAILed
    (1e-3 off)."""
    m = COMPUTED_OR_NESTED[case]()
    ir = ovrnn.convert_model(m, compress_weights="int8")
    assert all(r.weights.startswith("int8 symmetric, one scale per row: W, R;") for r in ir.rnns), ([r.weights for r in ir.rnns], ir.notes)
    report = ovrnn.validate(m, compress_weights="int8")
    assert report.passed, report.format()
    counted = [c for c in report.comparisons if c.oracle == "reference"]
    assert counted and all(c.max_abs < 1e-6 for c in counted), report.format()
    q = [c for c in report.comparisons if c.oracle == "quantization"]
    assert q and all(1e-5 < c.max_abs < 0.05 for c in q), report.format()


# id -> (fixture in fixtures/quantized, validate kwargs, onnxruntime counted, what the CPU does with the weights)
STATEFUL = {
    "int8-lstm": ("lstm_fwd.f32", dict(compress_weights="int8"), False, "folded to f32"),
    "int4-lstm-input-forget-no-budget": (
        "lstm_input_forget.f32",
        dict(compress_weights="int4", max_weight_error=float("inf")),
        False,
        "kept int4",
    ),
    "dynamic-quantize-lstm-input-forget": ("lstm_input_forget.dq_tensor", {}, False, "kept int8"),
    "qdq-uint8-zero-point": ("lstm_qdq_tensor_u8", {}, True, "folded to f32"),
    # a whole model (a Relu after Y): the stream's time axis is probed through the DynamicQuantizeLSTM too
    # (it was not: 'the stateful IR lists no graph input that carries the time axis')
    "dynamic-quantize-lstm-whole-model": ("lstm_fwd.dq_channel+relu", {}, False, "folded to f32"),
}


@pytest.mark.parametrize("case", list(STATEFUL))
def test_validate_stateful_with_integer_weights(case):
    """validate --stateful on an IR with integer weights: the stream matches float64 with the
    dequantized weights and the stateless IR (same integer weights); before, --compress-weights was
    refused and a quantized model died with an internal error (onnx.reference has no
    DynamicQuantizeLSTM, nor DequantizeLinear at opset 14)."""
    name, kw, ort_counted, on_cpu = STATEFUL[case]
    m = onnx.load(FIXTURES / "quantized" / f"{name.partition('+')[0]}.onnx")
    if name.endswith("+relu"):
        m.graph.node.append(helper.make_node("Relu", ["Y"], ["Z"]))
        m.graph.output.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    report = ovrnn.validate(m, stateful=True, chunks=2, **kw)
    assert report.passed, report.format()
    rows = {(c.check, c.output, c.oracle): c for c in report.comparisons}
    for oracle in ("reference", "stateless IR"):
        c = rows["chunked == whole", "Y", oracle]
        assert c.counted and c.max_abs < 1e-6, report.format()
    ort = rows["chunked == whole", "Y", "onnxruntime"]
    assert ort.counted == ort_counted and (ort.max_abs < 1e-6) == ort_counted, report.format()
    q = rows.get(("chunked == whole", "Y", "quantization"))
    assert (q is not None) == ("compress_weights" in kw), report.format()
    assert q is None or (not q.counted and 1e-5 < q.max_abs < 0.1)
    assert any(n.startswith(f"integer weights {on_cpu} on CPU") for n in report.notes), report.notes


def test_validate_stateful_whole_sequence_ir_gets_the_streams_scheme():
    """The stateless IR of the whole 360-step sequence gets the scheme the stream got: its error
    budget, measured over 360 steps instead of 256, kept it at int8 under a budget the stream's int4
    met, and validate FAILed the stream against it (5e-2)."""
    path = FIXTURES / "quantized" / "lstm_input_forget.f32.onnx"
    ir = ovrnn.convert_model(path, compress_weights="int4", max_weight_error=float("inf"))
    e256 = float(re.search(r"quantization-only error (\S+) over 256 steps", ir.rnns[0].weights).group(1))
    report = ovrnn.validate(path, stateful=True, chunks=60, compress_weights="int4", max_weight_error=e256 * 1.02)
    assert report.passed, report.format()
    rows = [c for c in report.comparisons if c.oracle == "stateless IR"]
    assert rows and all(c.max_abs < 1e-6 for c in rows), report.format()


def test_convert_stateful_whole_model_checks_chunked_against_the_same_scheme():
    """convert --stateful of a whole model (a Relu after Y) with K = 200 steps: its chunked == whole
    check converts 400 steps, and gets the scheme each node of the stream got; its own budget, over
    400 steps instead of 256, kept the LSTM at int8 where int4 met it, and convert refused the model
    as one whose ops 'mix time steps'."""
    m = onnx.load(FIXTURES / "quantized" / "lstm_input_forget.f32.onnx")
    ir = ovrnn.convert_model(m, compress_weights="int4", max_weight_error=float("inf"))
    e256 = float(re.search(r"quantization-only error (\S+) over 256 steps", ir.rnns[0].weights).group(1))
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 200
    m.graph.node.append(helper.make_node("Relu", ["Y"], ["Z"]))
    m.graph.output.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    ir = ovrnn.convert_model(m, compress_weights="int4", max_weight_error=e256 * 1.02, stateful=True)
    assert ir.rnns[0].compression.mode == "int4" and not ir.notes, ir.notes


# --- int4 (experimental) and the per-node error budget ---------------------------------------------

INT4 = {
    "lstm-cells-per-row": (dict(op="LSTM"), dict(group_size=-1), ("i4", "256, 64")),
    "lstm-cells-group-32": (dict(op="LSTM"), dict(group_size=32), ("i4", "256, 2, 32")),
    "gru-matmul-group-32": (dict(op="GRU"), dict(group_size=32, lowering="matmul"), ("i4", "2, 32, 192")),
    "lstm-peepholes-per-row": (dict(op="LSTM", peep=True), dict(group_size=-1), ("i4", "64, 256")),
    "rnn-whole-model-group-32": (dict(op="RNN", relu_after=True), dict(group_size=32), ("i4", "64, 2, 32")),
}


@pytest.mark.parametrize("case", list(INT4))
def test_int4_matches_the_dequantized_reference(case):
    """int4 with no budget (inf): per row or per group of columns, cells and MatMul steps, and a
    whole model; at f32 the CPU's MatMuls run without their dynamic activation quantization."""
    mk, ck, expect = INT4[case]
    m, _W = model(**mk, hidden=64, inputs=64, scale=0.2)
    ir = ovrnn.convert_model(m, compress_weights="int4", max_weight_error=float("inf"), **ck)
    int8 = ovrnn.convert_model(
        m, compress_weights="int8", max_weight_error=float("inf"), **{k: v for k, v in ck.items() if k != "group_size"}
    )
    assert expect in consts(ir.xml), consts(ir.xml)
    assert len(ir.bin) < 0.7 * len(int8.bin)
    feeds = feeds_of(m, inputs=64)
    got = infer(compiled_of(ir), feeds)
    want = reference.run_model(compressed_reference(m, ir).model, feeds)
    for name in want:
        assert_close(got[name], want[name], ATOL, RTOL, f"{case} {name}")


def test_packing_int4():
    from ovrnn.quantization import pack_int4

    assert pack_int4(np.array([1, -1, -8, 7, 3], np.int8)) == bytes([0xF1, 0x78, 0x03])


def test_budget_falls_back_per_node():
    """Two nodes: a benign one keeps int4 under a generous budget; a chaotic one (R x 4) exceeds
    it at int4 and int8 and keeps float weights; both say so."""
    benign, _ = model("LSTM", hidden=16, scale=0.1, seed=1)
    ir = ovrnn.convert_model(benign, compress_weights="int4", max_weight_error=float("inf"))
    e4 = float(re.search(r"quantization-only error (\S+) over 256 steps", ir.rnns[0].weights).group(1))
    ir = ovrnn.convert_model(benign, compress_weights="int4", max_weight_error=e4 * 1.2)
    assert ir.rnns[0].compression == Compression("int4", -1, e4 * 1.2) and not ir.notes
    ir = ovrnn.convert_model(benign, compress_weights="int4", max_weight_error=e4 * 0.8)
    assert ir.rnns[0].compression == Compression("int8", -1, e4 * 0.8)
    (note,) = ir.notes
    assert re.fullmatch(
        r"LSTM node 'lstm_node': int4 quantization-only error \d\.\d\de-\d\d over 256 steps is above --max-weight-error "
        rf"{e4 * 0.8:g}: kept at int8",
        note,
    ), note
    wild, _ = model("RNN", scale=1.5, seed=2)
    ir = ovrnn.convert_model(wild, compress_weights="int8")
    assert ir.rnns[0].compression is None and ir.rnns[0].weights == "" and b'element_type="i8"' not in ir.xml
    assert ir.notes[0].endswith("is above --max-weight-error 0.02: its weights stay float"), ir.notes
    report = ovrnn.validate(wild, compress_weights="int8")  # nothing compressed: the plain reference
    assert report.passed and not any(c.oracle == "quantization" for c in report.comparisons)


def test_max_weight_error_usage(tmp_path):
    m, _ = model("RNN")
    onnx.save(m, tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "-o", tmp_path / "q.xml", "--max-weight-error", "0.1")
    assert r.returncode == 2 and r.stderr.strip() == "error: --max-weight-error applies with --compress-weights only"
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "-o", tmp_path / "q.xml", "--compress-weights", "int8", "--max-weight-error", "-1")
    assert r.returncode == 2 and r.stderr.strip() == "error: --max-weight-error: expected a positive number (inf: no limit), got -1.0"

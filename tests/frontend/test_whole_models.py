"""Whole models: PyTorch exports (tests/fixtures, made by tools/export_torch_fixtures.py).

OpenVINO's ONNX frontend converts the other ops; every RNN, GRU and LSTM node becomes an
RNNCell, GRUCell or LSTMCell chain. Compared with PyTorch's own outputs, without importing torch.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import openvino as ov
import pytest
from cases import make_model
from conftest import FIXTURE_DIR, assert_close, layer_counts, ovrnn_cli, run_ir
from lxml import etree
from onnx import TensorProto, helper

import ovrnn
from ovrnn.errors import UnsupportedFeatureError, UsageError

FIXTURES = FIXTURE_DIR
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
HIDDEN_STEPS = ("RNNSequence", "GRUSequence", "LSTMSequence", "TensorIterator", "Loop")
CELLS = {"RNN": "RNNCell", "GRU": "GRUCell", "LSTM": "LSTMCell"}
GRU_LSTM = sorted(name for name, entry in MANIFEST.items() if set(entry["nodes"]) & {"GRU", "LSTM"})


def fixture(name):
    return FIXTURES / f"{name}.onnx", dict(np.load(FIXTURES / f"{name}.inputs.npz")), dict(np.load(FIXTURES / f"{name}.torch.npz"))


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_matches_pytorch_with_every_recurrent_node_as_cells(name):
    """PyTorch's outputs within the manifest's tolerance; one cell per step per layer per direction
    (the manifest's count comes from the torch modules, not from ONNX), no sequence op left."""
    path, inputs, torch_out = fixture(name)
    entry = MANIFEST[name]
    ir = ovrnn.convert_model(path, entry["input_flags"])
    got = run_ir(ir, inputs)
    assert set(got) == set(torch_out)
    for out, want in torch_out.items():
        assert_close(got[out], want.astype(np.float64), entry["tolerance"], entry["tolerance"], f"{name} {out}")
    counts = layer_counts(ir.xml)
    assert dict(Counter(r.op for r in ir.rnns)) == entry["nodes"]
    assert {cell: counts[cell] for cell in CELLS.values() if counts[cell]} == entry["cells"]
    for op, cell in CELLS.items():
        assert counts[cell] == sum(c.steps for r in ir.rnns if r.op == op for c in r.chains)
    assert all(c.form == "cell" for r in ir.rnns for c in r.chains)
    assert not any(counts[t] for t in HIDDEN_STEPS)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_deterministic_and_names_kept(name):
    path, _, _ = fixture(name)
    flags = MANIFEST[name]["input_flags"]
    a, b = ovrnn.convert_model(path, flags), ovrnn.convert_model(path, flags)
    assert (a.xml, a.bin) == (b.xml, b.bin)
    model = ov.Core().read_model(a.xml, ov.Tensor(np.frombuffer(a.bin, np.uint8).copy()))
    source = onnx.load(path)
    assert [i.get_any_name() for i in model.inputs] == [
        i.name for i in source.graph.input if i.name not in {t.name for t in source.graph.initializer}
    ]
    assert [o.get_any_name() for o in model.outputs] == [o.name for o in source.graph.output]
    assert b"compressed" not in a.xml and b'element_type="f16"' not in a.xml  # compress_to_fp16 stays off


def test_compress_to_fp16_on_a_whole_model():
    """docs/whole_models.md: FP16 compression is off unless asked for; asked, every float weight (the
    embedding and head too, not only the RNNs') is stored as f16, and the outputs stay within f16's tolerance."""
    path, feeds, expected = fixture("rnn_embedding_classifier")
    flags = MANIFEST["rnn_embedding_classifier"]["input_flags"]
    plain = ovrnn.convert_model(path, flags)
    ir = ovrnn.convert_model(path, flags, compress_to_fp16=True)
    consts = [layer for layer in etree.fromstring(ir.xml).iter("layer") if layer.get("type") == "Const"]
    floats = [c.find("data").get("element_type") for c in consts if c.find("data").get("element_type") in ("f16", "f32")]
    assert floats and all(t == "f16" for t in floats), floats
    assert len(ir.bin) < 0.55 * len(plain.bin)
    got = run_ir(ir, feeds)
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, atol=1e-2, rtol=1e-2)


def test_computed_initial_h_folds_to_constants():
    """PyTorch computes a zero h0 with Shape/Gather/Expand; with static shapes it folds away."""
    path, _, _ = fixture("rnn_tanh_3layer_nobias")
    counts = layer_counts(ovrnn.convert_model(path).xml)
    assert not any(counts[t] for t in ("ShapeOf", "Broadcast", "Expand"))
    assert counts["Gather"] == 3  # the lowering's own, one per RNN node: Y_h picked from Y at step T-1


@pytest.mark.parametrize("name", ["rnn_relu_2layer_bidir_dynamic", "gru_bidir_batch_first"])
def test_symbolic_batch_stays_dynamic(tmp_path, name):
    path, inputs, torch_out = fixture(name)
    ir = ovrnn.convert_model(path, ["x[?,9,6]"])
    report = ovrnn.inspect(ir.save(tmp_path / "m.xml"))
    assert [(t.name, t.shape) for t in report.inputs] == [("x", "?,9,6")]
    assert_close(run_ir(ir, inputs)["output"], torch_out["output"].astype(np.float64), 1e-4, 1e-4, "batch 4")
    two = {"x": inputs["x"][:2]}
    want = ovrnn.reference.run_model(onnx.load(path), two)
    assert_close(run_ir(ir, two)["output"], want["output"], 2e-5, 2e-5, "batch 2")


@pytest.mark.parametrize(
    ("name", "node", "cell"), [("rnn_relu_2layer_bidir_dynamic", "/rnn/RNN", "RNNCell"), ("gru_bidir_batch_first", "/rnn/GRU", "GRUCell")]
)
def test_dynamic_steps_error_names_the_graph_input(name, node, cell):
    path, _, _ = fixture(name)
    with pytest.raises(UsageError) as info:
        ovrnn.convert_model(path)
    assert str(info.value) == (
        f"{node.split('/')[-1]} node '{node}': the number of time steps comes from dim 1 of input 'x', which is dynamic ('seq'), "
        f'and the {cell} chain needs a fixed number of steps; fix it with input="x[?,T,6]" (T = number of time steps)'
    )


def test_inspect_lists_each_rnn_node(tmp_path):
    path, _, _ = fixture("rnn_relu_2layer_bidir_dynamic")
    xml = tmp_path / "m.xml"
    proc = ovrnn_cli("convert", path, "-o", xml, "--input", "x[4,9,6]")
    assert proc.returncode == 0, proc.stderr
    text = ovrnn_cli("inspect", xml).stdout
    for node in ("/rnn/RNN", "/rnn/RNN_1"):
        for d in ("fwd", "rev"):
            assert f"  {node} {d}: 9 steps, Relu, RNNCell, hidden 12, W shared by 9 cells" in text


def test_validate_whole_model_uses_onnxruntime(tmp_path):
    path, _, _ = fixture("rnn_embedding_classifier")
    report = ovrnn.validate(path)
    assert report.passed and report.onnxruntime == "used"
    assert {(c.output, c.oracle) for c in report.comparisons} == {("probs", "reference"), ("probs", "onnxruntime")}


@pytest.mark.parametrize("name", GRU_LSTM)
def test_validate_cli_on_gru_lstm_exports(tmp_path, name):
    """`ovrnn validate` on each GRU/LSTM export: the IR against onnxruntime and the float64
    reference, on every output, on seeded random inputs of the stored inputs' shapes."""
    path, _inputs, torch_out = fixture(name)
    flags = [a for f in MANIFEST[name]["input_flags"] for a in ("--input", f)]
    proc = ovrnn_cli("validate", path, *flags, "--json", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "PASS"
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and report["precision"] == "f32" and report["onnxruntime"] == "used"
    assert {(c["output"], c["oracle"]) for c in report["comparisons"]} == {
        (o, oracle) for o in torch_out for oracle in ("reference", "onnxruntime")
    }
    assert all(c["max_abs"] < 1e-4 for c in report["comparisons"])


def test_model_without_rnn_converts_with_a_note(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["Y"], name="r")],
        "plain",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])],
    )
    path = tmp_path / "plain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    proc = ovrnn_cli("convert", path, "-o", tmp_path / "plain.xml")
    assert proc.returncode == 0
    assert proc.stderr == (
        "note: the model has no RNN, GRU or LSTM node, so it was converted by OpenVINO's ONNX frontend as it is. PyTorch's dynamo=True "
        "exporter writes nn.RNN as plain ops or a Loop: export with torch.onnx.export(..., dynamo=False) to get an ONNX RNN node\n"
    )
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(run_ir(tmp_path / "plain.xml", {"X": x})["Y"], np.maximum(x, 0))


def _rnn_then(op_node, extra_opset=None):
    from cases import Case

    model, _, _ = make_model(Case("w", outputs=("Y_h",)))
    model.graph.node.append(op_node)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info(op_node.output[0], TensorProto.FLOAT, None))
    if extra_opset:
        model.opset_import.append(helper.make_opsetid(extra_opset, 1))
    return model


def test_unconvertible_ops_are_named():
    model = _rnn_then(helper.make_node("FooBar", ["Y_h"], ["Z"], name="foo", domain="com.example"), "com.example")
    with pytest.raises(UnsupportedFeatureError) as info:
        ovrnn.convert_model(model)
    assert str(info.value) == "OpenVINO's ONNX frontend cannot convert 1 op(s): com.example.FooBar (node 'foo')"


def test_rnn_errors_inside_whole_models_keep_their_message():
    """The normaliser's checks run inside the frontend callback; the first error comes out as is."""
    model = _rnn_then(helper.make_node("Relu", ["Y_h"], ["Z"], name="relu"))
    for a in model.graph.node[0].attribute:
        if a.name == "hidden_size":
            a.i = 9
    with pytest.raises(ovrnn.InvalidModelError) as info:
        ovrnn.convert_model(model)
    assert (
        str(info.value)
        == "RNN node 'rnn': input R 'R' has shape [1,5,5]: dim 1 (hidden_size) is 5, expected 9 from attribute 'hidden_size'"
    )

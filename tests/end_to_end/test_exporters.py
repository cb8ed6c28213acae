"""Models in the shapes other exporters write (tests/fixtures/exporters/, made by
tools/make_exporter_fixtures.py): they convert, run, and match onnxruntime and the reference."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from conftest import ROOT, layer_counts, ovrnn_cli
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn.onnx.reading.fold import fold_constants

FIXTURES = ROOT / "tests" / "fixtures" / "exporters"
EXPORTERS = ["mx2onnx_rnn_tanh", "onnxmltools_coreml_rnn", "onnxscript_rnn", "spox_rnn"]


def test_fixtures_are_what_the_tool_writes():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "make_exporter_fixtures.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", EXPORTERS)
def test_exporter_model_converts_runs_and_matches(tmp_path, name):
    path = FIXTURES / f"{name}.onnx"
    proc = ovrnn_cli("convert", path, "-o", tmp_path / "m.xml")  # every input is static: no --input needed
    assert proc.returncode == 0, proc.stderr
    report = ovrnn.validate(path)
    counted = {(c.output, c.oracle) for c in report.comparisons if c.counted}
    outputs = {o.name for o in onnx.load(path).graph.output}
    assert counted == {(o, oracle) for o in outputs for oracle in ("reference", "onnxruntime")}, report.format()
    assert report.passed, report.format()
    assert report.onnxruntime == "used"


def test_mx2onnx_swapaxes_shapes_fold_and_full_lengths_need_no_mask():
    """X reaches the RNN through Shape/ScatterND/GatherND/Pad/Reshape; the lengths are Cast(Tile(T))."""
    ir = ovrnn.convert_model(FIXTURES / "mx2onnx_rnn_tanh.onnx")
    (rnn,) = ir.rnns
    assert (rnn.seq_length, rnn.batch, rnn.input_size, rnn.hidden_size) == (6, "2", 4, 5)
    assert rnn.sequence_lens is None and "sequence_lens" not in dict(rnn.runtime_inputs)  # folded to a constant
    assert "RNN node 'rnn0': sequence_lens 'rnn0_seq_len' equals the sequence length (6) everywhere; no masking needed" in ir.notes
    counts = layer_counts(ir.xml)
    assert counts["RNNCell"] == 6 and counts["Select"] == 0
    report = ovrnn.validate(FIXTURES / "mx2onnx_rnn_tanh.onnx", ir=ir)
    assert "RNNSeq" in report.runtime_layer_types  # nothing stops the CPU plugin's fold


def test_spox_default_activations_on_a_forward_node_are_read_with_a_note():
    ir = ovrnn.convert_model(FIXTURES / "spox_rnn.onnx")
    assert ir.notes == (
        (
            "RNN node 'RNN_0': attribute 'activations' has 2 entries (Tanh, Tanh) for one direction; "
            "used the first (Tanh) as onnxruntime and OpenVINO do, and ignored 'Tanh'"
        ),
    )
    assert [c.activation for c in ir.rnns[0].chains] == ["Tanh"]


def test_two_activations_on_a_forward_node_use_the_first(tmp_path):
    from cases import Case, make_model

    model, _feeds, _ = make_model(Case("two", activations=("Relu", "Tanh")))
    ir = ovrnn.convert_model(model)
    assert ir.notes[-1].endswith("used the first (Relu) as onnxruntime and OpenVINO do, and ignored 'Tanh'")
    report = ovrnn.validate(model, ir=ir)
    assert report.passed and report.onnxruntime == "used", report.format()


@pytest.mark.parametrize(
    "op, direction, acts",
    [
        ("GRU", "forward", ("Relu", "Tanh", "Sigmoid", "Sigmoid")),
        ("GRU", "reverse", ("Relu", "Tanh", "Sigmoid", "Sigmoid")),
        ("LSTM", "forward", ("Sigmoid", "Relu", "Tanh", "Tanh", "Sigmoid", "Sigmoid")),
        ("LSTM", "reverse", ("Sigmoid", "Relu", "Tanh", "Tanh", "Sigmoid", "Sigmoid")),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(v),
)
def test_two_directions_of_activations_on_a_one_direction_gru_lstm_use_the_first(op, direction, acts):
    """The same leniency as for RNN, through the same normaliser. Checked on this machine:
    OpenVINO's own import uses the first k entries; onnxruntime 1.32 refuses such a GRU/LSTM node
    (it accepts it for RNN), so its cross-check runs on the node with the k entries used."""
    import onnxruntime as ort
    from cases import Case, make_model

    k = len(acts) // 2
    model, feeds, _ = make_model(Case("lenient", op=op, direction=direction, activations=acts))
    trimmed, _, _ = make_model(Case("lenient", op=op, direction=direction, activations=acts[:k]))
    ir = ovrnn.convert_model(model)
    node = model.graph.node[-1].name
    assert ir.notes == (
        (
            f"{op} node '{node}': attribute 'activations' has {2 * k} entries ({', '.join(acts)}) for one direction; "
            f"used the first {k} ({', '.join(acts[:k])}) as OpenVINO does (onnxruntime refuses such a node), "
            f"and ignored {', '.join(repr(a) for a in acts[k:])}"
        ),
    )
    with pytest.raises(Exception, match=f"num_directions_\\) \\* {k}"):  # onnxruntime refuses the node as written
        ort.InferenceSession(model.SerializeToString())
    report = ovrnn.validate(model, ir=ir)
    assert report.passed, report.format()
    want = ort.InferenceSession(trimmed.SerializeToString()).run(None, feeds)
    got = ovrnn.run(ir, feeds)
    for name, value in zip([o.name for o in model.graph.output], want):
        np.testing.assert_allclose(got[name], value, rtol=2e-5, atol=2e-5)


def test_dangling_tensor_is_an_invalid_model_named():
    proc = ovrnn_cli("convert", FIXTURES / "paddle2onnx_dangling.onnx", "-o", "/nonexistent/never.xml")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert (
        proc.stderr == "error: RNN node 'rnn_0': input 'initial_h' is tensor 'fill_constant_1.tmp_0', which no graph input, initializer or "
        "node provides\n"
    )
    with pytest.raises(ovrnn.InvalidModelError, match=re.escape("fill_constant_1.tmp_0")):
        ovrnn.validate(FIXTURES / "paddle2onnx_dangling.onnx")


def test_whole_model_inspect_shows_the_lone_node_table(tmp_path):
    """The same chain lines and lowering line whether ovrnn or OpenVINO's serializer wrote the IR."""
    from cases import Case, make_model

    model, _, _ = make_model(Case("i", direction="bidirectional", activations=("LeakyRelu", "Tanh"), alpha=(0.3,), T=4))
    lone = ovrnn.inspect(ovrnn.convert_model(model).save(tmp_path / "lone.xml")).format()
    model.graph.node.append(helper.make_node("Relu", ["Y"], ["Y_relu"]))
    model.graph.output.append(helper.make_tensor_value_info("Y_relu", TensorProto.FLOAT, None))
    whole = ovrnn.inspect(ovrnn.convert_model(model).save(tmp_path / "whole.xml")).format()

    def table(text):
        lines = text.splitlines()
        return [ln for ln in lines if ln.startswith(("  rnn ", "lowering:"))]

    assert table(lone) == [
        "  rnn fwd: 4 steps, LeakyRelu(alpha=0.3), explicit MatMul/Add/activation ops, hidden 5",
        "  rnn rev: 4 steps, Tanh, RNNCell, hidden 5, W shared by 4 cells",
        "lowering: cell",
    ]
    assert table(whole) == table(lone)


# --- the folding itself -----------------------------------------------------------------------------


def _lens_model(lens_from: str, batch):
    """RNN whose sequence_lens is computed from X: from its shape, or from its values."""
    T, I, H = 4, 3, 2
    nodes = [helper.make_node("Shape", ["X"], ["shape"]), helper.make_node("Gather", ["shape", "zero"], ["T"], axis=0)]
    if lens_from == "shape":
        nodes += [helper.make_node("Gather", ["shape", "one"], ["B"], axis=0), helper.make_node("Tile", ["T1", "B1"], ["lens64"])]
        nodes += [helper.make_node("Unsqueeze", ["T", "axes"], ["T1"]), helper.make_node("Unsqueeze", ["B", "axes"], ["B1"])]
    else:  # from the data: a runtime value, never folded
        nodes += [
            helper.make_node("ReduceMax", ["X"], ["m"], axes=[0, 2], keepdims=0),
            helper.make_node("Cast", ["m"], ["lens64"], to=TensorProto.INT64),
        ]
    nodes += [
        helper.make_node("Cast", ["lens64"], ["lens"], to=TensorProto.INT32),
        helper.make_node("RNN", ["X", "W", "R", "", "lens"], ["Y"], hidden_size=H),
    ]
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, batch, I])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.array(0, np.int64), "zero"),
            numpy_helper.from_array(np.array(1, np.int64), "one"),
            numpy_helper.from_array(np.array([0], np.int64), "axes"),
            numpy_helper.from_array(rng.uniform(-1, 1, (1, H, I)).astype(np.float32), "W"),
            numpy_helper.from_array(rng.uniform(-1, 1, (1, H, H)).astype(np.float32), "R"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_fold_uses_shapes_never_data():
    folded, names = fold_constants(_lens_model("shape", 2))
    assert "lens" in names and numpy_helper.to_array(next(t for t in folded.graph.initializer if t.name == "lens")).tolist() == [4, 4]
    assert [n.op_type for n in folded.graph.node] == ["RNN"]
    _, names = fold_constants(_lens_model("shape", "batch"))  # dynamic batch: the lengths' shape is unknown
    assert "lens" not in names
    _, names = fold_constants(_lens_model("data", 2))
    assert "lens" not in names and "m" not in names
    model = _lens_model("shape", 2)
    before = model.SerializeToString()
    fold_constants(model)
    assert model.SerializeToString() == before  # the caller's model is not touched


def test_input_shapes_given_with_input_reach_the_folding(tmp_path):
    model = _lens_model("shape", "batch")
    ir = ovrnn.convert_model(model, input="X[4,3,3]")
    assert ir.rnns[0].sequence_lens is None and layer_counts(ir.xml)["Select"] == 0
    dynamic = ovrnn.convert_model(model)
    assert dynamic.rnns[0].sequence_lens == "lens"  # a dynamic batch keeps the lengths a runtime value

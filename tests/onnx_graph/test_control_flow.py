"""Control flow around recurrent nodes: frozen inputs (``--input "sr->16000"``), constant Ifs
inlined, Loops unrolled where that makes a recurrent node lowerable. Fixtures:
tests/fixtures/control_flow, made by tools/make_control_flow_fixtures.py."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from conftest import ROOT, layer_counts, ovrnn_cli
from onnx import TensorProto, helper

import ovrnn
from ovrnn.errors import UsageError
from ovrnn.onnx.prepare import prepare

FIXTURES = ROOT / "tests" / "fixtures" / "control_flow"


def test_fixtures_are_what_the_tool_writes():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_control_flow_fixtures.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- frozen inputs --------------------------------------------------------------------------------


def _typed_inputs_model() -> onnx.ModelProto:
    """Inputs of every kind a value is given for: int64 scalar, int32 [3], bool scalar, float [2,?], uint8 [2]."""
    inputs = [
        helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        helper.make_tensor_value_info("mask", TensorProto.INT32, [3]),
        helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "n"]),
        helper.make_tensor_value_info("small", TensorProto.UINT8, [2]),
    ]
    nodes = [helper.make_node("Identity", [i.name], [f"{i.name}_out"]) for i in inputs]
    outputs = [helper.make_tensor_value_info(f"{i.name}_out", i.type.tensor_type.elem_type, None) for i in inputs]
    return helper.make_model(helper.make_graph(nodes, "typed", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _ov_cut_info():
    from openvino.tools.ovc.cli_parser import _InputCutInfo  # what ov.convert_model builds from input=

    return _InputCutInfo


FROZEN = [
    # id, input=, {name: value it is frozen to}
    ("scalar", "sr->16000", {"sr": np.array(16000, np.int64)}),
    ("scalar-shape-type", "sr[]{i64}->16000", {"sr": np.array(16000, np.int64)}),
    ("list-spaces", "mask[3]{i32}->[1 0 1]", {"mask": np.array([1, 0, 1], np.int32)}),
    ("list-commas", "mask->[1,0,1]", {"mask": np.array([1, 0, 1], np.int32)}),
    ("bool", "flag->true", {"flag": np.array(True)}),
    ("one-element-list-to-scalar", "sr->[8000]", {"sr": np.array(8000, np.int64)}),
    ("nested-2d", "x[2,2]->[[1.5 2] [3 -4e-1]]", {"x": np.array([[1.5, 2], [3, -0.4]], np.float32)}),
    ("flat-into-given-shape", "x[2,3]->[1 2 3 4 5 6]", {"x": np.arange(1, 7, dtype=np.float32).reshape(2, 3)}),
    (
        "with-shapes-one-list",
        "x[2,4],sr->16000,mask[3]{i32}->[1 0 1]",
        {"sr": np.array(16000, np.int64), "mask": np.array([1, 0, 1], np.int32)},
    ),
    ("repeated-flags", ["x[2,4]", "sr->16000", "small->[255 0]"], {"sr": np.array(16000, np.int64), "small": np.array([255, 0], np.uint8)}),
    ("ovrnn-cut-info", [ovrnn.InputCutInfo("sr", [], "i64", 16000)], {"sr": np.array(16000, np.int64)}),
    ("cut-info-alone", ovrnn.InputCutInfo("mask", [3], np.int32, [1, 0, 1]), {"mask": np.array([1, 0, 1], np.int32)}),
    ("tuple", [("sr", None, None, 8000), "x[2,4]"], {"sr": np.array(8000, np.int64)}),
    ("dict", {"sr": ovrnn.InputCutInfo("sr", None, int, 16000), "x": [2, 4]}, {"sr": np.array(16000, np.int64)}),
    ("numpy-value", [ovrnn.InputCutInfo("mask", None, None, np.array([1, 0, 1]))], {"mask": np.array([1, 0, 1], np.int32)}),
]


@pytest.mark.parametrize("given, want", [c[1:] for c in FROZEN], ids=[c[0] for c in FROZEN])
def test_frozen_input_becomes_a_constant(given, want):
    prepared = prepare(_typed_inputs_model(), given)
    model = prepared.view.model
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for name, value in want.items():
        assert name not in {i.name for i in model.graph.input}
        assert inits[name].dtype == value.dtype and inits[name].shape == value.shape, (name, inits[name])
        np.testing.assert_array_equal(inits[name], value)
    assert {f.name for f in prepared.frozen} == set(want)
    assert prepared.rt_info()["frozen_inputs"].keys() == want.keys()


def test_openvino_input_cut_info_is_accepted():
    import openvino as ov

    cut = _ov_cut_info()("sr", ov.PartialShape([]), ov.Type.i64, 16000)
    prepared = prepare(_typed_inputs_model(), [cut, ("x", [2, 4])])
    assert [(f.name, f.value.tolist(), f.value.dtype) for f in prepared.frozen] == [("sr", 16000, np.int64)]
    assert [str(d.value) for d in prepared.view.info("x").shape] == ["2", "4"]


BAD = [
    ("not-integral", "sr->16000.5", "input 'sr->16000.5': value 16000.5 does not fit int64; input 'sr' is declared int64 []"),
    ("out-of-range", "small->[256 0]", "input 'small->[256 0]': value 256 does not fit uint8; input 'small' is declared uint8 [2]"),
    ("not-a-bool", "flag->2", "input 'flag->2': value 2 does not fit bool; input 'flag' is declared bool []"),
    ("not-a-number", "sr->abc", "input 'sr->abc': value abc does not fit int64; input 'sr' is declared int64 []"),
    ("other-type", "sr{f32}->16000", "input 'sr{f32}->16000': type f32 given, but input 'sr' is declared int64 []"),
    ("type-only-other", "x{f16}", "input 'x{f16}': type f16 given, but input 'x' is declared float [2,'n']"),
    ("too-many", "sr->[16000 8000]", "input 'sr->[16000 8000]': value of shape [2] does not fit input 'sr', declared int64 []"),
    ("too-few", "mask->[1 0]", "input 'mask->[1 0]': value of shape [2] does not fit input 'mask', declared int32 [3]"),
    (
        "given-shape-vs-declared",
        "mask[4]->[1 0 1 1]",
        "input 'mask[4]->[1 0 1 1]': shape [4] given, but input 'mask' is declared int32 [3]",
    ),
    (
        "value-vs-given-shape",
        "x[2,2]->[1 2 3]",
        "input 'x[2,2]->[1 2 3]': value of shape [3] does not fit shape [2,2] given; input 'x' is declared float [2,'n']",
    ),
    ("dynamic-dim-needs-shape", "x->[1 2 3]", "input 'x->[1 2 3]': value of shape [3] does not fit input 'x', declared float [2,'n']"),
    ("ragged", "x->[[1 2] [3]]", "input 'x->[[1 2] [3]]': the value's nested lists differ in length"),
    ("no-such-input", "rate->16000", "input 'rate->16000': the model has no input 'rate' (inputs: sr, mask, flag, x, small)"),
    ("twice", "sr->1,sr[]", "input: input 'sr' is given twice"),
    ("no-value", "sr->", 'input \'sr->\': expected NAME[SHAPE]{TYPE}->VALUE, for example "sr->16000" or "mask[3]{i32}->[1 0 1]"'),
    ("no-name", "->1", "input '->1': a frozen input needs its name, as in \"sr->16000\""),
    (
        "unknown-type",
        "sr{int}->1",
        (
            "input 'sr{int}->1': unknown element type 'int' (expected one of f32, f16, f64, bf16, i8, i16, i32, i64, u8, u16, u32, "
            "u64, boolean)"
        ),
    ),
    (
        "python-value",
        [ovrnn.InputCutInfo("sr", [], np.int64, 0.5)],
        "input 'sr[]{i64}->0.5': value 0.5 does not fit int64; input 'sr' is declared int64 []",
    ),
]


@pytest.mark.parametrize("given, message", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_value_that_does_not_fit_is_a_usage_error_naming_both(given, message):
    with pytest.raises(UsageError) as err:
        prepare(_typed_inputs_model(), given)
    assert str(err.value) == message


def test_cli_frozen_input_error_is_one_line_exit_2(tmp_path):
    proc = ovrnn_cli("convert", FIXTURES / "if_scalar_lstm.onnx", "--input", "X[5,2,3],sr->16000.5", "-o", tmp_path / "m.xml")
    assert proc.returncode == 2
    assert proc.stderr == "error: --input 'sr->16000.5': value 16000.5 does not fit int64; input 'sr' is declared int64 []\n"
    assert not list(tmp_path.iterdir())


# --- constant Ifs -----------------------------------------------------------------------------------


def _xml_types(ir) -> set[str]:
    return set(layer_counts(ir.xml))


@pytest.mark.parametrize("sr, kept", [(16000, "lstm16k"), (8000, "lstm8k")])
def test_if_on_a_frozen_scalar_inlines_its_branch(sr, kept):
    report = ovrnn.validate(FIXTURES / "if_scalar_lstm.onnx", input=f"sr->{sr}")
    ir = ovrnn.convert_model(FIXTURES / "if_scalar_lstm.onnx", input=[ovrnn.InputCutInfo("sr", None, None, sr)])
    assert report.passed and report.onnxruntime == "used", report.format()
    assert {c.oracle for c in report.comparisons} == {"reference", "onnxruntime"}
    assert report.frozen_inputs == {"sr": f"int64 [] {sr}"}
    assert "frozen inputs (constants in the IR, fed to onnxruntime as such): sr = int64 [] " + str(sr) in report.format()
    assert [r.label for r in ir.rnns] == [kept] and all(c.form == "cell" and c.steps == 5 for c in ir.rnns[0].chains)
    types = _xml_types(ir)
    assert "If" not in types and "LSTMSequence" not in types and "LSTMCell" in types
    branch = "then" if sr == 16000 else "else"
    size = 4 if sr == 16000 else 6  # docs/control_flow.md quotes the 16 kHz note
    assert ir.notes[0] == (
        f"If node 'choose_sr': its condition 'is16k' is the constant {sr == 16000} once the frozen inputs and input shapes are known; "
        f"inlined its {branch} branch ({size} nodes, with LSTM '{kept}')"
    )
    assert _parameters(ir) == ["X", "h0"]


def _parameters(ir) -> list[str]:
    from lxml import etree

    root = etree.fromstring(ir.xml)
    return [el.get("name") for el in root.iter("layer") if el.get("type") == "Parameter"]


NESTED = [
    # id, --input, the GRU left, its steps
    ("batch1", "X[6,1,3]", "grubatch1", 6),
    ("short", "X[6,2,3]", "grushort", 6),
    ("long", "X[9,2,3]", "grulong", 9),
]


@pytest.mark.parametrize("shape, kept, steps", [c[1:] for c in NESTED], ids=[c[0] for c in NESTED])
def test_nested_ifs_on_shape_and_size_fold(shape, kept, steps):
    ir = ovrnn.convert_model(FIXTURES / "if_nested_shape.onnx", input=shape)
    assert [r.label for r in ir.rnns] == [kept] and ir.rnns[0].chains[0].steps == steps
    assert "If" not in _xml_types(ir) and "GRUCell" in _xml_types(ir)
    inlined = [n for n in ir.notes if n.startswith("If node")]
    assert len(inlined) == (2 if kept == "grubatch1" else 3), ir.notes
    report = ovrnn.validate(FIXTURES / "if_nested_shape.onnx", input=shape, ir=ir)
    assert report.passed and report.onnxruntime == "used", report.format()
    assert report.frozen_inputs == {}


def test_inspect_and_rt_info_record_what_was_frozen(tmp_path):
    out = tmp_path / "m.xml"
    proc = ovrnn_cli("convert", FIXTURES / "if_scalar_lstm.onnx", "--input", "sr[]{i64}->16000", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "note: If node 'choose_sr'" in proc.stderr
    text = ovrnn_cli("inspect", out).stdout
    assert "frozen inputs (constants now): sr = int64 [] 16000" in text
    assert ovrnn.inspect(out).ovrnn["frozen_inputs"] == {"sr": "int64 [] 16000"}
    assert [i.name for i in ovrnn.inspect(out).inputs] == ["X", "h0"]


def test_python_forms_write_the_same_ir():
    model = FIXTURES / "if_scalar_lstm.onnx"
    a = ovrnn.convert_model(model, input="sr->8000")
    b = ovrnn.convert_model(model, input=[ovrnn.InputCutInfo("sr", [], "i64", 8000)])
    c = ovrnn.convert_model(model, input=[("sr", None, None, np.int64(8000))])
    assert a.xml == b.xml == c.xml and a.bin == b.bin == c.bin


def test_validate_report_names_the_frozen_inputs(tmp_path):
    proc = ovrnn_cli(
        "validate", FIXTURES / "if_scalar_lstm.onnx", "--input", "sr->8000", "--json", tmp_path / "r.json", "--report", tmp_path / "rep"
    )
    assert proc.returncode == 0, proc.stderr
    import json

    data = json.loads((tmp_path / "r.json").read_text())
    assert data["frozen_inputs"] == {"sr": "int64 [] 8000"}
    assert json.loads((tmp_path / "rep" / "report.json").read_text())["frozen_inputs"] == {"sr": "int64 [] 8000"}
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "- frozen inputs (constants in the IR, fed to onnxruntime as such): `sr` = int64 [] 8000" in md
    assert "--input 'sr->8000'" in md  # the rerun command freezes it too
    assert "frozen inputs (constants in the IR, fed to onnxruntime as such): sr = int64 [] 8000" in proc.stdout


def test_if_on_a_runtime_input_stays_for_the_body_lowering():
    model = onnx.load(FIXTURES / "if_rnn_runtime.onnx")
    prepared = prepare(model)
    assert prepared.view.model is model and not prepared.notes and not prepared.changed


def _two_ifs_reusing_names() -> onnx.ModelProto:
    """Two constant Ifs whose branches both define tensor 't' and node 'add' (legal: sibling
    scopes), and a top-level tensor 'y1' that a branch name would clash with once inlined."""

    def branch(k: int, value: float) -> onnx.GraphProto:
        return helper.make_graph(
            [
                helper.make_node("Constant", [], ["t"], name="const", value=onnx.numpy_helper.from_array(np.float32(value))),
                helper.make_node("Add", ["x", "t"], ["y1" if k == 2 else "s"], name="add"),
            ],
            f"b{k}",
            [],
            [helper.make_tensor_value_info("y1" if k == 2 else "s", TensorProto.FLOAT, [2])],
        )

    nodes = [
        helper.make_node("Constant", [], ["yes"], name="yes", value=onnx.numpy_helper.from_array(np.array(True))),
        helper.make_node("If", ["yes"], ["y1"], name="first", then_branch=branch(1, 1.0), else_branch=branch(1, -1.0)),
        helper.make_node("If", ["yes"], ["y2"], name="second", then_branch=branch(2, 2.0), else_branch=branch(2, -2.0)),
    ]
    graph = helper.make_graph(
        nodes,
        "two_ifs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("y2", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_inlined_names_stay_unique():
    from ovrnn.onnx.control_flow.passes import fold_control_flow
    from ovrnn.reference import run_model

    model = _two_ifs_reusing_names()
    before = model.SerializeToString()
    folded, notes = fold_control_flow(model)
    assert model.SerializeToString() == before  # the caller's model is not edited
    onnx.checker.check_model(folded)
    outputs = [o for n in folded.graph.node for o in n.output] + [t.name for t in folded.graph.initializer]
    assert len(outputs) == len(set(outputs)), outputs
    names = [n.name for n in folded.graph.node if n.name]
    assert len(names) == len(set(names)) and {"first/add", "second/add"} <= set(names), names
    assert not any(n.op_type == "If" for n in folded.graph.node) and len(notes) == 2
    x = np.array([1.0, 2.0], np.float32)
    got = run_model(folded, {"x": x})
    np.testing.assert_array_equal(got["y1"], x + 1)
    np.testing.assert_array_equal(got["y2"], x + 2)


# --- Loops --------------------------------------------------------------------------------------------


def test_loop_whose_steps_change_per_iteration_is_unrolled_to_cells():
    ir = ovrnn.convert_model(FIXTURES / "loop_gru_chunks.onnx")
    assert ir.notes[0] == (
        "Loop node 'passes': trip count 3 and condition are constants, and the input X 'x_chunk' of its GRU node 'gru' has a "
        "shape (step count) "
        "known only per iteration; unrolled into 3 copies of its body, so that its GRU 'gru' can be lowered to cells"
    )
    counts = layer_counts(ir.xml)
    assert counts["GRUCell"] == 12 and not {"Loop", "TensorIterator", "GRUSequence"} & set(counts)
    assert [(r.label, r.seq_length) for r in ir.rnns] == [("gru", 4), ("passes/iter1/gru", 4), ("passes/iter2/gru", 4)]
    report = ovrnn.validate(FIXTURES / "loop_gru_chunks.onnx", ir=ir)
    assert report.passed and report.onnxruntime == "used", report.format()


def test_loop_whose_body_is_lowerable_in_place_stays():
    from ovrnn.onnx.control_flow.passes import fold_control_flow

    model = onnx.load(FIXTURES / "loop_gru_refine.onnx")
    asked = []
    folded, notes = fold_control_flow(model, lambda loop, body: asked.append(loop.name))
    assert asked == ["passes"] and folded is model and notes == []
    unrolled, notes = fold_control_flow(model, lambda loop, body: "a reason")
    assert [n.op_type for n in unrolled.graph.node].count("GRU") == 3 and "and a reason; unrolled into 3 copies" in notes[0]


def _loop_variant(change) -> onnx.ModelProto:
    model = onnx.load(FIXTURES / "loop_gru_chunks.onnx")
    change(model.graph)
    return model


def _runtime_trip_count(g):
    g.input.append(helper.make_tensor_value_info("M", TensorProto.INT64, []))
    g.node[2].input[0] = "M"


def _early_exit(g):
    body = g.node[2].attribute[0].g
    cond = next(n for n in body.node if n.name == "cond_out")
    cond.op_type = "Not"


def _no_recurrent_node(g):
    body = g.node[2].attribute[0].g
    gru = next(n for n in body.node if n.op_type == "GRU")
    gru.op_type, gru.input[:] = "Identity", ["h_in"]
    del gru.attribute[:]
    gru.output[:] = ["", "h_out"][1:]


@pytest.mark.parametrize(
    "change",
    [_runtime_trip_count, _early_exit, _no_recurrent_node],
    ids=["runtime-trip-count", "condition-from-the-body", "no-recurrent-node"],
)
def test_loops_that_are_not_unrolled(change):
    from ovrnn.onnx.control_flow.passes import fold_control_flow

    model = _loop_variant(change)
    folded, notes = fold_control_flow(model, lambda loop, body: "never lowerable")
    assert [n.op_type for n in folded.graph.node if n.op_type == "Loop"] == ["Loop"] and notes == []


@pytest.mark.parametrize("steps", [8, 12])
def test_torchscript_loop_with_a_computed_trip_count_and_a_stacked_list(steps):
    """Trip count Shape(X)[0] // 4, the condition an outer Constant through Identity, outputs
    appended to a sequence and stacked: unrolled, and the sequence becomes a Concat."""
    model = FIXTURES / "loop_gru_torchscript.onnx"
    ir = ovrnn.convert_model(model, input=f"X[{steps},2,3]")
    counts = layer_counts(ir.xml)
    assert counts["GRUCell"] == steps and not {"Loop", "TensorIterator", "GRUSequence"} & set(counts), counts
    assert ir.notes[0].startswith(f"Loop node 'chunks': trip count {steps // 4} and condition are constants")
    report = ovrnn.validate(model, input=f"X[{steps},2,3]", ir=ir)
    assert report.passed and report.onnxruntime == "used", report.format()
    assert next(c for c in report.comparisons if c.output == "ys").shape == [steps // 4, 2, 4]


def test_frozen_input_of_a_lone_rnn_model():
    """No control flow: freezing sequence_lens makes it a constant of ovrnn's own emitter path."""
    from ovrnn.examples import DEMO_MODEL

    ir = ovrnn.convert_model(DEMO_MODEL, input="X[8,2,4],sequence_lens->[8 5]")
    assert _parameters(ir) == ["X", "initial_h"]
    assert b'<info name="frozen_inputs">' in ir.xml and b'<info name="sequence_lens" value="int32 [2] [8 5]"/>' in ir.xml
    report = ovrnn.validate(DEMO_MODEL, input="X[8,2,4],sequence_lens->[8 5]", ir=ir)
    assert report.passed and report.onnxruntime == "used" and report.frozen_inputs == {"sequence_lens": "int32 [2] [8 5]"}, report.format()


def test_validate_of_a_given_ir_uses_the_values_it_was_converted_with():
    ir = ovrnn.convert_model(FIXTURES / "if_scalar_lstm.onnx", input="sr->8000")
    report = ovrnn.validate(FIXTURES / "if_scalar_lstm.onnx", ir=ir)
    assert report.passed and report.frozen_inputs == {"sr": "int64 [] 8000"}, report.format()


def test_loop_whose_body_fixes_the_step_count_stays_and_is_lowered_inside():
    ir = ovrnn.convert_model(FIXTURES / "loop_gru_refine.onnx")
    assert not [n for n in ir.notes if n.startswith("Loop node")], ir.notes
    counts = layer_counts(ir.xml)
    assert counts["Loop"] == 1 and counts["GRUCell"] == 4 and "GRUSequence" not in counts, counts
    report = ovrnn.validate(FIXTURES / "loop_gru_refine.onnx", ir=ir)
    assert report.passed and report.onnxruntime == "used", report.format()


def test_loop_kept_by_onnx_shapes_but_refused_inside_is_unrolled_after_all(monkeypatch):
    """Should onnx's shape inference call a body's step count static where OpenVINO's does not, the
    body lowering refuses the node and convert_model unrolls the Loop instead."""
    import ovrnn.onnx.prepare as inputs

    monkeypatch.setattr(inputs, "lowerable_in_body", lambda loop, body: None)  # "static": the Loop stays
    ir = ovrnn.convert_model(FIXTURES / "loop_gru_chunks.onnx")
    assert ir.notes[0] == (
        "Loop node 'passes': trip count 3 and condition are constants, and OpenVINO's shape inference leaves the step count of "
        "its body's recurrent "
        "node dynamic; unrolled into 3 copies of its body, so that its GRU 'gru' can be lowered to cells"
    )
    assert layer_counts(ir.xml)["GRUCell"] == 12 and "Loop" not in layer_counts(ir.xml)


@pytest.mark.parametrize("use_a, kept", [("true", "a_gru"), ("false", "b_gru")])
def test_if_inside_a_loop_that_stays_folds_on_a_frozen_input(use_a, kept):
    """A runtime trip count keeps the Loop; the If in its body tests the frozen use_a (an outer
    constant now) and is inlined there, leaving one GRU to be lowered inside the body."""
    model = ROOT / "tests" / "fixtures" / "bodies" / "loop_if_gru.onnx"
    ir = ovrnn.convert_model(model, input=f"use_a->{use_a}")
    assert ir.notes[0].startswith(f"If node 'inner_if': its condition 'use_a' is the constant {use_a == 'true'} once")
    assert f"with GRU '{kept}'" in ir.notes[0]
    counts = layer_counts(ir.xml)
    assert counts["Loop"] == 1 and "If" not in counts and counts["GRUCell"] > 0 and "GRUSequence" not in counts, counts
    report = ovrnn.validate(model, input=f"use_a->{use_a}", ir=ir)
    assert report.passed and report.onnxruntime == "used", report.format()


def test_stateful_nodes_keep_the_loop():
    """--stateful per node: unrolled copies would each carry a state of their own where the Loop
    hands h from iteration to iteration, so the Loop stays and its node is refused as in any body."""
    with pytest.raises(ovrnn.OvrnnError) as err:
        ovrnn.convert_model(FIXTURES / "loop_gru_chunks.onnx", stateful=True)
    assert "GRU node 'gru' is inside the body of Loop node 'passes'" in str(err.value)

"""Recurrent nodes inside If/Loop/Scan bodies that stay: an If on a runtime condition, a Loop whose
trip count is an input, a Scan. Each node is lowered to ovrnn's cell chain inside its body, with the
same normaliser and lowering as at the top level, and matches the float64 reference and
onnxruntime; a body node whose step count cannot be known at conversion time is refused, or left
to OpenVINO's frontend with --allow-sequence-ops.

Fixtures: tools/make_body_fixtures.py (T=4, batch 2, input 3, hidden 4).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import FIXTURE_DIR, ROOT, assert_close, ovrnn_cli, run_ir
from lxml import etree

import ovrnn
from ovrnn.reference import run_model

FIXTURES = FIXTURE_DIR / "bodies"
TOL = (2e-5, 2e-5)
CELLS = {"RNN": "RNNCell", "GRU": "GRUCell", "LSTM": "LSTMCell"}
SEQUENCE_OPS = {"RNNSequence", "GRUSequence", "LSTMSequence"}
# (fixture, op, cells in the bodies, the runs: input overrides per run)
CASES = [
    (f"{kind}_{op.lower()}", op, cells, runs)
    for op in ("RNN", "GRU", "LSTM")
    for kind, cells, runs in (
        ("if", 8, [{"cond": np.array(True)}, {"cond": np.array(False)}]),  # both branches, 4 steps each
        ("loop", 4, [{"M": np.array(1, np.int64)}, {"M": np.array(3, np.int64)}]),
        ("scan", 4, [{}]),
    )
]
CASES += [
    ("loop_if_gru", "GRU", 8, [{"use_a": np.array(True)}, {"use_a": np.array(False), "M": np.array(3, np.int64)}]),  # nested bodies
    ("if_shared_gru", "GRU", 8, [{"cond": np.array(True)}, {"cond": np.array(False)}]),  # told apart by attributes only
]
IDS = [
    f"{op.lower()}-in-{name.split('_')[0]}" + {"if": "-runtime-cond", "loop": "-trip-count-input", "scan": ""}[name.split("_")[0]]
    for name, op, _, _ in CASES[:9]
]
IDS += ["gru-in-if-in-loop-body", "gru-in-if-branches-sharing-inputs"]
REFUSAL = (
    "GRU node 'body_gru' is inside the body of Loop node 'loop', and its sequence length (dim 0 of X 'x_in') is not known at "
    "conversion time: X is computed from 'x_in', a value the Loop carries from one iteration to the next, so its length can "
    "change from iteration to iteration; a GRUCell chain needs a fixed number of steps, and ovrnn does not leave the node to "
    "OpenVINO's GRUSequence, which reads parts of the GRU spec differently; {flag} lets OpenVINO's ONNX frontend convert every "
    "GRU node instead"
)


def _fixture(name: str):
    return FIXTURES / f"{name}.onnx", dict(np.load(FIXTURES / f"{name}.inputs.npz"))


def _layers(xml: bytes) -> tuple[Counter, Counter]:
    """(layer types at the top level, layer types inside If/Loop/TensorIterator bodies)."""
    root = etree.fromstring(xml)
    top = Counter(el.get("type") for el in root.find("layers").findall("layer"))
    inner = Counter(el.get("type") for body in root.iter("body", "then_body", "else_body") for el in body.find("layers").findall("layer"))
    return top, inner


@pytest.mark.parametrize("name, op, cells, runs", CASES, ids=IDS)
def test_body_nodes_become_cell_chains_and_match_both_oracles(name, op, cells, runs):
    path, feeds = _fixture(name)
    ir = ovrnn.convert_model(path)
    top, inner = _layers(ir.xml)
    assert inner[CELLS[op]] == cells and not (SEQUENCE_OPS & (set(top) | set(inner))), inner
    assert [s.op for s in ir.rnns] == [op] * (cells // 4) and ir.notes == ()
    session = ort.InferenceSession(path.read_bytes())
    outputs = []
    for run in runs:
        fd = {**feeds, **run}
        got = run_ir(ir, fd)
        want = run_model(onnx.load(path), fd)
        theirs = dict(zip([o.name for o in session.get_outputs()], session.run(None, fd)))
        for out in want:
            assert_close(got[out], want[out], *TOL, f"{name} {run} {out} vs reference")
            assert_close(got[out], theirs[out], *TOL, f"{name} {run} {out} vs onnxruntime")
        outputs.append(got)
    if len(runs) > 1:  # the runs took different paths (branches, trip counts)
        first = next(iter(outputs[0]))
        assert not np.allclose(outputs[0][first][-1], outputs[1][first][-1])


def test_inspect_shows_the_chains_inside_bodies(tmp_path):
    path, _ = _fixture("if_lstm")
    ovrnn.convert_model(path).save(tmp_path / "m.xml")
    report = ovrnn.inspect(tmp_path / "m.xml")
    assert [(c.rnn, c.direction, c.steps, c.cell, c.lowering) for c in report.chains] == [
        ("else_lstm", "rev", 4, "LSTMCell", "cell"),
        ("then_lstm", "fwd", 4, "LSTMCell", "cell"),
    ]
    assert report.body_layer_counts["LSTMCell"] == 8 and report.layer_counts["If"] == 1 and report.sequence_layers == {}
    assert "inside If/Loop/TensorIterator bodies: " in report.format()


def test_rnn_in_an_if_on_a_runtime_bool_from_the_control_flow_fixtures():
    """tools/make_control_flow_fixtures.py's if_rnn_runtime: an RNN per branch, the If stays."""
    path = FIXTURE_DIR / "control_flow" / "if_rnn_runtime.onnx"
    model = onnx.load(path)
    ir = ovrnn.convert_model(path)
    top, inner = _layers(ir.xml)
    assert top["If"] == 1 and inner["RNNCell"] == 10 and not SEQUENCE_OPS & set(inner)
    rng = np.random.default_rng(0)
    feeds = {"X": rng.uniform(-1, 1, (5, 2, 3)).astype(np.float32), "h0": rng.uniform(-1, 1, (1, 2, 4)).astype(np.float32)}
    session = ort.InferenceSession(path.read_bytes())
    for flag in (True, False):
        fd = {**feeds, "use_a": np.array(flag)}
        got, want = run_ir(ir, fd), run_model(model, fd)
        theirs = session.run(["Y_h"], fd)[0]
        assert_close(got["Y_h"], want["Y_h"], *TOL, f"use_a={flag} vs reference")
        assert_close(got["Y_h"], theirs, *TOL, f"use_a={flag} vs onnxruntime")


def test_fixtures_are_what_the_tool_writes():
    import subprocess
    import sys

    tool = ROOT / "tools" / "make_body_fixtures.py"
    proc = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_validate_runs_a_loop_body_against_both_oracles():
    """validate's reference runs the Loop body too (onnx.reference's own Loop runs no iteration
    without a cond input and stacks scan outputs wrongly; control.py replaces it)."""
    path, _ = _fixture("loop_gru")
    report = ovrnn.validate(path, seed=1)
    assert report.passed and report.onnxruntime == "used"
    assert {(c.output, c.oracle) for c in report.comparisons} == {
        (o, k) for o in ("h_final", "h_each") for k in ("reference", "onnxruntime")
    }


def test_reference_loop_with_trip_count_and_scan_outputs():
    path, feeds = _fixture("loop_rnn")
    session = ort.InferenceSession(path.read_bytes())
    for m in (0, 2):
        fd = {**feeds, "M": np.array(m, np.int64)}
        want = dict(zip([o.name for o in session.get_outputs()], session.run(None, fd)))
        got = run_model(onnx.load(path), fd)
        assert got["h_each"].shape == want["h_each"].shape == (m, 1, 2, 4)
        assert_close(got["h_final"], want["h_final"].astype(np.float64), *TOL, f"M={m}")


def test_steps_from_the_loops_own_state_are_refused(tmp_path):
    path, _ = _fixture("loop_growing_gru")
    with pytest.raises(ovrnn.UnsupportedFeatureError) as info:
        ovrnn.convert_model(path)
    assert str(info.value) == REFUSAL.format(flag="allow_sequence_ops=True")
    r = ovrnn_cli("convert", path, "-o", tmp_path / "m.xml")
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"error: {REFUSAL.format(flag='--allow-sequence-ops')}\n")
    assert list(tmp_path.iterdir()) == []
    model = onnx.load(path)  # the carried X declared without any shape (as TorchScript writes it): the same reason
    body = model.graph.node[0].attribute[0].g
    body.input[2].type.tensor_type.ClearField("shape")
    body.output[1].type.tensor_type.ClearField("shape")
    with pytest.raises(ovrnn.UnsupportedFeatureError) as info:
        ovrnn.convert_model(model)
    assert str(info.value) == REFUSAL.format(flag="allow_sequence_ops=True")


def test_allow_sequence_ops_leaves_the_op_to_openvino_with_a_note(tmp_path):
    path, feeds = _fixture("loop_growing_gru")
    ir = ovrnn.convert_model(path, allow_sequence_ops=True)
    _top, inner = _layers(ir.xml)
    assert inner["GRUSequence"] == 1 and not inner["GRUCell"] and ir.rnns == ()
    (note,) = ir.notes
    assert note.startswith(
        "GRU nodes inside If/Loop/Scan bodies: every GRU node was converted by OpenVINO's ONNX frontend (GRUSequence), not "
        "lowered to cells "
        "(allow_sequence_ops=True: GRU node 'body_gru' is inside the body of Loop node 'loop', and its sequence length"
    )
    want = run_model(onnx.load(path), feeds)
    got = run_ir(ir, feeds)
    assert_close(got["h_each"], want["h_each"], *TOL, "h_each")
    r = ovrnn_cli("convert", path, "-o", tmp_path / "m.xml", "--allow-sequence-ops")
    assert r.returncode == 0 and "note: GRU nodes inside If/Loop/Scan bodies: every GRU node was converted" in r.stderr + r.stdout
    r = ovrnn_cli("validate", path, "--allow-sequence-ops", "--seed", "3")
    assert r.returncode == 0 and r.stdout.rstrip().endswith("PASS"), r.stdout + r.stderr


def test_dynamic_steps_from_a_graph_input_name_the_input(tmp_path):
    """A body node reading an outer input with a dynamic T gets the top level's --input advice."""
    path, _ = _fixture("if_gru")
    model = onnx.load(path)
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "T"
    with pytest.raises(ovrnn.UsageError) as info:
        ovrnn.convert_model(model)
    assert str(info.value) == (
        "GRU node 'then_gru': the sequence length (dim 0 of X 'X') is dynamic (?), and the GRUCell chain needs a fixed number of steps; "
        'fix it with input="X[T,2,3]" (T = number of time steps)'
    )
    ir = ovrnn.convert_model(model, input="X[4,2,3]")
    assert _layers(ir.xml)[1]["GRUCell"] == 8


def _scan_with_dynamic_slice(outer_dynamic: bool) -> onnx.ModelProto:
    """scan_gru with the body's slice declared [t, 2, 3] (and the outer XS [3, t, 2, 3])."""
    model = onnx.load(FIXTURES / "scan_gru.onnx")
    model.graph.node[0].attribute[0].g.input[-1].type.tensor_type.shape.dim[0].dim_param = "t"
    if outer_dynamic:
        model.graph.input[-1].type.tensor_type.shape.dim[1].dim_param = "t"
    return model


def test_a_scan_slice_declared_dynamic_takes_the_outer_inputs_dims():
    """OpenVINO's frontend types a Scan body's inputs from their declarations; ovrnn fills the
    dims the scanned input fixes (onnx/control_flow/body_inputs.py)."""
    _, feeds = _fixture("scan_gru")
    model = _scan_with_dynamic_slice(False)
    ir = ovrnn.convert_model(model)
    assert _layers(ir.xml)[1]["GRUCell"] == 4
    got, want = run_ir(ir, feeds), run_model(model, feeds)
    assert_close(got["h_each"], want["h_each"], *TOL, "h_each")


def test_a_scan_slice_of_a_dynamic_input_names_the_input():
    model = _scan_with_dynamic_slice(True)
    with pytest.raises(ovrnn.UsageError) as info:
        ovrnn.convert_model(model)
    assert str(info.value) == (
        "GRU node 'body_gru' is inside the body of Scan node 'scan' and reads X 'x_t', a slice of input 'XS': its sequence "
        "length comes from "
        "dim 1 of 'XS', which is dynamic ('t'), and the GRUCell chain needs a fixed number of steps; fix it with "
        'input="XS[3,T,2,3]" (T = number of time steps)'
    )
    assert _layers(ovrnn.convert_model(model, input="XS[3,4,2,3]").xml)[1]["GRUCell"] == 4


def test_bytes_are_the_same_on_every_conversion():
    """Unnamed ops inside bodies (and the frontend's copy of a Loop's condition, Constant_N_1) are
    numbered by position, not by OpenVINO's process-wide counter."""
    for name in ("loop_if_gru", "scan_lstm"):
        path, _ = _fixture(name)
        first, second = ovrnn.convert_model(path), ovrnn.convert_model(path)
        assert (first.xml, first.bin) == (second.xml, second.bin), name


def test_loop_carried_states_declared_without_shape():
    """TorchScript declares a Loop's carried values without shapes: initial_h/initial_c then reach
    the node with a dynamic rank, and the lowering takes their shape from the spec."""
    path, feeds = _fixture("loop_lstm")
    model = onnx.load(path)
    body = model.graph.node[0].attribute[0].g
    for vi in list(body.input)[2:] + list(body.output)[1:]:
        vi.type.tensor_type.ClearField("shape")
    ir = ovrnn.convert_model(model)
    assert _layers(ir.xml)[1]["LSTMCell"] == 4
    got, want = run_ir(ir, feeds), run_model(model, feeds)
    for out in want:
        assert_close(got[out], want[out], *TOL, out)


def test_validate_draws_a_runtime_condition_as_a_fair_coin():
    """A bool input (an If's runtime condition) is True or False with equal odds over seeds, so
    `validate --seed` reaches either branch (it was True two times in three)."""
    from ovrnn.runtime import engine
    from ovrnn.validation.compare import random_inputs

    path, _ = _fixture("if_rnn")
    ir = ovrnn.convert_model(path)
    compiled = engine.compile_ir(engine.read_model(ir), "CPU", "f32")
    draws = [bool(random_inputs(compiled, ir, seed=s, batch=2)["cond"]) for s in range(200)]
    assert 0.4 < np.mean(draws) < 0.6
    both = {draws[0]: 0, not draws[0]: draws.index(not draws[0])}
    for value, seed in both.items():
        assert ovrnn.validate(path, seed=seed).passed, f"cond={value}"

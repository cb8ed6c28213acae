"""Every case of the table (RNN, GRU, LSTM): ONNX -> IR -> OpenVINO CPU (f32) vs the float64
reference, no dead layers, one cell per step per direction the cell can express (explicit ops for
the rest), the matmul lowering and the whole-model path; then the paths of one op or several."""

from __future__ import annotations

import numpy as np
import pytest
from cases import CASES, DTYPES, TOL, Case, make_model
from conftest import HIDDEN_STEPS, assert_close, dead_layers, layer_counts, run_ir

import ovrnn
from ovrnn import reference
from ovrnn.device.plugins import NPU_IR_TYPES

CELL = {"RNN": "RNNCell", "GRU": "GRUCell", "LSTM": "LSTMCell"}
DYNAMIC_ONLY = {"ShapeOf", "Gather", "Broadcast"}  # what a dynamic shape adds to the ops NPU imports


def cell_directions(case: Case) -> int:
    """Directions the cell expresses: native activations; for LSTM no peepholes, no input_forget."""
    if case.op == "LSTM" and (case.peepholes or case.input_forget):
        return 0
    return case.native_directions()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_reference(case):
    model, feeds, flags = make_model(case)
    ir = ovrnn.convert_model(model, flags)
    got = run_ir(ir, feeds)
    want = reference.run_model(model, feeds)
    atol, rtol = TOL[case.dtype]
    assert set(got) == set(case.outputs)
    for name in case.outputs:
        assert got[name].dtype == np.dtype(DTYPES[case.dtype][0]), f"{name} keeps the ONNX element type"
        assert_close(got[name], want[name], atol, rtol, f"{case.id} {name}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_no_dead_layers(case):
    """OpenVINO silently drops layers that reach no Result: we must not write any."""
    model, _, flags = make_model(case)
    assert dead_layers(ovrnn.convert_model(model, flags).xml) == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_one_cell_per_step_per_cell_direction(case):
    model, _, flags = make_model(case)
    ir = ovrnn.convert_model(model, flags)
    counts = layer_counts(ir.xml)
    assert counts[CELL[case.op]] == case.T * cell_directions(case)
    assert not any(counts[t] for t in HIDDEN_STEPS) and not any(counts[c] for op, c in CELL.items() if op != case.op)
    (summary,) = ir.rnns
    assert summary.op == case.op
    assert [c.form for c in summary.chains].count("cell") == cell_directions(case)
    # explicit directions project X for all steps with one MatMul, then one MatMul per step (H·Rᵀ;
    # GRU linear_before_reset=1: one for all three gates; =0: Rz, Rr and Rh, one a gate, as the CPU
    # fuses best, docs/performance.md); RNN leaves out the first step's when there is no initial_h (H0 = 0)
    explicit = case.num_directions - cell_directions(case)
    per_step = (1 if case.linear_before_reset else 3) if case.op == "GRU" else 1
    steps = case.T - 1 if case.op == "RNN" and not case.h0 else case.T
    assert counts["MatMul"] == explicit * (1 + per_step * steps)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matmul_lowering_matches_reference_and_cell_lowering(case):
    """--lowering matmul: explicit ops for every direction, no cell at all, only ops NPU imports
    (and the dynamic-shape ones); the same numbers as the reference and as the cell lowering."""
    model, feeds, flags = make_model(case)
    cells = run_ir(ovrnn.convert_model(model, flags), feeds)
    ir = ovrnn.convert_model(model, flags, lowering="matmul")
    got = run_ir(ir, feeds)
    atol, rtol = TOL[case.dtype]
    want = reference.run_model(model, feeds)
    assert set(want) == set(case.outputs)
    for name, value in want.items():
        assert_close(got[name], value, atol, rtol, f"{case.id} {name} vs reference")
        assert_close(got[name], np.asarray(cells[name], np.float64), atol, rtol, f"{case.id} {name} vs cell lowering")
        assert got[name].dtype == np.dtype(DTYPES[case.dtype][0])
    types = set(layer_counts(ir.xml))
    assert not types & set(CELL.values())
    assert types <= NPU_IR_TYPES | DYNAMIC_ONLY, types - NPU_IR_TYPES


@pytest.mark.parametrize(
    "case",
    [
        Case("fold-gru-bidir", op="GRU", T=16, direction="bidirectional", h0=True),
        Case("fold-gru-lbr1-lens", op="GRU", T=16, linear_before_reset=1, lens=(16, 9)),
        Case("fold-lstm-bidir-h0-c0", op="LSTM", T=16, direction="bidirectional", h0=True, c0=True),
        Case("fold-lstm-lens-no-Y_c", op="LSTM", T=16, lens=(16, 7), outputs=("Y", "Y_h")),
    ],
    ids=lambda c: c.id,
)
def test_cell_chains_fold_into_the_cpu_sequence_kernel(case):
    """OpenVINO's CPU plugin folds each direction's chain into one RNNSeq, as for RNNCell chains."""
    from ovrnn.runtime import engine as runtime
    from ovrnn.runtime.runner import infer

    model, feeds, _ = make_model(case)
    ir = ovrnn.convert_model(model)
    compiled = runtime.compile_ir(runtime.read_model(ir), "CPU", "f32")
    types = compiled.runtime_layer_types()
    assert types.get("RNNSeq") == case.num_directions and not types.get("RNNCell"), types
    got, want = infer(compiled, feeds), reference.run_model(model, feeds)
    for name in case.outputs:
        assert_close(got[name], want[name], *TOL[case.dtype], name)


def test_lstm_weights_are_stored_once_in_cell_order():
    """One permuted copy of W, R and B in the .bin, whatever the number of steps and pieces."""
    case = Case("store", op="LSTM", T=40, direction="bidirectional", hidden=8, input_size=6)
    model, _, _ = make_model(case)
    ir = ovrnn.convert_model(model, chunk_steps=8)
    H, I, D = case.hidden, case.input_size, 2
    weights = 4 * (D * 4 * H * I + D * 4 * H * H + D * 4 * H)  # float32 W, R and B = Wb + Rb
    assert weights <= len(ir.bin) < weights + 256


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_case_inside_a_whole_model(case):
    """The whole-model path (frontend + realize) lowers every case of the table too: each case with a
    Relu after its first output, so the model is no longer made of recurrent nodes only."""
    from onnx import helper

    model, feeds, flags = make_model(case)
    first = model.graph.output[0]
    model.graph.node.append(helper.make_node("Relu", [first.name], [f"{first.name}_relu"], name="after"))
    model.graph.output.append(helper.make_tensor_value_info(f"{first.name}_relu", first.type.tensor_type.elem_type, None))
    ir = ovrnn.convert_model(model, flags)
    counts = layer_counts(ir.xml)
    assert counts[CELL[case.op]] == case.T * cell_directions(case)
    assert not any(counts[t] for t in HIDDEN_STEPS)
    got, want = run_ir(ir, feeds), reference.run_model(model, feeds)
    assert set(got) == set(want)
    for name in want:
        assert_close(got[name], want[name], *TOL[case.dtype], f"{case.id} {name}")


def test_mixed_rnn_gru_lstm_whole_model():
    """RNN -> Squeeze -> GRU -> Squeeze -> Tanh -> LSTM in one model: every recurrent node lowered
    by ovrnn (native and explicit directions), the rest by OpenVINO's frontend."""
    from conftest import rnn_gru_lstm_model, tagged_node
    from onnx import helper, numpy_helper

    rnn, rfeeds, _ = make_model(Case("m-rnn", T=5, hidden=4, input_size=2, activations=("Relu",), lens=(5, 2)))
    gru, _, _ = make_model(
        Case(
            "m-gru",
            op="GRU",
            T=5,
            hidden=6,
            input_size=4,
            direction="bidirectional",
            activations=("Sigmoid", "Tanh", "HardSigmoid", "Softsign"),
            linear_before_reset=1,
        )
    )
    lstm, _, _ = make_model(Case("m-lstm", op="LSTM", T=5, hidden=3, input_size=12, peepholes=True))
    inits = [numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    nodes = []
    for tag, m, x, outs in (("r", rnn, "X", ["rY"]), ("g", gru, "rY3", ["gY"]), ("l", lstm, "gT", ["Y", "Y_h", "Y_c"])):
        node, weights = tagged_node(m, tag, x, outs)
        nodes.append(node)
        inits += weights
    nodes[1:1] = [helper.make_node("Squeeze", ["rY", "axis1"], ["rY3"])]
    nodes[3:3] = [
        helper.make_node("Transpose", ["gY"], ["gYt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["gYt", "shape"], ["gY3"]),
        helper.make_node("Tanh", ["gY3"], ["gT"]),
    ]
    inits.append(numpy_helper.from_array(np.array([5, 2, 12], np.int64), "shape"))
    model = rnn_gru_lstm_model(nodes, inits, 5)
    feeds = {"X": rfeeds["X"], "rsequence_lens": rfeeds["sequence_lens"]}
    ir = ovrnn.convert_model(model)
    assert [(r.op, [c.form for c in r.chains]) for r in ir.rnns] == [
        ("RNN", ["cell"]),
        ("GRU", ["cell", "explicit"]),
        ("LSTM", ["explicit"]),
    ]
    counts = layer_counts(ir.xml)
    assert (counts["RNNCell"], counts["GRUCell"], counts["LSTMCell"]) == (5, 5, 0)
    got, want = run_ir(ir, feeds), reference.run_model(model, feeds)
    for name in ("Y", "Y_h", "Y_c"):
        assert_close(got[name], want[name], 2e-5, 2e-5, name)


def test_inspect_and_convert_say_which_directions_are_cells_and_why_not(tmp_path):
    from conftest import ovrnn_cli

    model, _, _ = make_model(
        Case(
            "say",
            op="LSTM",
            direction="bidirectional",
            T=6,
            activations=("Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Tanh", "Softsign"),
            lens=(6, 2),
            h0=True,
            c0=True,
        )
    )
    ir = ovrnn.convert_model(model)
    assert [(c.direction, c.activation, c.form) for c in ir.rnns[0].chains] == [
        ("fwd", "f=Sigmoid g=Tanh h=Tanh", "cell"),
        ("rev", "f=HardSigmoid(alpha=0.2, beta=0.5) g=Tanh h=Softsign [explicit: HardSigmoid, Softsign]", "explicit"),
    ]
    report = ovrnn.inspect(ir.save(tmp_path / "m.xml")).format()
    assert "  lstm fwd: 6 steps, f=Sigmoid g=Tanh h=Tanh, LSTMCell, hidden 5, W shared by 6 cells" in report
    assert (
        "  lstm rev: 6 steps, f=HardSigmoid(alpha=0.2, beta=0.5) g=Tanh h=Softsign [explicit: HardSigmoid, Softsign], explicit "
        "MatMul/Add/activation ops, hidden 5" in report
    )
    peep, _, _ = make_model(Case("say-p", op="GRU", T=3))
    import onnx

    onnx.save(peep, tmp_path / "g.onnx")
    proc = ovrnn_cli("convert", tmp_path / "g.onnx", "-o", tmp_path / "g.xml")
    assert proc.returncode == 0 and "3 GRUCell layers" in proc.stdout, proc.stdout + proc.stderr
    lstm, _, _ = make_model(Case("say-l", op="LSTM", peepholes=True, input_forget=1))
    assert ovrnn.convert_model(lstm).rnns[0].chains[0].activation == "f=Sigmoid g=Tanh h=Tanh [explicit: peepholes, input_forget]"


# --- RNN's own paths ------------------------------------------------------------------------------


def _two_node_model():
    """rnn_a's Y_h is rnn_b's initial_h; rnn_c reads X but nothing reads its outputs."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    H, I, T = 4, 3, 5
    init = lambda name, shape: numpy_helper.from_array(rng.uniform(-0.7, 0.7, shape).astype(np.float32), name)  # noqa: E731
    nodes = [
        helper.make_node("RNN", ["X", "Wa", "Ra"], ["", "Ha"], name="rnn_a", hidden_size=H, activations=["Relu"]),
        helper.make_node("RNN", ["X", "Wb", "Rb", "", "", "Ha"], ["Yb", "Hb"], name="rnn_b", hidden_size=H, direction="reverse"),
        helper.make_node("RNN", ["X", "Wa", "Ra"], ["Yc"], name="rnn_c", hidden_size=H),
    ]
    graph = helper.make_graph(
        nodes,
        "two",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, 2, I])],
        [helper.make_tensor_value_info("Yb", TensorProto.FLOAT, None), helper.make_tensor_value_info("Hb", TensorProto.FLOAT, None)],
        [init("Wa", (1, H, I)), init("Ra", (1, H, H)), init("Wb", (1, H, I)), init("Rb", (1, H, H))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), {
        "X": rng.uniform(-1, 1, (T, 2, I)).astype(np.float32)
    }


def test_chained_nodes_and_unused_node():
    model, feeds = _two_node_model()
    ir = ovrnn.convert_model(model)
    assert ir.notes == ("RNN node 'rnn_c': no graph output or node reads Y or Y_h; skipped",)
    assert layer_counts(ir.xml)["RNNCell"] == 10
    got = run_ir(ir, feeds)
    want = reference.run_model(model, feeds)
    for name in ("Yb", "Hb"):
        assert_close(got[name], want[name], 2e-5, 2e-5, name)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lean_lowering(direction):
    """Common case: per step and direction exactly one RNNCell, the Squeeze of its x_t and the
    Unsqueeze of its H_t (the mirror image the CPU plugin's fold cancels), plus O(1) glue with
    chunk_steps=0; the default chunking adds a fixed set of layers per 64-step piece. No Select."""
    from cases import Case

    def glue(T, chunk):
        model, _, _ = make_model(Case("lean", T=T, direction=direction, hidden=8, input_size=4))
        counts = layer_counts(ovrnn.convert_model(model, chunk_steps=chunk).xml)
        D = 2 if direction == "bidirectional" else 1
        pieces = -(-T // chunk) if chunk else 1
        assert counts["RNNCell"] == counts["Squeeze"] == counts["Unsqueeze"] - D * pieces == T * D
        return sum(counts.values()) - 3 * T * D, counts

    flat64, _ = glue(64, 0)
    flat300, counts = glue(300, 0)
    assert flat64 == flat300 and not counts["Select"]
    pieces128, _ = glue(128, 64)
    pieces320, _ = glue(320, 64)
    D = 2 if direction == "bidirectional" else 1
    per_piece = (pieces320 - pieces128) / (3 * D)
    assert per_piece == 12  # W, R, B, axis Consts; X: Transpose + order, Split + axis; Y: Concat, Unsqueeze, Transpose + order


def test_chunking_keeps_the_numbers():
    from cases import Case

    model, feeds, _ = make_model(Case("chunks", T=150, direction="bidirectional", lens=(150, 70), h0=True, hidden=8, input_size=4))
    want = reference.run_model(model, feeds)
    for chunk in (0, 1, 7, 64):
        got = run_ir(ovrnn.convert_model(model, chunk_steps=chunk), feeds)
        for name in want:
            assert_close(got[name], want[name], 2e-5, 2e-5, f"chunk {chunk} {name}")

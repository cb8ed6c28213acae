"""Every case of the table (RNN, GRU, LSTM): ONNX -> IR -> OpenVINO CPU (f32) vs the float64
reference, and no dead layers; RNNCell counts and RNN-only paths. GRU/LSTM cell counts and paths:
test_end_to_end_gru_lstm.py."""

from __future__ import annotations

import numpy as np
import pytest
from cases import CASES, DTYPES, RNN_CASES, TOL, make_model
from conftest import HIDDEN_STEPS, assert_close, dead_layers, layer_counts, run_ir

import ovrnn
from ovrnn.validation import reference


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


@pytest.mark.parametrize("case", RNN_CASES, ids=lambda c: c.id)
def test_one_rnncell_per_step_per_native_direction(case):
    model, _, flags = make_model(case)
    counts = layer_counts(ovrnn.convert_model(model, flags).xml)
    assert counts["RNNCell"] == case.T * case.native_directions()
    assert not any(counts[t] for t in HIDDEN_STEPS)


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
        nodes, "two", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, 2, I])],
        [helper.make_tensor_value_info("Yb", TensorProto.FLOAT, None), helper.make_tensor_value_info("Hb", TensorProto.FLOAT, None)],
        [init("Wa", (1, H, I)), init("Ra", (1, H, H)), init("Wb", (1, H, I)), init("Rb", (1, H, H))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), {"X": rng.uniform(-1, 1, (T, 2, I)).astype(np.float32)}


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

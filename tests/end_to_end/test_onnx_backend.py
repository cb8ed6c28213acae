"""ONNX's own backend test cases for RNN, GRU and LSTM (onnx.backend.test.case.node), through ovrnn
and the float64 reference, one table over the families."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, backend_cases, run_ir

import ovrnn
from ovrnn import reference

CASES = backend_cases("RNN") + backend_cases("GRU") + backend_cases("LSTM")


def test_backend_cases_exist():
    assert sorted(c.name for c in CASES) == [
        "test_gru_batchwise",
        "test_gru_bidirectional",
        "test_gru_defaults",
        "test_gru_reverse",
        "test_gru_seq_length",
        "test_gru_with_initial_bias",
        "test_lstm_batchwise",
        "test_lstm_bidirectional",
        "test_lstm_defaults",
        "test_lstm_reverse",
        "test_lstm_with_initial_bias",
        "test_lstm_with_peepholes",
        "test_rnn_seq_length",
        "test_simple_rnn_batchwise",
        "test_simple_rnn_bidirectional",
        "test_simple_rnn_defaults",
        "test_simple_rnn_reverse",
        "test_simple_rnn_with_initial_bias",
    ]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_backend_case(case):
    model = case.model
    model.ir_version = min(model.ir_version, 10)
    for inputs, outputs in case.data_sets:
        feeds = {i.name: v for i, v in zip(model.graph.input, inputs)}
        got = run_ir(ovrnn.convert_model(model), feeds)
        want = reference.run_model(model, feeds)
        for out, expected in zip(model.graph.output, outputs):
            tol = 1e-5 if expected.dtype == np.float32 else 1e-2
            assert_close(got[out.name], np.asarray(expected, np.float64), tol, tol, f"{case.name} {out.name} vs ONNX data")
            assert_close(
                want[out.name], np.asarray(expected, np.float64), min(tol, 1e-6), tol, f"{case.name} {out.name} reference vs ONNX data"
            )


def linear_attention_cases() -> list:
    """ONNX's backend cases of LinearAttention (opset 27) as their function bodies expand it: a
    Scan whose body declares its inputs with no type (onnx/control_flow/body_types.py types them)."""
    import importlib

    from onnx.backend.test.case import node

    node._TargetOpType = None
    importlib.import_module("onnx.backend.test.case.node.linear_attention")
    return [c for c in node._NodeTestCases if c.name.startswith("test_linear_attention_") and c.name.endswith("_expanded")]


LINEAR_ATTENTION = linear_attention_cases()


def test_linear_attention_cases_exist():
    assert len(LINEAR_ATTENTION) == 14
    for case in LINEAR_ATTENTION:
        scan = next(n for n in case.model.graph.node if n.op_type == "Scan")
        body = next(a.g for a in scan.attribute if a.name == "body")
        assert [vi.type.WhichOneof("value") for vi in body.input] == [None] * len(body.input), case.name


@pytest.mark.parametrize("case", LINEAR_ATTENTION, ids=lambda c: c.name)
def test_linear_attention_case(case):
    model = case.model
    model.ir_version = min(model.ir_version, 10)
    ir = ovrnn.convert_model(model)
    for inputs, outputs in case.data_sets:
        got = run_ir(ir, {i.name: v for i, v in zip(model.graph.input, inputs)})
        for out, expected in zip(model.graph.output, outputs):
            tol = 1e-5 if expected.dtype == np.float32 else 2e-3
            assert got[out.name].dtype == expected.dtype
            assert_close(got[out.name], np.asarray(expected, np.float64), tol, tol, f"{case.name} {out.name} vs ONNX data")

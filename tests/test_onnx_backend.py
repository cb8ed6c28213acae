"""ONNX's own RNN backend test cases (onnx.backend.test.case.node), through ovrnn and the reference."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, backend_cases, run_ir

import ovrnn
from ovrnn.validation import reference

CASES = backend_cases("RNN")


def test_backend_cases_exist():
    assert len(CASES) >= 6


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
            assert_close(want[out.name], np.asarray(expected, np.float64), tol, tol, f"{case.name} {out.name} reference vs ONNX data")

"""Every case of the table: ONNX -> IR -> OpenVINO CPU (f32) vs the float64 reference."""

from __future__ import annotations

import numpy as np
import pytest
from cases import CASES, DTYPES, TOL, make_model
from conftest import assert_close, layer_counts, run_ir
from lxml import etree

import ovrnn
from ovrnn import reference

HIDDEN_STEPS = ("RNNSequence", "TensorIterator", "Loop", "GRUSequence", "LSTMSequence")


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
def test_one_rnncell_per_step_per_native_direction(case):
    model, _, flags = make_model(case)
    counts = layer_counts(ovrnn.convert_model(model, flags).xml)
    assert counts["RNNCell"] == case.T * case.native_directions()
    assert not any(counts[t] for t in HIDDEN_STEPS)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_no_dead_layers(case):
    """OpenVINO silently drops layers that reach no Result: we must not write any."""
    model, _, flags = make_model(case)
    root = etree.fromstring(ovrnn.convert_model(model, flags).xml)
    consumed = {e.get("from-layer") for e in root.iter("edge")}
    dead = [el.get("name") for el in root.iter("layer") if el.get("type") not in ("Parameter", "Result") and el.get("id") not in consumed]
    assert dead == []

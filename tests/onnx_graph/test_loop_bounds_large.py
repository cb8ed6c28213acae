"""Adversarial probes of onnx/for_frontend/loop_bounds.py (redteam5, session 9): a run-time trip count
that is large but valid, with a body that stops the Loop on its own.

OpenVINO 2026.4.1's Loop sizes its scan outputs by a run-time trip count: M = 2**30 (a body that stops
after 123 iterations, 24-byte rows) gave no rows and the states as fed (onnxruntime: 123 rows), and
M = 2**31 - 2 crashed the process (ovrnn on main 094f35b). The bounded Loop now runs with no trip
count (-1) and its body stops at i + 1 == M. Every M here runs onnxruntime's 123 iterations, and the
small ones too, on one Runner (its request reused), so the stop in the body changes no valid run."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto

import ovrnn

from .test_loop_bounds import _loop

S0 = np.full((2, 3), -30.0, np.float32)  # sum(s) reaches 4.0 after 123 steps of 0.25 * 6


@pytest.mark.parametrize("body", ["stops-on-sum", "hands-its-condition-on"])
def test_a_large_valid_trip_count_runs_onnxruntimes_iterations(body):
    model = _loop(TensorProto.FLOAT, "input", "input", stops=body == "stops-on-sum")
    session, runner = ort.InferenceSession(model.SerializeToString()), ovrnn.Runner(ovrnn.convert_model(model))
    large = [2**30, 2**31 - 2, 10**9, 2**31 - 1] if body == "stops-on-sum" else []  # a body that never stops: only small M
    for trips in [*large, 122, 123, 124, 1, 0, 5, 2**30 + 7][: None if large else 6]:
        feeds = {"s0": S0, "M": np.array(trips, np.int64), "go": np.array(True)}
        want, got = session.run(None, feeds), runner(feeds)
        for name, value in zip(("sT", "ys"), want):
            assert got[name].shape == value.shape, (trips, name, got[name].shape, value.shape)
            np.testing.assert_array_equal(got[name], value, err_msg=f"M = {trips}")


@pytest.mark.parametrize("body", ["stops-on-sum", "hands-its-condition-on"])
def test_an_opset_9_loop_answers_each_call_for_itself(body):
    """Before opset 10 Slice takes no inputs, so the scan outputs of a Loop that ran no iteration were
    not cut: one Runner fed M = 3 then M = 0 (or a false start, or M = -1) answered the 3 rows of the
    call before, where onnxruntime gives none (main 8b9765f). They go through Compress now."""
    model = _loop(TensorProto.FLOAT, "input", "input", stops=body == "stops-on-sum")
    model.opset_import[0].version = 9
    session, runner = ort.InferenceSession(model.SerializeToString()), ovrnn.Runner(ovrnn.convert_model(model))
    x = (np.arange(6).reshape(2, 3) * 0.1).astype(np.float32)
    calls = [(3, True), (0, True), (2, True), (2, False), (-1, True), (1, True)]
    calls += [(2**30, True), (5, True)] if body == "stops-on-sum" else []
    for trips, go in calls:
        feeds = {"s0": S0 if trips == 2**30 else x, "M": np.array(trips, np.int64), "go": np.array(go)}
        want, got = session.run(None, feeds), runner(feeds)
        for name, value in zip(("sT", "ys"), want):
            assert got[name].shape == value.shape, (trips, go, name, got[name].shape, value.shape)
            np.testing.assert_array_equal(got[name], value, err_msg=f"M = {trips}, go = {go}")

"""Plan returns data (issue 32): the frontend stage calls nothing of the onnx stage back. The deepest
path through it, a stateful whole model whose stream is proved against its whole sequence, needs a
second model read for OpenVINO's frontend (onnx/for_frontend/): convert reads it and hands it down
(convert._whole_sequence_ir), where the frontend used to call a handed-down reader itself."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import ovrnn

PACKAGE = Path(ovrnn.__file__).resolve().parent
TOOLKIT = {"onnx/graphs.py", "onnx/reading/read.py"}  # the graph toolkit and the GraphView the frontend reads: the ground, not a stage


def _stateful_whole_model():
    """X -> Mul(0.5) -> LSTM -> Y -> Relu -> out: a whole model (the Mul), one forward node to carry."""
    rng = np.random.default_rng(3)
    H, I = 4, 3
    init = lambda name, shape: numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)  # noqa: E731
    nodes = [
        helper.make_node("Mul", ["X", "half"], ["Xs"]),
        helper.make_node("LSTM", ["Xs", "W", "R", "B"], ["Y"], hidden_size=H, name="enc"),
        helper.make_node("Relu", ["Y"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "whole",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "B", I])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.float32(0.5), "half"), init("W", (1, 4 * H, I)), init("R", (1, 4 * H, H)), init("B", (1, 8 * H))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _calls_during(action) -> set[tuple[str, str, str]]:
    """(caller's file, function, callee's file) of every Python call between ovrnn's modules while `action` runs."""
    seen: set[tuple[str, str, str]] = set()

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = Path(frame.f_code.co_filename), Path(frame.f_back.f_code.co_filename)
        if callee.is_relative_to(PACKAGE) and caller.is_relative_to(PACKAGE):
            seen.add((caller.relative_to(PACKAGE).as_posix(), frame.f_code.co_name, callee.relative_to(PACKAGE).as_posix()))

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return seen


def test_the_frontend_calls_nothing_of_the_onnx_stage_back():
    ir = None

    def convert():
        nonlocal ir
        ir = ovrnn.convert_model(_stateful_whole_model(), "X[4,2,3]", stateful=True)

    calls = _calls_during(convert)
    assert ir is not None and b'type="ReadValue"' in ir.xml
    back = sorted((c, f, o) for c, f, o in calls if c.startswith("frontend/") and o.startswith("onnx/") and o not in TOOLKIT)
    assert back == []
    # not vacuous: the profiler saw the frontend call earlier stages (the semantics of its nodes), and convert read the
    # whole-sequence model for it
    assert any(c.startswith("frontend/") and o.startswith("semantics/") for c, _, o in calls)
    assert ("convert.py", "frontend_input", "onnx/for_frontend/input.py") in calls
    assert any(f == "check_time_mixing" for _, f, _ in calls)

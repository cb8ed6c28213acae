"""validate on whole models: a node the float64 reference cannot compute is computed by
onnxruntime (reference/fallback.py), and a mismatch names the first ONNX node whose
output departs from onnxruntime."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import FIXTURE_DIR, ovrnn_cli
from onnx import TensorProto, helper, numpy_helper

import ovrnn

RL = FIXTURE_DIR / "rl"
HANDED = "onnxruntime computed that node"


def test_validate_passes_on_the_recurrent_ppo_policy(tmp_path):
    """sb3-contrib RecurrentPPO: onnx.reference refuses its GatherElements (a [4, 1] index into
    [4, 2] logits, which the spec allows; it was an internal error, then a node handed to
    onnxruntime): the reference's correction (reference/corrections.py) computes it, so every
    output passes against both oracles and nothing is handed to onnxruntime."""
    proc = ovrnn_cli("validate", RL / "recurrent_ppo.onnx", "--json", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    outputs = ["actions", "values", "log_prob", "h_pi_out", "c_pi_out", "h_vf_out", "c_vf_out"]
    assert [(c["output"], c["oracle"]) for c in report["comparisons"]] == [
        (o, oracle) for oracle in ("reference", "onnxruntime") for o in outputs
    ]
    assert report["passed"] and all(c["passed"] for c in report["comparisons"])
    assert all(c["max_abs"] < 1e-6 for c in report["comparisons"] if c["output"] == "log_prob")
    assert not any(HANDED in n for n in report["notes"]) and proc.stdout.rstrip().endswith("PASS")


PPO_PAIRS = "h_pi=h_pi_out,c_pi=c_pi_out,h_vf=h_vf_out,c_vf=c_vf_out"


def test_validate_stateful_passes_on_the_recurrent_ppo_policy(tmp_path):
    """The stream oracles run the same reference: every check passes, every call carried by hand."""
    proc = ovrnn_cli("validate", RL / "recurrent_ppo.onnx", "--stateful", PPO_PAIRS, "--json", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] and all(c["passed"] for c in report["comparisons"])
    checks = {c["check"] for c in report["comparisons"]}
    assert {"chunked == by hand", "final state", "reset", "two streams", "set_state", "long stream"} <= checks
    assert {c["output"] for c in report["comparisons"] if c["check"] == "chunked == by hand"} == {"actions", "values", "log_prob"}
    assert not any(HANDED in n for n in report["notes"]) and proc.stdout.rstrip().endswith("PASS")


def test_validate_stateful_without_onnxruntime_is_judged_by_the_reference_alone():
    """--no-onnxruntime: the reference computes every node (it was one error naming the
    GatherElements, exit 2), so the stream is proved against it alone."""
    proc = ovrnn_cli("validate", RL / "recurrent_ppo.onnx", "--stateful", PPO_PAIRS, "--no-onnxruntime")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "" and proc.stdout.rstrip().endswith("PASS")
    assert "onnxruntime: not asked for (--no-onnxruntime)" in proc.stdout


def test_a_misread_op_is_named_on_the_recurrent_ppo_policy(monkeypatch):
    """With the rewrites of onnx/for_frontend/fixes.py switched off, the
    IR's log_prob is wrong on 2026.4.1, and validate names the node where the IR first departs
    from onnxruntime: the ReduceLogSumExp, reduced to [1, 1] instead of [4, 1]. The LSTMs and Gemms
    before it agree."""
    from ovrnn.onnx.for_frontend import fixes as frontend_fixes

    if frontend_fixes.installed_openvino()[:2] != (2026, 4):
        pytest.skip("OpenVINO 2026.4 misreads ReduceLogSumExp-17")
    monkeypatch.setattr(frontend_fixes, "FIXES", ())
    report = ovrnn.validate(str(RL / "recurrent_ppo.onnx"))
    assert not report.passed
    assert {c.output for c in report.comparisons if not c.passed} == {"log_prob"}
    d = report.first_departure
    assert (d["node"], d["op_type"], d["output"]) == ("/policy/ReduceLogSumExp", "ReduceLogSumExp", "/policy/ReduceLogSumExp_output_0")
    assert d["note"] == "shape [1, 1] where onnxruntime gives [4, 1]"
    assert d["summary"] in report.format().splitlines()
    assert report.format().splitlines()[-1] == "FAIL"


def _lstm_then(activation: str) -> onnx.ModelProto:
    """X -> LSTM 'lstm' -> Squeeze -> Y -> `activation` 'act' -> Mul 'scale' -> Z."""
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)
        for name, shape in (("W", (1, 16, 3)), ("R", (1, 16, 4)), ("k", (4,)))
    ]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    nodes = [
        helper.make_node("LSTM", ["X", "W", "R"], ["Y4"], hidden_size=4, name="lstm"),
        helper.make_node("Squeeze", ["Y4", "axis1"], ["Y"], name="squeeze"),
        helper.make_node(activation, ["Y"], ["A"], name="act"),
        helper.make_node("Mul", ["A", "k"], ["Z"], name="scale"),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi("X", TensorProto.FLOAT, [5, 2, 3])], [vi("Z", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_validate_names_the_first_node_that_departs():
    """An IR in which one op is deliberately wrong (Sigmoid where the model has Tanh): validate
    fails and names that node, not the LSTM before it nor the Mul after it."""
    model = _lstm_then("Tanh")
    wrong_ir = ovrnn.convert_model(_lstm_then("Sigmoid"))
    report = ovrnn.validate(model, ir=wrong_ir)
    assert not report.passed
    d = report.first_departure
    assert (d["node"], d["op_type"], d["output"], d["note"]) == ("act", "Tanh", "A", "")
    assert d["max_abs"] > 0.1 and (d["atol"], d["rtol"]) == (2e-5, 2e-5)
    assert d["summary"].startswith("first departing node: 'act' (Tanh), output 'A': max_abs ")
    assert d["summary"].endswith(" against onnxruntime (tolerance 2e-05+2e-05*|ref|)")
    right = ovrnn.validate(model)
    assert right.passed and right.first_departure == {} and "first departing" not in right.format()


def test_reference_hands_a_node_it_has_no_code_for_to_onnxruntime_inside_a_body_too():
    """A GlobalLpPool (onnx.reference has no code for it) inside an If branch: onnxruntime computes
    that node, with a note; without a notes list (no onnxruntime asked for) it is a
    ReferenceUnavailable that names the node."""
    from ovrnn import reference

    vi = helper.make_tensor_value_info
    then = helper.make_graph(
        [helper.make_node("GlobalLpPool", ["x"], ["t"], p=2, name="pool")], "then", [], [vi("t", TensorProto.FLOAT, None)]
    )
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="same")], "else", [], [vi("e", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")],
        "g",
        [vi("x", TensorProto.FLOAT, [1, 2, 3]), vi("c", TensorProto.BOOL, [])],
        [vi("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.array([[[3, 4, 0], [1, 2, 2]]], dtype=np.float32)
    notes = []
    out = reference.run_model(model, {"x": x, "c": np.array(True)}, notes)
    np.testing.assert_allclose(out["y"], [[[5.0], [3.0]]], rtol=1e-6)  # sqrt(9 + 16), sqrt(1 + 4 + 4)
    assert notes == [
        (
            "the float64 reference cannot compute node 'pool' (GlobalLpPool), which onnx.reference has no implementation of: "
            "onnxruntime computed that node, the reference the rest"
        )
    ]
    with pytest.raises(reference.ReferenceUnavailable, match="cannot compute node 'pool' \\(GlobalLpPool\\)"):
        reference.run_model(model, {"x": x, "c": np.array(True)})


def test_a_failed_validation_raises_numeric_mismatch_on_request():
    """report.raise_for_failure(): NumericMismatchError (exit status 1) naming the failures and the worst of them, for a
    real mismatch (an IR with Sigmoid where the model has Tanh); the report itself when it passed, streams' reports too."""
    import dataclasses
    import re

    from ovrnn.examples import STREAM_MODEL

    report = ovrnn.validate(_lstm_then("Tanh"), ir=ovrnn.convert_model(_lstm_then("Sigmoid")))
    with pytest.raises(ovrnn.NumericMismatchError) as info:
        report.raise_for_failure()
    assert re.fullmatch(
        r"validate g on CPU at f32: 2 of 2 counted comparisons outside tolerance; the worst: output 'Z' against the "
        r"(reference|onnxruntime), max abs error (\S+) \(tolerance 2e-05 \+ 2e-05\*\|ref\|\)",
        str(info.value),
    ), str(info.value)
    worst = max(c.max_abs for c in report.comparisons)
    assert f"max abs error {worst:.2e} " in str(info.value) and worst > 0.1 and info.value.exit_code == 1
    right = ovrnn.validate(_lstm_then("Tanh"))
    assert right.raise_for_failure() is right
    stream = ovrnn.validate(STREAM_MODEL, stateful=True, chunks=2)
    assert stream.passed and stream.raise_for_failure() is stream
    stream.comparisons[0] = dataclasses.replace(stream.comparisons[0], passed=False)
    with pytest.raises(ovrnn.NumericMismatchError, match=r"^validate .* 1 of \d+ counted comparisons outside tolerance; the worst: "):
        stream.raise_for_failure()

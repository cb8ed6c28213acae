"""validate judges the model as the user gave it: its float64 reference evaluates the ORIGINAL
graph (Loops run as Loops, with only the frozen inputs applied), never ovrnn's rewritten graph, so
no rewrite can check itself; and its tolerance follows the precision the model computes in
(validation/weights.py).

The rewrite is made wrong on purpose here: the Loop recovery is wrapped so that the recurrent node
it recovers loses its recurrent term H_{t-1} R^T (R multiplied by 0: a term dropped, as the unsound
recoveries of issue 30 dropped ``0.1*i`` or a conditioning vector; exact at the first step). With
onnxruntime switched off the reference row alone must FAIL it; the reference of the rewritten graph,
what validate ran before, agrees with the wrong IR.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import FIXTURE_DIR, run_ir
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn import reference
from ovrnn.families import family_of
from ovrnn.onnx import prepare as prepare_stage
from ovrnn.validation.weights import output_precisions

LOOPS = FIXTURE_DIR / "loops"
# fixture -> the output names (each one a reference row)
RECOVERED = {
    "torch_lstmcell_loop": "an LSTMCell loop (torch.jit.script): a one-step LSTM node in the body, recovered as one LSTM node",
    "keras_gru_reset_after": "a Keras GRU while-loop of MatMuls (tf2onnx), recovered as one GRU node (linear_before_reset=1)",
    "keras_simplernn_seq": "a Keras SimpleRNN while-loop (tf2onnx), recovered as one RNN node",
}


def _drop_the_recurrent_term_of_recovered_nodes(monkeypatch) -> list[str]:
    """Wrap the Loop recovery (control_flow.fold_control_flow, as onnx/prepare.py calls it) so that
    each recurrent node it makes at the top level reads R * 0: a rewrite that drops a term."""
    dropped: list[str] = []
    real = prepare_stage.fold_control_flow

    def wrong(model, *args, **kwargs):
        folded, notes = real(model, *args, **kwargs)
        before = {n.name for n in model.graph.node if family_of(n) is not None}
        for k, node in enumerate(list(folded.graph.node)):
            if family_of(node) is not None and node.name not in before:
                zero, dropped_r = f"wrong_rewrite_zero_{k}", f"wrong_rewrite_R_{k}"
                folded.graph.initializer.append(numpy_helper.from_array(np.zeros((), np.float32), zero))
                folded.graph.node.insert(list(folded.graph.node).index(node), helper.make_node("Mul", [node.input[2], zero], [dropped_r]))
                node.input[2] = dropped_r
                dropped.append(node.name)
        return folded, notes

    monkeypatch.setattr(prepare_stage, "fold_control_flow", wrong)
    return dropped


@pytest.mark.parametrize("name", sorted(RECOVERED), ids=[f"{k}: {v}" for k, v in sorted(RECOVERED.items())])
def test_a_recovery_that_drops_a_term_fails_through_the_reference_row_alone(name, monkeypatch):
    model = LOOPS / f"{name}.onnx"
    right = ovrnn.validate(model, use_onnxruntime=False, drift=False)
    assert right.passed and {c.oracle for c in right.comparisons} == {"reference"}
    assert all(c.max_abs < 1e-5 for c in right.comparisons), [(c.output, c.max_abs) for c in right.comparisons]

    dropped = _drop_the_recurrent_term_of_recovered_nodes(monkeypatch)
    wrong = ovrnn.validate(model, use_onnxruntime=False, drift=False)
    assert dropped, "the recovery made no recurrent node: nothing was made wrong"
    assert not wrong.passed
    assert wrong.onnxruntime == "not asked for (use_onnxruntime=False)"
    assert {c.oracle for c in wrong.comparisons} == {"reference"}  # the verdict is the reference row's alone
    failing = [c for c in wrong.comparisons if c.counted and not c.passed]
    assert failing and all(c.oracle == "reference" for c in failing)
    assert max(c.max_abs for c in failing) > 1e-2  # the recurrent term of a random model: far outside f32 tolerance

    # what validate ran before: the reference of ovrnn's own rewritten graph agrees with the wrong IR
    from ovrnn.convert import convert
    from ovrnn.plan.request import Request

    conversion = convert(model, None, Request())
    feeds = {
        i.name: np.random.default_rng(1).uniform(-1, 1, [d.dim_value or 2 for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in onnx.load(model).graph.input
    }
    got = run_ir(conversion.ir, feeds)
    rewritten = reference.run_model(conversion.prepared.view.model, feeds)
    original = reference.run_model(conversion.proto, feeds)
    for output in rewritten:
        assert np.allclose(got[output], rewritten[output], atol=1e-4), (
            f"{output}: the rewritten graph's reference should agree with its own IR"
        )
    assert max(float(np.abs(got[o] - original[o]).max()) for o in original) > 1e-2


def test_the_reference_runs_the_loop_as_a_loop_not_the_recovered_node(monkeypatch):
    """The reference's model is the user's: the Loop is there when it runs."""
    seen: list[set[str]] = []
    real = reference.run_model

    def spy(model, feeds, notes=None):
        seen.append({n.op_type for n in model.graph.node})
        return real(model, feeds, notes)

    monkeypatch.setattr(reference, "run_model", spy)
    report = ovrnn.validate(LOOPS / "torch_lstmcell_loop.onnx", use_onnxruntime=False, drift=False)
    assert report.passed
    assert seen and all("Loop" in ops for ops in seen)


def _fp16_lstm(keep_io: bool, cast_weights_up: bool = False) -> onnx.ModelProto:
    """An LSTM over float16 W/R/B (keep_io: float32 X and Y behind Casts, as onnxconverter-common's
    keep_io_types writes); cast_weights_up: float16 weights widened to float32 by Casts, float32 math."""
    rng = np.random.default_rng(0)
    H, I, T = 6, 3, 9
    f16 = TensorProto.FLOAT16
    weights = {
        "W": rng.uniform(-0.6, 0.6, (1, 4 * H, I)),
        "R": rng.uniform(-0.6, 0.6, (1, 4 * H, H)),
        "B": rng.uniform(-0.3, 0.3, (1, 8 * H)),
    }
    inits = [numpy_helper.from_array(v.astype(np.float16), k) for k, v in weights.items()]
    nodes = []
    if cast_weights_up:
        nodes += [helper.make_node("Cast", [k], [f"{k}32"], to=TensorProto.FLOAT) for k in weights]
        nodes.append(helper.make_node("LSTM", ["X", "W32", "R32", "B32"], ["Y"], hidden_size=H))
        x_type = TensorProto.FLOAT
    elif keep_io:
        nodes += [
            helper.make_node("Cast", ["X"], ["X16"], to=f16),
            helper.make_node("LSTM", ["X16", "W", "R", "B"], ["Y16"], hidden_size=H),
            helper.make_node("Cast", ["Y16"], ["Y"], to=TensorProto.FLOAT),
        ]
        x_type = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "fp16_lstm",
        [helper.make_tensor_value_info("X", x_type, [T, 2, I])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [T, 1, 2, H])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_float16_weights_behind_float32_io_are_judged_at_float16_tolerance_and_the_report_says_why(tmp_path):
    path = tmp_path / "keep_io.onnx"
    onnx.save(_fp16_lstm(keep_io=True), path)
    report = ovrnn.validate(path, drift=False)
    assert report.passed, report.format()
    assert [(c.oracle, c.atol, c.rtol) for c in report.comparisons] == [("reference", 1e-2, 1e-2), ("onnxruntime", 1e-2, 1e-2)]
    assert all(1e-5 < c.max_abs < 1e-2 for c in report.comparisons), [
        c.max_abs for c in report.comparisons
    ]  # float16 rounding: beyond f32's, within f16's
    why = (
        "the model computes in float16: 3 weights are float16 (e.g. 'W') and 1 Cast node converts to float16 (e.g. 'X16'); "
        "onnxruntime and the reference round to float16 where the graph does: judged at float16 tolerance"
    )
    assert why in report.notes and f"note: {why}" in report.format()


def test_float16_weights_widened_before_use_keep_the_float32_tolerance(tmp_path):
    """Weights stored at float16 and Cast to float32 before the LSTM: float32 math on exact values,
    so the tighter float32 tolerance stays (and nothing is said)."""
    path = tmp_path / "widened.onnx"
    onnx.save(_fp16_lstm(keep_io=False, cast_weights_up=True), path)
    assert set(output_precisions(onnx.load(path)).values()) == {(None, "")}
    report = ovrnn.validate(path, drift=False)
    assert report.passed and {(c.atol, c.rtol) for c in report.comparisons} == {(2e-5, 2e-5)}
    assert not any("computes in float16" in n for n in report.notes)


@pytest.mark.parametrize(
    "elem, expected",
    [(TensorProto.FLOAT, None), (TensorProto.FLOAT16, "f16"), (TensorProto.BFLOAT16, "bf16"), (TensorProto.DOUBLE, None)],
    ids=["float32 weights: no floor", "float16 weights", "bfloat16 weights", "float64 weights: no floor"],
)
def test_the_floor_is_the_narrowest_float_the_graph_computes_in(elem, expected):
    w = helper.make_tensor("w", elem, [2], [1.0, 2.0])
    node = helper.make_node("Mul", ["x", "w"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", elem, [2])], [helper.make_tensor_value_info("y", elem, [2])], [w]
    )
    ((floor, why),) = output_precisions(helper.make_model(graph)).values()
    assert floor == expected and (why == "") == (expected is None)


def _lstm_behind_an_if_on_sr() -> onnx.ModelProto:
    """silero's pattern: If(Equal(sr, 16000)) picks a branch, each an LSTM over X; B is computed,
    Add(Bh, Bh): with sr frozen, ovrnn folds both (control_flow.fold_constants) and inlines the branch."""
    rng = np.random.default_rng(5)
    H, I, T = 4, 3, 6
    inits = [
        numpy_helper.from_array(rng.uniform(-0.7, 0.7, shape).astype(np.float32), name)
        for name, shape in (("W", (1, 4 * H, I)), ("R", (1, 4 * H, H)), ("Bh", (1, 8 * H)))
    ]
    inits.append(numpy_helper.from_array(np.array(16000, np.int64), "rate16k"))
    vi = helper.make_tensor_value_info

    def branch(name, activations):
        lstm = helper.make_node(
            "LSTM", ["X", "W", "R", "B"], ["", f"{name}_h"], hidden_size=H, activations=activations, name=f"{name}_lstm"
        )
        return helper.make_graph([lstm], name, [], [vi(f"{name}_h", TensorProto.FLOAT, None)])

    nodes = [
        helper.make_node("Add", ["Bh", "Bh"], ["B"], name="bias"),
        helper.make_node("Equal", ["sr", "rate16k"], ["is16k"], name="is16k"),
        helper.make_node(
            "If",
            ["is16k"],
            ["Y_h"],
            then_branch=branch("then", ["Sigmoid", "Tanh", "Tanh"]),
            else_branch=branch("else", ["Sigmoid", "Relu", "Relu"]),
            name="by_rate",
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "sr_if",
        [vi("X", TensorProto.FLOAT, [T, 2, I]), vi("sr", TensorProto.INT64, [])],
        [vi("Y_h", TensorProto.FLOAT, [1, 2, H])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_fold_that_loses_half_a_value_fails_through_the_reference_row_alone(tmp_path, monkeypatch):
    """The other prepare-stage rewrite: constant folding (with the frozen sr, the If's condition and
    B = Bh + Bh fold to initializers). Wrapped so that every float value it folds is halved, the
    IR is wrong; the reference of the original graph (the If run as an If, B computed) FAILs it."""
    from ovrnn.onnx.control_flow import passes as control_flow

    path = tmp_path / "sr_if.onnx"
    onnx.save(_lstm_behind_an_if_on_sr(), path)
    right = ovrnn.validate(path, input="sr->16000", use_onnxruntime=False, drift=False)
    assert right.passed and right.frozen_inputs == {"sr": "int64 [] 16000"}
    assert [c.output for c in right.comparisons] == ["Y_h"] and right.comparisons[0].max_abs < 1e-5

    halved: list[str] = []
    real = control_flow.fold_constants

    def wrong(model, *args, **kwargs):
        folded, notes = real(model, *args, **kwargs)
        before = {t.name for t in model.graph.initializer}
        for t in folded.graph.initializer:
            if t.name not in before and t.data_type == TensorProto.FLOAT:
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * 0.5, t.name))
                halved.append(t.name)
        return folded, notes

    monkeypatch.setattr(control_flow, "fold_constants", wrong)
    report = ovrnn.validate(path, input="sr->16000", use_onnxruntime=False, drift=False)
    assert "B" in halved
    assert not report.passed and [(c.output, c.oracle, c.passed) for c in report.comparisons] == [("Y_h", "reference", False)]
    assert report.comparisons[0].max_abs > 1e-2


def test_compressed_weights_of_a_recovered_node_say_what_the_reference_ran(monkeypatch):
    """--compress-weights on a recurrence recovered from a Loop: the dequantized weights go in front
    of a node the original graph does not have, so that reference runs the rewritten graph, and the
    note says so; the 'rewrite' rows then judge the rewritten graph, with the original weights,
    against the ORIGINAL graph, both float64, counted at the float32 tolerance (rewrite.py): an
    honest recovery passes them, a wrong one FAILs them; the 'quantization' row is the same graph
    with and without compression, shown."""
    model = LOOPS / "keras_gru_forecaster.onnx"
    right = ovrnn.validate(model, use_onnxruntime=False, drift=False, compress_weights="int8")
    note = [n for n in right.notes if n.startswith("the compressed node(s) ")]
    assert note == [
        (
            "the compressed node(s) 'sequential_8_1/gru_3_1/while_loop', 'sequential_8_1/gru_4_1/while_loop' were recovered from a "
            "Loop: the dequantized reference runs ovrnn's rewritten graph, and the 'rewrite' rows judge that graph, with the original "
            "weights, against the original graph (both float64, counted at the float32 tolerance)"
        )
    ]
    rows = {c.oracle: c for c in right.comparisons}
    assert right.passed and rows["rewrite"].counted and rows["rewrite"].passed and rows["rewrite"].max_abs < 1e-6  # the same math
    assert (rows["rewrite"].atol, rows["rewrite"].rtol) == (2e-5, 2e-5)
    assert not rows["quantization"].counted and 1e-5 < rows["quantization"].max_abs < 1e-2  # int8 rounding, shown

    _drop_the_recurrent_term_of_recovered_nodes(monkeypatch)
    wrong = ovrnn.validate(model, use_onnxruntime=False, drift=False, compress_weights="int8")
    rows = {c.oracle: c for c in wrong.comparisons}
    assert not wrong.passed and all(
        c.passed for c in wrong.comparisons if c.oracle == "reference"
    )  # the device agrees with the (wrong) rewritten graph it was made from
    assert not rows["rewrite"].passed and rows["rewrite"].max_abs > 2e-2


_WRONG_RECOVERY_CLI = """
import sys
import numpy as np
from onnx import helper, numpy_helper
from ovrnn.families import family_of
from ovrnn.onnx import prepare as prepare_stage

real = prepare_stage.fold_control_flow

def wrong(model, *args, **kwargs):  # the recovered node reads R * 0: H_{t-1} R^T dropped
    folded, notes = real(model, *args, **kwargs)
    before = {n.name for n in model.graph.node if family_of(n) is not None}
    for k, node in enumerate(list(folded.graph.node)):
        if family_of(node) is not None and node.name not in before:
            folded.graph.initializer.append(numpy_helper.from_array(np.zeros((), np.float32), f"zero{k}"))
            folded.graph.node.insert(list(folded.graph.node).index(node), helper.make_node("Mul", [node.input[2], f"zero{k}"], [f"R0_{k}"]))
            node.input[2] = f"R0_{k}"
    return folded, notes

prepare_stage.fold_control_flow = wrong
from ovrnn.cli import main
sys.exit(main(["validate", sys.argv[1], "--no-onnxruntime", "--no-drift"]))
"""


def test_the_command_line_with_no_onnxruntime_fails_a_wrong_recovery():
    """The same through `ovrnn validate --no-onnxruntime`, in a child process: exit 1, FAIL, every
    row the reference's."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _WRONG_RECOVERY_CLI, str(LOOPS / "torch_lstmcell_loop.onnx")], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.split()[1:2] == ["reference"]]
    assert rows and all(r[-1] == "FAIL" for r in rows) and "onnxruntime" not in {r[1] for r in rows}
    assert "onnxruntime: not asked for (--no-onnxruntime)" in proc.stdout and proc.stdout.rstrip().endswith("FAIL")


def _lstm_with_a_float16_side_output() -> onnx.ModelProto:
    """Y_h: a float32 LSTM; Z: Cast(Cast(X, f16) * w16, f32), a float16 side branch."""
    rng = np.random.default_rng(11)
    H, I, T = 4, 3, 5
    inits = [
        numpy_helper.from_array(rng.uniform(-0.7, 0.7, shape).astype(np.float32), name)
        for name, shape in (("W", (1, 4 * H, I)), ("R", (1, 4 * H, H)))
    ]
    inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, (I,)).astype(np.float16), "w16"))
    nodes = [
        helper.make_node("LSTM", ["X", "W", "R"], ["", "Y_h"], hidden_size=H),
        helper.make_node("Cast", ["X"], ["x16"], to=TensorProto.FLOAT16),
        helper.make_node("Mul", ["x16", "w16"], ["z16"]),
        helper.make_node("Cast", ["z16"], ["Z"], to=TensorProto.FLOAT),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "side",
        [vi("X", TensorProto.FLOAT, [T, 2, I])],
        [vi("Y_h", TensorProto.FLOAT, None), vi("Z", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_each_output_is_judged_at_the_precision_on_its_own_path(tmp_path):
    """A float16 side branch loosens only the output it feeds: the float32 LSTM's output keeps the
    float32 tolerance, so a wrong rewrite of it would still FAIL (redteam's mixed model)."""
    model = _lstm_with_a_float16_side_output()
    floors = {name: floor for name, (floor, _) in output_precisions(model).items()}
    assert floors == {"Y_h": None, "Z": "f16"}
    path = tmp_path / "side.onnx"
    onnx.save(model, path)
    report = ovrnn.validate(path, drift=False)
    assert report.passed, report.format()
    tol = {(c.output, c.oracle): (c.atol, c.rtol) for c in report.comparisons}
    assert tol[("Y_h", "reference")] == tol[("Y_h", "onnxruntime")] == (2e-5, 2e-5)
    assert tol[("Z", "reference")] == tol[("Z", "onnxruntime")] == (1e-2, 1e-2)
    why = (
        "output 'Z': the model computes in float16: 1 weight is float16 (e.g. 'w16') and 1 Cast node converts to float16 (e.g. 'x16'); "
        "onnxruntime and the reference round to float16 where the graph does: judged at float16 tolerance; output 'Y_h' never "
        "reads a narrower float: judged at its own tolerance"
    )
    assert why in report.notes


def test_a_loop_output_reads_the_precision_inside_its_body():
    """What a Loop's body computes in counts for the Loop's outputs (the body is part of the node)."""
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["s"], ["s16"], to=TensorProto.FLOAT16),
            helper.make_node("Mul", ["s16", "k16"], ["m16"]),
            helper.make_node("Cast", ["m16"], ["s_next"], to=TensorProto.FLOAT),
            helper.make_node("Identity", ["c"], ["c_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("s_next", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array([0.5, 2.0], np.float16), "k16")],
    )
    nodes = [helper.make_node("Loop", ["T", "", "s0"], ["s_T"], body=body), helper.make_node("Relu", ["s0"], ["r"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "g",
        [vi("T", TensorProto.INT64, []), vi("s0", TensorProto.FLOAT, [2])],
        [vi("s_T", TensorProto.FLOAT, [2]), vi("r", TensorProto.FLOAT, [2])],
    )
    floors = {name: floor for name, (floor, _) in output_precisions(helper.make_model(graph)).items()}
    assert floors == {"s_T": "f16", "r": None}


@pytest.mark.parametrize("vocab", [1, 2, 5], ids=["table-of-1-row", "table-of-2-rows", "table-of-5-rows"])
def test_random_indices_stay_within_the_axis_they_index(tmp_path, vocab):
    """validate's seeded integer inputs are 0..2, and never past an axis they index: a token table
    of 2 rows got index 2, which the runner rightly refuses (validate crashed on a valid model)."""
    rng = np.random.default_rng(3)
    H, I, T = 4, 3, 5
    inits = [
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
        for name, shape in (("W", (1, 4 * H, I)), ("R", (1, 4 * H, H)), ("table", (vocab, I)))
    ]
    nodes = [helper.make_node("Gather", ["table", "tok"], ["X"]), helper.make_node("LSTM", ["X", "W", "R"], ["", "Y_h"], hidden_size=H)]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("tok", TensorProto.INT64, [T, 2])],
        [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)],
        inits,
    )
    path = tmp_path / "tokens.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    report = ovrnn.validate(path, drift=False)
    assert report.passed and {c.oracle for c in report.comparisons} == {"reference", "onnxruntime"}, report.format()
    assert all(c.max_abs < 1e-6 for c in report.comparisons)

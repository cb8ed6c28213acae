"""Control flow as an ordered list of passes with one analysis per round (ovrnn/onnx/control_flow/):
counted, never timed. A model with an If on a frozen input, two Loops over time (one recovered as
its cell, one unrolled: no cell) and a Scan (written as a Loop, then recovered) is folded with
onnx's shape inference, the Loop recovery's recogniser and its Loop-over-time test wrapped: each
round infers the whole model at most once for the passes (the fixed point declaring Loop states
ends on the inference it returns: no third call), recognises each body at most once, and asks
over_time of each Loop once; constant folding infers only when a Shape or Size node asks.
The shapes the Scan pass reads without inferring again are checked against onnx's inference."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnx.shape_inference
import pytest
from loop_bodies import IR_VERSION, OPSET, BodySpec, build, pack
from onnx import TensorProto, helper, numpy_helper

import ovrnn.reference  # noqa: F401 - attaches the families' float64 cells, which the recogniser checks with
from ovrnn.onnx.control_flow import analysis as analysis_module
from ovrnn.onnx.control_flow import passes
from ovrnn.onnx.control_flow.body_inputs import declare_carried, declare_carried_inferred
from ovrnn.onnx.control_flow.inline import Names
from ovrnn.onnx.control_flow.scan_loop import as_loop
from ovrnn.onnx.graphs import constant_value
from ovrnn.onnx.loops.enclosing import EnclosingGraph
from ovrnn.onnx.prepare import prepare
from ovrnn.onnx.reading import fold
from ovrnn.onnx.reading.read import graph_view

BODIES = [  # prefix, the body, what the fold makes of it
    ("a_", BodySpec("lstm", "plain"), "recovered"),
    ("b_", BodySpec("gru_lbr1", "scan", scan_axis=1, reverse=1), "written as a Loop, then recovered"),
    ("c_", BodySpec("rnn_tanh", "state_scale"), "unrolled (no cell)"),
]


def _if_on(sr: str, out: str) -> list[onnx.NodeProto]:
    """An If on Equal(sr, 16000) choosing one of two constants (silero's sample-rate switch)."""
    branch = lambda v: helper.make_graph(  # noqa: E731
        [helper.make_node("Constant", [], [f"{out}_{v}"], value=numpy_helper.from_array(np.array([v], np.float32)))],
        f"branch_{v}",
        [],
        [helper.make_tensor_value_info(f"{out}_{v}", TensorProto.FLOAT, [1])],
    )
    return [
        helper.make_node("Constant", [], ["rate16k"], value=numpy_helper.from_array(np.array(16000, np.int64))),
        helper.make_node("Equal", [sr, "rate16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], [out], name="choose_sr", then_branch=branch(1.0), else_branch=branch(2.0)),
    ]


def several() -> onnx.ModelProto:
    model = pack([build(spec, prefix) for prefix, spec, _ in BODIES])
    model.graph.node.extend(_if_on("sr", "gain"))
    model.graph.input.append(helper.make_tensor_value_info("sr", TensorProto.INT64, []))
    model.graph.output.append(helper.make_tensor_value_info("gain", TensorProto.FLOAT, [1]))
    onnx.checker.check_model(model)
    return model


class Rounds:
    """What each round of fold_control_flow asked, counted (a round starts at its fold_constants)."""

    def __init__(self, monkeypatch) -> None:
        self.rounds: list[Counter] = []
        self.recognised: list[Counter] = []  # per round: Loop label -> recognise calls
        real_fold, real_infer = passes.fold_constants, onnx.shape_inference.infer_shapes
        real_recognise, real_over_time = analysis_module.recognise, analysis_module.over_time

        def fold_constants(model, *args, **kwargs):
            self.rounds.append(Counter(Loop=sum(n.op_type == "Loop" for n in model.graph.node)))
            self.recognised.append(Counter())
            self.stage = "fold"
            try:
                return real_fold(model, *args, **kwargs)
            finally:
                self.stage = "passes"

        def infer_shapes(model, *args, **kwargs):
            if self.rounds:
                self.rounds[-1][f"infer {self.stage}"] += 1
            return real_infer(model, *args, **kwargs)

        def recognise(loop, body, *args, **kwargs):
            self.recognised[-1][loop.name] += 1
            return real_recognise(loop, body, *args, **kwargs)

        def over_time(body, *args, **kwargs):
            self.rounds[-1]["over_time"] += 1
            return real_over_time(body, *args, **kwargs)

        self.stage = "passes"
        monkeypatch.setattr(passes, "fold_constants", fold_constants)
        monkeypatch.setattr(onnx.shape_inference, "infer_shapes", infer_shapes)
        monkeypatch.setattr(analysis_module, "recognise", recognise)
        monkeypatch.setattr(analysis_module, "over_time", over_time)


@pytest.fixture
def folded(monkeypatch):
    counted = Rounds(monkeypatch)
    prepared = prepare(several(), "sr->16000")
    return counted, prepared


def test_the_model_folds_as_each_body_says(folded):
    """The counts below are of real work: the If inlined, two Loops recovered (one from the Scan),
    one unrolled; the prepared model has no control flow left."""
    _, prepared = folded
    ops = Counter(n.op_type for n in prepared.view.model.graph.node)
    assert ops["If"] == ops["Loop"] == ops["Scan"] == 0
    assert ops["LSTM"] == 1 and ops["GRU"] == 1 and ops["RNN"] == 0
    notes = "\n".join(prepared.notes)
    assert "If node 'choose_sr'" in notes and "Scan node 'b_" in notes and "unrolled into its 5 iterations" in notes
    assert sorted(what.split(",")[0] for _, what in prepared.recovered) == [
        "GRU (linear_before_reset=1) cell",
        "LSTM cell",
        "unrolled",
    ]


def test_each_round_infers_the_whole_model_at_most_once_for_its_passes(folded):
    """Round by round: the If inlined (no shape asked), the Loop recovered, the Loop unrolled, the
    Scan written as a Loop, that Loop recovered, then the last round finds nothing to do and its
    shapes are the answer. A round with Loop states left infers twice, the fixed point declaring
    them (their initial shapes, then the bodies' under them), and that second inference is the
    analysis itself, not run a third time; no pass infers again (not the Scan's trial as a Loop,
    not the refusal); the last round, with no state left, once. Constant folding never infers
    here: no Shape or Size node."""
    counted, _ = folded
    assert [r["infer passes"] for r in counted.rounds] == [0, 2, 2, 2, 2, 1]
    assert [r["infer fold"] for r in counted.rounds] == [0] * 6
    assert [r["Loop"] for r in counted.rounds] == [2, 2, 1, 0, 1, 0]


def test_each_body_is_recognised_and_asked_over_time_once_a_round(folded):
    counted, _ = folded
    assert [dict(seen) for seen in counted.recognised] == [{}, {"a_loop": 1}, {"c_loop": 1}, {"b_scan": 1}, {"b_scan": 1}, {}]
    for r in counted.rounds:  # every Loop of the main graph asked once, in the round whose model holds it
        assert r["over_time"] == (r["Loop"] if r is not counted.rounds[0] else 0)


def test_constant_folding_infers_only_for_a_shape_or_size(monkeypatch):
    """fold_constants asks onnx's inference for Shape and Size nodes only: a model with none folds
    its constant subexpressions with no inference; one Shape node makes it infer."""
    calls = []
    real = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda *a, **k: calls.append(1) or real(*a, **k))
    nodes = [
        helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array([2.0], np.float32))),
        helper.make_node("Add", ["two", "two"], ["four"]),
        helper.make_node("Mul", ["x", "four"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "n"])
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    out, names = fold.fold_constants(model)
    assert names == ["four"] and calls == []
    assert numpy_helper.to_array(next(t for t in out.graph.initializer if t.name == "four")).tolist() == [4.0]
    model.graph.node.append(helper.make_node("Shape", ["y"], ["shape"]))
    model.graph.output.append(helper.make_tensor_value_info("shape", TensorProto.INT64, [2]))
    out, names = fold.fold_constants(model)
    assert names == ["four"] and len(calls) == 2  # a Shape of a dynamic tensor: inferred, found dynamic, left


@pytest.mark.parametrize(
    "spec",
    [BodySpec("lstm", "plain"), BodySpec("gru_lbr1", "scan", scan_axis=1, reverse=1), BodySpec("rnn_tanh", "mask_bool")],
    ids=["states-lstm", "scan-gru-axis1-reversed", "masked-rnn"],
)
def test_the_fixed_point_returns_the_inference_of_the_model_it_leaves(spec):
    """declare_carried_inferred's inference is onnx's inference of the model as declare_carried
    leaves it, byte for byte, so the analysis may keep it."""
    model = build(spec)
    mine = onnx.ModelProto()
    mine.CopyFrom(model)
    gained, inferred = declare_carried_inferred(mine)
    theirs = onnx.ModelProto()
    theirs.CopyFrom(model)
    assert declare_carried(theirs) == gained
    assert mine.SerializeToString() == theirs.SerializeToString()
    assert inferred.SerializeToString() == onnx.shape_inference.infer_shapes(theirs, data_prop=True).SerializeToString()


@pytest.mark.parametrize("axis, reverse", [(0, 0), (0, 1), (1, 0), (1, 1)], ids=["axis0", "axis0-reversed", "axis1", "axis1-reversed"])
def test_the_scan_pass_reads_the_shapes_onnx_infers_for_the_moved_inputs(axis, reverse):
    """The Scan pass tries a Scan as the Loop it is without inferring the whole model again: the
    moved inputs' shapes (a Transpose's permutation, a reversing Slice's same dims) and types it
    gives the recogniser are onnx's own, tensor by tensor, for every outer tensor the Loop reads."""
    model = build(BodySpec("gru_lbr1", "scan", scan_axis=axis, reverse=reverse))
    model = graph_view(model).model
    index, scan = next((k, n) for k, n in enumerate(model.graph.node) if n.op_type == "Scan")
    enclosing = EnclosingGraph(model.graph, analysis_module.infer_with_states(model).graph, constant_value)
    names = Names(model.graph)
    new_nodes, inits, loop = as_loop(scan, enclosing.shape, lambda n: names.tensor(n, "s", names.tensors), OPSET)
    trial = onnx.ModelProto()
    trial.CopyFrom(model)
    del trial.graph.node[index]
    for k, n in enumerate(new_nodes):
        trial.graph.node.insert(index + k, n)
    trial.graph.initializer.extend(inits)
    moved = enclosing.with_nodes(trial.graph, new_nodes[: new_nodes.index(loop)])
    inferred = EnclosingGraph(trial.graph, analysis_module.infer_with_states(trial).graph, constant_value)
    body = next(a.g for a in loop.attribute if a.name == "body")
    own = {o for n in body.node for o in n.output} | {i.name for i in body.input} | {t.name for t in body.initializer}
    read = sorted({i for n in body.node for i in n.input if i and i not in own} | set(loop.input))
    assert moved is not None and len(new_nodes[: new_nodes.index(loop)]) == (axis != 0) + reverse
    assert [(n, moved.shape(n), moved.elem_type(n)) for n in read] == [(n, inferred.shape(n), inferred.elem_type(n)) for n in read]


def test_the_scan_pass_infers_when_it_cannot_read_the_shapes():
    """with_nodes answers None for a node it does not know (the pass then infers the trial): never a guess."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    model = helper.make_model(helper.make_graph([], "g", [x], [x]), opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    enclosing = EnclosingGraph(model.graph, onnx.shape_inference.infer_shapes(model).graph, constant_value)
    assert enclosing.with_nodes(model.graph, [helper.make_node("Relu", ["x"], ["r"])]) is None
    assert enclosing.with_nodes(model.graph, [helper.make_node("Transpose", ["x"], ["t"])]) is None  # no perm: not as_loop's
    assert enclosing.with_nodes(model.graph, [helper.make_node("Transpose", ["y"], ["t"], perm=[1, 0])]) is None  # shape unknown
    ok = enclosing.with_nodes(model.graph, [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0])])
    assert ok.shape("t") == [3, 2] and ok.elem_type("t") == TensorProto.FLOAT


_SILERO = importlib.util.find_spec("silero_vad")
SILERO = Path(_SILERO.submodule_search_locations[0]) / "data" if _SILERO and _SILERO.submodule_search_locations else None


@pytest.mark.skipif(
    SILERO is None or not SILERO.is_dir(), reason="the silero-vad wheel is not installed (pip install --no-deps silero-vad==6.2.3)"
)
@pytest.mark.parametrize(
    "file, given, fold",
    [
        ("silero_vad.onnx", "input[1,512],state[2,1,128],sr->16000", [0, 3, 2, 1, 0]),
        ("silero_vad.onnx", "input[1,256],state[2,1,128],sr->8000", [0, 3, 2, 1, 0]),
        ("silero_vad_16k_op15.onnx", "input[1,512],state[2,1,128],sr->16000", [3, 2, 1, 0]),
    ],
    ids=["main-16k", "main-8k", "op15-16k"],
)
def test_silero_infers_while_a_shape_is_asked_and_once_at_the_end(monkeypatch, file, given, fold):
    """silero's Ifs fold in rounds: constant folding infers while a Shape or Size node is left (its
    last rounds, on the inlined 16 kHz or 8 kHz graph, have none), the passes (If inlining) never,
    and the model returned is inferred once: 7 or 6 whole-model inferences in all."""
    counted = Rounds(monkeypatch)
    prepared = prepare(onnx.load(SILERO / file), given)
    assert [r["infer fold"] for r in counted.rounds] == fold
    assert [r["infer passes"] for r in counted.rounds] == [0] * (len(fold) - 1) + [1]
    assert not any(n.op_type == "If" for n in prepared.view.model.graph.node)

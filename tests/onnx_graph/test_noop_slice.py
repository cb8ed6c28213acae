"""A scripted loop over a custom cell (speechbrain's LiGRU under torch.jit.script) reads each step
through a Slice that changes nothing, then a Gather: onnx/loops/noop_slice.py proves such Slices no-ops,
and rewrite.over_time looks through them, so the Loop is unrolled (or its cell recovered)
instead of staying a Loop. The look-alikes, Slices that do change something, are not looked through.
Fixture: tests/fixtures/loops/torch_ligru_scripted.*, made by tools/make_loop_fixtures.py torch."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import FIXTURE_DIR, assert_close, layer_counts, run_ir
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn.onnx.loops.noop_slice import INT_MAX, noop_slice_sources
from ovrnn.onnx.loops.rewrite import over_time

LIGRU = FIXTURE_DIR / "loops" / "torch_ligru_scripted"
HIDING = {"Loop", "TensorIterator"}
INT64_MAX = np.iinfo(np.int64).max


def ligru_data():
    data = np.load(f"{LIGRU}.npz")
    return {k: data[k] for k in data if not k.startswith("out:")}, {k[4:]: data[k] for k in data if k.startswith("out:")}


def ort_outputs(model: onnx.ModelProto, feeds: dict) -> dict:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def test_scripted_ligru_converts_with_no_loop_left_and_matches_torch_and_onnxruntime():
    model = onnx.load(f"{LIGRU}.onnx")
    assert [n.op_type for n in model.graph.node].count("Loop") == 2  # one per layer, as TorchScript wrote them
    feeds, want = ligru_data()
    ir = ovrnn.convert_model(model)
    assert not HIDING & set(layer_counts(ir.xml))
    assert [note.split(": ")[0] for note in ir.notes if note.startswith("Loop node")] == [
        "Loop node '/ligru/rnn.0/Loop'",
        "Loop node '/ligru/rnn.1/Loop'",
    ]
    got = run_ir(ir, feeds)
    runtime = ort_outputs(model, feeds)
    for name in ("y", "h"):
        assert_close(got[name], want[name].astype(np.float64), 1e-5, 1e-5, f"{name} vs torch")
        assert_close(got[name], runtime[name].astype(np.float64), 1e-5, 1e-5, f"{name} vs onnxruntime")
    assert want["y"].shape == (2, 5, 4) and np.abs(want["y"]).max() > 0.1  # not a probe at zero


def with_slice_bound(model: onnx.ModelProto, slot: int, value) -> onnx.ModelProto:
    """The fixture with bound `slot` (1 starts, 2 ends, 4 steps) of the no-op Slice of each Loop
    body replaced by a constant `value`: a look-alike that slices for real."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for loop in (n for n in out.graph.node if n.op_type == "Loop"):
        body = next(a.g for a in loop.attribute if a.name == "body")
        node = next(n for n in body.node if n.op_type == "Slice")
        name = f"{node.name}/lookalike{slot}"
        body.node.insert(0, helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array([value], np.int64))))
        node.input[slot] = name
    return out


@pytest.mark.parametrize("slot, value", [(1, 1), (2, 1), (4, 2)], ids=["starts-1", "ends-1", "steps-2"])
def test_a_slice_that_changes_something_keeps_its_loop(slot, value):
    """x[1:, k], x[:1, k], x[::2, k]: not the step read over_time takes, so the Loops stay
    (OpenVINO's), and the result is still what onnxruntime computes."""
    model = with_slice_bound(onnx.load(f"{LIGRU}.onnx"), slot, value)
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in model.graph.node if n.op_type == "Constant"}
    for loop in (n for n in model.graph.node if n.op_type == "Loop"):
        assert not over_time(next(a.g for a in loop.attribute if a.name == "body"), consts.get, 17)
    feeds, _ = ligru_data()
    runtime = ort_outputs(model, feeds)
    ir = ovrnn.convert_model(model)
    assert layer_counts(ir.xml)["Loop"] + layer_counts(ir.xml)["TensorIterator"] == 2
    got = run_ir(ir, feeds)
    for name in ("y", "h"):
        assert_close(got[name], runtime[name].astype(np.float64), 1e-5, 1e-5, name)


# --- the precondition, bound by bound ----------------------------------------------------------------


def body_with_slice(starts, ends, axes=None, steps=None, *, opset=13, axes_from_outer=False) -> onnx.GraphProto:
    """h' = h + Gather(Slice(x, ...), i, axis=1): x outer [2, 5, 3], the bounds body Constants
    (axes from an Unsqueeze of the outer constant 'outer_axis' when `axes_from_outer`)."""
    nodes, names = [], ["x"]
    for tag, value in (("starts", starts), ("ends", ends)):
        nodes.append(helper.make_node("Constant", [], [tag], value=numpy_helper.from_array(np.array(value, np.int64))))
        names.append(tag)
    if axes_from_outer:
        nodes.append(helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array([0], np.int64))))
        nodes.append(helper.make_node("Unsqueeze", ["outer_axis", "zero"], ["axes"]))
        names.append("axes")
    elif axes is not None:
        nodes.append(helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array(axes, np.int64))))
        names.append("axes")
    if steps is not None:
        if len(names) == 3:
            names.append("")
        nodes.append(helper.make_node("Constant", [], ["steps"], value=numpy_helper.from_array(np.array(steps, np.int64))))
        names.append("steps")
    if opset < 10:
        attrs = {"starts": list(starts), "ends": list(ends), **({"axes": list(axes)} if axes is not None else {})}
        nodes = [helper.make_node("Slice", ["x"], ["xs"], **attrs)]
    else:
        nodes.append(helper.make_node("Slice", names, ["xs"]))
    nodes += [
        helper.make_node("Gather", ["xs", "i"], ["x_t"], axis=1),
        helper.make_node("Add", ["h", "x_t"], ["h2"]),
        helper.make_node("Identity", ["c"], ["c2"]),
    ]
    return helper.make_graph(
        nodes,
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 3]),
        ],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []), helper.make_tensor_value_info("h2", TensorProto.FLOAT, [2, 3])],
    )


OUTER = {"outer_axis": np.array(0, np.int64)}


@pytest.mark.parametrize(
    "case, bounds, dims, noop",
    [
        ("torchscript-colon", dict(starts=[0], ends=[INT64_MAX], axes=[0], steps=[1]), None, True),
        ("int32-max-end", dict(starts=[0], ends=[INT_MAX], axes=[0]), None, True),
        ("axes-absent", dict(starts=[0], ends=[INT64_MAX]), None, True),
        ("two-axes", dict(starts=[0, 0], ends=[INT64_MAX, INT64_MAX], axes=[0, 2]), None, True),
        ("end-equals-dim", dict(starts=[0], ends=[2], axes=[0]), [2, 5, 3], True),
        ("end-past-dim", dict(starts=[0], ends=[7], axes=[0]), [2, 5, 3], True),
        ("negative-axis-known-rank", dict(starts=[0], ends=[2], axes=[-3]), [2, 5, 3], True),
        ("end-equals-dim-unknown", dict(starts=[0], ends=[2], axes=[0]), None, False),
        ("end-short-of-dim", dict(starts=[0], ends=[1], axes=[0]), [2, 5, 3], False),
        ("end-just-below-int-max", dict(starts=[0], ends=[INT_MAX - 1], axes=[0]), None, False),
        ("start-1", dict(starts=[1], ends=[INT64_MAX], axes=[0]), None, False),
        ("start-negative", dict(starts=[-2], ends=[INT64_MAX], axes=[0]), [2, 5, 3], False),
        ("step-2", dict(starts=[0], ends=[INT64_MAX], axes=[0], steps=[2]), None, False),
        ("step-negative", dict(starts=[0], ends=[INT64_MAX], axes=[0], steps=[-1]), None, False),
        ("duplicate-axes", dict(starts=[0, 0], ends=[INT64_MAX, INT64_MAX], axes=[0, 0]), None, False),
        ("axis-out-of-rank", dict(starts=[0], ends=[INT64_MAX], axes=[3]), [2, 5, 3], False),
        ("lengths-differ", dict(starts=[0, 0], ends=[INT64_MAX], axes=[0]), None, False),
    ],
    ids=[
        "torchscript-colon",
        "int32-max-end",
        "axes-absent",
        "two-axes",
        "end-equals-dim",
        "end-past-dim",
        "negative-axis-known-rank",
        "end-equals-dim-unknown",
        "end-short-of-dim",
        "end-just-below-int-max",
        "start-1",
        "start-negative",
        "step-2",
        "step-negative",
        "duplicate-axes",
        "axis-out-of-rank",
        "lengths-differ",
    ],
)
def test_noop_slice_precondition(case, bounds, dims, noop):
    body = body_with_slice(**bounds)
    found = noop_slice_sources(body, None, 13, (lambda name: dims) if dims else None)
    assert found == ({"xs": "x"} if noop else {}), case


def test_axes_computed_from_an_outer_constant_as_torchscript_writes_them():
    body = body_with_slice([0], [INT64_MAX], axes_from_outer=True)
    assert noop_slice_sources(body, OUTER.get, 13) == {"xs": "x"}
    assert noop_slice_sources(body, None, 13) == {}  # the axes unknown: not proven
    assert noop_slice_sources(body, lambda name: np.array(2, np.int64), 13) == {"xs": "x"}  # any axis: ends INT_MAX copy it whole


def test_bounds_computed_at_run_time_are_not_proven():
    body = body_with_slice([0], [INT64_MAX], axes=[0])
    ends = next(n for n in body.node if n.output[0] == "ends")
    body.node.remove(ends)
    body.node.insert(0, helper.make_node("Shape", ["h"], ["ends"], start=0, end=1))  # a value of the loop's state
    assert noop_slice_sources(body, None, 13) == {}


def test_slice_1_attributes():
    assert noop_slice_sources(body_with_slice([0], [INT64_MAX], [0], opset=9), None, 9) == {"xs": "x"}
    assert noop_slice_sources(body_with_slice([1], [INT64_MAX], [0], opset=9), None, 9) == {}


def test_over_time_sees_through_only_a_proven_no_op():
    assert over_time(body_with_slice([0], [INT64_MAX], axes_from_outer=True), OUTER.get, 13)
    assert not over_time(body_with_slice([0], [INT64_MAX], axes_from_outer=True), None, 13)
    assert not over_time(body_with_slice([1], [INT64_MAX], axes_from_outer=True), OUTER.get, 13)

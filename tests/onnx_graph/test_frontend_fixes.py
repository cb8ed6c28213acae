"""The ops OpenVINO's ONNX frontend reads wrong (ovrnn/onnx/for_frontend/fixes.py): every Reduce op,
at opsets 7, 11, 13, 17, 18 and 20, with axes absent, as an attribute or as an input, keepdims absent/0/1
and noop_with_empty_axes absent/0/1, read by the installed OpenVINO with and without the rewrites.
A rewrite must apply exactly where OpenVINO misreads (so a release that reads a node right gets
the model untouched) and give onnxruntime's values; then the RecurrentPPO policy that showed it.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import FIXTURE_DIR
from onnx import TensorProto, helper

import ovrnn
from ovrnn.onnx.for_frontend import fixes as frontend_fixes
from ovrnn.onnx.for_frontend.fixes import apply_fixes, installed_openvino

REDUCE_OPS = (
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
)
AXES = (None, [-1], [1], [0, 2], [-2, -1], [])
SHAPE = (2, 3, 4)
RL = FIXTURE_DIR / "rl"


def _cases(opset: int):
    """(id, op, axes, keepdims, noop, axes_as_input) for one opset: ReduceSum's axes are an input
    from opset 13, the others' from 18; noop_with_empty_axes exists with the input form only."""
    for op in REDUCE_OPS:
        as_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
        for axes in AXES:
            if axes == [] and not as_input:
                continue
            for keepdims in (None, 0, 1):
                for noop in (None, 0, 1) if as_input else (None,):
                    label = f"{op}-{opset} axes={axes}{' (input)' if as_input and axes is not None else ''} keepdims={keepdims} noop={noop}"
                    yield label, op, axes, keepdims, noop, as_input


def matrix_model(opset: int, scale: float = 1.0) -> tuple[onnx.ModelProto, list[str], dict]:
    """Every case of one opset as one node of one model (one compile per opset), on signed inputs
    (|x| matters for L1/L2) and positive ones for ReduceLogSum; ``scale`` makes them large."""
    nodes, outputs, inits, labels = [], [], [], []
    for k, (label, op, axes, keepdims, noop, as_input) in enumerate(_cases(opset)):
        attrs = {n: v for n, v in (("keepdims", keepdims), ("noop_with_empty_axes", noop)) if v is not None}
        inputs = ["p" if op == "ReduceLogSum" else "x"]
        if axes is not None and as_input:
            inits.append(helper.make_tensor(f"axes{k}", TensorProto.INT64, [len(axes)], axes))
            inputs.append(f"axes{k}")
        elif axes is not None:
            attrs["axes"] = axes
        nodes.append(helper.make_node(op, inputs, [f"y{k}"], name=f"case{k}", **attrs))
        outputs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))
        labels.append(label)
    graph = helper.make_graph(
        nodes, f"reduce_{opset}", [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("x", "p")], outputs, inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    rng = np.random.default_rng(opset)
    x = (rng.uniform(0.1, 2.0, SHAPE) * rng.choice([-1.0, 1.0], SHAPE) * scale).astype(np.float32)
    return model, labels, {"x": x, "p": np.abs(x)}


def _openvino(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled(feeds)
    return [got[o] for o in compiled.outputs]


def _onnxruntime(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _same(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5) -> bool:
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=rtol, atol=1e-5, equal_nan=True))


@pytest.mark.parametrize("opset", [7, 11, 13, 17, 18, 20], ids=lambda o: f"opset{o}")
def test_rewrites_exactly_what_openvino_misreads(opset):
    """A case is misread when OpenVINO's value differs from onnxruntime's at inputs of about 1 or
    of about 300 (where exp overflows f32 unless the max is subtracted first)."""
    misread, rewritten = set(), set()
    for scale in (1.0, 300.0):
        model, labels, feeds = matrix_model(opset, scale)
        want = _onnxruntime(model, feeds)
        plain = _openvino(model, feeds)
        fixed, notes = apply_fixes(model)
        producer = {n.output[0]: n for n in fixed.graph.node}
        rewritten = {labels[k] for k in range(len(labels)) if producer[f"y{k}"].op_type != model.graph.node[k].op_type}
        assert bool(rewritten) == bool(notes)
        misread |= {label for label, g, w in zip(labels, plain, want) if not _same(g, w)}
        wrong = [label for label, g, w in zip(labels, _openvino(fixed, feeds), want) if not _same(g, w)]
        assert not wrong, f"still wrong after the rewrite (inputs ~{scale}): {wrong}"
    assert rewritten == misread, (
        f"OpenVINO {installed_openvino()}: misread but not rewritten {sorted(misread - rewritten)}; rewritten but read right "
        f"{sorted(rewritten - misread)}"
    )


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT16, TensorProto.DOUBLE], ids=["float16", "float64"])
def test_rewrites_keep_the_element_type(dtype):
    """The rewrites of ReduceL1/LogSum/LogSumExp-13 in float16 and float64 models (the max's zero
    is a constant of x's type) give onnxruntime's values and types."""
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node(op, ["x"], [f"y{k}"], axes=[1], keepdims=k % 2, name=f"{op}_{k}")
        for k, op in enumerate(("ReduceL1", "ReduceLogSumExp", "ReduceLogSumExp"))
    ]
    nodes.append(helper.make_node("ReduceLogSum", ["p"], ["y3"], axes=[0, 2], name="ReduceLogSum"))
    graph = helper.make_graph(nodes, "g", [vi("x", dtype, SHAPE), vi("p", dtype, SHAPE)], [vi(f"y{k}", dtype, None) for k in range(4)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    x = np.random.default_rng(2).uniform(-2, 2, SHAPE).astype(np_type)
    feeds = {"x": x, "p": (np.abs(x) + 0.1).astype(np_type)}
    fixed, notes = apply_fixes(model, openvino=(2026, 4, 1))
    assert len(notes) == 1 and "4 node(s)" in notes[0]
    for got, want in zip(_openvino(fixed, feeds), _onnxruntime(model, feeds)):
        assert got.dtype == want.dtype and _same(got, want, rtol=2e-3 if dtype == TensorProto.FLOAT16 else 1e-6)


def test_the_misreadings_of_the_installed_release_are_the_documented_ones():
    """On 2026.4.1: ReduceL1/LogSum/LogSumExp's axes attribute at opsets 13-17, and the element-wise
    step of ReduceL1/L2/LogSum with noop_with_empty_axes at 18 (docs/whole_models.md's table)."""
    if installed_openvino()[:2] != (2026, 4):
        pytest.skip("the table is of OpenVINO 2026.4")
    active = {(op, fix.opsets) for fix in frontend_fixes.FIXES if fix.affects(installed_openvino()) for op in fix.ops}
    assert active == {
        ("ReduceL1", (13, 17)),
        ("ReduceLogSum", (13, 17)),
        ("ReduceLogSumExp", (13, 17)),
        ("ReduceL1", (18, None)),
        ("ReduceL2", (18, None)),
        ("ReduceLogSum", (18, None)),
        ("HardSigmoid", (1, None)),
    }


@pytest.mark.parametrize("opset", [7, 11, 17, 18], ids=lambda o: f"opset{o}")
def test_log_sum_exp_rewrite_is_stable_for_large_and_infinite_values(opset):
    """Log(ReduceSum(Exp(x - max))) + max: |x| ~ 1000 and -inf entries (masked logits) stay exact,
    where exp(x) alone overflows f32 at x > 88 (as 2025.4.1 computes it: the rewrite it gets), in
    each opset's form (Clip-6 before 11, the axes as an input from 18)."""
    x = np.array([[[1000.0, 999.0, -1000.0, 0.0]], [[-np.inf, 5.0, -np.inf, 4.0]], [[-np.inf] * 4]], dtype=np.float32)
    vi = helper.make_tensor_value_info
    for keepdims in (0, 1):
        inputs, inits, attrs = ["x"], [], {"keepdims": keepdims}
        if opset >= 18:
            inputs.append("axes")
            inits.append(helper.make_tensor("axes", TensorProto.INT64, [1], [-1]))
        else:
            attrs["axes"] = [-1]
        node = helper.make_node("ReduceLogSumExp", inputs, ["y"], **attrs)
        model = helper.make_model(
            helper.make_graph([node], "lse", [vi("x", TensorProto.FLOAT, x.shape)], [vi("y", TensorProto.FLOAT, None)], inits),
            opset_imports=[helper.make_opsetid("", opset)],
        )
        model.ir_version = 8
        fixed, notes = apply_fixes(model, openvino=(2025, 4, 1))
        assert notes
        (got,) = _openvino(fixed, {"x": x})
        want = np.logaddexp.reduce(x.astype(np.float64), axis=-1, keepdims=bool(keepdims))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)  # 1000.3133, 5.3133, -inf


def test_fixes_follow_the_installed_release():
    """Each fix is made for the releases that misread the node, and only for them: ReduceLogSumExp-13
    with axes [1] overflows on 2024.6 and 2025.4 and is reduced over every axis from 2026;
    ReduceLogSum-13 is read right until 2025.4; ReduceL1-13 is misread from 2025.4 on."""

    def model(op):
        graph = helper.make_graph(
            [helper.make_node(op, ["x"], ["y"], axes=[1])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    def why(op, release):
        original = model(op)
        fixed, notes = apply_fixes(original, openvino=release)
        assert (fixed is not original) == bool(notes) and len(notes) <= 1
        return notes[0].split("reads wrong (")[1].split(":")[0] if notes else None

    releases = ((2024, 6, 0), (2025, 4, 1), (2026, 0, 0), (2026, 4, 1))
    assert [why("ReduceLogSumExp", r) for r in releases] == [
        "exp overflows",
        "exp overflows",
        "axes attribute ignored",
        "axes attribute ignored",
    ]
    assert [why("ReduceLogSum", r) for r in releases] == [None, None, "axes attribute ignored", "axes attribute ignored"]
    assert [why("ReduceL1", r) for r in releases] == [None, "axes attribute ignored", "axes attribute ignored", "axes attribute ignored"]


def _rl(name):
    return RL / f"recurrent_ppo.{name}"


def test_recurrent_ppo_log_prob_matches_after_conversion():
    """sb3-contrib RecurrentPPO (tools/make_rl_fixtures.py): actions, values, log_prob and the four
    LSTM states match the policy's own outputs at f32; the LSTMs are cell chains, the
    ReduceLogSumExp is rewritten and said so."""
    from conftest import assert_close, layer_counts, run_ir

    feeds = dict(np.load(_rl("inputs.npz")))
    want = dict(np.load(_rl("torch.npz")))
    ir = ovrnn.convert_model(str(_rl("onnx")))
    counts = layer_counts(ir.xml)
    assert counts["LSTMCell"] == 2 and counts["LSTMSequence"] == 0
    if installed_openvino()[:2] == (2026, 4):
        assert any("'/policy/ReduceLogSumExp'" in n and "openvinotoolkit/openvino#38238" in n for n in ir.notes), ir.notes
    got = run_ir(ir, feeds)
    for name, value in want.items():
        assert_close(got[name], value.astype(np.float64), 1e-5, 1e-5, name)


def test_recurrent_ppo_on_older_releases_gets_the_overflow_fix(monkeypatch):
    """On 2025.4.1 (which reads ReduceLogSumExp-17's axes right but overflows past 88) the policy's
    node is rewritten for that reason, and the note says so."""
    monkeypatch.setattr(frontend_fixes, "installed_openvino", lambda: (2025, 4, 1))
    ir = ovrnn.convert_model(str(_rl("onnx")))
    assert [n.split(": ")[0] for n in ir.notes if "rewritten" in n] == [
        "1 node(s) rewritten that OpenVINO's ONNX frontend reads wrong (exp overflows"
    ]


def test_rewrites_inside_bodies_too():
    """An If on a runtime condition stays in the model; the ReduceLogSumExp-17 in its branch is
    rewritten as well, and both branches give onnxruntime's values."""
    vi = helper.make_tensor_value_info
    then = helper.make_graph(
        [helper.make_node("ReduceLogSumExp", ["x"], ["t"], axes=[-1], keepdims=0, name="lse")],
        "then",
        [],
        [vi("t", TensorProto.FLOAT, None)],
    )
    other = helper.make_graph(
        [helper.make_node("ReduceMax", ["x"], ["e"], axes=[-1], keepdims=0, name="max")], "else", [], [vi("e", TensorProto.FLOAT, None)]
    )
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")]
    graph = helper.make_graph(
        nodes, "g", [vi("x", TensorProto.FLOAT, [4, 3]), vi("c", TensorProto.BOOL, [])], [vi("y", TensorProto.FLOAT, None)]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    fixed, notes = apply_fixes(model, openvino=(2026, 4, 1))
    assert len(notes) == 1 and "'lse'" in notes[0]
    branch = next(a.g for a in fixed.graph.node[0].attribute if a.name == "then_branch")
    assert [n.op_type for n in branch.node][-1] == "Add" and branch.node[-1].name == "lse"
    x = np.random.default_rng(1).uniform(-3, 3, (4, 3)).astype(np.float32)
    ir = ovrnn.convert_model(model)
    from conftest import run_ir

    for c in (True, False):
        feeds = {"x": x, "c": np.array(c)}
        (got,) = run_ir(ir, feeds).values()
        (want,) = _onnxruntime(model, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --- preconditions: the rewrite is exact for the node, or the node is refused; look-alikes untouched --


def _one_node(op, elem, opset=13, domain="", producer=None, **attrs):
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node(op, ["x"], ["y"], name="r", domain=domain, **attrs)]
    if producer is not None:  # x comes from an op of a domain onnx does not know: its type is unknown
        nodes.insert(0, helper.make_node(producer, ["x0"], ["x"], name="custom", domain="com.example"))
        nodes[1].input[0] = "x"
    inputs = [vi("x0" if producer else "x", elem, [2, 3])]
    opsets = [helper.make_opsetid("", opset)] + (
        [helper.make_opsetid(d, 1) for d in {domain, "com.example"} - {""}] if domain or producer else []
    )
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, [vi("y", elem, None)]), opset_imports=opsets)
    model.ir_version = 8
    return model


AXES_WHY = (
    "axes attribute ignored: its opset-13 translators of these ops (src/frontends/onnx/frontend/src/op/reduce.cpp, namespace opset_13) "
    "take the axes from a second input, which only opset 18 has, so the fallback reduces over every axis (openvinotoolkit/openvino#38238)"
)


@pytest.mark.parametrize("op", ["ReduceLogSum", "ReduceLogSumExp"])
def test_an_integer_log_reduction_openvino_misreads_is_refused(op):
    """int64 ReduceLogSum-13 with axes [1]: OpenVINO 2026.4 reduces over every axis (a scalar where
    the spec has one value per row), and Log/Exp cannot be written in int64: refused, not misread."""
    import openvino as ov

    model = _one_node(op, TensorProto.INT64, axes=[1], keepdims=0)
    compiled = ov.Core().compile_model(ov.Core().read_model(model.SerializeToString(), b""), "CPU")
    assert compiled({"x": np.arange(6, dtype=np.int64).reshape(2, 3)})[0].shape == ()  # the misreading
    with pytest.raises(ovrnn.UnsupportedFeatureError) as refused:
        apply_fixes(model, openvino=(2026, 4, 1))
    assert str(refused.value) == (
        f"{op} node 'r': OpenVINO's ONNX frontend reads it wrong ({AXES_WHY}), and ovrnn cannot rewrite it exactly: "
        "its input 'x' is int64, and the rewrite computes Log/Exp, which take float types only"
    )


def test_a_log_sum_exp_of_unknown_type_is_refused_not_taken_for_float():
    """Its input comes from a custom op: onnx cannot tell its type. Before, float was assumed, and
    the rewrite wrote float constants beside a tensor of any type."""
    model = _one_node("ReduceLogSumExp", TensorProto.DOUBLE, producer="Mystery", axes=[1])
    with pytest.raises(ovrnn.UnsupportedFeatureError) as refused:
        apply_fixes(model, openvino=(2025, 4, 1))
    assert str(refused.value).endswith(
        "and ovrnn cannot rewrite it exactly: the element type of its input 'x' is not known to onnx's type inference, and the "
        "rewrite computes Log/Exp in it"
    )
    assert str(refused.value).startswith("ReduceLogSumExp node 'r': OpenVINO's ONNX frontend reads it wrong (exp overflows: ")


def test_an_integer_reduce_l1_is_rewritten_exactly():
    model = _one_node("ReduceL1", TensorProto.INT64, axes=[1], keepdims=0)
    fixed, notes = apply_fixes(model, openvino=(2026, 4, 1))
    assert len(notes) == 1
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.int64)
    (got,) = _openvino(fixed, {"x": x})
    np.testing.assert_array_equal(got, [6, 15])


def _with_empty_axes(model):
    model.graph.node[0].attribute.append(helper.make_attribute("axes", [], attr_type=onnx.AttributeProto.INTS))
    return model


@pytest.mark.parametrize(
    "case, model",
    [
        ("custom-domain-look-alike", lambda: _one_node("ReduceL1", TensorProto.FLOAT, domain="com.example", axes=[1])),
        ("empty-axes-attribute-means-all", lambda: _with_empty_axes(_one_node("ReduceL1", TensorProto.FLOAT))),
        ("opset-12-reads-its-attribute", lambda: _one_node("ReduceLogSum", TensorProto.FLOAT, opset=12, axes=[1])),
        ("reduce-sum-is-read-right", lambda: _one_node("ReduceSum", TensorProto.FLOAT, opset=11, axes=[1])),
    ],
)
def test_look_alikes_are_not_rewritten(case, model):
    original = model()
    assert apply_fixes(original, openvino=(2026, 4, 1)) == (original, ()), case


def test_a_runtime_axes_input_is_not_taken_for_empty():
    """noop_with_empty_axes=1 with an axes input that is a graph input: whether it is empty is known
    only at run time, so no rewrite (docs/whole_models.md lists it among what is not rewritten)."""
    vi = helper.make_tensor_value_info
    node = helper.make_node("ReduceL1", ["x", "axes"], ["y"], noop_with_empty_axes=1)
    model = helper.make_model(
        helper.make_graph(
            [node], "g", [vi("x", TensorProto.FLOAT, [2, 3]), vi("axes", TensorProto.INT64, [None])], [vi("y", TensorProto.FLOAT, None)]
        ),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    assert apply_fixes(model, openvino=(2026, 4, 1)) == (model, ())

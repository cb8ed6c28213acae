"""The float64 reference's evaluator (reference/fallback.py) never crashes on what
onnx.reference's loader gives, whatever its kind: an OpRun class, a factory of OpFunction instances
(ops computed through their schema's function body: HardSwish, Mish, MeanVarianceNormalization;
model-local functions), an op whose function depends on its input types (Gelu, GroupNormalization:
``RuntimeContextError``, retried by the evaluator with the types), or no implementation at all
(handed to onnxruntime). One test over every op of the default domain, then a table of small models,
one per kind and per correction, each against onnxruntime.
"""

from __future__ import annotations

import inspect

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, defs, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun, RuntimeContextError

from ovrnn import reference
from ovrnn.reference.fallback import NodeFallback, evaluator_class

OPSET = defs.onnx_opset_version()  # every op as the newest opset defines it
SCHEMAS = [defs.get_schema(name, OPSET, "") for name in sorted({s.name for s in defs.get_all_schemas() if s.domain == ""})]


def _node_for(schema) -> onnx.NodeProto:
    """A node of the op with its least inputs and outputs (attributes left to their defaults)."""
    inputs = [f"i{k}" for k in range(schema.min_input)]
    outputs = [f"o{k}" for k in range(max(schema.min_output, 1))]
    return helper.make_node(schema.name, inputs, outputs)


def _identity_model() -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "g", [vi("x", TensorProto.FLOAT, [1])], [vi("y", TensorProto.FLOAT, [1])]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


def _loader_kind(evaluator, node) -> str:
    try:
        impl = ReferenceEvaluator._load_impl(evaluator, node)
    except RuntimeContextError:
        return "context-dependent"
    except Exception:  # noqa: BLE001
        return "none"
    return "class" if inspect.isclass(impl) else "factory"


def test_every_op_loads_through_the_guard_whatever_the_loader_gives():
    """For each op of the default domain: what ovrnn's evaluator gives back for a node of it makes an
    instance wherever onnx.reference's own does, and that instance's ``run`` is guarded; an op
    without implementation comes back as a class that hands the node to onnxruntime; a
    context-dependent one raises RuntimeContextError for the evaluator to retry, as onnx.reference's."""
    model = _identity_model()
    fallback = NodeFallback(model, True)
    evaluator = evaluator_class(fallback, set())(model)
    plain = ReferenceEvaluator(model)
    run_params = {
        "log": lambda *a: None,
        "opsets": evaluator.opsets,
        "verbose": 0,
        "new_ops": {},
        "existing_functions": {},
        "evaluator_cls": type(evaluator),
    }
    kinds: dict[str, list[str]] = {}
    for schema in SCHEMAS:
        if schema.deprecated:
            continue
        node = _node_for(schema)
        kind = _loader_kind(plain, node)
        kinds.setdefault(kind, []).append(schema.name)
        if kind == "context-dependent":
            with pytest.raises(RuntimeContextError):
                evaluator._load_impl(node)
            continue
        made = evaluator._load_impl(node)
        if kind == "none":
            assert inspect.isclass(made) and issubclass(made, OpRun), schema.name
            continue
        try:
            ReferenceEvaluator._load_impl(plain, node)(node, run_params)
        except Exception:  # noqa: BLE001 - onnx.reference cannot make one from a bare node (a required attribute): nor need ours
            continue
        op = made(node, run_params)
        has_body = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
        assert has_body or op.run.__name__ == "guarded_run", schema.name
    assert {"HardSwish", "Mish", "MeanVarianceNormalization"} <= set(kinds["factory"])
    assert {"Gelu", "GroupNormalization"} <= set(kinds["context-dependent"])
    assert len(kinds["class"]) > 150


vi = helper.make_tensor_value_info


def _model(nodes, inputs, outputs, inits=(), opset=18, functions=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("local", 1)] if functions else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=8, functions=list(functions))


def _unary(op: str, opset: int, **attrs) -> onnx.ModelProto:
    return _model(
        [helper.make_node(op, ["x"], ["y"], **attrs)],
        [vi("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [vi("y", TensorProto.FLOAT, None)],
        opset=opset,
    )


def _group_norm() -> onnx.ModelProto:
    inits = [
        numpy_helper.from_array(np.array([1.5, 0.5, -1.0], np.float32), "s"),
        numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32), "b"),
    ]
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)
    return _model([node], [vi("x", TensorProto.FLOAT, [2, 3, 4, 5])], [vi("y", TensorProto.FLOAT, None)], inits, opset=21)


def _batch_norm(opset: int, **attrs) -> onnx.ModelProto:
    """Inference BatchNormalization, as paddle2onnx writes it (momentum set): running stats far from the batch's."""
    rng = np.random.default_rng(4)
    inits = [
        numpy_helper.from_array(v.astype(np.float32), n)
        for n, v in (
            ("s", rng.uniform(0.5, 1.5, 3)),
            ("b", rng.uniform(-1, 1, 3)),
            ("m", rng.uniform(-1, 1, 3)),
            ("v", rng.uniform(0.5, 2, 3)),
        )
    ]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], **attrs)
    return _model([node], [vi("x", TensorProto.FLOAT, [2, 3, 4, 5])], [vi("y", TensorProto.FLOAT, None)], inits, opset=opset)


def _local_function() -> onnx.ModelProto:
    """A model-local function (HardSwish then Neg): onnx.reference loads it as a factory too."""
    fn = helper.make_function(
        "local",
        "SwishNeg",
        ["a"],
        ["b"],
        [helper.make_node("HardSwish", ["a"], ["t"]), helper.make_node("Neg", ["t"], ["b"])],
        [helper.make_opsetid("", 18)],
    )
    return _model(
        [helper.make_node("SwishNeg", ["x"], ["y"], domain="local")],
        [vi("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [vi("y", TensorProto.FLOAT, None)],
        opset=18,
        functions=[fn],
    )


def _loop_of_hardswish() -> onnx.ModelProto:
    """A Loop of 3 iterations whose body applies HardSwish to the carried value (bodies' evaluators are ovrnn's)."""
    body = helper.make_graph(
        [helper.make_node("HardSwish", ["v"], ["v2"]), helper.make_node("Identity", ["c"], ["c2"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("v", TensorProto.FLOAT, None)],
        [vi("c2", TensorProto.BOOL, []), vi("v2", TensorProto.FLOAT, None)],
    )
    inits = [numpy_helper.from_array(np.array(3, np.int64), "M")]
    loop = helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)
    return _model([loop], [vi("x", TensorProto.FLOAT, [2, 3, 4, 5])], [vi("y", TensorProto.FLOAT, None)], inits, opset=18)


def _zero_d() -> onnx.ModelProto:
    return _model(
        [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)],
        [vi("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [vi("y", TensorProto.FLOAT, [])],
        opset=18,
    )


def _global_lp_pool() -> onnx.ModelProto:
    return _unary("GlobalLpPool", 18, p=3)


# id -> (model, handed to onnxruntime?)
MODELS = {
    "HardSwish-14 (a function factory)": (lambda: _unary("HardSwish", 14), False),
    "Mish-18 (a function factory)": (lambda: _unary("Mish", 18), False),
    "MeanVarianceNormalization-13 (a function factory)": (lambda: _unary("MeanVarianceNormalization", 13), False),
    "Gelu-20 tanh (context-dependent)": (lambda: _unary("Gelu", 20, approximate="tanh"), False),
    "GroupNormalization-21 (context-dependent)": (_group_norm, False),
    "BatchNormalization-9 with momentum (onnx.reference: training mode)": (lambda: _batch_norm(9, epsilon=1e-5, momentum=0.9), False),
    "BatchNormalization-11 with momentum, as paddle2onnx writes it": (lambda: _batch_norm(11, epsilon=1e-5, momentum=0.9), False),
    "BatchNormalization-15 training_mode=0": (lambda: _batch_norm(15, epsilon=1e-3), False),
    "a model-local function holding HardSwish": (_local_function, False),
    "a Loop body holding HardSwish": (_loop_of_hardswish, False),
    "a 0-d output (ReduceSum keepdims=0)": (_zero_d, False),
    "GlobalLpPool (no onnx.reference code: onnxruntime computes it)": (_global_lp_pool, True),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_the_reference_computes_what_onnxruntime_computes(name):
    make, handed = MODELS[name]
    model = make()
    x = np.random.default_rng(7).uniform(-4, 4, (2, 3, 4, 5)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(["y"], {"x": x})[0]
    notes: list[str] = []
    got = reference.run_model(model, {"x": x}, notes)["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=2e-5)
    assert bool(notes) == handed, notes
    if handed:
        with pytest.raises(
            reference.ReferenceUnavailable,
            match=r"cannot compute node 'y' \(GlobalLpPool\), which onnx\.reference has no implementation of",
        ):
            reference.run_model(model, {"x": x})
    else:  # nothing needs onnxruntime: the reference alone computes it
        np.testing.assert_allclose(reference.run_model(model, {"x": x})["y"], want, atol=2e-5, rtol=2e-5)


def test_onnx_reference_alone_misreads_the_inference_batch_norm():
    """The correction is needed: onnx.reference's own BatchNormalization-11 with momentum blends
    the batch statistics in (what the reference computed before, a false FAIL on PaddleOCR's CRNN)."""
    model = _batch_norm(11, epsilon=1e-5, momentum=0.9)
    x = np.random.default_rng(7).uniform(-4, 4, (2, 3, 4, 5)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]
    plain = ReferenceEvaluator(model).run(["y"], {"x": x})[0]
    assert np.abs(plain - want).max() > 1e-2


RANDOM = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Dropout"}
# op -> why the reference cannot compute its first backend case (then validate judges by onnxruntime alone, with a note)
UNAVAILABLE = {
    "Scan": "test_scan_sum is Scan-8 (a batch axis, an empty sequence_lens): onnx.reference runs its body with no type for it, "
    "onnxruntime refuses the body's Add alone"
}


def _first_case_per_op() -> dict:
    """ONNX's own backend node cases (onnx.backend.test.case.node: every op of the spec, with the
    outputs its authors expect), the first per op whose inputs and outputs are all numeric tensors."""
    import warnings

    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node.collect_testcases(None)
    first: dict = {}
    for case in cases:
        op = case.model.graph.node[0].op_type
        inputs, outputs = case.data_sets[0]
        values = [*inputs, *outputs]
        if op in first or not all(isinstance(v, np.ndarray) and v.dtype.kind in "biuf" for v in values):
            continue
        first[op] = case
    return first


def test_the_reference_computes_onnxs_own_backend_case_of_every_op():
    """One case per op (about 180 ops): the float64 reference (onnx.reference with ovrnn's cells and
    corrections, onnxruntime for a node it has no code for) never crashes, and agrees with the
    outputs the spec's authors wrote, except random ops and the cases UNAVAILABLE names."""
    cases = _first_case_per_op()
    assert len(cases) > 150
    wrong, unavailable = {}, {}
    for op, case in sorted(cases.items()):
        inputs, outputs = case.data_sets[0]
        feeds = dict(zip([i.name for i in case.model.graph.input], inputs))
        try:
            got = reference.run_model(case.model, feeds, [])
        except reference.ReferenceUnavailable as exc:  # one clear error, never a crash
            unavailable[op] = str(exc)
            continue
        for output, want in zip([o.name for o in case.model.graph.output], outputs):
            if op not in RANDOM and (
                got[output].shape != want.shape
                or not np.allclose(got[output], want.astype(np.float64), atol=1e-4, rtol=1e-3, equal_nan=True)
            ):
                wrong[op] = case.name
    assert wrong == {}
    assert set(unavailable) == set(UNAVAILABLE), unavailable


def _gather_elements(axis: int) -> onnx.ModelProto:
    return _model(
        [helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)],
        [vi("x", TensorProto.FLOAT, None), vi("i", TensorProto.INT64, None)],
        [vi("y", TensorProto.FLOAT, None)],
        opset=17,
    )


@pytest.mark.parametrize(
    "axis, index_shape",
    [(-1, (4, 1)), (0, (2, 2)), (1, (3, 5)), (0, (4, 2))],
    ids=[
        "axis -1, [4, 1] from [4, 2] (sb3-contrib's log_prob)",
        "axis 0, smaller on the other axis",
        "axis 1, longer on the gathered axis",
        "axis 0, the same shape",
    ],
)
def test_gather_elements_takes_indices_smaller_than_the_data_off_its_axis(axis, index_shape):
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    size = x.shape[axis]
    i = np.random.default_rng(2).integers(-size, size, index_shape)
    model = _gather_elements(axis)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], {"x": x, "i": i})[0]
    np.testing.assert_array_equal(reference.run_model(model, {"x": x, "i": i})["y"], want)


def test_gather_elements_refuses_an_index_out_of_range_where_onnx_reference_wraps_it():
    """onnx.reference 1.23 wraps index 4 of a 4-row axis to row 0 (a silently wrong reference);
    onnxruntime refuses it, and so does the reference now: one clear error naming the node."""
    model = _gather_elements(0)
    x, i = np.arange(8, dtype=np.float32).reshape(4, 2), np.array([[4, 0]])
    assert ReferenceEvaluator(model).run(["y"], {"x": x, "i": i})[0].tolist() == [[0.0, 1.0]]
    with pytest.raises(Exception):  # noqa: B017 (onnxruntime raises its own types)
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], {"x": x, "i": i})
    with pytest.raises(
        reference.ReferenceUnavailable,
        match=r"cannot compute node 'y' \(GatherElements\), where .*an index is out of \[-4, 3\] on axis 0",
    ):
        reference.run_model(model, {"x": x, "i": i}, [])

"""The ONNX ops OpenVINO's ONNX frontend reads wrong, rewritten before it reads them: the one list.

A whole model goes through OpenVINO's frontend (frontend/whole_model.py), so its misreadings
would be ovrnn's. Each ``FrontendFix`` names the ops, opsets and attribute forms it rewrites, the
OpenVINO releases that misread them (checked against the installed OpenVINO at convert time: the
rewrite is skipped on a release that reads the node right), why, and the equivalent ONNX nodes,
which every release from 2024.6 on reads right (the IR loads and computes the same there).
``tests/onnx_graph/test_frontend_fixes.py`` checks, op by op, opset by opset, that each fix applies exactly
where the installed OpenVINO misreads and that the rewritten node matches onnxruntime.

Precondition of each fix, checked per node: ``applies`` says the node is in the form OpenVINO
misreads (whatever x's element type), ``exact`` that the rewrite computes the same for this node
(Log and Exp, and constants of x's type, only for an x known to be float). A node in the misread
form whose rewrite would not be exact is refused with one UnsupportedFeatureError: left as it is,
OpenVINO would misread it silently. x's type is onnx's type inference's, never assumed.

Measured with every Reduce op x opsets 7/11/13/17/18/20 x axes absent, [-1], [1], [0,2], [-2,-1], []
x keepdims absent/0/1 x noop_with_empty_axes absent/0/1 x inputs ~1 and ~300, on 2024.6.0, 2025.4.1
and 2026.4.1 (the test's matrix, run in a venv of each).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...errors import UnsupportedFeatureError
from .. import graphs
from ..graphs import FLOAT_TYPES, all_nodes, fresh, node_label

Version = tuple[int, ...]


def _version(text: str) -> Version:
    """'2026.4.1-22982-e213a...' or '2026.4.1' -> (2026, 4, 1)."""
    head = text.split("-")[0].split("+")[0]
    return tuple(int(p) for p in head.split(".") if p.isdigit())


@dataclass(frozen=True)
class Reading:
    """One ONNX node as the fixes look at it: its op, the model's opset, and its axes."""

    node: onnx.NodeProto
    opset: int
    axes: list[int] | None  # the attribute, or the constant input; None: absent
    axes_known: bool  # False: a non-constant axes input
    attrs: dict
    elem_type: int | None  # x's TensorProto type; None when onnx's type inference cannot tell


@dataclass(frozen=True)
class FrontendFix:
    name: str
    ops: tuple[str, ...]
    opsets: tuple[int, int | None]  # first and last opset (None: every later one)
    broken_after: str | None  # newest release known to read it right before it broke (None: 2024.6, ovrnn's oldest, misreads it)
    fixed_in: str | None  # first release known to read it right again (None: none yet)
    why: str
    applies: Callable[[Reading], bool]  # the node is in the form OpenVINO misreads (whatever x's type)
    rewrite: Callable[[Reading, Callable[[str], str]], list[onnx.NodeProto]]
    exact: Callable[[Reading], str | None] = lambda r: None  # why the rewrite would not be exact for this node; None: it is

    def affects(self, openvino: Version) -> bool:
        return (self.broken_after is None or openvino > _version(self.broken_after)) and (
            self.fixed_in is None or openvino < _version(self.fixed_in)
        )

    def matches(self, r: Reading) -> bool:
        last = self.opsets[1]
        return (
            r.node.op_type in self.ops
            and r.node.domain in ("", "ai.onnx")
            and self.opsets[0] <= r.opset
            and (last is None or r.opset <= last)
            and self.applies(r)
        )

    def note(self, nodes: list[str]) -> str:
        shown = ", ".join(f"'{n}'" for n in nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        return f"{len(nodes)} node(s) rewritten that OpenVINO's ONNX frontend reads wrong ({self.name}: {shown}): {self.why}"


# --- the rewrites (equations beside them; ``fresh`` makes a tensor name no other tensor has) ---------


def _keepdims(r: Reading) -> int:
    return int(r.attrs.get("keepdims", 1))


def _reduce(op: str, r: Reading, fresh, x: str, out: str, keepdims: int) -> list[onnx.NodeProto]:
    """``op`` over the node's axes, in the form this opset gives ``op`` (an input from opset 18,
    ReduceSum's from 13; an attribute before), which every release reads right. From opset 18 the
    node's own axes input and noop_with_empty_axes are passed on, constant or not."""
    attrs: dict = {"keepdims": keepdims}
    if r.opset >= 18:
        if "noop_with_empty_axes" in r.attrs:
            attrs["noop_with_empty_axes"] = int(r.attrs["noop_with_empty_axes"])
        return [helper.make_node(op, [x, *r.node.input[1:2]], [out], **attrs)]
    if not r.axes:  # absent or empty: every axis
        return [helper.make_node(op, [x], [out], **attrs)]
    if op == "ReduceSum" and r.opset >= 13:
        axes = fresh("axes")
        constant = helper.make_node("Constant", [], [axes], value=numpy_helper.from_array(np.array(r.axes, dtype=np.int64), axes))
        return [constant, helper.make_node(op, [x, axes], [out], **attrs)]
    return [helper.make_node(op, [x], [out], axes=r.axes, **attrs)]


def _finite(r: Reading, fresh, m: str, out: str) -> list[onnx.NodeProto]:
    """m clipped to the type's finite range: a max of -inf (a row of -inf) or +inf shifts by a
    finite number, so x - shift stays -inf or +inf instead of becoming NaN."""
    import ml_dtypes

    if r.opset < 11:  # Clip-6: the bounds are float attributes
        big = float(np.finfo(np.float32).max)
        return [helper.make_node("Clip", [m], [out], min=-big, max=big)]
    big = float(ml_dtypes.finfo(helper.tensor_dtype_to_np_dtype(r.elem_type)).max)
    lo, hi = fresh("lowest"), fresh("highest")
    return [
        helper.make_node("Constant", [], [lo], value=helper.make_tensor(lo, r.elem_type, [], [-big])),
        helper.make_node("Constant", [], [hi], value=helper.make_tensor(hi, r.elem_type, [], [big])),
        helper.make_node("Clip", [m, lo, hi], [out]),
    ]


def _log_sum_exp(r: Reading, fresh) -> list[onnx.NodeProto]:
    """ReduceLogSumExp(x) = Log(ReduceSum(Exp(x - m))) + m with m = ReduceMax(x) (keepdims=1),
    clipped to the finite range: no overflow for large x, -inf for a row of -inf, +inf for +inf.
    With keepdims=0 the max is reduced once more without keepdims, so no Squeeze has to know the axes."""
    x, y, k = r.node.input[0], r.node.output[0], _keepdims(r)
    m, shift, d, e, s, log = (fresh(n) for n in ("max", "shift", "centred", "exp", "sum", "log"))
    nodes = [
        *_reduce("ReduceMax", r, fresh, x, m, 1),
        *_finite(r, fresh, m, shift),
        helper.make_node("Sub", [x, shift], [d]),
        helper.make_node("Exp", [d], [e]),
        *_reduce("ReduceSum", r, fresh, e, s, k),
        helper.make_node("Log", [s], [log]),
    ]
    if k:
        return [*nodes, helper.make_node("Add", [log, shift], [y])]
    m0, shift0 = fresh("max_reduced"), fresh("shift_reduced")
    return [*nodes, *_reduce("ReduceMax", r, fresh, x, m0, 0), *_finite(r, fresh, m0, shift0), helper.make_node("Add", [log, shift0], [y])]


def _attribute_axes(r: Reading, fresh) -> list[onnx.NodeProto]:
    """ReduceL1(x) = ReduceSum(|x|); ReduceLogSum(x) = Log(ReduceSum(x)); ReduceLogSumExp: above."""
    x, y, op = r.node.input[0], r.node.output[0], r.node.op_type
    if op == "ReduceL1":
        a = fresh("abs")
        return [helper.make_node("Abs", [x], [a]), *_reduce("ReduceSum", r, fresh, a, y, _keepdims(r))]
    if op == "ReduceLogSum":
        s = fresh("sum")
        return [*_reduce("ReduceSum", r, fresh, x, s, _keepdims(r)), helper.make_node("Log", [s], [y])]
    return _log_sum_exp(r, fresh)


def _empty_axes(r: Reading, fresh) -> list[onnx.NodeProto]:
    """Reduction over no axes is the element-wise step alone (the spec, opset 18's
    noop_with_empty_axes): ReduceL1, ReduceL2 -> |x|; ReduceLogSum -> Log(x); ReduceLogSumExp -> x;
    ReduceSumSquare -> x * x."""
    x, y, op = r.node.input[0], r.node.output[0], r.node.op_type
    if op in ("ReduceL1", "ReduceL2"):
        return [helper.make_node("Abs", [x], [y])]
    if op == "ReduceLogSum":
        return [helper.make_node("Log", [x], [y])]
    if op == "ReduceSumSquare":
        return [helper.make_node("Mul", [x, x], [y])]
    return [helper.make_node("Identity", [x], [y])]


def _axes_attribute(r: Reading) -> bool:
    """An ``axes`` attribute that names axes (an absent or empty one means all axes, read right)."""
    return "axes" in r.attrs and bool(r.axes)


def _float_input(r: Reading) -> str | None:
    """Why x's type does not allow a rewrite that computes Log/Exp in it and writes constants of
    its type (those take float types only); None when x is known to be float."""
    from ...dtypes import onnx_type_name

    if r.elem_type is None:
        return (
            f"the element type of its input '{r.node.input[0]}' is not known to onnx's type inference, "
            "and the rewrite computes Log/Exp in it"
        )
    if r.elem_type not in FLOAT_TYPES:
        return (
            f"its input '{r.node.input[0]}' is {onnx_type_name(r.elem_type)}, and the rewrite computes Log/Exp, which take float types only"
        )
    return None


def _log_exp_rewrite(r: Reading) -> str | None:
    """_attribute_axes: ReduceL1's Abs and ReduceSum take every numeric type; the others need a float x."""
    return None if r.node.op_type == "ReduceL1" else _float_input(r)


def _step_rewrite(r: Reading) -> str | None:
    """_empty_axes: Abs, Identity and Mul take every numeric type; ReduceLogSum's Log needs a float x."""
    return _float_input(r) if r.node.op_type == "ReduceLogSum" else None


def _no_axes_noop(r: Reading) -> bool:
    """noop_with_empty_axes=1 with no axes input, or a constant empty one."""
    return bool(r.attrs.get("noop_with_empty_axes", 0)) and r.axes_known and not r.axes


_AXES_ATTRIBUTE_WHY = (
    "its opset-13 translators of these ops (src/frontends/onnx/frontend/src/op/reduce.cpp, namespace opset_13) take the axes "
    "from a second input, which only opset 18 has, so the fallback reduces over every axis "
    "(openvinotoolkit/openvino#38238); rewritten as ReduceSum-13 with the axes as an input"
)
_NOOP_WHY = (
    "with noop_with_empty_axes=1 and no axes, its translator returns the input unchanged "
    "(reduce.cpp, make_ov_reduction_op's Identity branch), where the spec keeps the element-wise step "
    "(|x|, Log(x), x*x); rewritten as that step"
)

_OVERFLOW_WHY = (
    "its translator computes Log(ReduceSum(Exp(x))) (reduce.cpp, reduce_log_sum_exp), which overflows to inf once x passes "
    "88 in f32 (11 in f16), where onnxruntime subtracts the max first; rewritten as Log(ReduceSum(Exp(x - max))) + max"
)


def _float(r: Reading) -> bool:
    """A float x, or one whose type onnx cannot tell (then _float_for_log refuses the rewrite)."""
    return r.elem_type in FLOAT_TYPES or r.elem_type is None


def _zero_parameter(r: Reading) -> bool:
    """HardSigmoid with alpha or beta exactly 0 (-0 too)."""
    return float(r.attrs.get("alpha", 0.2)) == 0 or float(r.attrs.get("beta", 0.5)) == 0


def _hard_sigmoid(r: Reading, fresh) -> list[onnx.NodeProto]:
    """HardSigmoid(x) = Clip(alpha*x + beta, 0, 1), the constants of x's type (Clip-6's float
    attributes before opset 11)."""
    x, y = r.node.input[0], r.node.output[0]
    alpha, beta = float(r.attrs.get("alpha", 0.2)), float(r.attrs.get("beta", 0.5))
    names = {k: fresh(k) for k in ("alpha", "beta", "scaled", "affine", "zero", "one")}
    const = lambda n, v: helper.make_node("Constant", [], [names[n]], value=helper.make_tensor(names[n], r.elem_type, [], [v]))  # noqa: E731
    nodes = [
        const("alpha", alpha),
        const("beta", beta),
        helper.make_node("Mul", [x, names["alpha"]], [names["scaled"]]),
        helper.make_node("Add", [names["scaled"], names["beta"]], [names["affine"]]),
    ]
    if r.opset < 11:
        return [*nodes, helper.make_node("Clip", [names["affine"]], [y], min=0.0, max=1.0)]
    return [*nodes, const("zero", 0.0), const("one", 1.0), helper.make_node("Clip", [names["affine"], names["zero"], names["one"]], [y])]


def _float_hard_sigmoid(r: Reading) -> str | None:
    """The rewrite writes constants of x's type: x must be known to be float."""
    if r.elem_type is None or r.elem_type not in FLOAT_TYPES:
        return f"the element type of its input '{r.node.input[0]}' is not known to be float, and the rewrite writes constants of that type"
    return None


_HARD_SIGMOID_WHY = (
    "the CPU plugin takes an alpha or beta of exactly 0 for its defaults 0.2/0.5 (measured on 2026.4.1: off by up to 0.5); "
    "rewritten as Clip(alpha*x + beta, 0, 1)"
)


# The one list, the first match wins. Releases checked: 2024.6.0, 2025.4.1, 2026.4.1
# (tests/onnx_graph/test_frontend_fixes.py; docs/whole_models.md).
FIXES: tuple[FrontendFix, ...] = (
    FrontendFix(
        "axes attribute ignored",
        ("ReduceL1",),
        (13, 17),
        "2024.6.0",
        None,
        _AXES_ATTRIBUTE_WHY,
        _axes_attribute,
        _attribute_axes,
        _log_exp_rewrite,
    ),
    FrontendFix(
        "axes attribute ignored",
        ("ReduceLogSum", "ReduceLogSumExp"),
        (13, 17),
        "2025.4.1",
        None,
        _AXES_ATTRIBUTE_WHY,
        _axes_attribute,
        _attribute_axes,
        _log_exp_rewrite,
    ),
    FrontendFix(
        "noop_with_empty_axes", ("ReduceL1", "ReduceL2"), (18, None), None, None, _NOOP_WHY, _no_axes_noop, _empty_axes, _step_rewrite
    ),
    FrontendFix(
        "noop_with_empty_axes", ("ReduceLogSum",), (18, None), "2025.4.1", None, _NOOP_WHY, _no_axes_noop, _empty_axes, _step_rewrite
    ),
    FrontendFix(
        "noop_with_empty_axes",
        ("ReduceLogSumExp", "ReduceSumSquare"),
        (18, None),
        None,
        "2025.4.1",
        _NOOP_WHY,
        _no_axes_noop,
        _empty_axes,
        _step_rewrite,
    ),
    FrontendFix("exp overflows", ("ReduceLogSumExp",), (1, None), None, "2026.4.1", _OVERFLOW_WHY, _float, _log_sum_exp, _float_input),
    FrontendFix(
        "zero alpha or beta",
        ("HardSigmoid",),
        (1, None),
        None,
        None,
        _HARD_SIGMOID_WHY,
        _zero_parameter,
        _hard_sigmoid,
        _float_hard_sigmoid,
    ),
)
FIXED_OPS = frozenset(op for fix in FIXES for op in fix.ops)


def installed_openvino() -> Version:
    """The installed OpenVINO's release, read from its package metadata (no import)."""
    try:
        return _version(importlib.metadata.version("openvino"))
    except importlib.metadata.PackageNotFoundError:
        return ()


def apply_fixes(
    model: onnx.ModelProto, openvino: Version | None = None, fixes: tuple[FrontendFix, ...] | None = None
) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    """(model, notes): every node (bodies included) a fix for ``openvino`` (default: the installed
    release) matches, replaced by its rewrite; the caller's model is not changed. The rewrite's last
    node keeps the node's name and output, so the IR keeps both."""
    if not any(n.op_type in FIXED_OPS for n in all_nodes(model.graph)):
        return model, ()
    release = installed_openvino() if openvino is None else openvino
    active = [f for f in (FIXES if fixes is None else fixes) if f.affects(release)]
    if not active:
        return model, ()
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    opset = graphs.opset(fixed)
    types = _elem_types(fixed)
    taken = {t for g in graphs.all_graphs(fixed.graph) for t in _names(g)}
    done: dict[str, list[str]] = {}
    for graph in graphs.all_graphs(fixed.graph):
        nodes: list[onnx.NodeProto] = []
        for node in graph.node:
            reading = _reading(node, opset, graph, types)
            fix = next((f for f in active if reading is not None and f.matches(reading)), None)
            if fix is None:
                nodes.append(node)
                continue
            label = node_label(node)
            why_not = fix.exact(reading)
            if why_not is not None:  # misread as it is, and no exact rewrite: one error, never a silent misreading
                raise UnsupportedFeatureError(
                    f"{node.op_type} node '{label}': OpenVINO's ONNX frontend reads it wrong ({fix.name}: {fix.why.split(';')[0]}), "
                    f"and ovrnn cannot rewrite it exactly: {why_not}"
                )
            new = fix.rewrite(reading, lambda kind, label=label: fresh(f"{label}/ovrnn_fix/{kind}", taken))
            for k, n in enumerate(new):
                n.name = node.name if k == len(new) - 1 else fresh(f"{label}/ovrnn_fix/{n.op_type}", taken)
            nodes.extend(new)
            done.setdefault(f"{fix.name}|{fix.why}", []).append(label)
        del graph.node[:]
        graph.node.extend(nodes)
    if not done:
        return model, ()
    notes = tuple(next(f for f in active if f"{f.name}|{f.why}" == key).note(labels) for key, labels in done.items())
    return fixed, notes


def _reading(node: onnx.NodeProto, opset: int, graph: onnx.GraphProto, types: dict[str, int]) -> Reading | None:
    if node.op_type not in FIXED_OPS or not node.input or not node.output:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    axes, known = None, True
    if "axes" in attrs:
        axes = [int(a) for a in attrs["axes"]]
    elif len(node.input) > 1 and node.input[1]:
        value = graphs.constant_value(graph, node.input[1])
        known = value is not None
        axes = None if value is None else [int(a) for a in np.asarray(value).ravel()]
    return Reading(node, opset, axes, known, attrs, types.get(node.input[0]))


def _names(graph: onnx.GraphProto) -> set[str]:
    return (
        {i.name for i in graph.input}
        | {t.name for t in graph.initializer}
        | {o for n in graph.node for o in n.output}
        | {n.name for n in graph.node}
    )


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Tensor name -> element type, from onnx's shape inference (what it cannot infer is left out)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - inference is a help here, not a check
        inferred = model
    types = {}
    for g in graphs.all_graphs(inferred.graph):
        for vi in (*g.input, *g.output, *g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                types[vi.name] = vi.type.tensor_type.elem_type
        types.update({t.name: t.data_type for t in g.initializer})
    return types

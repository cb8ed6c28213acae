"""Where onnx.reference cannot compute a node, onnxruntime computes that node, and the report says so.

onnx.reference has no code for some ops (com.microsoft contrib ops, the old ConstantFill) and
refuses inputs the spec and onnxruntime accept (its GatherElements wants an index as large as the
data on every axis but the gathered one: sb3-contrib's Categorical.log_prob gathers [4, 1] from
[4, 2]). Such a node is run alone on onnxruntime with the values the reference computed for its
inputs; every other node stays onnx.reference's (and ovrnn's float64 RNN/GRU/LSTM), bodies of
If/Loop/Scan included (their evaluators are made from the same class). Without onnxruntime (not
installed, or ``--no-onnxruntime``) the node's failure is a ``ReferenceUnavailable`` naming it.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ..errors import UnsupportedFeatureError
from ..onnx.graphs import node_label

ORT_MAX_IR_VERSION = 10  # as compare.py's: onnx 1.23 writes 14, onnxruntime reads <= 13


class ReferenceUnavailable(UnsupportedFeatureError):
    """The model holds an op the float64 reference cannot compute."""


class NodeFallback:
    """What the reference handed to onnxruntime in one run: node label -> why."""

    def __init__(self, model: onnx.ModelProto, allowed: bool):
        self.opsets = list(model.opset_import)
        self.ir_version = min(model.ir_version, ORT_MAX_IR_VERSION)
        self.allowed = allowed
        self.used: dict[str, str] = {}

    def notes(self) -> list[str]:
        return [
            f"the float64 reference cannot compute node {label}, {why}: onnxruntime computed that node, the reference the rest"
            for label, why in self.used.items()
        ]

    def run(self, node: onnx.NodeProto, inputs: tuple, why: str) -> tuple[np.ndarray, ...]:
        label = f"'{node_label(node)}' ({f'{node.domain}.' if node.domain not in ('', 'ai.onnx') else ''}{node.op_type})"
        if not self.allowed:
            raise ReferenceUnavailable(
                f"the float64 reference (onnx.reference, with ovrnn's RNN/GRU/LSTM) cannot compute node {label}, {why}"
            )
        try:
            values = _run_on_onnxruntime(node, inputs, self.opsets, self.ir_version)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise ReferenceUnavailable(
                f"the float64 reference cannot compute node {label}, {why}; and onnxruntime cannot run it alone either ({first})"
            ) from None
        self.used.setdefault(label, why)
        return values


def evaluator_class(fallback: NodeFallback, own: set[tuple[str, str]]):
    """A ReferenceEvaluator whose node implementations hand a node to ``fallback`` when
    onnx.reference has none or raises; ``own`` (domain, op): ovrnn's implementations, never handed.

    What onnx.reference's loader gives for a node is not always a class: an op it computes through
    the function body of its schema (HardSwish, Mish, MeanVarianceNormalization) or a model-local
    function comes back as a factory of ``OpFunction`` instances, so the guard wraps the instance the
    loader's result makes (a subclass of a factory was a ``TypeError: metaclass conflict``). An op
    whose function depends on its input types (Gelu, GroupNormalization) raises
    ``RuntimeContextError``: that goes back to the evaluator, which retries with the types."""
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun, RuntimeContextError

    class Evaluator(ReferenceEvaluator):
        def _load_impl(self, node, input_types=None):
            key = (node.domain if node.domain != "ai.onnx" else "", node.op_type)
            try:
                impl = super()._load_impl(node, input_types)
            except RuntimeContextError:
                raise
            except Exception:  # noqa: BLE001 (NotImplementedError, RuntimeError: an op onnx.reference has no code for)
                why = "which onnx.reference has no implementation of"
                return type(
                    node.op_type, (OpRun,), {"op_domain": key[0], "_run": lambda self, *args, **_: fallback.run(self.onnx_node, args, why)}
                )
            if key in own or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
                return impl  # ovrnn's own ops, and control flow: a failure inside a body is its node's
            return _guarded(impl, fallback)

    return Evaluator


def _guarded(impl, fallback: NodeFallback):
    """A factory like ``impl`` (an OpRun class, or a function making an OpFunction) whose
    instances hand their node to ``fallback`` when ``run`` (the op's code and onnx.reference's
    checks of its outputs) raises anything."""

    def make(*args, **kwargs):
        op = impl(*args, **kwargs)
        run = op.run

        def guarded_run(*inputs, **attrs):
            try:
                return run(*inputs, **attrs)
            except ReferenceUnavailable:  # a body's node that nothing can compute: already named
                raise
            except Exception as exc:  # noqa: BLE001 - whatever onnx.reference raises, onnxruntime is asked
                return fallback.run(op.onnx_node, inputs, f"where onnx.reference raises {type(exc).__name__}: {_first_line(exc)}")

        op.run = guarded_run
        return op

    return make


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _run_on_onnxruntime(node: onnx.NodeProto, inputs: tuple, opsets, ir_version: int) -> tuple[np.ndarray, ...]:
    """The node alone, as a one-node model, on onnxruntime's CPU provider."""
    import onnxruntime as ort

    feeds, graph_inputs = {}, []
    for name, value in zip(node.input, inputs):
        if not name or value is None or name in feeds:
            continue
        value = np.asarray(value)
        feeds[name] = value
        graph_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
    outputs = [o for o in node.output if o]
    graph = helper.make_graph([node], "node", graph_inputs, [onnx.ValueInfoProto(name=o) for o in outputs])
    model = helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    values = dict(zip(outputs, session.run(outputs, feeds)))
    return tuple(values.get(o) for o in node.output)

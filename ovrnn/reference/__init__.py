"""The oracle: float64 numpy implementations of the whole ONNX RNN, GRU and LSTM specs.

One module per op holds its cell equations (rnn.py, gru.py, lstm.py: a ``Cell``, the step and what
it needs); ``loop.py`` holds the one recurrent loop and the one signature they share. Deliberately
independent of ``ovrnn.semantics`` and ``ovrnn.lower``: the references read raw ONNX attributes
themselves, so a mistake in the normaliser cannot hide in both places. ``run_model`` computes whole models.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from ..families import onnx_families
from ..onnx import graphs
from ..onnx.graphs import all_nodes
from ..quantization import DEQUANTIZED_WEIGHTS as WEIGHTS
from ..quantization import dequantized_weights
from . import gru, lstm, rnn  # noqa: F401 (each attaches its cell to its family)
from .fallback import NodeFallback, ReferenceUnavailable, evaluator_class
from .loop import reference

__all__ = ["OPS", "ReferenceUnavailable", "run_model", "run_node"]

# op_type -> its cell (attached in rnn.py, gru.py, lstm.py); loop.reference takes the ONNX inputs
# positionally and the attributes by name
OPS = {f.name: f.part("reference") for f in onnx_families()}


def run_node(op_type: str, inputs: list, attrs: dict) -> tuple[np.ndarray, ...]:
    """One recurrent node's outputs in float64. `attrs` as onnx.helper.get_attribute_value gives
    them (strings may still be bytes); output_sequence (opset 1) only makes Y optional."""
    kw = {k: v for k, v in attrs.items() if v is not None and k != "output_sequence"}
    if isinstance(kw.get("direction"), bytes):
        kw["direction"] = kw["direction"].decode()
    if "activations" in kw:
        kw["activations"] = [a.decode() if isinstance(a, bytes) else a for a in kw["activations"]]
    return reference(OPS[op_type], inputs, **kw)


def run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray], fallback_notes: list[str] | None = None) -> dict[str, np.ndarray]:
    """Every graph output in float64. Graphs of recurrent and Constant nodes only are computed
    wholly in float64; other graphs run on onnx.reference with these references plugged in (other
    ops in the model's type), inside If/Loop/Scan bodies too (``control.py``). With
    ``fallback_notes``, a node onnx.reference cannot compute is computed by onnxruntime, and a
    note saying so is appended (fallback.py); without, it raises ReferenceUnavailable."""
    if any(n.op_type not in (*OPS, "Constant") and (n.domain, n.op_type) != WEIGHTS for n in model.graph.node):
        return _run_with_onnx_reference(model, feeds, fallback_notes)
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    values.update(feeds)
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Constant":
            values[node.output[0]] = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.array(next(iter(attrs.values())))
            continue
        if (node.domain, node.op_type) == WEIGHTS:
            values[node.output[0]] = dequantized_weights(values[node.input[0]], **attrs)
            continue
        outputs = run_node(node.op_type, [values[n] if n else None for n in node.input], attrs)
        for name, value in zip(node.output, outputs):
            if name:
                values[name] = value
    return {o.name: np.asarray(values[o.name], dtype=np.float64) for o in model.graph.output}


def _plugged_op(op_type: str):
    """An onnx.reference op that computes `op_type` with our reference (onnx.reference's own RNN
    knows Tanh/Affine only, its GRU/LSTM ignore activations, clip, sequence_lens, input_forget).
    OpRun hands _run every attribute, the schema's defaults filled in."""
    from onnx.reference.op_run import OpRun

    def _run(self, *inputs, **attrs):
        return tuple(y.astype(inputs[0].dtype) for y in run_node(op_type, list(inputs), attrs))

    return type(op_type, (OpRun,), {"op_domain": "", "_run": _run})


def _dequantized_weights_op():
    """``ai.ovrnn.DequantizedWeights`` (validation/dequantized.py) for onnx.reference: W/R as an IR
    with integer weights stores them, in bodies too."""
    from onnx.reference.op_run import OpRun

    def _run(self, x, bits=8, group_size=-1):
        return (dequantized_weights(x, bits, group_size),)

    return type(WEIGHTS[1], (OpRun,), {"op_domain": WEIGHTS[0], "_run": _run})


def _older_opsets(model: onnx.ModelProto) -> list:
    """onnx.reference implements DequantizeLinear from opset 19 on; opsets 10 and 13 mean the same
    for what they can express (per tensor, per axis), so a QDQ model of opset 13-18 runs on 19's."""
    from onnx.reference.ops.op_dequantize_linear import DequantizeLinear_19

    opset = graphs.opset(model)

    def _run(self, x, x_scale, x_zero_point=None, axis=1, **_later):  # block_size, output_dtype: opset 21's, absent before
        return DequantizeLinear_19._run(self, x, x_scale, x_zero_point, axis)

    return [type("DequantizeLinear", (DequantizeLinear_19,), {"op_domain": "", "_run": _run})] if opset < 19 else []


def _run_with_onnx_reference(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], fallback_notes: list[str] | None
) -> dict[str, np.ndarray]:
    names = [o.name for o in model.graph.output]
    from .control import (
        Loop,
        Scan,
    )  # onnx.reference's own Loop misreads an absent cond and stacks scan outputs wrongly; its Scan takes axis 0 forward only
    from .corrections import BatchNormalization, GatherElements  # where onnx.reference misreads the spec

    own = (
        [_plugged_op(op) for op in OPS]
        + [Loop, _dequantized_weights_op(), *_older_opsets(model)]
        + ([Scan] if graphs.opset(model) >= 9 else [])
    )  # Scan-8 is batched: another op
    new_ops = [*own, BatchNormalization, GatherElements]  # the corrections are guarded as onnx.reference's ops are
    fallback = NodeFallback(model, fallback_notes is not None)
    evaluator_cls = evaluator_class(fallback, {(c.op_domain, c.__name__) for c in own})
    try:  # the evaluator loads every node's implementation (bodies included) as it is made
        evaluator = evaluator_cls(_named_outputs(model), new_ops=new_ops)
    except (NotImplementedError, RuntimeError) as exc:  # not an op: a malformed graph, say
        raise ReferenceUnavailable(
            f"the float64 reference (onnx.reference, with ovrnn's RNN/GRU/LSTM) cannot run this model: {str(exc).strip().splitlines()[0]}"
        ) from None
    try:
        values = evaluator.run(names, feeds)
    except ReferenceUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - a node outside the guard (control flow, a context-dependent function): never a crash
        raise ReferenceUnavailable(
            f"the float64 reference (onnx.reference, with ovrnn's RNN/GRU/LSTM) cannot run this model ({type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''})"
        ) from None
    if fallback_notes is not None:
        fallback_notes.extend(n for n in fallback.notes() if n not in fallback_notes)
    return {n: np.asarray(v, dtype=np.float64) for n, v in zip(names, values)}


def _named_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx.reference stores an unnamed output (a GRU's Y left out) under the name '', where a
    later node's unnamed optional input (sequence_lens) then finds it: give each one a name."""
    if not any(not o for n in all_nodes(model.graph) for o in n.output):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    k = 0
    for node in all_nodes(copy.graph):  # If/Loop/Scan bodies too
        for i, name in enumerate(node.output):
            if not name:
                node.output[i] = f"ovrnn_reference_unused_{k}"
                k += 1
    return copy

"""The class of Loop bodies a few probes can prove equal to a cell, checked node by node while
cells.evaluate walks the body (docs/control_flow.md, "Loop recovery: when a probe proves
it"): what the step index may reach, which outer tensors may be read, what a mask is, which ops
keep batch rows apart. Each check raises NotACell naming the node and the rule it breaks."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from .. import graphs
from ..reading.read import RECURRENT
from .values import Body, Expr, Lin, NotACell, OuterTensor, Step

# ops that may lie between the states, the step's input and the outputs: analytic ones, and the
# Cast/Not/Where a mask select is written with (a Cast only to a float type: rounding is not analytic)
ANALYTIC = {
    "Add",
    "Sub",
    "Mul",
    "Neg",
    "Sigmoid",
    "Tanh",
    "MatMul",
    "Gemm",
    "Split",
    "Slice",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Cast",
    "Not",
    "Where",
    "Gather",
    "Concat",
    "Shape",
}
# ops that select or reshape along an axis: on a computed value, never along the batch axis (0)
AXIS_OPS = {"Split", "Slice", "Concat", "Gather"}
# a Cast may only widen or keep float32/float64: a Cast to float16 rounds (not analytic; the cell would be more exact than the body)
FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)
INTEGERS = (
    onnx.TensorProto.INT64,
    onnx.TensorProto.INT32,
    onnx.TensorProto.INT16,
    onnx.TensorProto.INT8,
    onnx.TensorProto.UINT64,
    onnx.TensorProto.UINT32,
    onnx.TensorProto.UINT16,
    onnx.TensorProto.UINT8,
)


def own_names(body: onnx.GraphProto) -> set[str]:
    return {o for n in body.node for o in n.output if o} | {i.name for i in body.input} | {t.name for t in body.initializer}


def attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def per_step_read(node: onnx.NodeProto, step: Step, outer, found: Body, env: dict, batch):
    """``Gather(T, i + offset)`` of an outer tensor: the input sequence (a float [steps, batch,
    features] tensor) or a mask (proven 0/1, one value per batch row); the batch it fixes."""
    name = node.input[0]
    dims = outer.shape(name)  # an outer tensor, or an outer constant (a frozen input)
    if dims is None or len(dims) < 2 or None in dims[2:]:  # the steps and the batch may stay dynamic
        raise NotACell(f"the tensor '{name}' it reads step by step has no static shape past its batch")
    key = (name, step.offset)
    if outer.binary(name) and int(np.prod(dims[2:], dtype=np.int64)) == 1:
        if found.mask not in (None, key):
            raise NotACell("it reads more than one mask step by step")
        found.mask = key
        env[node.output[0]] = Expr("mask")
        return batch  # a [T, 1, 1] mask holds one bit for every row: the batch is X's
    elif len(dims) == 3 and outer.is_float(name):
        if found.x not in (None, key):
            raise NotACell(
                f"it reads more than one input sequence step by step ('{found.x[0]}' and '{name}'; a float table gating the "
                "state is no mask unless its values are proven 0 or 1: bool, or cast from a comparison)"
            )
        found.x = key
        env[node.output[0]] = Lin({"x": np.eye(dims[2])}, np.zeros(dims[2]))
        return dims[1]
    else:
        raise NotACell(
            f"it reads '{name}' step by step, which is neither the input sequence (a float [steps, batch, features] tensor) "
            "nor a mask proven 0 or 1 (bool, or a float cast from a comparison) with one value per batch row"
        )


def step_of(node: onnx.NodeProto, ins: list) -> Step | None:
    """The step index after a Cast/Identity, or plus/minus an integer constant; None otherwise."""
    if not ins or (not isinstance(ins[0], Step) and not (node.op_type == "Add" and len(ins) == 2 and isinstance(ins[1], Step))):
        return None
    if node.op_type in ("Cast", "Identity") and (node.op_type == "Identity" or attr(node, "to") in INTEGERS):
        return ins[0]
    if node.op_type in ("Add", "Sub") and len(ins) == 2:
        step, other = (ins[0], ins[1]) if isinstance(ins[0], Step) else (ins[1], ins[0])
        if isinstance(other, np.ndarray) and other.size == 1 and other.dtype.kind in "iu":
            sign = -1 if node.op_type == "Sub" else 1
            return Step(step.offset + sign * int(other.reshape(-1)[0]), step.source)
    return None


def check_reads(node: onnx.NodeProto, ins: list, label: str) -> None:
    """The step index, a counter, the condition and outer non-constants reach the outputs only
    through the per-step reads (handled before this)."""
    for name, value in zip(node.input, ins):
        if isinstance(value, Step) or (isinstance(value, Expr) and value.op == "counter"):
            source = value.source if isinstance(value, Step) else value.args[0]
            what = (
                f"the iteration number ('{name}')"
                if not source
                else f"the counter '{source}'" + (f" (as '{name}')" if name != source else "")
            )
            raise NotACell(
                f"{what} reaches its {node.op_type} node '{label}', beyond the per-step read of the input sequence: "
                "the body is not the same function at every step"
            )
        if isinstance(value, Expr) and value.op == "cond":
            raise NotACell(f"its {node.op_type} node '{label}' reads the loop condition '{name}'")
        if isinstance(value, OuterTensor):
            raise NotACell(
                f"its {node.op_type} node '{label}' reads '{value.name}' from outside the loop, which is neither the input "
                "sequence, a 0/1 mask, a constant nor a carried state: no input of a recurrent node can hold it"
            )


def beside_recurrent_node(body: onnx.GraphProto) -> set[str]:
    """The Unsqueeze outputs only a recurrent node reads and the Squeeze outputs of a recurrent
    node's outputs (its [1, batch, hidden] states): the one place a new axis 0 is no batch axis."""
    readers = graphs.consumers(body)
    made = {o for n in body.node if n.op_type in RECURRENT for o in n.output if o}
    found = set()
    for n in body.node:
        if (
            n.op_type == "Unsqueeze"
            and all(r.op_type in RECURRENT for r in readers.get(n.output[0], [None]) if r is not None)
            and readers.get(n.output[0])
        ):
            found.add(n.output[0])
        if n.op_type == "Squeeze" and n.input and n.input[0] in made:
            found.add(n.output[0])
    return found


def axes_of(node: onnx.NodeProto, ins: list) -> list[int] | None:
    """The axes attribute (before opset 13) or constant input of an Unsqueeze/Squeeze; None when computed."""
    if len(ins) > 1 and ins[1] is not None:
        return ins[1].reshape(-1).tolist() if isinstance(ins[1], np.ndarray) else None
    return list(attr(node, "axes", []))


def check_rows(node: onnx.NodeProto, ins: list, label: str, batch, beside_inner: set[str] = frozenset()) -> None:
    """Each batch row is computed from the same row alone: so a probe's rows stand for every
    batch, and a mask row is checked on and off by the all-on and all-off probes."""
    op = node.op_type
    computed = [v for v in ins if v is not None and not isinstance(v, np.ndarray)]
    if not computed:
        return
    why = None
    if op in ("Unsqueeze", "Squeeze") and node.output[0] not in beside_inner:
        axes = axes_of(node, ins)
        if axes is None or (op == "Squeeze" and not axes) or any(a == 0 or a < 0 for a in axes):
            why = (
                f"{'adds' if op == 'Unsqueeze' else 'removes'} an axis in front of the batch (or one it computes), "
                "so later axes are not what they were"
            )
    elif op == "MatMul" and not (isinstance(ins[1], np.ndarray) and ins[1].ndim == 2):
        why = "multiplies by a computed value on the right"
    elif op == "Gemm" and (attr(node, "transA", 0) or not isinstance(ins[1], np.ndarray)):
        why = "multiplies by a computed value on the right, or transposes its left side"
    elif op in AXIS_OPS and (op != "Gather" or not isinstance(ins[0], np.ndarray)):
        axes = (
            [attr(node, "axis", 0)]
            if op != "Slice"
            else (ins[3].reshape(-1).tolist() if len(ins) > 3 and isinstance(ins[3], np.ndarray) else None)
        )
        if op == "Slice" and (axes is None or not all(isinstance(v, np.ndarray) for v in ins[1:3])):
            why = "slices with computed bounds or axes"
        elif op == "Gather" and not isinstance(ins[1], np.ndarray):
            why = "gathers by a computed index"
        elif op == "Slice":
            starts, ends = ins[1].reshape(-1), ins[2].reshape(-1)
            if any(a in (0, -2) and not (s == 0 and e >= (batch or np.iinfo(np.int32).max)) for a, s, e in zip(axes, starts, ends)):
                why = "slices along the batch axis"
        elif any(a in (0, -2) for a in axes) and op != "Gather":
            why = "runs along the batch axis"
        elif op == "Gather" and any(a in (0, -2) for a in axes):
            why = "gathers along the batch axis"
    elif op == "Split" and len(ins) > 1 and ins[1] is not None and not isinstance(ins[1], np.ndarray):
        why = "splits by computed sizes"
    if why:
        raise NotACell(f"its {op} node '{label}' {why}, so its batch rows are not computed apart")

"""QDQ weights: ``DequantizeLinear(integer initializer) -> W or R`` of RNN/GRU/LSTM nodes.

    W_float = (x - x_zero_point) * x_scale       (DequantizeLinear; per tensor, or per axis)

Such a node is taken out of the graph before lowering: its output becomes a float constant (the
dequantized value, which every check and the float64 reference read), and its integer initializer
with its scale and zero point are kept for the lowering, which stores them as they are (one
``Const int8 -> Convert -> [Subtract] -> Multiply`` chain per node, direction and matrix) instead of
the float weights constant folding would make. Taken when x is an int8/uint8 initializer and the
scale is per tensor, per direction (axis 0) or per row (axis 1: one scale per gate of each hidden
unit); other forms (per column, blocked, int16, a runtime x) stay ordinary nodes (folded to float).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx
from onnx import numpy_helper

from ...quantization import Quantized
from ..graphs import ONNX_DOMAINS, describe_node
from .read import RECURRENT, GraphView, TensorInfo, constant_info


def weight_readers(graph: onnx.GraphProto) -> dict[str, set[tuple[str, int]]]:
    """tensor name -> {(op_type, slot)} of every node input that reads it."""
    readers: dict[str, set[tuple[str, int]]] = {}
    for node in graph.node:
        for slot, name in enumerate(node.input):
            if name:
                readers.setdefault(name, set()).add(
                    (node.op_type if node.domain in ONNX_DOMAINS else f"{node.domain}.{node.op_type}", slot)
                )
    return readers


def feeds_recurrent_weights(node: onnx.NodeProto, readers: dict[str, set[tuple[str, int]]]) -> bool:
    """A DequantizeLinear whose output is read only as W or R of recurrent nodes."""
    if node.op_type != "DequantizeLinear" or node.domain not in ONNX_DOMAINS or not node.output:
        return False
    users = readers.get(node.output[0], set())
    return bool(users) and all(op in RECURRENT and slot in (1, 2) for op, slot in users)


def absorb_dequantize_linear(view: GraphView) -> tuple[GraphView, dict[str, list[Quantized]], list[str]]:
    """(view without the absorbed DequantizeLinear nodes, {W/R tensor name: Quantized per direction,
    rows in ONNX order}, notes)."""
    graph = view.model.graph
    readers = weight_readers(graph)
    outputs = {o.name for o in graph.output}
    taken: dict[int, tuple[str, list[Quantized], np.ndarray]] = {}
    notes: list[str] = []
    for index, node in enumerate(graph.node):
        if not feeds_recurrent_weights(node, readers) or node.output[0] in outputs:
            continue
        got = _quantized(node, view)
        if isinstance(got, str):
            notes.append(f"{describe_node(node)} feeding W/R: {got}; its weights are folded to float")
            continue
        taken[index] = (node.output[0], *got)
    if not taken:
        return view, {}, notes
    model = onnx.ModelProto()
    model.CopyFrom(view.model)
    kept = [n for i, n in enumerate(model.graph.node) if i not in taken]
    del model.graph.node[:]
    model.graph.node.extend(kept)
    for name, _, value in taken.values():
        model.graph.initializer.append(numpy_helper.from_array(value, name))
    # the view's tables as they are (its --input shapes applied), plus the float tensors the nodes gave
    new_view = replace(
        view, model=model, constants={**view.constants, **{name: constant_info(name, value) for name, _, value in taken.values()}}
    )
    return new_view, {name: qs for name, qs, _ in taken.values()}, notes


def _quantized(node: onnx.NodeProto, view: GraphView) -> tuple[list[Quantized], np.ndarray] | str:
    """The integer rows per direction and the float value, or why the node is not taken."""
    names = list(node.input) + ["", ""]
    x, scale, zp = (view.constants.get(n) if n else None for n in names[:3])
    if x is None or scale is None or (names[2] and zp is None):
        return "its inputs are not all initializers"
    q = np.asarray(x.value)
    if q.dtype not in (np.int8, np.uint8):
        return f"integer type {q.dtype.name} (int8 and uint8 are kept)"
    if q.ndim != 3:
        return f"x has rank {q.ndim}, not W/R's 3"
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("block_size"):
        return "blocked quantization (block_size)"
    s = np.asarray(scale.value, dtype=np.float64)
    z = np.zeros(s.shape, q.dtype) if zp is None else np.asarray(zp.value)
    D, rows, _ = q.shape
    if s.size == 1:
        s_rows, z_rows = np.full((D, rows), float(s.reshape(-1)[0])), np.full((D, rows), z.reshape(-1)[0], q.dtype)
    else:
        axis = int(attrs.get("axis", 1))
        axis = axis + 3 if axis < 0 else axis
        if axis == 0 and s.shape == (D,):
            s_rows, z_rows = np.repeat(s[:, None], rows, 1), np.repeat(z.reshape(D, 1), rows, 1)
        elif axis == 1 and s.shape == (rows,):
            s_rows, z_rows = np.tile(s, (D, 1)), np.tile(z.reshape(1, rows), (D, 1))
        else:
            return f"scale of shape {list(s.shape)} along axis {axis} (per tensor, per direction or per row are kept)"
    if not np.all(np.isfinite(s_rows)) or np.any(s_rows < 0):
        return "a scale is negative or not finite"
    out_type = attrs.get("output_dtype") or onnx.TensorProto.FLOAT
    if out_type != onnx.TensorProto.FLOAT and out_type != scale_type(scale):
        return "an output type other than the scale's"
    symmetric = not np.any(z_rows)
    qs = [
        Quantized(np.ascontiguousarray(q[d]), s_rows[d][:, None], None if symmetric else z_rows[d][:, None].astype(q.dtype), 8)
        for d in range(D)
    ]
    value = np.stack([x_.dequantize() for x_ in qs]).astype(np.asarray(scale.value).dtype)
    return qs, value


def scale_type(scale: TensorInfo) -> int:
    return scale.elem_type or onnx.TensorProto.FLOAT

"""Build OpenVINO nodes from a ``LayerGraph``: the same lowering, realised in memory.

Used by the whole-model path, where OpenVINO's ONNX frontend calls ovrnn for each RNN node. No
RNN logic here: each layer becomes the op its template names (type and opset version), with its
attributes as the lowering typed them (the emitter alone writes them as text).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ..device.ov import opset, ov, ov_submodule
from ..dtypes import ElementType
from ..ir.templates import template
from ..lower.layer_graph import Layer, LayerGraph
from ..shapes import Dim, Shape

# op type in the IR -> op class name in OpenVINO's opset tables, where they differ
_CLASS_NAMES = {"PReLU": "PRelu"}
_OV_TYPE = {"output_type"}  # element types OpenVINO's node factory takes as ov.Type (others by IR name)


def typed(key: str, value: object):
    """A layer attribute as OpenVINO's node factory takes it: lists for tuples, ov.Type or the IR
    name for element types; the rest as the lowering typed it."""
    if isinstance(value, ElementType):
        return getattr(ov().Type, value.ir) if key in _OV_TYPE else value.ir
    if isinstance(value, tuple):
        return list(value)
    return value


@cache
def _factory(version: str):
    NodeFactory = ov_submodule("utils.node_factory").NodeFactory

    return NodeFactory(version)


def _constant(layer: Layer, blob: memoryview):
    o = ov()
    typ = layer.out_types[0]
    shape = [d.lo for d in typ.shape]
    raw = blob[layer.const.offset : layer.const.offset + layer.const.size]
    if typ.etype.ir == "i4":  # packed two per byte, low nibble first: the .bin bytes as they are
        tensor = o.Tensor(o.Type.i4, shape)
        np.copyto(tensor.data.view(np.uint8).reshape(-1), np.frombuffer(raw, dtype=np.uint8))
        return o.op.Constant(tensor)
    if typ.etype.ir == "bf16":
        tensor = o.Tensor(o.Type.bf16, shape)
        tensor.data.view(np.uint16)[...] = np.frombuffer(raw, dtype=np.uint16).reshape(shape)
        return o.op.Constant(tensor)
    return o.op.Constant(np.frombuffer(raw, dtype=typ.etype.numpy).reshape(shape).copy())


def _variable(layer: Layer, variables: dict):
    """One ov Variable per variable_id, shared by its ReadValue and Assign."""
    o = ov()
    var_id = layer.attrs["variable_id"]
    if var_id not in variables:
        info = o.op.util.VariableInfo()
        info.variable_id = var_id
        info.data_type = getattr(o.Type, layer.attrs["variable_type"].ir)
        info.data_shape = partial_shape(layer.attrs["variable_shape"])
        variables[var_id] = o.op.util.Variable(info)
    return variables[var_id]


def assign(value, variable):
    """Assign-6 of an ov.Output. The Python binding takes only a Node, and checks its output 0
    against the variable: built on a stand-in Parameter of the value's type and shape, then rewired
    (the value may be another output of its node, say an If's second output, whose first output
    has another shape)."""
    opset1, opset6 = opset(1), opset(6)

    node = opset6.assign(opset1.parameter(value.get_partial_shape(), value.get_element_type()), variable)
    node.input(0).replace_source_output(value)
    node.validate_and_infer_types()
    return node


def realize(
    g: LayerGraph, bindings: dict[int, object], variables: dict | None = None, sinks: list | None = None, precise: set | None = None
) -> dict[int, list]:
    """{layer id: [ov.Output per output]}. Parameters come from `bindings` (layer id -> ov.Output);
    ReadValue/Assign share the Variables in `variables` (by id); Assign nodes go to `sinks`, for
    the model's add_sinks; the names of layers marked precise go to `precise` (OpenVINO's Python
    API cannot attach the mark: ir.emit.mark_precise writes it into the serialized IR)."""
    opset6 = opset(6)

    blob = memoryview(g.weights.getvalue())
    outs: dict[int, list] = {}
    variables = {} if variables is None else variables
    for layer in g.layers:
        if layer.type == "Parameter":
            outs[layer.id] = [bindings[layer.id]]
            continue
        if layer.type == "Result":
            continue
        if layer.type == "Const":
            node = _constant(layer, blob)
        elif layer.type == "ReadValue":
            node = opset6.read_value(outs[layer.inputs[0].layer.id][layer.inputs[0].index], _variable(layer, variables))
        elif layer.type == "Assign":
            node = assign(outs[layer.inputs[0].layer.id][layer.inputs[0].index], _variable(layer, variables))
            if sinks is not None:
                sinks.append(node)
        else:
            version = template(layer.type).get("version")
            args = [outs[src.layer.id][src.index] for src in layer.inputs]
            attrs = {k: typed(k, v) for k, v in layer.attrs.items()}
            node = _factory(version).create(_CLASS_NAMES.get(layer.type, layer.type), args, attrs)
        node.set_friendly_name(layer.name)
        if layer.precise and precise is not None:
            precise.add(layer.name)
        outs[layer.id] = [node.output(i) for i in range(node.get_output_size())]
    return outs


# --- shapes between ovrnn (Dim) and OpenVINO (Dimension, PartialShape) ----------------------------


def dim_of(d) -> Dim:
    """An ov.Dimension as a Dim: static, a range, or dynamic."""
    if d.is_static:
        return Dim.of(d.get_length())
    hi = d.get_max_length()
    return Dim(max(d.get_min_length(), 0), None if hi < 0 else hi)


def partial_shape(shape: Shape):
    o = ov()
    return o.PartialShape([o.Dimension(d.lo) if d.is_static else o.Dimension(d.lo, -1 if d.hi is None else d.hi) for d in shape])

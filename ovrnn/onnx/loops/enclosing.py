"""What a Loop body may ask of the graph holding it: the shapes and element types onnx's inference
gives the outer tensors it reads, their constant values, whether a tensor is 0/1 (a mask); read by the
Loop recovery (cells.py, check.py, rewrite.py) and the control-flow analysis."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from .. import graphs
from ..reading.read import ONNX_DOMAINS

# ops whose output values are some of their first input's values (a 0/1 tensor stays 0/1)
_MOVES_VALUES = ("Identity", "Transpose", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Flatten", "Slice", "Gather")


class EnclosingGraph:
    """What a Loop body may ask of the graph holding it (shapes from onnx's inference)."""

    def __init__(self, graph: onnx.GraphProto, inferred: onnx.GraphProto, constant_value) -> None:
        self.graph, self._constant = graph, constant_value
        self._infos = {vi.name: vi for vi in list(inferred.input) + list(inferred.value_info) + list(inferred.output)}
        for t in graph.initializer:
            self._infos.setdefault(t.name, helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))

    def const(self, name: str):
        return self._constant(self.graph, name)

    def shape(self, name: str):
        vi = self._infos.get(name)
        if vi is None or not vi.type.tensor_type.HasField("shape"):
            return None
        dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
        return dims

    def with_nodes(self, graph: onnx.GraphProto, nodes: list[onnx.NodeProto]) -> EnclosingGraph | None:
        """What `graph` (this graph with `nodes` added: the Transposes and reversing Slices by which
        control_flow/scan_loop.as_loop moves a Scan's inputs) may tell a body, with no inference run
        again: each added output's dims follow from its input's static dims (a permutation; the same
        dims for a Slice that reverses axis 0 whole). None when a node is anything else, or an
        input's shape is not static: the caller infers the graph instead."""
        infos = dict(self._infos)
        for node in nodes:
            vi = infos.get(node.input[0]) if node.input else None
            shape = vi.type.tensor_type.shape if vi is not None and vi.type.tensor_type.HasField("shape") else None
            if shape is None or not all(d.HasField("dim_value") for d in shape.dim) or len(node.output) != 1:
                return None
            dims = [d.dim_value for d in shape.dim]
            perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
            bounds = [self._constant(graph, name) for name in node.input[1:]]
            if node.op_type == "Transpose" and sorted(perm or []) == list(range(len(dims))):
                dims = [dims[k] for k in perm]
            elif not (
                node.op_type == "Slice"
                and len(bounds) == 4
                and all(b is not None for b in bounds)
                and [b.reshape(-1).tolist() for b in bounds] == [[-1], [-(1 << 62)], [0], [-1]]
            ):
                return None
            infos[node.output[0]] = helper.make_tensor_value_info(node.output[0], vi.type.tensor_type.elem_type, dims)
        extended = EnclosingGraph.__new__(EnclosingGraph)
        extended.graph, extended._constant, extended._infos = graph, self._constant, infos
        for t in graph.initializer:
            infos.setdefault(t.name, helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        return extended

    def elem_type(self, name: str) -> int:
        vi = self._infos.get(name)
        return vi.type.tensor_type.elem_type if vi is not None else onnx.TensorProto.FLOAT

    def is_float(self, name: str) -> bool:
        return self.elem_type(name) in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16)

    def binary(self, name: str) -> bool:
        """Every value of `name` is 0 or 1, whatever the inputs: a bool tensor, a constant of 0s and
        1s, or a float the graph casts from a bool (a comparison), through ops that only move values."""
        value = self.const(name)
        if value is not None:
            return bool(np.isin(value, (0, 1)).all())
        producers = graphs.producers(self.graph)
        for _ in range(len(self.graph.node) + 1):
            if self.elem_type(name) == onnx.TensorProto.BOOL and name in self._infos:
                return True
            node = producers.get(name)
            if node is None or node.domain not in ONNX_DOMAINS or node.op_type not in _MOVES_VALUES + ("Cast",):
                return False
            name = node.input[0]
        return False

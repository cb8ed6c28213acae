"""A graph made of recurrent (and Constant) nodes only, read by the semantics stage: which nodes,
which of their outputs are read, and one spec per node, in graph order. Each node's inputs are
looked up among the graph's tensors and the outputs of the nodes specced before it, so a stack of
nodes (an RNN feeding a GRU) is specced with the shapes the first one produces."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import onnx

from ..onnx.reading.read import GraphView, TensorInfo
from ..shapes import Dim, Shape
from . import Spec, normalise_node
from .nodes import RecurrentNode, unique_label


@dataclass
class GraphNodes:
    nodes: list[tuple[int, onnx.NodeProto]]  # the recurrent nodes, with their index in the graph
    needed: set[str]  # tensor names a graph output or a later node reads


def graph_nodes(view: GraphView, recurrent: Iterable[RecurrentNode]) -> GraphNodes:
    """A model made of recurrent and Constant nodes only (`recurrent`: its nodes as ``recurrent_nodes``
    found them): which of their outputs are read."""
    nodes = [(n.index, n.proto) for n in recurrent]
    needed = {o.name for o in view.outputs}
    for _, node in nodes:
        needed.update(n for n in node.input if n)
    return GraphNodes(nodes, needed)


def normalise_all(view: GraphView, nodes: GraphNodes) -> list[Spec]:
    """One spec per node, in graph order; each node's inputs are looked up among the graph's tensors
    and the outputs of the nodes specced before it."""
    labels: list[str] = []  # the nodes' layer-name prefixes, each unique
    for k, (_, node) in enumerate(nodes.nodes):
        labels.append(unique_label(node, k, labels))
    produced: dict[str, TensorInfo] = {}

    def lookup(name: str) -> TensorInfo | None:
        return produced.get(name) or view.info(name)

    specs = []
    for label, (i, node) in zip(labels, nodes.nodes):
        spec = normalise_node(node, i, view.opset, lookup, label)
        specs.append(spec)
        for name, shape in _output_shapes(spec).items():
            produced[name] = TensorInfo(name, spec.etype.onnx, shape)
    return specs


def _output_shapes(spec: Spec) -> dict[str, Shape]:
    T, D, B, H = Dim.of(spec.seq_length), Dim.of(spec.num_directions), spec.batch, Dim.of(spec.hidden_size)
    shapes = {}
    if spec.Y:
        shapes[spec.Y] = (B, T, D, H) if spec.layout else (T, D, B, H)
    for state in (spec.Y_h, getattr(spec, "Y_c", None)):
        if state:
            shapes[state] = (B, D, H) if spec.layout else (D, B, H)
    return shapes

"""The one ONNX-graph toolkit every module asks (in the spirit of onnxruntime's ``OnnxModel``): a
model's opset, who produces and who reads a tensor, the walk over every node of a graph and of
its If/Loop/Scan bodies, the label a node is known by, a constant's value, a fresh name, the float
element types. Each exists here once; tests/test_architecture.py fails on a second copy."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import onnx
import onnx.defs
from onnx import helper, numpy_helper

from ..dtypes import BY_ONNX
from ..errors import InvalidModelError, UnsupportedFeatureError
from ..families import ONNX_DOMAINS

__all__ = [
    "FLOAT_TYPES",
    "ONNX_DOMAINS",
    "all_graphs",
    "all_nodes",
    "constant_value",
    "consumers",
    "describe_node",
    "fresh",
    "node_label",
    "opset",
    "producers",
    "subgraphs",
    "upstream",
    "walk",
    "walk_bodies_first",
]

# the ONNX element types of floating point numbers (float16, float, double, bfloat16: the RNN/GRU/LSTM
# type constraint T), from the one element-type table (dtypes.py)
FLOAT_TYPES = frozenset(t.onnx for t in BY_ONNX.values() if t.is_float)


def opset(model: onnx.ModelProto) -> int:
    """The model's default-domain (ai.onnx) opset version; both spellings of the domain count, the
    newest wins. No default for a model that needs one: the ONNX spec requires an opset import for
    every domain a model uses, so a model with an ai.onnx node and no ai.onnx import is invalid
    (onnx.checker: "No opset import for domain ''"). A model whose nodes are all of other domains
    (an onnx backend case of ai.onnx.preview.training, a com.microsoft-only graph) needs no ai.onnx
    import; no op's meaning depends on the version then, and it reads as the newest this onnx
    knows. One newer than that is unsupported."""
    versions = [o.version for o in model.opset_import if o.domain in ONNX_DOMAINS]
    newest = onnx.defs.onnx_opset_version()
    if not versions:
        if any(node.domain in ONNX_DOMAINS for node in all_nodes(model.graph)):
            raise InvalidModelError("model declares no ai.onnx opset in opset_import")
        return newest
    version = max(versions)
    if version < 1:
        raise InvalidModelError(f"model opset_import: expected an ai.onnx opset >= 1, got {version}")
    if version > newest:
        raise UnsupportedFeatureError(
            f"model opset_import: ai.onnx opset {version} is newer than the newest this onnx "
            f"{onnx.__version__} knows ({newest}); expected an opset between 1 and {newest}"
        )
    return version


# --- nodes and bodies ---------------------------------------------------------------------------


def subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    """(attribute name, graph) for each body a node holds (If's branches, Loop's and Scan's body)."""
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.name, attr.g
        for g in attr.graphs:
            yield attr.name, g


def walk(
    graph: onnx.GraphProto, owner: onnx.NodeProto | None = None
) -> Iterator[tuple[onnx.NodeProto, onnx.GraphProto, onnx.NodeProto | None]]:
    """(node, the graph holding it, the node whose body that graph is; None at the top) for every
    node of `graph` and of its bodies, depth first: a node, then the nodes of its bodies."""
    for node in graph.node:
        yield node, graph, owner
        for _, sub in subgraphs(node):
            yield from walk(sub, node)


BodyPath = tuple[tuple[onnx.NodeProto, str, onnx.GraphProto], ...]  # (holder, attribute, body graph), outermost first


def walk_bodies_first(graph: onnx.GraphProto, path: BodyPath = ()) -> Iterator[tuple[onnx.NodeProto, int, BodyPath]]:
    """(node, its index in its graph, the bodies it sits in) for every node of `graph` and of its
    bodies, each body's nodes before the node that holds them: the order in which OpenVINO's ONNX
    frontend converts them."""
    for index, node in enumerate(graph.node):
        for attribute, sub in subgraphs(node):
            yield from walk_bodies_first(sub, (*path, (node, attribute, sub)))
        yield node, index, path


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of the graph and of its If/Loop/Scan bodies, in walk's order."""
    return (node for node, _, _ in walk(graph))


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph, then every body in it, depth first (outer first)."""
    yield graph
    for node in graph.node:
        for _, sub in subgraphs(node):
            yield from all_graphs(sub)


def node_label(node: onnx.NodeProto) -> str:
    """The name a node is known by in messages: its name, else its first output (its op type when
    it has neither)."""
    return node.name or (node.output[0] if node.output else node.op_type)


def describe_node(node: onnx.NodeProto) -> str:
    """ "LSTM node 'lstm_1'": a node as messages name it."""
    return f"{node.op_type} node '{node_label(node)}'"


# --- tensors ------------------------------------------------------------------------------------


def producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    """Tensor name -> the node of `graph` (not of its bodies) that outputs it."""
    return {o: n for n in graph.node for o in n.output if o}


def consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """Tensor name -> the nodes of `graph` (not of its bodies) that read it, in graph order."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            if i:
                readers.setdefault(i, []).append(n)
    return readers


def upstream(graph: onnx.GraphProto, names: Iterable[str]) -> set[str]:
    """The tensors of `graph` that `names` are computed from, `names` included: producers followed
    back through their inputs (not into bodies)."""
    producer = producers(graph)
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in producer:
            todo.extend(i for i in producer[name].input if i)
    return seen


_SCALAR_CONSTANTS = {"value_int": np.int64, "value_ints": np.int64, "value_float": np.float32, "value_floats": np.float32}


def constant_value(graph: onnx.GraphProto, name: str) -> np.ndarray | None:
    """The value of an initializer or of a Constant node's output of `graph`, else None (also for a
    Constant onnx.reference cannot read)."""
    for t in graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ONNX_DOMAINS and list(node.output) == [name]:
            attr = node.attribute[0] if len(node.attribute) == 1 else None
            if attr is not None and attr.name == "value":
                return numpy_helper.to_array(attr.t)
            if attr is not None and attr.name in _SCALAR_CONSTANTS:
                return np.array(helper.get_attribute_value(attr), dtype=_SCALAR_CONSTANTS[attr.name])
            try:  # sparse_value, value_string(s)
                from onnx.reference import ReferenceEvaluator

                return ReferenceEvaluator(node).run(None, {})[0]
            except Exception:  # noqa: BLE001 - an odd Constant has no value here
                return None
    return None


def fresh(base: str, taken: set[str], start: int = 1) -> str:
    """`base`, or `base_<start>`, `base_<start+1>`, ...: the first not in `taken`, which then takes it."""
    name, k = base, start
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name

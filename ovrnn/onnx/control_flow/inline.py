"""Copy a graph's body into the graph holding it with its names kept unique: what inlining an If
branch and unrolling a Loop share (control_flow/passes.py, loops/rewrite.py). A body's tensor or node
keeps its name unless another graph of the model uses it; then it is prefixed with the inlining
node's name (``choose_sr/...``, ``loop/iter2/...``).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import graphs
from ..graphs import all_graphs, node_label, subgraphs


def defined(graph: onnx.GraphProto) -> set[str]:
    """The tensor names a graph defines itself (inputs, initializers, node outputs)."""
    names = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    names |= {t.values.name for t in graph.sparse_initializer}
    names |= {o for n in graph.node for o in n.output if o}
    return names


class Names:
    """Every tensor and node name used anywhere in the model, to keep inlined names unique."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.tensors: set[str] = set()
        self.nodes: set[str] = set()
        self.claimed: set[str] = set()  # names handed out to inlined tensors
        self.claimed_nodes: set[str] = set()
        for g in all_graphs(graph):
            self.tensors |= defined(g) | {o.name for o in g.output} | {n for node in g.node for n in node.input if n}
            self.nodes |= {n.name for n in g.node if n.name}

    def tensor(self, name: str, prefix: str, taken: set[str]) -> str:
        """`name` itself when no graph of the model but the one being inlined uses it."""
        return _claim(name, prefix, taken, self.tensors, self.claimed)

    def node(self, name: str, prefix: str, taken: set[str] | None = None) -> str:
        """`name` itself when no node outside the body being inlined has it (`taken`)."""
        return _claim(name, prefix, self.nodes if taken is None else taken, self.nodes, self.claimed_nodes) if name else ""


def _claim(name: str, prefix: str, taken: set[str], used: set[str], claimed: set[str]) -> str:
    """`name` itself when neither `taken` nor an earlier claim holds it, else a fresh `prefix/name`
    among `used`; either way claimed, so no later copy is given it."""
    if name not in taken and name not in claimed:
        used.add(name)
        claimed.add(name)
        return name
    fresh = graphs.fresh(f"{prefix}/{name}", used, start=2)
    claimed.add(fresh)
    return fresh


def rename_inside(graph: onnx.GraphProto, mapping: dict[str, str]) -> None:
    """Rename the outer-scope names a nested subgraph reads (those it does not define itself)."""
    own = defined(graph)
    local = {k: v for k, v in mapping.items() if k not in own}
    if not local:
        return
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in local:
                node.input[i] = local[name]
        for _, sub in subgraphs(node):
            rename_inside(sub, local)
    for out in graph.output:
        if out.name in local:
            out.name = local[out.name]


def copy_body(
    body: onnx.GraphProto, prefix: str, names: Names, preset: dict[str, str], taken: tuple[set[str], set[str]]
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], list[onnx.ValueInfoProto], dict[str, str]]:
    """A body's nodes, initializers and value_info with its own names made unique in the outer graph.
    `preset` maps some of the body's names to outer names (its inputs, or outputs renamed onto the
    node's outputs)."""
    taken_tensors, taken_nodes = taken
    mapping = dict(preset)
    for name in sorted(defined(body) - set(preset)):
        mapping[name] = names.tensor(name, prefix, taken_tensors)
    nodes = []
    for node in body.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.name = names.node(node.name, prefix, taken_nodes)
        for i, name in enumerate(copy.input):
            copy.input[i] = mapping.get(name, name)
        for i, name in enumerate(copy.output):
            if name:
                copy.output[i] = mapping[name]
        for _, sub in subgraphs(copy):
            rename_inside(sub, mapping)
        nodes.append(copy)
    inits = []
    for t in body.initializer:
        copy = onnx.TensorProto()
        copy.CopyFrom(t)
        copy.name = mapping[t.name]
        inits.append(copy)
    infos = []
    for vi in body.value_info:
        if vi.name in mapping:
            copy = onnx.ValueInfoProto()
            copy.CopyFrom(vi)
            copy.name = mapping[vi.name]
            infos.append(copy)
    return nodes, inits, infos, mapping


def taken_names(graph: onnx.GraphProto, node: onnx.NodeProto) -> tuple[set[str], set[str]]:
    """(tensor names, node names) the inlined body's own may not keep: those of every graph but
    the bodies of `node`, which goes away (an If's other branch included)."""
    own = {id(sub) for _, sub in subgraphs(node)}
    tensors: set[str] = set()
    nodes: set[str] = set()
    stack = [graph]
    while stack:
        g = stack.pop()
        tensors |= defined(g) | {o.name for o in g.output} | {i for n in g.node for i in n.input if i}
        nodes |= {n.name for n in g.node if n is not node}
        stack += [sub for n in g.node for _, sub in subgraphs(n) if id(sub) not in own]
    return tensors, nodes


def inline_branch(graph: onnx.GraphProto, node: onnx.NodeProto, branch: onnx.GraphProto, names: Names):
    """(nodes, initializers, value_info) computing the If `node`'s outputs by its `branch`, in its place."""
    prefix = node_label(node)
    produced = {o for n in branch.node for o in n.output if o} | {t.name for t in branch.initializer}
    preset: dict[str, str] = {}
    tails: list[onnx.NodeProto] = []
    seen: set[str] = set()
    for out, target in zip(branch.output, node.output):
        if not target:
            continue
        if out.name in produced and out.name not in seen:
            preset[out.name] = target  # the producer writes the If's output itself
            seen.add(out.name)
        else:  # an outer name, or one value given twice
            tails.append((out.name, target))
    new_nodes, inits, infos, mapping = copy_body(branch, prefix, names, preset, taken_names(graph, node))
    for source, target in tails:
        new_nodes.append(
            helper.make_node("Identity", [mapping.get(source, source)], [target], name=names.node(f"{prefix}/{target}", prefix))
        )
    return new_nodes, inits, infos


def unrolled(graph: onnx.GraphProto, node: onnx.NodeProto, body: onnx.GraphProto, trips: int, names: Names):
    """The body copied `trips` times: iteration i reads the constant i, the previous copy's carried
    values, and the scan outputs are stacked along a new axis 0 (ONNX Loop semantics)."""
    prefix = node_label(node)
    carried_in = [i.name for i in body.input[2:]]
    carried_out = [o.name for o in body.output[1 : 1 + len(carried_in)]]
    scan_out = [o.name for o in body.output[1 + len(carried_in) :]]
    state = list(node.input[2:])
    taken = taken_names(graph, node)
    all_nodes, all_inits, all_infos = [], [], []
    scans: list[list[str]] = [[] for _ in scan_out]
    for it in range(trips):
        tag = f"{prefix}/iter{it}"
        counter = names.tensor(f"{tag}/i", tag, taken[0] | names.tensors)
        cond = names.tensor(f"{tag}/cond", tag, taken[0] | names.tensors)
        all_inits += [numpy_helper.from_array(np.array(it, np.int64), counter), numpy_helper.from_array(np.array(True), cond)]
        preset = {body.input[0].name: counter, body.input[1].name: cond}
        preset.update(zip(carried_in, state))
        nodes, inits, infos, mapping = copy_body(body, tag, names, preset, taken)
        all_nodes += nodes
        all_inits += inits
        all_infos += infos
        state = [mapping.get(name, name) for name in carried_out]
        for k, name in enumerate(scan_out):
            scans[k].append(mapping.get(name, name))
    zero = names.tensor(f"{prefix}/axis0", prefix, taken[0] | names.tensors)
    all_inits.append(numpy_helper.from_array(np.array([0], np.int64), zero))
    outputs = list(node.output)
    for k, target in enumerate(outputs[: len(carried_out)]):
        if target:
            all_nodes.append(helper.make_node("Identity", [state[k]], [target], name=names.node(f"{prefix}/{target}", prefix)))
    for k, target in enumerate(outputs[len(carried_out) :]):
        if not target or k >= len(scans):
            continue
        parts = []
        for it, name in enumerate(scans[k]):
            part = names.tensor(f"{prefix}/iter{it}/{target}", prefix, taken[0] | names.tensors)
            all_nodes.append(helper.make_node("Unsqueeze", [name, zero], [part], name=names.node(part, prefix)))
            parts.append(part)
        all_nodes.append(helper.make_node("Concat", parts, [target], name=names.node(f"{prefix}/{target}", prefix), axis=0))
    return all_nodes, all_inits, all_infos

"""TorchScript writes ``outs.append(y)`` in a loop and ``torch.stack(outs)`` as SequenceEmpty,
SequenceInsert per iteration and ConcatFromSequence; once the loop is unrolled (or rewritten as a
cell, loops/rewrite.py), the chain becomes a Concat OpenVINO's frontend converts with static shapes.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import graphs
from ..graphs import all_graphs, node_label
from ..reading.read import ONNX_DOMAINS
from .inline import Names


def sequences_to_concat(graph: onnx.GraphProto, names: Names) -> bool:
    """TorchScript writes ``outs.append(y)`` in a loop and ``torch.stack(outs)`` as SequenceEmpty,
    SequenceInsert per iteration and ConcatFromSequence. Once the loop is unrolled, such a chain
    (each sequence read once, every insert at the end) is a Concat of its elements (Unsqueezed
    first for ``new_axis=1``): ops OpenVINO's frontend converts with static shapes."""
    producers = graphs.producers(graph)
    readers: dict[str, int] = {}
    for g in all_graphs(graph):
        for n in g.node:
            for i in n.input:
                readers[i] = readers.get(i, 0) + 1
    for o in graph.output:
        readers[o.name] = readers.get(o.name, 0) + 1
    for node in graph.node:
        if node.op_type != "ConcatFromSequence" or node.domain not in ONNX_DOMAINS:
            continue
        chain, name = [], node.input[0]
        while True:
            producer = producers.get(name)
            if producer is None or readers.get(name, 0) != 1:
                break
            if (producer.op_type == "SequenceInsert" and len([i for i in producer.input if i]) == 2) or producer.op_type == "Identity":
                chain.append(producer)  # an Identity: a Loop output an unrolled Loop passes on
                name = producer.input[0]
                continue
            if producer.op_type == "SequenceEmpty":
                chain.append(producer)
            break
        if not chain or chain[-1].op_type != "SequenceEmpty" or not any(n.op_type == "SequenceInsert" for n in chain):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        axis, new_axis = int(attrs.get("axis", 0)), int(attrs.get("new_axis", 0))
        elements = [n.input[1] for n in reversed(chain[:-1]) if n.op_type == "SequenceInsert"]
        label = node_label(node)
        replacement = []
        if new_axis:
            axes = names.tensor(f"{label}/axes", label, names.tensors)
            replacement.append(
                helper.make_node(
                    "Constant", [], [axes], name=names.node(axes, label), value=numpy_helper.from_array(np.array([axis], np.int64))
                )
            )
            stacked = []
            for k, element in enumerate(elements):
                out = names.tensor(f"{label}/item{k}", label, names.tensors)
                replacement.append(helper.make_node("Unsqueeze", [element, axes], [out], name=names.node(out, label)))
                stacked.append(out)
            elements = stacked
        replacement.append(helper.make_node("Concat", elements, list(node.output), name=names.node(f"{label}/concat", label), axis=axis))
        gone = {id(n) for n in chain} | {id(node)}
        kept: list[onnx.NodeProto] = []
        for n in graph.node:
            if id(n) == id(node):
                kept += replacement
            elif id(n) not in gone:
                kept.append(n)
        del graph.node[:]
        graph.node.extend(kept)
        return True
    return False

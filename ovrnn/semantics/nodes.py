"""Which nodes of a model are recurrent (any family of the registry, ``ovrnn/families/``), where
each sits (its If/Loop/Scan body), and the labels they are known by: the plan and the frontend
both ask here."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import onnx

from ..families import is_recurrent
from ..onnx import graphs
from ..onnx.graphs import describe_node, fresh


@dataclass(frozen=True)
class Body:
    """The If/Loop/Scan body a node sits in."""

    holder: onnx.NodeProto  # the If, Loop or Scan node
    attribute: str  # then_branch | else_branch | body
    graph: onnx.GraphProto
    outer: Body | None = None

    def describe(self) -> str:
        """ "the body of Loop node 'loop'", "the then_branch of If node 'if1'"."""
        what = "the body" if self.attribute == "body" else f"the {self.attribute}"
        return f"{what} of {describe_node(self.holder)}"


@dataclass(frozen=True)
class RecurrentNode:
    """One RNN, GRU or LSTM node: its proto, where it sits, the opset it is read in."""

    proto: onnx.NodeProto
    index: int  # in its own graph
    opset: int
    body: Body | None = None


def recurrent_nodes(model: onnx.ModelProto) -> list[RecurrentNode]:
    """Every RNN/GRU/LSTM node of the model, bodies included, in the order the ONNX frontend
    converts them: each body before the node that holds it."""
    opset = graphs.opset(model)
    found = []
    for node, index, path in graphs.walk_bodies_first(model.graph):
        if is_recurrent(node):
            body = None
            for holder, attribute, sub in path:  # outermost first: each body knows the one it sits in
                body = Body(holder, attribute, sub, body)
            found.append(RecurrentNode(node, index, opset, body))
    return found


def unique_label(node: onnx.NodeProto, k: int, used: Collection[str]) -> str:
    """Layer-name prefix of the k-th recurrent node: its name when it has one, else rnn_<k>
    (gru_<k>, lstm_<k>); not in `used`."""
    return fresh(node.name or f"{node.op_type.lower()}_{k}", set(used))

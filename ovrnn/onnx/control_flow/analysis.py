"""What the control-flow passes of one round know of the model: computed once, on first ask, and
shared by every pass of the round (passes.py), as tf2onnx's rewriters share one graph.

    inferred        onnx's shapes, whole model, data propagated, Loop/Scan states declared where
                    their shape is a fixed point (body_inputs.py): at most one such inference a round
    opset           the model's ai.onnx opset (the toolkit's one lookup)
    enclosing       what a Loop body may ask of the graph holding it (loops/enclosing.py)
    time_loops      the Loops over time of the main graph (loops/rewrite.over_time), each asked once
    trips           the iterations each of them runs, counted once
    recognised      the cell the Loop recovery recognises in a body (loops/check.recognise), or why
                    not: each body once a round, whichever pass (or the refusal) asks
    loop_bodies     each Loop's body with the shapes of the outer tensors it reads

A pass that rewrites the model ends the round, and the next round analyses the rewritten model
afresh: no pass ever reads an analysis of a model other than the one it rewrites. A pass that
finds nothing leaves the model as it was, so the next pass of the round reads the same analysis.
"""

from __future__ import annotations

from functools import cached_property

import onnx
from onnx import helper

from .. import graphs
from ..graphs import constant_value, node_label
from ..loops.check import recognise
from ..loops.enclosing import EnclosingGraph
from ..loops.rewrite import counted_trips, over_time
from ..reading.read import ONNX_DOMAINS
from .body_inputs import declare_carried_inferred
from .inline import Names, defined


class Analysis:
    """One round's knowledge of `model` (edited only by the pass that rewrites it, which ends the round)."""

    def __init__(self, model: onnx.ModelProto, names: Names, limit: int) -> None:
        self.model, self.names, self.limit = model, names, limit
        self._trips: dict[int, int | None] = {}
        self._recognised: dict[tuple, tuple] = {}

    @cached_property
    def opset(self) -> int:
        return graphs.opset(self.model)

    @cached_property
    def inferred(self) -> onnx.ModelProto:
        return infer_with_states(self.model)

    @cached_property
    def enclosing(self) -> EnclosingGraph:
        return EnclosingGraph(self.model.graph, self.inferred.graph, constant_value)

    @cached_property
    def time_loops(self) -> list[tuple[int, onnx.NodeProto, onnx.GraphProto]]:
        """(index, Loop, body) of each Loop of the main graph that is a recurrence written out."""
        opset, graph = self.opset, self.model.graph
        found = []
        for index, node in enumerate(graph.node):
            if node.op_type == "Loop" and node.domain in ONNX_DOMAINS:
                body = body_of(node)
                if over_time(body, lambda name: constant_value(graph, name), opset):
                    found.append((index, node, body))
        return found

    def trips(self, index: int, node: onnx.NodeProto, body: onnx.GraphProto) -> int | None:
        """The iterations the Loop over time at `index` runs: its trip count when the condition stays
        true, else counted from a condition the counters decide (one past the limit when it runs longer)."""
        if index not in self._trips:
            graph = self.model.graph
            most = trip_count(graph, node) if node.input and node.input[0] else None
            if node.input and node.input[0] and most is None:
                self._trips[index] = None
            elif most is not None and always_continues(graph, node, body):
                self._trips[index] = most
            else:
                self._trips[index] = counted_trips(node, body, most, self.enclosing, self.opset, self.limit)
        return self._trips[index]

    def recognised(self, key, node: onnx.NodeProto, body: onnx.GraphProto, trips: int | None, outer: EnclosingGraph | None = None):
        """recognise(node, body, ...) for the body `key` names (the Loop's index in the main graph,
        or the Scan a pass tries as a Loop), run once: later asks get the same cell, or the same
        exception (NotACell: why the body is no cell) raised again."""
        if (key, trips) not in self._recognised:
            try:
                self._recognised[key, trips] = (recognise(node, body, outer or self.enclosing, self.opset, trips), None)
            except Exception as exc:  # noqa: BLE001 - kept and raised again to every asker, as recognise raised it
                self._recognised[key, trips] = (None, exc)
        found, error = self._recognised[key, trips]
        if error is not None:
            raise error
        return found

    @cached_property
    def loop_bodies(self) -> dict[str, onnx.GraphProto]:
        """Loop label -> its body as inferred, with the shapes of the outer tensors it reads."""
        inferred = self.inferred.graph
        return {node_label(n): with_outer_shapes(body_of(n), inferred) for n in inferred.node if n.op_type == "Loop"}


def body_of(node: onnx.NodeProto) -> onnx.GraphProto:
    return next(a.g for a in node.attribute if a.name == "body")


def infer_with_states(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with onnx's inferred shapes (data propagated) in its value_info; unchanged when
    onnx cannot infer it. Loop states that keep their shape on every iteration are declared with it
    first (body_inputs.py), so a node reading one (a greedy decoder's fed-back token) counts as
    lowerable in its body, and its Loop is not unrolled for it. The fixed point that declares them
    infers the model it ends on: that inference is the one returned, not run again."""
    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    del stripped.graph.value_info[:]  # inlined tensors' old entries may be stale
    _, inferred = declare_carried_inferred(stripped)
    if inferred is not None:
        return model if inferred is False else inferred
    try:
        return onnx.shape_inference.infer_shapes(stripped, data_prop=True)
    except Exception:  # noqa: BLE001 - a model onnx cannot infer keeps what it has
        return model


def with_outer_shapes(body: onnx.GraphProto, outer: onnx.GraphProto) -> onnx.GraphProto:
    """A copy of `body` whose value_info also holds the shapes of the outer tensors it reads."""
    known = {vi.name: vi for vi in list(outer.input) + list(outer.value_info) + list(outer.output)}
    for t in outer.initializer:
        known.setdefault(t.name, helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    copy = onnx.GraphProto()
    copy.CopyFrom(body)
    own = defined(body)
    read = {i for n in body.node for i in n.input if i and i not in own}
    copy.value_info.extend(known[name] for name in sorted(read) if name in known)
    return copy


def trip_count(graph: onnx.GraphProto, node: onnx.NodeProto) -> int | None:
    """The Loop's trip count input, when it is a constant."""
    if not node.input or not node.input[0]:
        return None
    value = constant_value(graph, node.input[0])
    return None if value is None or value.size != 1 else int(value.reshape(-1)[0])


def always_continues(graph: onnx.GraphProto, node: onnx.NodeProto, body: onnx.GraphProto) -> bool:
    """The Loop's condition is absent or constant true, and the body passes it on unchanged (or
    sets it to a constant true): it runs exactly its trip count."""
    if len(node.input) > 1 and node.input[1]:
        start = constant_value(graph, node.input[1])
        if start is None or start.size != 1 or not bool(start.reshape(-1)[0]):
            return False
    name = body.output[0].name
    producers = graphs.producers(body)
    for _ in range(len(body.node) + 1):
        if name == body.input[1].name:
            return True
        producer = producers.get(name)
        value = constant_value(body, name) if producer is None or producer.op_type == "Constant" else None
        if value is None and producer is None and name not in defined(body):
            value = constant_value(graph, name)  # an outer constant
        if value is not None:
            return value.size == 1 and bool(value.reshape(-1)[0])
        if producer is None or producer.op_type != "Identity":
            return False
        name = producer.input[0]
    return False

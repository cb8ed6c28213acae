"""What a user can do about control flow ovrnn leaves: the graph inputs whose value or shape an If's
condition or a Loop's trip count is computed from, and the --input that fixes or freezes them."""

from __future__ import annotations

import onnx

from ...errors import flag, quoted
from .. import graphs
from ..reading.read import ONNX_DOMAINS


def _deciding_inputs(graph: onnx.GraphProto, names: list[str]) -> tuple[list[str], set[str], set[str]]:
    """(the graph's inputs, those whose shape, those whose value the tensors `names` are computed from)."""
    producers = graphs.producers(graph)
    inputs = [i.name for i in graph.input if i.name not in {t.name for t in graph.initializer}]
    by_shape: set[str] = set()
    by_value: set[str] = set()
    stack, seen = [(name, False) for name in names], set()
    while stack:
        name, through_shape = stack.pop()
        if (name, through_shape) in seen:
            continue
        seen.add((name, through_shape))
        if name in inputs:
            (by_shape if through_shape else by_value).add(name)
            continue
        producer = producers.get(name)
        if producer is None:
            continue
        shape_op = producer.op_type in ("Shape", "Size")
        stack += [(i, through_shape or shape_op) for i in producer.input if i]
    return inputs, by_shape, by_value


def trip_count_hint(graph: onnx.GraphProto, loop: onnx.NodeProto) -> str:
    """What the trip count (and start condition) of a Loop depends on, and the --input that makes
    it a constant: a value frozen (``"steps->7"``), a shape fixed (``"X[T,2,3]"``)."""
    decided = [n for n in list(loop.input[:2]) if n]
    inputs, by_shape, by_value = _deciding_inputs(graph, decided)
    declared = {i.name: i for i in graph.input}
    parts = []
    for name in (n for n in inputs if n in by_value):
        if name in declared and declared[name].type.tensor_type.elem_type == onnx.TensorProto.BOOL:  # a condition, not a count
            parts.append(
                f"the value of the condition '{name}' (freeze it with {flag('input', quoted(name + '->1'))} to run the trip count)"
            )
        else:
            parts.append(f"the value of '{name}' (freeze it with {flag('input', quoted(name + '->N'))}, N the number of steps)")
    for name in (n for n in inputs if n in by_shape):
        dims = declared[name].type.tensor_type.shape.dim
        shown, named = [], False
        for d in dims:
            if d.HasField("dim_value"):
                shown.append(str(d.dim_value))
            else:
                shown.append("?" if named else "T")
                named = True
        parts.append(
            f"the shape of '{name}' (fix it with {flag('input', quoted(name + '[' + ','.join(shown) + ']'))}, T the number of steps)"
        )
    if not parts:
        return "it is computed from values the graph computes, not from an input that --input can fix or freeze".replace(
            "--input", flag("input")
        )
    return "it depends on " + " and on ".join(parts)


def open_conditions_hint(graph: onnx.GraphProto) -> str:
    """Why If nodes are left, for an error from OpenVINO's frontend: the graph inputs whose shapes
    or values their conditions read (the inputs to fix or freeze with --input); '' without Ifs."""
    ifs = [n for n in graph.node if n.op_type == "If" and n.domain in ONNX_DOMAINS and n.input]
    if not ifs:
        return ""
    inputs, by_shape, by_value = _deciding_inputs(graph, [node.input[0] for node in ifs])
    parts = []
    if by_shape:
        names = [n for n in inputs if n in by_shape]
        parts.append(
            f"on the shape of {', '.join(repr(n) for n in names)} "
            f"(fix {'them' if len(names) > 1 else 'it'} with {flag('input', quoted(names[0] + '[d0,d1,...]'))})"
        )
    if by_value:
        names = [n for n in inputs if n in by_value]
        parts.append(
            f"on the value of {', '.join(repr(n) for n in names)} "
            f"(freeze {'them' if len(names) > 1 else 'it'} with {flag('input', quoted(names[0] + '->VALUE'))})"
        )
    why = " and ".join(parts) if parts else "on values computed in the graph"
    return (
        f"{len(ifs)} If node(s) are left, whose conditions depend {why}; "
        "OpenVINO's frontend converts both branches of an If and cannot give their outputs a static rank"
    )

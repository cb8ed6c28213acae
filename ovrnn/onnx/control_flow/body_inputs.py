"""Scan bodies declare their slices: give them the dims the outer input fixes.

OpenVINO's ONNX frontend types a Scan body's inputs from the body's own declarations, not from the
tensors the Scan slices (an outer-scope tensor a body *reads* gets the outer shape; a scan input
does not). An exporter that declares the slice ``[?, batch, input]`` therefore hides a step count
the outer input fixes, and a recurrent node reading the slice cannot become a chain. Every slice
of a scan input has the same shape, the outer shape without the scan axis, so a dynamic or absent
declared dim is filled from the outer input's static dim (as onnx's shape inference knows it).

Loop-carried values (Loop states, Scan states) may change shape from one iteration to the next, so
their declarations are only filled where a fixed point proves they do not: the declaration starts
from the initial value's shape, the body's output for that value is inferred under it, and every dim
on which they disagree becomes dynamic, until nothing changes. What is left holds on every iteration
(by induction: the first iteration sees the initial value, each later one what the body returned).
A greedy decoder's token, fed back through ArgMax, is `[B, 1]` on every iteration, so the
recurrent node reading its embedding runs one step, a chain the lowering can build.
"""

from __future__ import annotations

import onnx

from ..graphs import ONNX_DOMAINS, all_nodes, subgraphs


def declare_scan_slices(model: onnx.ModelProto) -> tuple[onnx.ModelProto, bool]:
    """(model with Scan slice declarations filled and Loop/Scan states declared where their shape is
    a fixed point, whether anything changed); the input model is not changed."""
    if not any(n.op_type in ("Scan", "Loop") and n.domain in ONNX_DOMAINS for n in all_nodes(model.graph)):
        return model, False
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 (shape inference refuses some valid models: leave them as they are)
        return model, False
    out = onnx.ModelProto()
    out.CopyFrom(model)
    changed = _fill(out.graph, inferred.graph, {})
    changed |= declare_carried(out)
    return (out, True) if changed else (model, False)


def _shapes(graph: onnx.GraphProto, outer: dict) -> dict:
    known = dict(outer)
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            known[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
    for init in graph.initializer:
        known[init.name] = list(init.dims)
    return known


def _fill(graph: onnx.GraphProto, inferred: onnx.GraphProto, outer: dict) -> bool:
    """Walk `graph` and its inferred twin (same nodes, same order) together."""
    shapes = _shapes(inferred, outer)
    changed = False
    for node, twin in zip(graph.node, inferred.node):
        if node.op_type == "Scan" and node.domain in ONNX_DOMAINS:
            changed |= _fill_scan(node, shapes)
        for (_, sub), (_, sub_twin) in zip(subgraphs(node), subgraphs(twin)):
            changed |= _fill(sub, sub_twin, shapes)
    return changed


def _fill_scan(node: onnx.NodeProto, shapes: dict) -> bool:
    attrs = {a.name: a for a in node.attribute}
    if "body" not in attrs or "num_scan_inputs" not in attrs:
        return False
    body = attrs["body"].g
    scans = attrs["num_scan_inputs"].i
    states = len(node.input) - scans
    axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else [0] * scans
    changed = False
    for k in range(scans):
        outer = shapes.get(node.input[states + k])
        if outer is None or states + k >= len(body.input) or k >= len(axes):
            continue
        axis = axes[k] + len(outer) if axes[k] < 0 else axes[k]
        slice_dims = outer[:axis] + outer[axis + 1 :]
        declared = body.input[states + k].type.tensor_type
        if not declared.HasField("shape"):
            for d in slice_dims:
                dim = declared.shape.dim.add()
                if d is not None:
                    dim.dim_value = d
            changed |= any(d is not None for d in slice_dims)
            continue
        if len(declared.shape.dim) != len(slice_dims):
            continue  # an invalid model: the frontend will say so
        for dim, d in zip(declared.shape.dim, slice_dims):
            if d is not None and not dim.HasField("dim_value"):
                dim.dim_value = d
                changed = True
    return changed


# --- loop-carried values: the shape every iteration keeps ------------------------------------------

_MAX_ROUNDS = 8  # each round only turns static dims dynamic, so a fixed point comes quickly


def declare_carried(model: onnx.ModelProto) -> bool:
    """Declare each Loop/Scan state's body input with the dims it keeps on every iteration (in
    place); whether any declaration gained a static dim."""
    return declare_carried_inferred(model)[0]


def declare_carried_inferred(model: onnx.ModelProto) -> tuple[bool, onnx.ModelProto | bool | None]:
    """declare_carried, and onnx's inference (data propagated) of the model as it is left: the
    fixed point infers it on its last round, so the caller need not infer it again. None when no
    inference ran (no Loop or Scan); False when onnx cannot infer the model as it was given."""
    if not any(n.op_type in ("Scan", "Loop") and n.domain in ONNX_DOMAINS for n in all_nodes(model.graph)):
        return False, None  # no state to declare: spare the shape inference rounds
    original = onnx.ModelProto()
    original.CopyFrom(model)
    declared: dict[tuple[int, int], list | None] | None = None  # (holder index, state index) -> dims
    first: onnx.ModelProto | bool = False  # the inference of the model as given
    for _ in range(_MAX_ROUNDS):
        try:  # data_prop: a zeros state shaped from Shape(x) has its dims known
            inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:  # noqa: BLE001 (as above: leave the model as it was)
            model.CopyFrom(original)
            return False, first
        first = inferred if declared is None else first
        carried = _carried_shapes(inferred.graph)
        if declared is None:  # the first round: each state as its initial value is
            new = {key: init for key, (init, _) in carried.items()}
        else:  # then the dims the body's output keeps under that declaration
            new = {key: _meet(_meet(declared.get(key), init), out) for key, (init, out) in carried.items()}
        if new == declared:
            break
        declared = new
        model.CopyFrom(original)  # a state whose rank is unknown keeps its own declaration
        _write_declarations(model.graph, declared)
    else:
        model.CopyFrom(original)  # no fixed point within the rounds: declare nothing
        return False, first
    gained = any(dims is not None and any(d is not None for d in dims) for dims in declared.values())
    if not gained:
        model.CopyFrom(original)
        return False, first
    return True, inferred  # the model as left (the declarations of the round that found no change), inferred


def _holders(graph: onnx.GraphProto):
    """The Loop and Scan nodes of the graph and its bodies, depth first (the order all_nodes walks),
    with the shapes known in the scope holding each (outer scopes included)."""

    def walk(graph, outer):
        shapes = _shapes(graph, outer)
        for node in graph.node:
            if node.op_type in ("Loop", "Scan") and node.domain in ONNX_DOMAINS:
                yield node, shapes
            for _, sub in subgraphs(node):
                yield from walk(sub, shapes)

    yield from walk(graph, {})


def _states(node: onnx.NodeProto) -> list[tuple[str, int, int]]:
    """(outer initial value, body input slot, body output slot) of each state the node carries."""
    attrs = {a.name: a for a in node.attribute}
    if node.op_type == "Loop":
        return [(name, 2 + k, 1 + k) for k, name in enumerate(node.input[2:])]
    scans = attrs["num_scan_inputs"].i if "num_scan_inputs" in attrs else 0
    return [(name, k, k) for k, name in enumerate(node.input[: len(node.input) - scans])]


def _carried_shapes(graph: onnx.GraphProto) -> dict[tuple[int, int], tuple[list | None, list | None]]:
    """(holder index, state index) -> (initial value's dims, the body output's inferred dims)."""
    found = {}
    for h, (node, shapes) in enumerate(_holders(graph)):
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if body is None:
            continue
        body_shapes = _shapes(body, shapes)
        for k, (outer, slot_in, slot_out) in enumerate(_states(node)):
            if not outer or slot_in >= len(body.input) or slot_out >= len(body.output):
                continue
            found[(h, k)] = (shapes.get(outer), body_shapes.get(body.output[slot_out].name))
    return found


def _meet(a: list | None, b: list | None) -> list | None:
    """The dims two shapes agree on (None: dynamic); None when a rank is unknown or they differ."""
    if a is None or b is None or len(a) != len(b):
        return None
    return [x if x is not None and x == y else None for x, y in zip(a, b)]


def _write_declarations(graph: onnx.GraphProto, declared: dict) -> None:
    for h, (node, _) in enumerate(_holders(graph)):
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if body is None:
            continue
        for k, (_, slot_in, _) in enumerate(_states(node)):
            dims = declared.get((h, k))
            if dims is None or slot_in >= len(body.input) or not body.input[slot_in].type.HasField("tensor_type"):
                continue
            shape = body.input[slot_in].type.tensor_type.shape
            del shape.dim[:]
            for d in dims:
                dim = shape.dim.add()
                if d is not None:
                    dim.dim_value = d

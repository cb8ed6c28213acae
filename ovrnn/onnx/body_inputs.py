"""Scan bodies declare their slices: give them the dims the outer input fixes.

OpenVINO's ONNX frontend types a Scan body's inputs from the body's own declarations, not from the
tensors the Scan slices (an outer-scope tensor a body *reads* gets the outer shape; a scan input
does not). An exporter that declares the slice ``[?, batch, input]`` therefore hides a step count
the outer input fixes, and a recurrent node reading the slice cannot become a chain. Every slice
of a scan input has the same shape, the outer shape without the scan axis, so a dynamic or absent
declared dim is filled from the outer input's static dim (as onnx's shape inference knows it).
Loop-carried values are left alone: they may change shape from one iteration to the next.
"""

from __future__ import annotations

import onnx

from .read import all_nodes

_DOMAINS = ("", "ai.onnx")


def declare_scan_slices(model: onnx.ModelProto) -> tuple[onnx.ModelProto, bool]:
    """(model with Scan slice declarations filled, whether anything changed); the input model is
    not changed."""
    if not any(n.op_type == "Scan" for n in all_nodes(model.graph)):
        return model, False
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 (shape inference refuses some valid models: leave them as they are)
        return model, False
    out = onnx.ModelProto()
    out.CopyFrom(model)
    changed = _fill(out.graph, inferred.graph, {})
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
        if node.op_type == "Scan" and node.domain in _DOMAINS:
            changed |= _fill_scan(node, shapes)
        for attr, twin_attr in zip(node.attribute, twin.attribute):
            subs = [attr.g] if attr.HasField("g") else list(attr.graphs)
            twins = [twin_attr.g] if twin_attr.HasField("g") else list(twin_attr.graphs)
            for sub, sub_twin in zip(subs, twins):
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

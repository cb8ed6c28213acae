"""Fold what the input shapes decide, before anything is lowered: onnx's own machinery.

Exporters compute shapes, lengths and weights in the graph. mx2onnx writes ``swapaxes`` as
Shape/ScatterND/GatherND/Pad/Reshape in front of the RNN and ``sequence_lens`` as
``Cast(Tile(seq_length, batch))``. With every graph input static, all of that is a constant, but
neither OpenVINO's frontend (no shape propagation through GatherND/ScatterND, and its
ConstantFolding does not evaluate GatherND) nor a lowering that reads X's shape can see it.

    repeat until nothing changes:
        onnx.shape_inference.infer_shapes(data_prop=True)   which tensors have a static shape
        Shape/Size of a static tensor                       -> initializer
        Gather/Slice of a Shape picking only static dims    -> initializer (``x.shape[2] == 5`` with a dynamic batch)
        a node whose inputs are all constants               -> initializer, evaluated by onnx.reference

Only values that cannot depend on a graph input's values are folded: a graph input's shape, never
its data. A DequantizeLinear that feeds W or R of a recurrent node is not folded either: its integer
weights are kept (``qdq.py``). Random ops, ops with subgraphs, non-ONNX domains and the recurrent ops themselves are left
alone, and so is any result bigger than ``MAX_ELEMENTS`` (weights are folded later by OpenVINO's
ConstantFolding, which evaluates the ops weights go through).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import graphs
from ..graphs import ONNX_DOMAINS, upstream
from .qdq import feeds_recurrent_weights, weight_readers
from .read import RECURRENT

MAX_ELEMENTS = 1 << 16  # shapes, lengths, small tensors
WEIGHT_MAX_ELEMENTS = 1 << 28  # weights=True: what W/R of a recurrent node are computed from (1 GiB of f32)
_MAX_ROUNDS = 16
_KEEP = {
    *RECURRENT,
    "If",
    "Loop",
    "Scan",
    "SequenceMap",
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
    "Dropout",
}


def fold_constants(model: onnx.ModelProto, weights: bool = False) -> tuple[onnx.ModelProto, list[str]]:
    """(model with the foldable nodes replaced by initializers, names of the tensors folded).

    ``weights`` (--compress-weights, after the QDQ weights were taken, onnx/reading/qdq.py): W and R of the
    recurrent nodes are folded whatever their size (an Unsqueeze or Transpose of an initializer, a
    DequantizeLinear of a form qdq.py does not keep), so the lowering sees constants it can quantize.
    The input model is not changed; when nothing folds it is returned as it is."""
    folded_names: list[str] = []
    current = None
    for _ in range(_MAX_ROUNDS):
        names = _fold_once(current or model, copy_first=current is None, weights=weights)
        if not names:
            break
        current, names = names
        folded_names += names
    if current is None:
        return model, []
    if current.ir_version < 4:  # IR 3 lists every initializer among the inputs; ours are not
        current.ir_version = 4
    return current, folded_names


def _fold_once(model: onnx.ModelProto, copy_first: bool, weights: bool = False) -> tuple[onnx.ModelProto, list[str]] | None:
    graph = model.graph
    # shapes serve Shape and Size only (folded, or read by _shape_values): with none of them in the
    # graph, onnx's whole-model inference would tell this round nothing
    asks = any(n.op_type in ("Shape", "Size") and n.domain in ONNX_DOMAINS for n in graph.node)
    shapes, partial = _inferred_shapes(model) if asks else _declared_shapes(graph)
    dims = _shape_values(graph, partial)
    consts = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ONNX_DOMAINS and len(node.output) == 1:
            consts.setdefault(node.output[0], None)  # value read on demand
    keep_outputs = {o.name for o in graph.output}
    opset = graphs.opset(model)
    new_initializers: list[onnx.TensorProto] = []
    folded: set[int] = set()
    readers = weight_readers(graph)
    feeders = _weight_feeders(graph) if weights else set()
    for index, node in enumerate(graph.node):
        if not _foldable(node) or any(o in keep_outputs for o in node.output) or (not weights and feeds_recurrent_weights(node, readers)):
            continue
        limit = WEIGHT_MAX_ELEMENTS if any(o in feeders for o in node.output) else MAX_ELEMENTS
        values = _evaluate(node, consts, shapes, graph, opset, limit)
        if values is None and node.output and node.output[0] in dims and None not in dims[node.output[0]][0]:
            known, rank = dims[node.output[0]]
            values = [np.array(known, dtype=np.int64).reshape(rank)]
        if values is None:
            continue
        folded.add(index)
        for name, value in zip(node.output, values):
            if name:
                tensor = numpy_helper.from_array(np.asarray(value), name)
                new_initializers.append(tensor)
                consts[name] = tensor
    if not folded:
        return None
    if copy_first:  # the caller's model stays as it was; later rounds edit this copy
        out = onnx.ModelProto()
        out.CopyFrom(model)
    else:
        out = model
    kept_nodes = [n for i, n in enumerate(out.graph.node) if i not in folded]
    del out.graph.node[:]
    out.graph.node.extend(kept_nodes)
    out.graph.initializer.extend(new_initializers)
    names = [t.name for t in new_initializers]
    stale = set(names)
    kept = [vi for vi in out.graph.value_info if vi.name not in stale]
    del out.graph.value_info[:]
    out.graph.value_info.extend(kept)
    return out, names


def _weight_feeders(graph: onnx.GraphProto) -> set[str]:
    """Tensors W or R of a recurrent node are computed from (themselves included)."""
    return upstream(
        graph,
        [
            n.input[k]
            for n in graph.node
            if n.op_type in RECURRENT and n.domain in ONNX_DOMAINS
            for k in (1, 2)
            if k < len(n.input) and n.input[k]
        ],
    )


def _foldable(node: onnx.NodeProto) -> bool:
    if node.domain not in ONNX_DOMAINS or node.op_type in _KEEP or node.op_type == "Constant":
        return False
    return not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _inferred_shapes(model: onnx.ModelProto) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int | None, ...]]]:
    """(tensor name -> static shape, tensor name -> shape with None for each dynamic dim), from
    onnx's shape inference with data propagation, from the graph inputs' shapes and the constants
    alone: the model's own declarations of other tensors (value_info, the graph outputs' shapes) are
    hidden from it while it runs. An exporter's declaration is no proof (a traced [2, 3] beside a
    dynamic batch): merged with what inference finds, it would fold Shape(t) into a constant that
    is wrong for another batch. A model onnx cannot infer keeps its graph inputs' and constants' shapes."""
    graph = model.graph
    declared = [onnx.ValueInfoProto() for _ in graph.value_info]
    for held, vi in zip(declared, graph.value_info):
        held.CopyFrom(vi)
    outputs = [onnx.ValueInfoProto() for _ in graph.output]
    for held, vi in zip(outputs, graph.output):
        held.CopyFrom(vi)
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    del graph.value_info[:]
    try:  # the caller's model is put back as it was below, whatever happens
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
    except Exception:  # noqa: BLE001 - the graph inputs' own shapes, and the constants', are all that is known
        inferred = None
    finally:
        graph.value_info.extend(declared)
        for vi, held in zip(graph.output, outputs):
            vi.CopyFrom(held)
    return _declared_shapes(graph) if inferred is None else _shapes_in(inferred, inferred=True)


def _declared_shapes(graph: onnx.GraphProto) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int | None, ...]]]:
    """What is known with no inference: the graph inputs' shapes and the constants'."""
    return _shapes_in(graph, inferred=False)


def _shapes_in(g: onnx.GraphProto, inferred: bool) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int | None, ...]]]:
    shapes, partial = {}, {}
    for vi in list(g.input) + (list(g.value_info) + list(g.output) if inferred else []):
        t = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and t.HasField("shape"):
            dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
            partial[vi.name] = dims
            if None not in dims:
                shapes[vi.name] = dims
    for init in g.initializer:
        shapes[init.name] = partial[init.name] = tuple(init.dims)
    return shapes, partial


def _shape_values(graph: onnx.GraphProto, partial: dict) -> dict[str, tuple[list[int | None], tuple[int, ...]]]:
    """The values of Shape outputs and of Gather/Slice/Squeeze/Unsqueeze of them, with None for a
    dynamic dim: tensor -> (flat values, shape). A TorchScript ``if x.shape[2] == 5`` with a dynamic
    batch reads a static dim of a partly dynamic shape; Gather picks it, and the fold sees a constant."""
    values: dict[str, tuple[list[int | None], tuple[int, ...]]] = {}
    consts = {t.name: t for t in graph.initializer}  # TensorProtos, read only where an index or bound is (not every weight)
    for node in graph.node:
        if node.domain not in ONNX_DOMAINS:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Constant" and node.output and "value" in attrs:
            consts[node.output[0]] = attrs["value"]
            continue
        ins = [values.get(n) for n in node.input]
        out = node.output[0] if node.output else ""
        try:
            if node.op_type == "Shape" and node.input and partial.get(node.input[0]) is not None:
                dims = list(partial[node.input[0]])
                start, end = attrs.get("start", 0), attrs.get("end", len(dims))
                picked = dims[slice(start, end)]
                values[out] = (picked, (len(picked),))
            elif (
                node.op_type == "Gather"
                and ins
                and ins[0] is not None
                and len(ins[0][1]) == 1
                and node.input[1] in consts
                and attrs.get("axis", 0) in (0, -1)
            ):
                idx = numpy_helper.to_array(consts[node.input[1]]).astype(np.int64)
                flat = ins[0][0]
                values[out] = ([flat[int(i)] for i in idx.reshape(-1)], tuple(idx.shape))
            elif (
                node.op_type == "Slice"
                and ins
                and ins[0] is not None
                and len(ins[0][1]) == 1
                and all(n in consts for n in node.input[1:] if n)
            ):
                args = [numpy_helper.to_array(consts[n]).astype(np.int64).reshape(-1) if n else None for n in node.input[1:]] + [None] * 4
                starts, ends, axes, steps = args[:4]
                if (axes is None or list(axes) in ([0], [-1])) and len(starts) == 1:
                    picked = ins[0][0][slice(int(starts[0]), int(ends[0]), int(steps[0]) if steps is not None else 1)]
                    values[out] = (picked, (len(picked),))
            elif node.op_type in ("Squeeze", "Unsqueeze", "Identity", "Cast") and ins and ins[0] is not None:
                if node.op_type == "Cast" and attrs.get("to") not in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
                    continue
                known = partial.get(out)
                shape = known if known is not None and None not in known else None
                if shape is not None and int(np.prod(shape)) == len(ins[0][0]):
                    values[out] = (ins[0][0], tuple(shape))
        except (IndexError, ValueError, TypeError):  # an index out of range: the model is wrong, OpenVINO will say so
            continue
    return values


def known_value(name: str, consts: dict, graph: onnx.GraphProto) -> np.ndarray | None:
    """The value of `name` among `consts` (tensor name -> its TensorProto, or None for a Constant
    node of `graph`, read on demand); None when it is not a known constant."""
    tensor = consts.get(name)
    if tensor is not None:
        return numpy_helper.to_array(tensor)
    return graphs.constant_value(graph, name) if name in consts else None


def _evaluate(
    node: onnx.NodeProto, consts: dict, shapes: dict, graph: onnx.GraphProto, opset: int, limit: int = MAX_ELEMENTS
) -> list[np.ndarray] | None:
    if node.op_type in ("Shape", "Size") and node.input and node.input[0] in shapes:
        shape = np.array(shapes[node.input[0]], dtype=np.int64)
        if node.op_type == "Size":
            return [np.array(int(np.prod(shape)), dtype=np.int64)]
        attrs = {a.name: a.i for a in node.attribute}
        return [shape[attrs.get("start", 0) : attrs.get("end", len(shape)) if "end" in attrs else None]]
    names = [n for n in node.input if n]
    if not names or any(n not in consts for n in names):
        return None
    feeds = {}
    for n in names:
        value = known_value(n, consts, graph)
        if value is None:
            return None
        feeds[n] = value
    if node.op_type == "DequantizeLinear" and opset < 19:  # onnx.reference implements it from 19 on; 13's axis means the same
        opset = 19
    try:
        from onnx.reference import ReferenceEvaluator

        inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()]
        outputs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output if o]
        probe = helper.make_model(
            helper.make_graph([node], "fold", inputs, outputs),
            opset_imports=[helper.make_opsetid("", opset)],
        )
        values = ReferenceEvaluator(probe).run(None, feeds)
    except Exception:  # noqa: BLE001 - an op onnx.reference cannot run is left to OpenVINO
        return None
    if any(np.asarray(v).size > limit or np.asarray(v).dtype == object for v in values):
        return None
    return list(values)


# for other ONNX-stage modules (noop_slice.py): one evaluator of constant nodes
evaluate_node = _evaluate
